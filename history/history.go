// Package history reads a workload's rollout history from the cluster and
// rolls it back: the revisions `rollplan history` lists and `rollplan
// undo` returns to.
//
// Upstream keeps a Deployment's history as its ReplicaSets
// (deployment.kubernetes.io/revision) and a StatefulSet's or DaemonSet's
// as ControllerRevisions. A Deployment updated in place by rollplan keeps
// one ReplicaSet, whose earlier templates rollplan records in the
// ReplicaSet's live.AnnRevisionHistory annotation; List merges both.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Revision is one revision of a workload.
type Revision struct {
	Number int64 `json:"revision"`
	// Source: the ReplicaSet or ControllerRevision that records it.
	Source string `json:"source"`
	// InPlace: recorded by rollplan when an in-place update replaced this
	// template in Source (a ReplicaSet's AnnRevisionHistory).
	InPlace bool `json:"inPlace,omitempty"`
	// Current: the workload's pods are (being) rolled to this revision.
	Current bool `json:"current,omitempty"`
	// Pending: the workload's template, which no revision records yet
	// (Number 0): a held Deployment's new template before rollplan apply.
	Pending     bool   `json:"pending,omitempty"`
	ChangeCause string `json:"changeCause,omitempty"`
	// Changes: what differs from the revision before it ("" for the
	// first): "PATH, ... changed", plus " in place" when the revision is
	// known to have been rolled out in place (a Deployment revision in the
	// same ReplicaSet as the one before; see rolledInPlace).
	Changes  string                  `json:"changes"`
	Template *corev1.PodTemplateSpec `json:"-"`
}

// List reads the revisions of the workload, oldest first.
func List(ctx context.Context, c kubernetes.Interface, t live.Target) ([]Revision, error) {
	var (
		revs    []Revision
		current *corev1.PodTemplateSpec
		err     error
	)
	switch t.Kind {
	case capture.Deployment:
		revs, current, err = deploymentRevisions(ctx, c, t)
	case capture.StatefulSet, capture.DaemonSet:
		revs, current, err = controllerRevisions(ctx, c, t)
	default:
		return nil, fmt.Errorf("%s: history of a %s: want Deployment, StatefulSet or DaemonSet", t, t.Kind)
	}
	if err != nil {
		return nil, err
	}
	sort.SliceStable(revs, func(i, j int) bool { return revs[i].Number < revs[j].Number })
	for i := range revs {
		if i > 0 {
			revs[i].Changes = summary(facts.Diff(revs[i-1].Template, revs[i].Template), rolledInPlace(t, revs[i-1], revs[i]))
		}
	}
	// The current revision is the newest whose template is the workload's.
	for i := len(revs) - 1; i >= 0; i-- {
		if live.SameTemplate(revs[i].Template, current) {
			revs[i].Current = true
			return revs, nil
		}
	}
	// None is: the template changed and no controller (a held Deployment,
	// a controller that has not synced yet) recorded it.
	p := Revision{Source: "the workload's template", Pending: true, Current: true, Template: stripRevisionLabels(current)}
	if len(revs) > 0 {
		p.Changes = summary(facts.Diff(revs[len(revs)-1].Template, p.Template), false)
	}
	return append(revs, p), nil
}

func deploymentRevisions(ctx context.Context, c kubernetes.Interface, t live.Target) ([]Revision, *corev1.PodTemplateSpec, error) {
	d, err := c.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, getError(t, err)
	}
	l, err := c.AppsV1().ReplicaSets(t.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: list ReplicaSets: %w", t, err)
	}
	var out []Revision
	for i := range l.Items {
		rs := &l.Items[i]
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		out = append(out, Revision{Number: live.Revision(rs), Source: "ReplicaSet/" + rs.Name,
			ChangeCause: rs.Annotations["kubernetes.io/change-cause"], Template: live.StripHash(&rs.Spec.Template)})
		hist, err := live.RevisionHistory(rs)
		if err != nil {
			return nil, nil, err
		}
		for _, h := range hist {
			out = append(out, Revision{Number: h.Revision, Source: "ReplicaSet/" + rs.Name, InPlace: true, ChangeCause: h.ChangeCause, Template: h.Template.DeepCopy()})
		}
	}
	return out, &d.Spec.Template, nil
}

func controllerRevisions(ctx context.Context, c kubernetes.Interface, t live.Target) ([]Revision, *corev1.PodTemplateSpec, error) {
	var (
		uid      string
		template *corev1.PodTemplateSpec
	)
	switch t.Kind {
	case capture.StatefulSet:
		s, err := c.AppsV1().StatefulSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, getError(t, err)
		}
		uid, template = string(s.UID), &s.Spec.Template
	default:
		ds, err := c.AppsV1().DaemonSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, getError(t, err)
		}
		uid, template = string(ds.UID), &ds.Spec.Template
	}
	l, err := c.AppsV1().ControllerRevisions(t.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: list ControllerRevisions: %w", t, err)
	}
	var out []Revision
	for i := range l.Items {
		cr := &l.Items[i]
		if ref := metav1.GetControllerOf(cr); ref == nil || string(ref.UID) != uid {
			continue
		}
		tmpl, err := facts.RevisionTemplate(cr)
		if err != nil {
			return nil, nil, fmt.Errorf("ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		out = append(out, Revision{Number: cr.Revision, Source: "ControllerRevision/" + cr.Name,
			ChangeCause: cr.Annotations["kubernetes.io/change-cause"], Template: stripRevisionLabels(tmpl)})
	}
	return out, template, nil
}

func stripRevisionLabels(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	c := live.StripHash(t)
	delete(c.Labels, appsv1.ControllerRevisionHashLabelKey)
	delete(c.Labels, "pod-template-generation")
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}

// summary says what changed: the paths, and "changed in place" only when
// the revision is known to have been rolled out in place (inPlace). Whether
// a field could change in place (facts.Change.InPlace) says nothing of how
// the revision was rolled out: a native rolling update recreates pods
// whatever changed.
func summary(changes []facts.Change, inPlace bool) string {
	if len(changes) == 0 {
		return "no change"
	}
	var parts []string
	for _, c := range changes {
		parts = append(parts, c.Path)
	}
	s := strings.Join(parts, ", ") + " changed"
	if inPlace {
		s += " in place"
	}
	return s
}

// rolledInPlace: rev (the revision after prev) is known to have been
// rolled out in place. Only a Deployment's history tells: rollplan updates
// a Deployment in place within one ReplicaSet, recording the template it
// replaced there, so two successive revisions recorded by the same
// ReplicaSet went in place; a revision in another ReplicaSet got new pods.
// A ControllerRevision does not record how its pods were updated.
func rolledInPlace(t live.Target, prev, rev Revision) bool {
	return t.Kind == capture.Deployment && prev.Source == rev.Source && !rev.Pending
}

// Find is revision n of revs; n = 0 is the revision before the current
// one, as kubectl rollout undo takes it. Its errors say what is missing;
// the caller adds how to list the revisions (the command line it takes).
func Find(revs []Revision, t live.Target, n int64) (*Revision, error) {
	if n == 0 {
		cur := -1
		for i := range revs {
			if revs[i].Current {
				cur = i
			}
		}
		// The newest revision that is not the current template.
		for i := len(revs) - 1; i >= 0; i-- {
			if i != cur && (cur < 0 || !live.SameTemplate(revs[i].Template, revs[cur].Template)) {
				return &revs[i], nil
			}
		}
		return nil, fmt.Errorf("%s: no previous revision to roll back to", t)
	}
	for i := range revs {
		if revs[i].Number == n && !revs[i].Pending {
			return &revs[i], nil
		}
	}
	var have []string
	for _, r := range revs {
		if !r.Pending {
			have = append(have, fmt.Sprint(r.Number))
		}
	}
	return nil, fmt.Errorf("%s: revision %d not found (revisions: %s)", t, n, strings.Join(have, ", "))
}

// Rollback sets the workload's pod template to the revision's (the
// revision labels aside) and returns whether it changed. The rollout then
// runs like any update: rollplan apply drives it (in place where the
// policy allows), or the workload's controller for one rollplan does not
// manage.
//
// The template is replaced by a JSON patch that carries the
// resourceVersion read (a conflict is read again and retried), so that
// the patch verb suffices: the executor's automatic rollback after a
// failed analysis runs under the controller's role, which has no update.
func Rollback(ctx context.Context, c kubernetes.Interface, t live.Target, rev *Revision, dryRun bool) (bool, error) {
	changed := false
	opts := metav1.PatchOptions{FieldManager: "rollplan"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	apps := c.AppsV1()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var (
			m   metav1.Object
			cur *corev1.PodTemplateSpec
		)
		switch t.Kind {
		case capture.Deployment:
			d, err := apps.Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			m, cur = d, &d.Spec.Template
		case capture.StatefulSet:
			s, err := apps.StatefulSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			m, cur = s, &s.Spec.Template
		default:
			ds, err := apps.DaemonSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			m, cur = ds, &ds.Spec.Template
		}
		want := rev.Template.DeepCopy()
		if changed = !live.SameTemplate(stripRevisionLabels(cur), want); !changed {
			return nil
		}
		// Replacing resourceVersion makes the write conditional on it: a
		// stale read is a 409 Conflict, retried.
		body, err := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/metadata/resourceVersion", "value": m.GetResourceVersion()},
			{"op": "replace", "path": "/spec/template", "value": want},
		})
		if err != nil {
			return err
		}
		switch t.Kind {
		case capture.Deployment:
			_, err = apps.Deployments(t.Namespace).Patch(ctx, t.Name, types.JSONPatchType, body, opts)
		case capture.StatefulSet:
			_, err = apps.StatefulSets(t.Namespace).Patch(ctx, t.Name, types.JSONPatchType, body, opts)
		default:
			_, err = apps.DaemonSets(t.Namespace).Patch(ctx, t.Name, types.JSONPatchType, body, opts)
		}
		return err
	})
	if err != nil {
		if nf := capture.WorkloadNotFound(t.Kind, t.Name, t.Namespace, err); nf != err {
			return false, nf
		}
		return false, fmt.Errorf("%s: roll the template back to revision %d: %w", t, rev.Number, err)
	}
	return changed, nil
}

// getError is the error of reading the workload: worded as rollplan
// snapshot, status and apply word it when it does not exist.
func getError(t live.Target, err error) error {
	if nf := capture.WorkloadNotFound(t.Kind, t.Name, t.Namespace, err); nf != err {
		return nf
	}
	return fmt.Errorf("%s: %w", t, err)
}

// RollBackTo sets the workload's template back to that of the revision
// recorded by from (a ControllerRevision or ReplicaSet name; "" or one not
// found: the one before the current, as undo takes it) and returns the
// name of that record: the executor's rollback after a failed analysis
// (executor.RollBacker).
func RollBackTo(ctx context.Context, c kubernetes.Interface, t live.Target, from string, dryRun bool) (string, error) {
	revs, err := List(ctx, c, t)
	if err != nil {
		return "", err
	}
	var rev *Revision
	for i := range revs {
		if _, name, _ := strings.Cut(revs[i].Source, "/"); name == from && from != "" && !revs[i].Current && !revs[i].Pending {
			rev = &revs[i]
		}
	}
	if rev == nil {
		if rev, err = Find(revs, t, 0); err != nil {
			return "", err
		}
	}
	if _, err := Rollback(ctx, c, t, rev, dryRun); err != nil {
		return "", err
	}
	_, name, _ := strings.Cut(rev.Source, "/")
	return name, nil
}
