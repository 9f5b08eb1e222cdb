// Command rollplan plans Kubernetes rollouts from policies.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/rollplan/rollplan/executor"
)

// Exit codes scripts can rely on.
const (
	exitOK    = 0
	exitError = 1 // bad input, policy error
	exitUsage = 2 // wrong flags or arguments
	// exitHalted: rollplan apply stopped because the policy halted the
	// rollout (progress deadline, crash loop, a guard rule); the cluster is
	// left as it is.
	exitHalted = 3
)

// usageError marks errors in how the command was called.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

func main() {
	cmd := newRootCommand()
	err := cmd.Execute()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(os.Stderr, "See '%s --help'.\n", cmd.CommandPath())
		}
	}
	os.Exit(exitCode(err))
}

// exitCode maps a command's error to the documented exit codes.
func exitCode(err error) int {
	var u usageError
	var h *executor.HaltedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &h):
		return exitHalted
	case errors.As(err, &u):
		return exitUsage
	}
	return exitError
}
