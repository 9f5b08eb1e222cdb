package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
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
		Use:                        "rollplan",
		Short:                      "Plan Kubernetes rollouts from policies, before they run",
		Long:                       "rollplan evaluates rollout strategy written as policy (Rego or CEL) over a cluster snapshot and shows, wave by wave, which pods change, how, and why.",
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
		// --version prints what `rollplan version` prints.
		Version: version,
		// Runnable, so that an unknown command reaches RunE (cobra would
		// report it as a plain error, exit 1) and is a usage error.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	// The template prints the line as one quoted string constant, whatever
	// the version or commit hold.
	root.SetVersionTemplate("{{" + strconv.Quote(versionLine()) + "}}")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// A bounded flag value's error is a usageError already, worded
		// for the user; pflag's wrapping only repeats the value.
		var u usageError
		if errors.As(err, &u) {
			return u
		}
		return usageError{err}
	})
	root.AddCommand(newPlanCommand(), newExplainCommand(), newTestCommand(), newSnapshotCommand(), newApplyCommand(), newStatusCommand(), newHistoryCommand(), newUndoCommand(), newPauseCommand(true), newPauseCommand(false), newPromoteCommand(false), newPromoteCommand(true), newGateCommand(), newControllerCommand(), newVersionCommand(), newSchemaCommand())
	root.AddCommand(newManifestsCommand())
	withExitCodes(root)
	return root
}

// kubectlPlugin is the prefix kubectl looks for on PATH: `kubectl rollplan`
// runs the executable kubectl-rollplan (make install links it).
const kubectlPlugin = "kubectl-"

// nameFromArgv0 makes the help of root and every command under it say
// `kubectl rollplan` when the binary was started as kubectl-rollplan, so
// that what the help suggests can be typed as shown. Any other name
// leaves the help as it is.
func nameFromArgv0(root *cobra.Command, argv0 string) {
	base := filepath.Base(argv0)
	if !strings.HasPrefix(base, kubectlPlugin) {
		return
	}
	display := "kubectl " + strings.TrimPrefix(base, kubectlPlugin)
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	// Usage lines and "Use ... --help" hints go through CommandPath, which
	// starts from this name; the examples are text, rewritten below.
	root.Annotations[cobra.CommandDisplayNameAnnotation] = display
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Example = exampleCommand.ReplaceAllString(c.Example, "${1}"+display+" ")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// exampleCommand finds "rollplan " where an example line, a pipe or an &&
// starts a command (not inside a path such as /etc/rollplan/).
var exampleCommand = regexp.MustCompile(`(^|\s)rollplan `)

// unknownCommand is the usage error of "rollplan NAME" when rollplan has no
// command NAME, with cobra's suggestion if one is close.
func unknownCommand(root *cobra.Command, name string) error {
	hint := ""
	if s := root.SuggestionsFor(name); len(s) > 0 {
		hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageError{fmt.Errorf("unknown command %q for %q%s; run '%s --help' for the commands", name, root.CommandPath(), hint, root.CommandPath())}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the rollplan version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}

// versionLine is what `rollplan version` and `rollplan --version` print.
func versionLine() string {
	return fmt.Sprintf("rollplan %s (commit %s)\n", version, commit)
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %s", cmd.CommandPath(), strings.Join(args, " "))}
	}
	return nil
}
