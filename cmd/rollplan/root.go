package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Set by the Makefile with -ldflags.
var (
	version = "dev"
	commit  = "unknown"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "rollplan",
		Short:         "Plan Kubernetes rollouts from policies, before they run",
		Long:          "rollplan evaluates rollout strategy written as policy (Rego) over a cluster snapshot and shows, wave by wave, which pods change, how, and why.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newPlanCommand(), newExplainCommand(), newTestCommand(), newSnapshotCommand(), newApplyCommand(), newStatusCommand(), newHistoryCommand(), newUndoCommand(), newPauseCommand(true), newPauseCommand(false), newGateCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the rollplan version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "rollplan %s (commit %s)\n", version, commit)
			return nil
		},
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %s", cmd.CommandPath(), strings.Join(args, " "))}
	}
	return nil
}
