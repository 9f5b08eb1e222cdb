package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/change"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/request"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// registerChange binds --change and kubectl's connection flags
// (--kubeconfig, --context, ...; -n is plan's own): with --change and no
// -f, plan previews the change against the live cluster.
func (f *planFlags) registerChange(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.changes, "change", nil, "preview the rollout these manifests would cause: files or directories (*.yaml, *.yml, *.json) of Deployments, StatefulSets and DaemonSets that replace the workloads of the same kind, namespace and name; without -f, against the live cluster (--kubeconfig, --context) through a server-side dry-run apply")
	kube := pflag.NewFlagSet("kube", pflag.ContinueOnError)
	f.config.register(kube)
	kube.VisitAll(func(k *pflag.Flag) {
		if k.Name != "namespace" {
			k.Usage += " (with --change and no -f: the cluster to preview against)"
			fl.AddFlag(k)
			f.kubeFlagNames = append(f.kubeFlagNames, k.Name)
		}
	})
	f.flags = fl
}

// live: --change without -f previews against the live cluster.
func (f *planFlags) live() bool { return len(f.changes) > 0 && len(f.files) == 0 }

// checkSource refuses flags that contradict where the plan reads from.
func (f *planFlags) checkSource() error {
	var set []string
	for _, n := range f.kubeFlagNames {
		if f.flags != nil && f.flags.Changed(n) {
			set = append(set, "--"+n)
		}
	}
	switch {
	case len(set) > 0 && len(f.files) > 0:
		return usageError{fmt.Errorf("%s and -f: -f plans snapshot files, %s a live cluster: pass one of them", strings.Join(set, ", "), set[0])}
	case len(set) > 0 && len(f.changes) == 0:
		return usageError{fmt.Errorf("%s: plan reads a live cluster only to preview a change (--change FILE); to plan the cluster as it is: rollplan snapshot -n NAMESPACE | rollplan plan -f -", strings.Join(set, ", "))}
	}
	return nil
}

// changeSource is where a change's proposed objects came from.
type changeSource struct {
	outcomes []change.Outcome
}

// fileChange reads the --change manifests, gives them the API server's
// defaults and puts them in the snapshot.
func (f *planFlags) fileChange(snap *snapshot.Snapshot, cluster facts.Options, stderr io.Writer) (*changeSource, []string, error) {
	objs, warnings, err := change.Read(f.changes, f.namespace)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		if err := change.Default(o, cluster.FeatureGates); err != nil {
			return nil, nil, err
		}
	}
	return f.applyChange(snap, objs, change.FromFiles, cluster, warnings, stderr)
}

// liveChange previews the change against the cluster: the proposed
// objects as a server-side dry-run apply returns them, in a capture of
// the workloads they change.
func (f *planFlags) liveChange(ctx context.Context, stderr io.Writer) (*snapshot.Snapshot, facts.Options, *changeSource, []string, error) {
	f.config.overrides.Context.Namespace = f.namespace
	cl, err := connectCluster(&f.config)
	if err != nil {
		return nil, facts.Options{}, nil, nil, err
	}
	objs, warnings, err := change.Read(f.changes, cl.namespace)
	if err != nil {
		return nil, facts.Options{}, nil, nil, err
	}
	cluster, err := f.liveClusterOptions(cl, stderr)
	if err != nil {
		return nil, facts.Options{}, nil, nil, err
	}
	// The stored objects first: what exists is captured before the
	// dry-run, the rest is new.
	byNS := map[string][]capture.Ref{}
	for _, o := range objs {
		exists, err := workloadExists(ctx, cl.client, o)
		if err != nil {
			return nil, facts.Options{}, nil, nil, err
		}
		if exists {
			byNS[o.Namespace] = append(byNS[o.Namespace], capture.Ref{Kind: o.Kind, Name: o.Name})
		}
	}
	snap := &snapshot.Snapshot{}
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		s, ws, err := capture.Capture(ctx, cl.client, capture.Options{Namespace: ns, Workloads: byNS[ns], Now: captureClock})
		if err != nil {
			return nil, facts.Options{}, nil, nil, fmt.Errorf("reading the workloads the change replaces from %s: %w", cl.source, err)
		}
		warnings = append(warnings, ws...)
		change.Merge(snap, s)
	}
	if err := change.DryRun(ctx, cl.client, objs); err != nil {
		return nil, facts.Options{}, nil, nil, codedError{exitError, err}
	}
	if snap.CapturedAt.IsZero() {
		snap.CapturedAt = captureClock().UTC()
	}
	src, ws, err := f.applyChange(snap, objs, change.FromServer, cluster, warnings, stderr)
	return snap, cluster, src, ws, err
}

// workloadExists reports whether the cluster holds the workload o proposes.
func workloadExists(ctx context.Context, client kubernetes.Interface, o *change.Object) (bool, error) {
	var err error
	apps := client.AppsV1()
	switch o.Kind {
	case change.Deployment:
		_, err = apps.Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case change.StatefulSet:
		_, err = apps.StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case change.DaemonSet:
		_, err = apps.DaemonSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", o.ID(), err)
	}
	return true, nil
}

// applyChange puts the proposed objects in the snapshot; what is not
// planned (a new workload, an unchanged one) becomes a warning.
func (f *planFlags) applyChange(snap *snapshot.Snapshot, objs []*change.Object, mode change.Mode, cluster facts.Options, warnings []string, stderr io.Writer) (*changeSource, []string, error) {
	src := &changeSource{outcomes: change.Apply(snap, objs, mode, cluster.FeatureGates)}
	for _, oc := range src.outcomes {
		if oc.Status != change.Replaced {
			warnings = append(warnings, oc.Note())
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	return src, warnings, nil
}

// changedNothing is the error of a change that replaces no workload
// (unless --allow-empty): each proposed workload is new or unchanged, so
// the preview is empty, which a CI job must not take for a success. A
// workload of that kind and name in another namespace of snap is named:
// the manifest probably lacks its namespace (-n).
func (f *planFlags) changedNothing(c *changeSource, snap *snapshot.Snapshot) error {
	if c == nil || f.allowEmpty {
		return nil
	}
	where := "the snapshot"
	if f.live() {
		where = "the cluster"
	}
	var what []string
	for _, oc := range c.outcomes {
		o := oc.Object
		switch oc.Status {
		case change.Replaced:
			return nil
		case change.Unchanged:
			what = append(what, fmt.Sprintf("%s proposes the spec it has", o.ID()))
		case change.New:
			msg := fmt.Sprintf("%s is not in %s", o.ID(), where)
			if nss := namespacesOf(snap, o.Kind, o.Name); len(nss) > 0 {
				msg += fmt.Sprintf(" (a %s %s is in %s: name it with -n %s or metadata.namespace)", o.Kind, o.Name, request.Namespaces(nss), nss[0])
			}
			what = append(what, msg)
		}
	}
	msg := "--change plans nothing: " + strings.Join(what, "; ")
	if hint := f.allowEmptyHint(); hint != "" {
		msg += ": fix the manifests" + hint + " when the change only creates workloads or changes none"
	}
	return errors.New(msg)
}

// namespacesOf are the namespaces where snap has a workload of kind and
// name, sorted.
func namespacesOf(snap *snapshot.Snapshot, kind, name string) []string {
	var nss []string
	add := func(o metav1.Object) {
		if o.GetName() == name {
			nss = append(nss, o.GetNamespace())
		}
	}
	switch kind {
	case change.Deployment:
		for _, o := range snap.Deployments {
			add(o)
		}
	case change.StatefulSet:
		for _, o := range snap.StatefulSets {
			add(o)
		}
	case change.DaemonSet:
		for _, o := range snap.DaemonSets {
			add(o)
		}
	}
	slices.Sort(nss)
	return slices.Compact(nss)
}

// scope keeps the facts of the workloads the change replaces: the plan
// previews the change, not the other workloads of the snapshot.
func (c *changeSource) scope(in *request.Facts) {
	if c == nil {
		return
	}
	keep := map[string]bool{}
	for _, oc := range c.outcomes {
		if oc.Status == change.Replaced {
			keep[oc.Object.ID()] = true
		}
	}
	id := func(kind, ns, name string) string { return fmt.Sprintf("%s %s/%s", kind, ns, name) }
	in.Rollouts = slices.DeleteFunc(in.Rollouts, func(r *facts.Rollout) bool {
		return !keep[id(r.Workload.Kind, r.Workload.Namespace, r.Workload.Name)]
	})
	in.Failed = slices.DeleteFunc(in.Failed, func(e *facts.WorkloadError) bool { return !keep[id(e.Kind, e.Namespace, e.Name)] })
}

// annotate notes on each planned workload which manifest proposed it.
func (c *changeSource) annotate(p *plan.Plan) {
	if c == nil {
		return
	}
	notes := map[string][]string{}
	for _, oc := range c.outcomes {
		if oc.Status == change.Replaced {
			notes[oc.Object.ID()] = []string{oc.Note()}
			if oc.TemplateChanged {
				notes[oc.Object.ID()] = append(notes[oc.Object.ID()], templateChanges(oc.From, oc.To))
			}
		}
	}
	for i := range p.Workloads {
		wp := &p.Workloads[i]
		if n, ok := notes[fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name)]; ok {
			wp.Notes = append(n, wp.Notes...)
		}
	}
}

// templateChangesPrefix starts the note that lists a change's pod
// template fields (-o markdown shows it as "What changes").
const templateChangesPrefix = "pod template changes: "

// templateChanges words what a change does to the pod template: each
// field that differs (facts.Diff), images with their values, and whether
// a running pod may take it.
func templateChanges(from, to *corev1.PodTemplateSpec) string {
	var out []string
	for _, c := range facts.Diff(from, to) {
		x := c.Path
		if v1, v2, ok := imageValues(c.Path, from, to); ok {
			x += fmt.Sprintf(" %s → %s", v1, v2)
		}
		switch {
		case c.InPlace:
			x += " (a running pod can take it)"
		case c.Detail != "":
			x += " (" + c.Detail + ")"
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		return templateChangesPrefix + "none that a pod sees (the new revision differs in fields the pods do not carry)"
	}
	return templateChangesPrefix + strings.Join(out, "; ")
}

// imageValues are the images before and after of a path
// spec.containers[NAME].image or spec.initContainers[NAME].image.
func imageValues(path string, from, to *corev1.PodTemplateSpec) (string, string, bool) {
	for _, list := range []struct {
		prefix   string
		from, to []corev1.Container
	}{{"spec.containers[", from.Spec.Containers, to.Spec.Containers}, {"spec.initContainers[", from.Spec.InitContainers, to.Spec.InitContainers}} {
		name, ok := strings.CutPrefix(path, list.prefix)
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, "].image"); !ok {
			return "", "", false
		}
		image := func(cs []corev1.Container) string {
			for _, c := range cs {
				if c.Name == name {
					return c.Image
				}
			}
			return "(none)"
		}
		return image(list.from), image(list.to), true
	}
	return "", "", false
}

// changeOutcome is plan's exit status with --change: a change the
// policy's guard rails deny fails as a halt does (3; the gate would refuse
// the update), whatever --allow-halted says; a smaller code wins.
func changeOutcome(p *plan.Plan, err error, changed bool) error {
	if !changed {
		return err
	}
	if code := exitCode(err); code != exitOK && code <= exitHalted {
		return err
	}
	var denied []string
	for _, wp := range p.Workloads {
		if len(wp.Denied) > 0 {
			denied = append(denied, fmt.Sprintf("%s %s/%s: %s", wp.Kind, wp.Namespace, wp.Name, wp.Denied[0]))
		}
	}
	if len(denied) == 0 {
		return err
	}
	return codedError{exitHalted, fmt.Errorf("denied: %s (the policy's guard rails refuse the change; the gate would deny the update)", strings.Join(denied, "; "))}
}
