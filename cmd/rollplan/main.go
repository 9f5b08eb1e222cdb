// Command rollplan plans Kubernetes rollouts from policies.
package main

import (
	"errors"
	"fmt"
	"os"
)

// Exit codes scripts can rely on.
const (
	exitOK    = 0
	exitError = 1 // bad input, policy error
	exitUsage = 2 // wrong flags or arguments
)

// usageError marks errors in how the command was called.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

func main() {
	cmd := newRootCommand()
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(os.Stderr, "See '%s --help'.\n", cmd.CommandPath())
			os.Exit(exitUsage)
		}
		os.Exit(exitError)
	}
	os.Exit(exitOK)
}
