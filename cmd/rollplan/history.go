package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/history"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

func oneWorkload(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError{fmt.Errorf("%s takes one KIND/NAME, e.g. deploy/web", cmd.CommandPath())}
	}
	return nil
}

func newHistoryCommand() *cobra.Command {
	var (
		config   kubeFlags
		output   string
		revision int64
	)
	cmd := &cobra.Command{
		Use:   "history KIND/NAME [-n NAMESPACE] [--revision N]",
		Short: "List the revisions of a workload, including in-place ones, with what each changed",
		Long: `List the revisions of a Deployment, StatefulSet or DaemonSet, oldest first:
the kubectl rollout history of rollplan. A Deployment's revisions are its
ReplicaSets and, for a ReplicaSet rollplan updated in place, the templates
it replaced (kept in the ReplicaSet's annotation rollplan.dev/revision-history,
at most revisionHistoryLimit of them); a StatefulSet's and DaemonSet's are
its ControllerRevisions. CHANGES says which fields differ from the revision
before ("... changed"), and "changed in place" where the revision is known
to have been rolled out in place (a Deployment revision rollplan applied
within the previous revision's ReplicaSet; a ControllerRevision does not
record how its pods were updated); * marks the revision the workload's template is at. A template no revision
records yet (a held Deployment after kubectl set image, before rollplan
apply) is listed last as "-*".`,
		Example: `  rollplan history deploy/web -n prod
  rollplan history deploy/web --revision 2      # that revision's pod template
  rollplan history sts/db -o json`,
		Args: oneWorkload,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := capture.ParseRef(args[0]); err != nil {
				return usageError{err}
			}
			if !render.Check(output) {
				return usageError{fmt.Errorf("-o %q: want %s", output, render.List())}
			}
			cl, t, err := connectTarget(&config, args[0])
			if err != nil {
				return err
			}
			revs, err := history.List(cmd.Context(), cl.client, t)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if revision != 0 {
				rev, err := history.Find(revs, t, revision)
				if err != nil {
					return fmt.Errorf("%w: list them with `%s`", err, commandFor(&config, "rollplan history", t))
				}
				raw, err := yaml.Marshal(rev.Template)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "# %s revision %d (%s)\n%s", t, rev.Number, rev.Source, raw)
				return nil
			}
			return printHistory(out, t, revs, output)
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, false)
	cmd.Flags().StringVarP(&output, "output", "o", render.Formats[0], "output format: "+render.List())
	cmd.Flags().Int64Var(&revision, "revision", 0, "print the pod template of this revision")
	return cmd
}

// printHistory prints a workload's revisions in an output format of render.
func printHistory(w io.Writer, t live.Target, revs []history.Revision, output string) error {
	return render.Value(w, output, revs, func(w io.Writer) error { return historyTable(w, t, revs) })
}

// historyTable is the table layout of a revision list. It stays beside the
// command while Revision is history's: render, in the planner, may not
// import a consumer.
func historyTable(w io.Writer, t live.Target, revs []history.Revision) error {
	fmt.Fprintf(w, "%s\n", t)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tSOURCE\tCHANGE-CAUSE\tCHANGES")
	for _, r := range revs {
		num := fmt.Sprint(r.Number)
		if r.Pending {
			num = "-"
		}
		if r.Current {
			num += "*"
		}
		src := r.Source
		switch {
		case r.InPlace:
			src += " (replaced in place)"
		case r.Pending:
			src += " (not rolled out yet)"
		}
		cause := r.ChangeCause
		if cause == "" {
			cause = "<none>"
		}
		changes := r.Changes
		if changes == "" {
			changes = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", num, src, cause, changes)
	}
	return tw.Flush()
}

func newUndoCommand() *cobra.Command {
	var (
		config kubeFlags
		pf     planFlags
		to     int64
		dryRun string
		output string
		o      driveOptions
	)
	cmd := &cobra.Command{
		Use:   "undo KIND/NAME [-n NAMESPACE] [--to-revision N] [--dry-run=client]",
		Short: "Roll a workload back to an earlier revision, in place where the policy allows",
		Long: `Roll a Deployment, StatefulSet or DaemonSet back to an earlier revision (the
one before the current, or --to-revision N from rollplan history): set its
pod template to that revision's, then carry out the rollout like any
update, as rollplan apply does — in place where the policy allows. For a
workload rollplan does not manage, its controller rolls it (as after
kubectl rollout undo).

--dry-run=client changes nothing: it prints the plan of the rollback
(-o ` + strings.Join(render.Formats, "|") + `), computed from the live state with the template
rolled back. It exits as rollplan apply does (the table below).`,
		Example: `  rollplan undo deploy/web -n prod --dry-run=client   # preview the plan
  rollplan undo deploy/web -n prod
  rollplan undo deploy/web --to-revision 3 --timeout 20m`,
		Args: oneWorkload,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dryRun != "none" && dryRun != "client" {
				return usageError{fmt.Errorf("--dry-run %q: want none or client", dryRun)}
			}
			r, err := render.Get(output)
			if err != nil {
				return usageError{err}
			}
			w, err := openWorkload(cmd, args[0], &pf, &config)
			if err != nil {
				return err
			}
			defer w.stop()
			revs, err := history.List(w.ctx, w.client, w.target)
			if err != nil {
				return err
			}
			rev, err := history.Find(revs, w.target, to)
			if err != nil {
				return fmt.Errorf("%w: see `%s`", err, commandFor(&config, "rollplan history", w.target))
			}
			stderr := cmd.ErrOrStderr()
			if dryRun == "client" {
				p, err := previewRollback(w, rev)
				if err != nil {
					return err
				}
				fmt.Fprintf(stderr, "%s: preview of the rollback to revision %d (%s); nothing changed\n", w.target, rev.Number, rev.Source)
				return r.Render(cmd.OutOrStdout(), p)
			}
			changed, err := history.Rollback(w.ctx, w.client, w.target, rev, false)
			if err != nil {
				return err
			}
			if !changed {
				fmt.Fprintf(stderr, "%s: the template is revision %d's already\n", w.target, rev.Number)
			} else {
				fmt.Fprintf(stderr, "%s: template rolled back to revision %d (%s)\n", w.target, rev.Number, rev.Source)
			}
			managed, err := isManaged(w)
			if err != nil {
				return err
			}
			if !managed {
				fmt.Fprintf(stderr, "%s is not managed by rollplan (annotation %s): its controller rolls it back; follow it with `%s`\n", w.target, facts.AnnManaged, commandFor(&config, "kubectl rollout status", w.target))
				return nil
			}
			o.undo = true
			return drive(cmd, w, o)
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, false)
	fl := cmd.Flags()
	fl.Int64Var(&to, "to-revision", 0, "the revision to roll back to (rollplan history lists them); 0: the one before the current")
	fl.StringVar(&dryRun, "dry-run", "none", `"client": print the plan of the rollback and change nothing; "none": roll back`)
	fl.Lookup("dry-run").NoOptDefVal = "client"
	fl.StringVarP(&output, "output", "o", render.Formats[0], "output format of --dry-run=client: "+render.List())
	fl.StringSliceVar(&pf.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&pf.engine, "engine", "", "policy engine: "+engine.KindList()+"; "+engineDefault)
	pf.registerCluster(fl)
	durationVar(fl, &pf.timeout, "policy-timeout", time.Minute, positive, "deadline for evaluating the policy at each step")
	fl.StringVar(&o.deleteMethod, "delete-method", executor.DeleteEvict, `how a recreation removes a pod: "evict" (PodDisruptionBudgets honoured) or "delete" (see rollplan apply --help)`)
	fl.BoolVar(&o.once, "once", false, "after rolling the template back, carry out one step and exit")
	durationVarOff(fl, &o.timeout, "timeout", 0, zeroOrPositive, "no limit", "give up after this long (exit 1); 0: no limit")
	fl.StringVar(&o.metrics, "metrics-bind-address", "", `serve Prometheus metrics on this address at /metrics; "" or "0": off`)
	fl.StringVar(&o.analysisConfig, "analysis-config", "", analysisConfigHelp)
	return cmd
}

// workloadError is the error of reading the workload t: worded as rollplan
// snapshot, status and apply word it when it does not exist.
func workloadError(t live.Target, err error) error {
	if nf := capture.WorkloadNotFound(t.Kind, t.Name, t.Namespace, err); nf != err {
		return nf
	}
	return fmt.Errorf("%s: %w", t, err)
}

// isManaged: rollplan apply drives the workload (annotation rollplan.dev/managed).
func isManaged(w *liveWorkload) (bool, error) {
	m, err := workloadMeta(w.ctx, w)
	if err != nil {
		return false, err
	}
	return m.GetAnnotations()[facts.AnnManaged] == "true", nil
}

// workloadMeta reads the workload's metadata from the API server.
func workloadMeta(ctx context.Context, w *liveWorkload) (metav1.Object, error) {
	t := w.target
	var m metav1.Object
	var err error
	switch t.Kind {
	case capture.Deployment:
		m, err = w.client.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	case capture.StatefulSet:
		m, err = w.client.AppsV1().StatefulSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	default:
		m, err = w.client.AppsV1().DaemonSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, workloadError(t, err)
	}
	return m, nil
}

// workloadUID is the workload's UID (its driver Lease is owned by it).
func workloadUID(ctx context.Context, w *liveWorkload) (types.UID, error) {
	m, err := workloadMeta(ctx, w)
	if err != nil {
		return "", err
	}
	return m.GetUID(), nil
}

// previewRollback plans the rollout the rollback would start: the live
// state, read as rollplan apply reads it, with the workload's template set
// to the revision's.
func previewRollback(w *liveWorkload, rev *history.Revision) (*plan.Plan, error) {
	now := applyClock()
	snap, err := live.CaptureReader{Client: w.client, Now: applyClock}.Read(w.ctx, w.target)
	if err != nil {
		return nil, err
	}
	set := func(t *corev1.PodTemplateSpec) { *t = *rev.Template.DeepCopy() }
	found := false
	for _, d := range snap.Deployments {
		if w.target.Kind == capture.Deployment && d.Name == w.target.Name {
			set(&d.Spec.Template)
			found = true
		}
	}
	for _, s := range snap.StatefulSets {
		if w.target.Kind == capture.StatefulSet && s.Name == w.target.Name {
			set(&s.Spec.Template)
			found = true
		}
	}
	for _, ds := range snap.DaemonSets {
		if w.target.Kind == capture.DaemonSet && ds.Name == w.target.Name {
			set(&ds.Spec.Template)
			found = true
		}
	}
	if !found {
		return nil, capture.NotFoundError(w.target.Kind, w.target.Name, w.target.Namespace)
	}
	r, _, err := live.Observe(snap, w.target, now, w.cluster)
	if err != nil {
		return nil, err
	}
	res, err := plan.Build(w.ctx, []*facts.Rollout{r}, w.engine, plan.Metadata{Now: now.UTC().Format(time.RFC3339), Engine: w.engine.Name(), PolicyDigest: w.engine.Digest()}, planOptions())
	if err != nil {
		return nil, err
	}
	return res.Plan, nil
}

func newPauseCommand(pause bool) *cobra.Command {
	var (
		config kubeFlags
		dryRun string
	)
	use, short := "resume", "Resume a rollout paused with rollplan pause"
	long := `Resume a rollout paused with rollplan pause: remove the annotation
rollplan.dev/paused. The driver that holds the workload's driver Lease
(the rollplan controller, or a running rollplan apply) carries on from
where the cluster is; resume says which, or the command to run when none
holds it. Resume also ends a halt: the controller's record of it, and an
analysis gate's (the wave is measured again, from a first try).`
	if pause {
		use, short = "pause", "Pause a workload's rollout after the actions in flight; any executor honours it"
		long = `Pause the rollout of a Deployment, StatefulSet or DaemonSet: annotate it
rollplan.dev/paused="true". Every rollplan apply running on it (and any
started later) starts no new action until rollplan resume: pods already
being updated finish, then the rollout holds. The state lives on the
workload in the cluster, not in an executor. For a managed Deployment it
also sets spec.paused, so a rollout handed to the Deployment controller
stops too.`
	}
	cmd := &cobra.Command{
		Use:     use + " KIND/NAME [-n NAMESPACE]",
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  rollplan %s deploy/web -n prod\n  rollplan %s sts/db --context staging", use, use),
		Args:    oneWorkload,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dryRun != "none" && dryRun != "server" {
				return usageError{fmt.Errorf("--dry-run %q: want none or server", dryRun)}
			}
			cl, t, err := connectTarget(&config, args[0])
			if err != nil {
				return err
			}
			var who string
			if !pause && dryRun != "server" {
				if who, err = carriesOn(cmd.Context(), cl.client, &config, t); err != nil {
					return err
				}
			}
			if err := executor.SetPaused(cmd.Context(), cl.client, t, pause, dryRun == "server"); err != nil {
				return capture.WorkloadNotFound(t.Kind, t.Name, t.Namespace, err)
			}
			suffix := ""
			if dryRun == "server" {
				suffix = " (server dry run, nothing changed)"
			}
			if pause {
				fmt.Fprintf(cmd.OutOrStdout(), "%s paused%s: no new action starts until `%s`; pods being updated finish\n", t, suffix, commandFor(&config, "rollplan resume", t))
			} else if suffix != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s resumed%s\n", t, suffix)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s resumed: %s\n", t, who)
			}
			return nil
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, false)
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"server": send the change with dryRun=All; "none": apply it`)
	return cmd
}

// carriesOn says who carries a resumed rollout on, read before resume
// clears the controller's record: the driver that holds the workload's
// driver Lease (status reads the same Lease: executor.ReadDriver), the
// controller or a running apply; else the controller when it keeps the
// rollout's record (it gives the Lease up while the rollout is paused,
// and takes it again when resume changes the workload); else nobody yet,
// with the command.
func carriesOn(ctx context.Context, client kubernetes.Interface, config *kubeFlags, t live.Target) (string, error) {
	h, err := executor.ReadDriver(ctx, client, t, applyClock)
	if err != nil {
		return "", err
	}
	apply := commandFor(config, "rollplan apply", t)
	switch {
	case h != nil && h.Live && h.Controller:
		return fmt.Sprintf("the rollplan controller carries on (it holds the driver Lease: %s)", h.Identity), nil
	case h != nil && h.Live:
		return fmt.Sprintf("the running rollplan apply carries on (it holds the driver Lease: %s)", h.Identity), nil
	}
	var anns map[string]string
	apps := client.AppsV1()
	switch t.Kind {
	case capture.Deployment:
		var o *appsv1.Deployment
		if o, err = apps.Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{}); err == nil {
			anns = o.Annotations
		}
	case capture.StatefulSet:
		var o *appsv1.StatefulSet
		if o, err = apps.StatefulSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{}); err == nil {
			anns = o.Annotations
		}
	case capture.DaemonSet:
		var o *appsv1.DaemonSet
		if o, err = apps.DaemonSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{}); err == nil {
			anns = o.Annotations
		}
	}
	if err != nil {
		return "", capture.WorkloadNotFound(t.Kind, t.Name, t.Namespace, err)
	}
	if rec, err := live.ParseRolloutState(anns[facts.AnnRolloutState]); err == nil && rec != nil {
		return fmt.Sprintf("the rollplan controller carries on (it recorded the rollout as %s; where it no longer runs: `%s`)", rec.Phase, apply), nil
	}
	return fmt.Sprintf("no driver holds it now: run `%s` to carry on, or install the rollplan controller", apply), nil
}
