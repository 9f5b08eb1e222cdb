package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	explainpkg "github.com/rollplan/rollplan/planner/explain"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

func newExplainCommand() *cobra.Command {
	var f planFlags
	var output, htmlFile string
	var wave int
	cmd := &cobra.Command{
		Use:   "explain (POD | --wave N KIND/NAME) -f SNAPSHOT...",
		Short: "Print every decision that placed a pod in the plan, or why a wave starts when it does",
		Long: `Print every decision that placed a pod in the plan: its changes, scope,
eligibility, order key, wave and actions, the budgets, and which budget
kept it out of an earlier wave.

With --wave N KIND/NAME, print why wave N of the workload starts when it
does: what of the earlier waves it waits for, the budget that kept its
pods out of the wave before (its limit and use), each budget's use in the
wave, and what keeps the next pods out of it.

-o json and -o yaml print the same as data (field names in lowerCamel,
documented in docs/planning.md).`,
		Example: `  rollplan explain web-3 -f testdata/scenarios/sts-partition-gate-off/snapshot.yaml
  rollplan explain default/web-3 -f snap.yaml --policy policies/examples/leader-last
  rollplan explain --wave 2 statefulset/web -f snap.yaml -o yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("wave") {
				if len(args) != 1 {
					return usageError{fmt.Errorf("explain --wave takes one workload (KIND/NAME, e.g. statefulset/web), got %d arguments", len(args))}
				}
				if _, err := capture.ParseRef(args[0]); err != nil {
					return usageError{fmt.Errorf("explain --wave: %w", err)}
				}
			} else if len(args) != 1 {
				return usageError{fmt.Errorf("explain takes one pod name (POD or NAMESPACE/POD), got %d arguments", len(args))}
			}
			if !slices.Contains(explainFormats, output) {
				return usageError{fmt.Errorf("-o %q: want %s", output, strings.Join(explainFormats, ", "))}
			}
			if ns, _, ok := strings.Cut(args[0], "/"); ok && !cmd.Flags().Changed("wave") && f.namespace != "" && ns != f.namespace {
				return usageError{fmt.Errorf("pod %s names namespace %q but -n names %q: drop -n, or pass the pod name alone", args[0], ns, f.namespace)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Plan every namespace: explain looks for the pod in -n,
			// and can then say where a pod of that name is instead.
			f.everyNamespace = true
			f.stdin = cmd.InOrStdin()
			res, err := f.run(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("wave") {
				return explainWave(cmd.OutOrStdout(), res.Result, args[0], f.namespace, wave, output)
			}
			if err := explain(cmd.OutOrStdout(), res.Result, res.failed, args[0], f.namespace, output); err != nil || htmlFile == "" {
				return err
			}
			return explainHTML(cmd.ErrOrStderr(), htmlFile, res, args[0], f.namespace)
		},
	}
	f.register(cmd)
	cmd.ValidArgsFunction = completeExplain(&f)
	cmd.Flags().StringVarP(&output, "output", "o", explainFormats[0], "output format: "+strings.Join(explainFormats, ", "))
	cmd.Flags().IntVar(&wave, "wave", 0, "explain why wave N of workload KIND/NAME starts when it does (1 is the first wave)")
	cmd.Flags().StringVar(&htmlFile, "html", "", "also write the plan as an HTML page (plan -o html) to this file, and print a file:// link that opens it at the pod")
	return cmd
}

// explainWave prints why wave of workload arg (KIND/NAME, in namespace
// or the one namespace that has it) starts when it does, in format.
func explainWave(out io.Writer, res *plan.Result, arg, namespace string, wave int, format string) error {
	ref, err := capture.ParseRef(arg)
	if err != nil {
		return usageError{err}
	}
	wi, err := explainpkg.FindWorkload(res, ref.Kind, namespace, ref.Name)
	if err != nil {
		return err
	}
	e, err := explainpkg.ExplainWave(res, wi, wave)
	if err != nil {
		return err
	}
	return render.Value(out, format, e, e.WriteText)
}

// explainFormats: what explain prints, the default first.
var explainFormats = []string{"text", "json", "yaml"}

// explain prints the decisions behind pod arg in format (text, json or
// yaml); failed are the workloads that could not be planned, which a pod
// not found may belong to.
func explain(out io.Writer, res *plan.Result, failed []*facts.WorkloadError, arg, namespace, format string) error {
	wi, pi, err := explainpkg.FindPod(res, failed, arg, namespace)
	if err != nil {
		return err
	}
	e := explainpkg.Pod(res, wi, pi)
	return render.Value(out, format, e, e.WriteText)
}
