package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/request"
)

func newExplainCommand() *cobra.Command {
	var f planFlags
	var htmlFile string
	cmd := &cobra.Command{
		Use:   "explain POD -f SNAPSHOT...",
		Short: "Print every decision that placed a pod in the plan",
		Example: `  rollplan explain web-3 -f testdata/scenarios/sts-partition-gate-off/snapshot.yaml
  rollplan explain default/web-3 -f snap.yaml --policy policies/examples/leader-last`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("explain takes one pod name (POD or NAMESPACE/POD), got %d arguments", len(args))}
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
			if err := explain(cmd.OutOrStdout(), res.Result, res.failed, args[0], f.namespace); err != nil || htmlFile == "" {
				return err
			}
			return explainHTML(cmd.ErrOrStderr(), htmlFile, res, args[0], f.namespace)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&htmlFile, "html", "", "also write the plan as an HTML page (plan -o html) to this file, and print a file:// link that opens it at the pod")
	return cmd
}

// explain prints the decisions behind pod arg; failed are the workloads
// that could not be planned, which a pod not found may belong to.
func explain(out io.Writer, res *plan.Result, failed []*facts.WorkloadError, arg, namespace string) error {
	ns, name := namespace, arg
	if i := strings.Index(arg, "/"); i >= 0 {
		ns, name = arg[:i], arg[i+1:]
	}
	for wi, det := range res.Details {
		r := det.Facts
		if ns != "" && r.Workload.Namespace != ns {
			continue
		}
		for i := range r.Pods {
			p := &r.Pods[i]
			if p.Name != name {
				continue
			}
			wp := &res.Plan.Workloads[wi]
			fmt.Fprintf(out, "pod %s/%s of %s %s\n", r.Workload.Namespace, p.Name, r.Workload.Kind, r.Workload.Name)
			fmt.Fprintf(out, "  revision:    %s (update revision %s)\n", p.Revision, r.Workload.UpdateRevision)
			state := fmt.Sprintf("phase %s, ready %t, available %t", p.Phase, p.Ready, p.Available)
			if p.Terminating {
				state += ", terminating"
			}
			fmt.Fprintf(out, "  state:       %s, node %q, zone %q, restarts %d\n", state, p.Node, p.Zone, p.Restarts)
			if p.Updated {
				fmt.Fprintln(out, "  decision:    already at the update revision; nothing to do")
				return nil
			}
			fmt.Fprintln(out, "  changes:")
			canInPlace := len(p.Changes) > 0
			for _, c := range p.Changes {
				how := "a running pod can take it (in place)"
				if !c.InPlace {
					how = "needs a new pod: " + c.Detail
					canInPlace = false
				}
				fmt.Fprintf(out, "    - %s (%s): %s\n", c.Path, c.Class, how)
			}
			pd := det.Decisions.Pods[i]
			override, overridden := det.Overrides[p.Name]
			if !pd.InScope {
				fmt.Fprintf(out, "  scope:       held: %s\n", pd.HeldReason)
				if !overridden {
					return nil
				}
				// The policy holds it, but its controller rolls it anyway:
				// the rest is what the plan does with it.
				fmt.Fprintf(out, "               (Go overrode the policy: %s)\n", override)
			} else {
				fmt.Fprintln(out, "  scope:       in this rollout")
			}
			fmt.Fprintf(out, "  eligibility: %s: %s\n", pd.Action, strings.Join(pd.Reasons, "; "))
			if w := r.Workload; canInPlace && pd.Action == engine.Recreate && (!w.Managed || w.PodUpdatePolicy == "" || w.PodUpdatePolicy == "Recreate") {
				how := fmt.Sprintf("%s=\"true\" and %s=InPlaceIfPossible", facts.AnnManaged, facts.AnnPodUpdatePolicy)
				if w.Managed {
					how = facts.AnnPodUpdatePolicy + "=InPlaceIfPossible"
				}
				fmt.Fprintf(out, "               (every change could go in place, but %s %s does not opt in: annotate it %s)\n", w.Kind, w.Name, how)
			}
			if overridden && pd.InScope {
				fmt.Fprintf(out, "               (Go overrode the policy: %s)\n", override)
			}
			fmt.Fprintf(out, "  order key:   %v\n", pd.Order)
			if len(wp.Halted) > 0 {
				fmt.Fprintf(out, "  wave:        none: the rollout is halted (%s)\n", strings.Join(wp.Halted, "; "))
				return nil
			}
			wave := det.Wave[p.Name]
			if wave == 0 {
				fmt.Fprintf(out, "  wave:        none (%s)\n", strings.Join(append(append([]string{}, wp.Notes...), "the plan holds no action for this pod"), "; "))
				return nil
			}
			w := wp.Waves[wave-1]
			fmt.Fprintf(out, "  wave:        %d of %d, starting at %s, pacing %s\n", wave, len(wp.Waves), w.Start, wp.Pacing)
			for _, a := range w.Actions {
				// A node action of the pod's node prepares it (DaemonSet).
				prepares := a.Pod == "" && a.Node != "" && a.Node == p.Node && wp.Kind == "DaemonSet"
				if a.Pod == p.Name || contains(a.Pods, p.Name) || prepares {
					desc := a.Type
					if a.ReplicaSet != "" {
						desc = fmt.Sprintf("%s %s %d->%d", a.Type, a.ReplicaSet, *a.From, *a.To)
					}
					if prepares {
						desc += " " + a.Node
					}
					fmt.Fprintf(out, "  action:      %s: %s\n", desc, strings.Join(a.Reasons, "; "))
				}
			}
			fmt.Fprintln(out, "  budgets:")
			for _, b := range wp.Budgets {
				adv := ""
				if b.Advisory {
					adv = " (advisory)"
				}
				fmt.Fprintf(out, "    - %s: limit %d %s, %d in use at snapshot time%s — %s\n", b.Name, b.Limit, b.Type, b.InUse, adv, b.Source)
			}
			if why := versionDecided(r); why != "" {
				fmt.Fprintf(out, "  kubernetes:  %s\n", why)
			}
			return nil
		}
	}
	// Not found: say where it was looked for, and where it is.
	var elsewhere []string
	for _, det := range res.Details {
		r := det.Facts
		for i := range r.Pods {
			if r.Pods[i].Name == name && !slices.Contains(elsewhere, r.Workload.Namespace) {
				elsewhere = append(elsewhere, r.Workload.Namespace)
			}
		}
	}
	sort.Strings(elsewhere)
	var err error
	switch {
	case ns == "":
		err = fmt.Errorf("pod %s is not a pod of any Deployment, StatefulSet or DaemonSet in the snapshot: check the pod name", arg)
	case len(elsewhere) > 0:
		err = fmt.Errorf("pod %s is not a pod of any Deployment, StatefulSet or DaemonSet in namespace %q of the snapshot; a pod of that name is in %s: explain %s/%s, or pass -n %s", name, ns, request.Namespaces(elsewhere), elsewhere[0], name, elsewhere[0])
	default:
		err = fmt.Errorf("pod %s is not a pod of any Deployment, StatefulSet or DaemonSet in namespace %q of the snapshot: check the name and the namespace", name, ns)
	}
	// It may be a pod of a workload that could not be planned.
	var why []string
	for _, e := range failed {
		if ns == "" || e.Namespace == ns {
			why = append(why, e.Error())
		}
	}
	if len(why) > 0 {
		err = fmt.Errorf("%w; it may be a pod of a workload that could not be planned: %s", err, strings.Join(why, "; "))
	}
	return err
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// versionDecided names the Kubernetes version and the feature gates that
// decided how a native StatefulSet's controller rolls it, or "" where the
// version changes nothing (reference §8).
func versionDecided(r *facts.Rollout) string {
	w := r.Workload
	if w.Kind != "StatefulSet" || w.Managed {
		return ""
	}
	v, err := kubeversion.ParseAny(r.KubernetesVersion)
	if err != nil {
		return ""
	}
	gate := func(name string) string {
		on := r.FeatureGates[name]
		how := "--feature-gates"
		if def, ok := kubeversion.Gates(v)[name]; ok && def == on {
			how = "the " + v.String() + " default"
		}
		return fmt.Sprintf("%s=%t (%s)", name, on, how)
	}
	switch w.Strategy.Type {
	case "Recreate":
		return fmt.Sprintf("planned for %s; %s decides whether the controller takes updateStrategy Recreate", v, gate(kubeversion.StatefulSetRecreateStrategy))
	case "RollingUpdate":
		on := r.FeatureGates[kubeversion.MaxUnavailableStatefulSet]
		switch {
		case !on:
			return fmt.Sprintf("planned for %s; %s: the controller replaces one pod at a time and ignores maxUnavailable", v, gate(kubeversion.MaxUnavailableStatefulSet))
		case w.PodManagementPolicy == "Parallel" && v.AtLeast(kubeversion.V1_37):
			return fmt.Sprintf("planned for %s; %s: maxUnavailable pods at once, and unavailable old pods first whatever the budget (two-phase Parallel update)", v, gate(kubeversion.MaxUnavailableStatefulSet))
		default:
			return fmt.Sprintf("planned for %s; %s: maxUnavailable pods at once (KEP-961)", v, gate(kubeversion.MaxUnavailableStatefulSet))
		}
	}
	return ""
}
