// Command rollplan plans Kubernetes rollouts from policies.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

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
	cmd, err := newRootCommand().ExecuteC()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(cmd, err))
	}
	os.Exit(exitCode(err))
}

// errorLine is the one line printed for a command's error. A usage error
// points at the help of the command that was called (cmd: the subcommand
// ExecuteC found), unless its message already names a help to read.
func errorLine(cmd *cobra.Command, err error) string {
	line := "error: " + strings.Join(strings.Fields(err.Error()), " ")
	var u usageError
	if errors.As(err, &u) && !strings.Contains(line, "--help") {
		line += fmt.Sprintf("; run '%s --help' for usage", cmd.CommandPath())
	}
	return line
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
