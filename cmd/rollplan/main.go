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
	// exitHalted: the policy halts the rollout (progress deadline, crash
	// loop, a guard rule): apply and undo stopped, leaving the cluster as
	// it is; plan and status report it.
	exitHalted = 3
	// exitStalled: the rollout cannot start or finish within its budgets
	// (plan), or its pods do not move (status).
	exitStalled = 4
)

// exitCodesHelp ends every command's help: the one exit-code table
// (README "Exit codes"), the same for every command.
const exitCodesHelp = `

Exit codes (the same for every rollplan command; README "Exit codes"):
  0  success: planned, done, rolled out, printed, tests passed
  1  error: bad input, a policy error, a workload that could not be
     planned, a failed test, a timeout or interrupted watch; plan: a
     snapshot with no workload or a --change that replaces none
  2  usage error: wrong flags or arguments
  3  halted: the policy halts a rollout (plan, apply, undo, status)
  4  stalled: a rollout cannot start or finish within its budgets (plan),
     or its pods do not move (status)
When several apply, the smallest wins; plan --allow-halted exits 0 for 3
and 4, plan --allow-empty for a plan of nothing.`

// withExitCodes appends exitCodesHelp to the help of cmd and every command
// under it.
func withExitCodes(cmd *cobra.Command) {
	if cmd.Long == "" {
		cmd.Long = cmd.Short
	}
	cmd.Long += exitCodesHelp
	for _, c := range cmd.Commands() {
		withExitCodes(c)
	}
}

// usageError marks errors in how the command was called.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

// codedError is the outcome of a command that printed what it found and
// exits with code (exitError, exitHalted, exitStalled) because of it.
type codedError struct {
	code int
	err  error
}

func (c codedError) Error() string { return c.err.Error() }

func (c codedError) Unwrap() error { return c.err }

func main() {
	root := newRootCommand()
	nameFromArgv0(root, os.Args[0])
	cmd, err := root.ExecuteC()
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
	var rb *executor.RolledBackError
	var c codedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &c):
		return c.code
	case errors.As(err, &h), errors.As(err, &rb):
		return exitHalted
	case errors.As(err, &u):
		return exitUsage
	}
	return exitError
}
