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
)

func newExplainCommand() *cobra.Command {
	var f planFlags
	var output, htmlFile string
	cmd := &cobra.Command{
		Use:   "explain POD -f SNAPSHOT...",
		Short: "Print every decision that placed a pod in the plan",
		Example: `  rollplan explain web-3 -f testdata/scenarios/sts-partition-gate-off/snapshot.yaml
  rollplan explain default/web-3 -f snap.yaml --policy policies/examples/leader-last`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("explain takes one pod name (POD or NAMESPACE/POD), got %d arguments", len(args))}
			}
			if !slices.Contains(explainFormats, output) {
				return usageError{fmt.Errorf("-o %q: want %s", output, strings.Join(explainFormats, ", "))}
			}
			if ns, _, ok := strings.Cut(args[0], "/"); ok && f.namespace != "" && ns != f.namespace {
				return usageError{fmt.Errorf("pod %s names namespace %q but -n names %q: drop -n, or pass the pod name alone", args[0], ns, f.namespace)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Plan every namespace: explain looks for the pod in -n,
			// and can then say where a pod of that name is instead.
			if _, err := f.target(); err != nil {
				return err
			}
			all := f
			all.namespace = ""
			all.stdin = cmd.InOrStdin()
			res, err := all.run(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := explain(cmd.OutOrStdout(), res.Result, res.failed, args[0], f.namespace, output); err != nil || htmlFile == "" {
				return err
			}
			return explainHTML(cmd.ErrOrStderr(), htmlFile, res, args[0], f.namespace)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", explainFormats[0], "output format: "+strings.Join(explainFormats, ", "))
	cmd.Flags().StringVar(&htmlFile, "html", "", "also write the plan as an HTML page (plan -o html) to this file, and print a file:// link that opens it at the pod")
	return cmd
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
