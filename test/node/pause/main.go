// Command pause is the pod sandbox's process in the real node's pause image
// (test/node): it sleeps until it is signalled to stop, reaping any child
// it inherits as its namespace's init. It stands in for the upstream pause
// image, which these machines cannot fetch.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	child := make(chan os.Signal, 1)
	signal.Notify(child, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-child:
			// As PID 1 of a shared PID namespace, orphans are ours to reap.
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
