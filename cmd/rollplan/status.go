package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/render"
)

// statusDebounce: status --watch reads at most this often on changes.
const statusDebounce = 200 * time.Millisecond

// statusInterval is how often status --watch reads again; tests shorten it.
var statusInterval = 2 * time.Second

// statusIsTTY says whether w is a terminal (status --watch then redraws);
// tests replace it.
var statusIsTTY = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func newStatusCommand() *cobra.Command {
	var (
		config kubeFlags
		pf     planFlags
		output string
		watch  bool
		wait   bool
		// timeout bounds --watch and --wait (0: no limit).
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status KIND/NAME [-n NAMESPACE] [--policy P] [-o " + strings.Join(render.Formats, "|") + "] [--watch]",
		Short: "Show the rollout status of one workload: revisions, pods, the current wave, budgets, halts",
		Long: `Show where the rollout of one workload stands, as rollplan apply sees it:
the revisions (current → update); the pods: total, updated, available, held
(with reasons) and in flight (being updated in place); the plan's next wave
and its actions; every budget with its use and limit; the policy's halt and
deny reasons; and a one-line verdict: "rolled out", "in progress: wave 2 of
5", "halted: ...", "stalled ...", "waiting for a driver ...", or "paused" (a
paused Deployment rollplan does not manage, or a rollout paused with
rollplan pause). A Deployment its controller rolls shows "in progress:
rolled by the Deployment controller, 2 waves left": its waves are the
controller's, re-planned at every read, so they are not numbered.

The verdict says what the cluster shows, not what should happen: the
latest sign of the rollout moving (a pod created, deleted, updated in
place or turning Ready at the update revision; the update revision
created) decides it. A rollout rollplan drives whose next wave could start
now, with nothing in flight and nothing moved for 30s, is "waiting for a
driver (run rollplan apply, or install the controller)": rollplan apply
would have acted by then. A rollout whose plan cannot start within its
budgets, with nothing moved for 30s, is "stalled for D: budget B is used
up (N/N): REASON". Halted exits 3 and stalled 4 (the table below).

It only reads, so it works for every workload rollplan plans: Deployments,
StatefulSets and DaemonSets, rolled by their controller or by rollplan
apply. The state is read and planned exactly as each step of rollplan apply
reads and plans it (same policy flags). "wave N of M" counts the
rollout's own plan: M is the waves of the rollout as planned before its
first pod moved (rollplan keeps no history, so that plan is planned again
at every read from the live state rewound: every pod back at the previous
revision and available), the same at every read and after a restart. N
is the wave of the last pod that started moving (in flight, terminating,
missing, not yet available), else the next wave: counted from the pods the
plan of what is left no longer updates, it never goes backwards and never
passes M.

With --watch it reads from informer caches, again on every change (at most
every 0.2s) and every 2s, and prints again until the rollout is
rolled out (exit 0), halted (exit 3) or stalled (exit 4): on a terminal the table is redrawn;
otherwise a line (or, with -o json|yaml, a document) is printed only when
it changed (the read time and how long nothing has moved aside).

It also says who drives the rollout (the holder of its driver Lease: the
rollplan controller or a person's rollplan apply; a rollout a live driver
holds is never "waiting for a driver") and the controller's record of it
(the workload's annotation rollplan.dev/rollout-state: phase, wave, pods,
why it is halted), marked stale when it was recorded for another revision
or its driver no longer holds the driver Lease (the controller stopped). A rollout the controller halted shows halted until its
template changes or rollplan resume, as the controller keeps it.

-o json and -o yaml print a RolloutStatus (apiVersion rollplan.dev/v1alpha1).`,
		Example: `  rollplan status sts/web -n prod
  rollplan status deploy/api -o json | jq .verdict
  rollplan status ds/agent --policy policies/examples/one-zone-at-a-time --watch`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one KIND/NAME, e.g. sts/web", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !render.Check(output) {
				return usageError{fmt.Errorf("--output %q: want %s", output, render.List())}
			}
			output = render.Canonical(output) // --watch redraws the table in place
			w, err := openWorkload(cmd, args[0], &pf, &config)
			if err != nil {
				return err
			}
			defer w.stop()
			ctx, target := w.ctx, w.target
			if wait {
				watch = true
			}
			if timeout > 0 && !watch {
				return usageError{fmt.Errorf("--timeout bounds --watch and --wait: give one of them")}
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimedOut{timeout})
				defer cancel()
			}
			opts := executor.Options{Target: target, Engine: w.engine, KubernetesVersion: w.cluster.KubernetesVersion, FeatureGates: w.cluster.FeatureGates, Now: applyClock, PlanOptions: planOptions()}
			var changes <-chan struct{}
			if watch {
				// Watching reads from informer caches and reads again on
				// their changes, not only on the clock.
				r, err := live.NewInformerReader(ctx, w.client, target.Namespace, applyClock)
				if err != nil {
					return fmt.Errorf("%s: start informers: %w", target, err)
				}
				opts.Reader, changes = r, r.Changes()
			}
			x, err := executor.New(w.client, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !watch {
				st, err := x.Status(ctx)
				if err != nil {
					return err
				}
				if err := writeStatus(out, st, output); err != nil {
					return err
				}
				return statusErr(target, st)
			}
			if wait {
				return waitStatus(ctx, x.Status, target, out, output, changes)
			}
			return watchStatus(ctx, x.Status, target, out, output, statusIsTTY(out), changes)
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, false)
	fl := cmd.Flags()
	fl.StringSliceVar(&pf.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&pf.engine, "engine", "", "policy engine: "+engine.KindList()+"; "+engineDefault)
	pf.registerCluster(fl)
	durationVar(fl, &pf.timeout, "policy-timeout", time.Minute, positive, "deadline for evaluating the policy at each read")
	fl.StringVarP(&output, "output", "o", render.Formats[0], "output format: "+render.List())
	fl.BoolVarP(&watch, "watch", "w", false, "read again on every change (and every 2s) until the rollout is rolled out (exit 0), halted (exit 3) or stalled (exit 4)")
	fl.BoolVar(&wait, "wait", false, "as --watch, but print only the last status: for pipelines (exit 0 rolled out, 3 halted, 4 stalled, 1 on --timeout)")
	durationVarOff(fl, &timeout, "timeout", 0, zeroOrPositive, "no limit", "with --watch or --wait: give up after this long (exit 1); 0: no limit")
	return cmd
}

// statusErr is the error a status maps to: a *executor.HaltedError (exit 3)
// when the policy halts the rollout, a *executor.RolledBackError (exit 3)
// when a failed analysis rolled it back, exit 4 when it is stalled, else
// nil.
func statusErr(t live.Target, st *executor.RolloutStatus) error {
	switch st.State {
	case executor.StatusHalted:
		return &executor.HaltedError{Target: t, Reasons: append(append([]string{}, st.Halted...), st.Denied...)}
	case executor.StatusStalled:
		return codedError{exitStalled, fmt.Errorf("%s: %s", t, st.Verdict)}
	case executor.StatusRolledOut:
		if a := st.Analysis; a != nil && a.RolledBack {
			// Rolled out, but to the revision a failed analysis went
			// back to: the version applied did not.
			return &executor.RolledBackError{Target: t, From: a.From, To: a.Revision, Reason: a.Message}
		}
	}
	return nil
}

// errTimedOut is the cause of a --timeout's end.
type errTimedOut struct{ after time.Duration }

func (e errTimedOut) Error() string { return fmt.Sprintf("--timeout %s passed", e.after) }

// waitStatus is status --wait: watchStatus printing nothing until the
// rollout is rolled out, halted or stalled (or the wait ends), then the
// last status once: the line, or the -o json|yaml document.
func waitStatus(ctx context.Context, read func(context.Context) (*executor.RolloutStatus, error), t live.Target, out io.Writer, format string, changes <-chan struct{}) error {
	var last *executor.RolloutStatus
	keep := func(ctx context.Context) (*executor.RolloutStatus, error) {
		st, err := read(ctx)
		if st != nil {
			last = st
		}
		return st, err
	}
	err := watchStatus(ctx, keep, t, io.Discard, format, false, changes)
	if last == nil {
		return err
	}
	var buf bytes.Buffer
	if format == "table" {
		statusLine(&buf, last)
	} else if werr := writeStatus(&buf, last, format); werr != nil {
		return werr
	}
	if _, werr := out.Write(buf.Bytes()); werr != nil {
		return werr
	}
	var timedOut errTimedOut
	if errors.As(context.Cause(ctx), &timedOut) && err != nil && statusErr(t, last) == nil {
		return fmt.Errorf("%s: not rolled out within %s (%s); `rollplan status %s -n %s` shows where it stands", t, timedOut.after, last.Verdict, strings.ToLower(t.Kind)+"/"+t.Name, t.Namespace)
	}
	return err
}

// watchStatus reads (read: the executor's Status) and prints until the
// rollout is rolled out or halted, or ctx ends: again when changes reports
// a change (nil: never), and every statusInterval (time alone changes a
// status: minReadySeconds, deadlines).
func watchStatus(ctx context.Context, read func(context.Context) (*executor.RolloutStatus, error), t live.Target, out io.Writer, format string, tty bool, changes <-chan struct{}) error {
	last := ""
	for {
		st, err := read(ctx)
		if err != nil {
			return err
		}
		k := watchKey(st, format)
		if changed := k != last; changed || (tty && format == "table") {
			last = k
			var buf bytes.Buffer
			switch {
			case format != "table":
				if format == "yaml" {
					buf.WriteString("---\n")
				}
				err = writeStatus(&buf, st, format)
			case tty:
				buf.WriteString("\x1b[H\x1b[2J") // home, clear screen
				err = writeStatus(&buf, st, format)
			default:
				statusLine(&buf, st)
			}
			if err != nil {
				return err
			}
			if _, err := out.Write(buf.Bytes()); err != nil {
				return err
			}
		}
		switch st.State {
		case executor.StatusRolledOut:
			return nil
		case executor.StatusHalted, executor.StatusStalled:
			return statusErr(t, st)
		}
		stopped := func() error {
			return fmt.Errorf("%s: stopped watching before the rollout finished (%s): %w", t, st.Verdict, context.Cause(ctx))
		}
		tm := time.NewTimer(statusInterval)
		select {
		case <-ctx.Done():
			tm.Stop()
			return stopped()
		case <-changes:
			tm.Stop()
			// A burst of events (a wave restarting) makes one read.
			select {
			case <-ctx.Done():
				return stopped()
			case <-time.After(statusDebounce):
			}
		case <-tm.C:
		}
		if ctx.Err() != nil { // both ready at once: select picks either
			return stopped()
		}
	}
}

// elapsed matches how long nothing has moved, in a verdict ("for 1h2m0s").
var elapsed = regexp.MustCompile(`\bfor [0-9][0-9hms.]*`)

// watchKey is what --watch compares between reads to tell a change: what
// it prints (the line, or the document) without the read time and
// without how long nothing has moved, which change at every read.
func watchKey(st *executor.RolloutStatus, format string) string {
	c := *st
	c.Time = ""
	c.Verdict = elapsed.ReplaceAllString(c.Verdict, "for …")
	if c.Stalled != nil {
		s := *c.Stalled
		s.For = ""
		c.Stalled = &s
	}
	if format == "table" {
		var b bytes.Buffer
		statusLine(&b, &c)
		return b.String()
	}
	k, _ := json.Marshal(c) // plain fields: cannot fail
	return string(k)
}

// statusLine is the one line --watch prints per change when not on a terminal.
func statusLine(w io.Writer, st *executor.RolloutStatus) {
	p := st.Pods
	fmt.Fprintf(w, "%s %s %s/%s: %s; %d/%d pods updated, %d available, %d held, %d in flight\n",
		st.Time, st.Workload.Kind, st.Workload.Namespace, st.Workload.Name, st.Verdict,
		p.Updated, p.Desired-p.Held, p.Available, p.Held, p.InFlight)
}

// writeStatus prints the status in an output format of render.
func writeStatus(w io.Writer, st *executor.RolloutStatus, format string) error {
	return render.Value(w, format, st, func(w io.Writer) error { return statusTable(w, st) })
}

// statusTable is the table layout of a status. It stays beside the command
// while RolloutStatus is the executor's: render, in the planner, may not
// import a consumer.
func statusTable(w io.Writer, st *executor.RolloutStatus) error {
	var b bytes.Buffer
	wl := st.Workload
	fmt.Fprintf(&b, "%s %s/%s: %s\n", wl.Kind, wl.Namespace, wl.Name, st.Verdict)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	mode := wl.Strategy
	if wl.Managed {
		mode += ", managed by rollplan"
	}
	if wl.PodUpdatePolicy != "" {
		mode += ", pod update policy " + wl.PodUpdatePolicy
	}
	fmt.Fprintf(tw, "Strategy:\t%s\n", mode)
	rev := st.Revisions.Current + " → " + st.Revisions.Update
	if st.Revisions.Current == st.Revisions.Update {
		rev = st.Revisions.Update + " (current)"
	}
	if len(st.Revisions.Other) > 0 {
		var on []string
		for _, r := range slices.Sorted(maps.Keys(st.Revisions.Other)) {
			on = append(on, fmt.Sprintf("%d on %s", st.Revisions.Other[r], r))
		}
		rev += "; pods to update also run other revisions: " + strings.Join(on, ", ")
	}
	fmt.Fprintf(tw, "Revisions:\t%s\n", rev)
	p := st.Pods
	fmt.Fprintf(tw, "Pods:\t%d desired, %d total: %d updated, %d available, %d held, %d in flight\n", p.Desired, p.Total, p.Updated, p.Available, p.Held, p.InFlight)
	// The numbers the verdict uses (executor's waves): done + the current
	// wave + the ones after it; the pods in flight are the current wave.
	wv := st.Waves
	switch {
	case wv.Total > 0 && st.State == executor.StatusRolledOut:
		fmt.Fprintf(tw, "Waves:\t%d done (estimated)\n", wv.Done)
	case wv.Total > 0:
		fmt.Fprintf(tw, "Waves:\twave %d of %d: %d done (estimated), %d after it\n", wv.Current, wv.Total, wv.Done, wv.Remaining-1)
	case wv.Remaining > 0:
		fmt.Fprintf(tw, "Waves:\t%d left, as planned now (the Deployment controller's; waves done are not counted)\n", wv.Remaining)
	}
	if d := st.Driver; d != nil {
		live := ""
		if !d.Live {
			live = ", lapsed: free to take"
		}
		fmt.Fprintf(tw, "Driver:\t%s (Lease %s%s)\n", d.Identity, d.Lease, live)
	}
	if c := st.Controller; c != nil {
		stale := ""
		if st.ControllerStale != "" {
			stale = " (stale: " + st.ControllerStale + ")"
		}
		fmt.Fprintf(tw, "Controller:\t%s%s\n", c.Summary(), stale)
	}
	if a := st.Analysis; a != nil {
		fmt.Fprintf(tw, "Analysis:\t%s\n", a.Summary())
	}
	tw.Flush()
	inFlight := "In flight"
	if wv.Current > 0 {
		inFlight = fmt.Sprintf("In flight (wave %d)", wv.Current)
	}
	podList(&b, inFlight, st.InFlight)
	podList(&b, "Held", st.Held)
	if cw := st.CurrentWave; cw != nil {
		when := "now"
		if cw.Start != "" && cw.Start != "0s" {
			when = "in " + cw.Start
		}
		title := "Current wave"
		if cw.Number > wv.Current {
			title = "Next wave" // it waits for the pods in flight
		}
		if cw.Number > 0 {
			title += fmt.Sprintf(" %d", cw.Number)
		}
		fmt.Fprintf(&b, "%s (starts %s):\n", title, when)
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, a := range cw.Actions {
			what := a.Pod
			if what == "" {
				what = a.Node
			}
			if a.ReplicaSet != "" {
				what = a.ReplicaSet
				if a.From != nil && a.To != nil {
					what += fmt.Sprintf(" %d → %d", *a.From, *a.To)
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.Type, what, strings.Join(a.Reasons, "; "))
		}
		tw.Flush()
	}
	if len(st.Budgets) > 0 {
		fmt.Fprintln(&b, "Budgets:")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, bu := range st.Budgets {
			adv := ""
			if bu.Advisory {
				adv = " (advisory)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d in use%s\t%s\n", bu.Name, bu.Type, bu.InUse, bu.Limit, adv, bu.Source)
		}
		tw.Flush()
	}
	if a := st.LastActivity; a != nil {
		fmt.Fprintf(&b, "Last activity: %s (%s)\n", a.Time, a.What)
	}
	reasons(&b, "Halted", st.Halted)
	reasons(&b, "Denied", st.Denied)
	reasons(&b, "Notes", st.Notes)
	_, err := w.Write(b.Bytes())
	return err
}

func podList(w io.Writer, title string, pods []executor.StatusPod) {
	if len(pods) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range pods {
		fmt.Fprintf(tw, "  %s\t%s\n", p.Pod, p.Reason)
	}
	tw.Flush()
}

func reasons(w io.Writer, title string, rs []string) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for _, r := range rs {
		fmt.Fprintf(w, "  %s\n", r)
	}
}
