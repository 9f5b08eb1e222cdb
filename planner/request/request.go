// Package request is what a plan is computed from: a snapshot read at a
// time, the Kubernetes version and feature gates it is planned for, and
// the workloads selected. rollplan plan, rollplan test (planner/policytest),
// the scenario tests and live.Observe (the executor's and the gate's view of
// one workload) build a Request and take its Facts; plan.Run
// plans them with an engine. It imports no consumer (executor, gate) and
// no engine, so that every reader of a cluster or a snapshot can build one.
package request

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// Request is one planning request.
type Request struct {
	Snapshot *snapshot.Snapshot
	// Warnings from loading the snapshot; the plan's metadata carries them.
	Warnings []string
	// Now is the snapshot time; zero: the latest time the snapshot records.
	Now time.Time
	// Cluster: the Kubernetes version (zero: the newest rollplan models)
	// and the feature gates that differ from its defaults. Its Now is not
	// read: Now is.
	Cluster facts.Options
	// Workload selects the workloads planned; the zero value selects all.
	Workload Workload
	// Strict: one workload whose facts cannot be built fails the request,
	// selected or not (policy tests); else such workloads are returned
	// apart, and only those selected (rollplan plan reports them).
	Strict bool
}

// Workload selects workloads: each empty field matches any.
type Workload struct {
	// Kind: Deployment, StatefulSet or DaemonSet (see Kind for the aliases).
	Kind, Namespace, Name string
	// Arg: the selection as it was written (--workload KIND/NAME or
	// KIND/NAMESPACE/NAME, a test's workload), for messages; "" for a
	// namespace alone (-n).
	Arg string
}

// IsZero reports whether w selects every workload.
func (w Workload) IsZero() bool { return w.Kind == "" && w.Namespace == "" && w.Name == "" }

func (w Workload) selects(kind, namespace, name string) bool {
	return (w.Kind == "" || w.Kind == kind) && (w.Namespace == "" || w.Namespace == namespace) && (w.Name == "" || w.Name == name)
}

// Kind is the workload kind an alias names (deployment, deploy, sts, ds,
// any case; plural or not), or "" for none.
func Kind(alias string) string {
	switch strings.ToLower(alias) {
	case "deployment", "deployments", "deploy":
		return "Deployment"
	case "statefulset", "statefulsets", "sts":
		return "StatefulSet"
	case "daemonset", "daemonsets", "ds":
		return "DaemonSet"
	}
	return ""
}

// ErrNoTime: Now is zero and the snapshot records no time to take instead.
var ErrNoTime = errors.New("the snapshot records no time (no creation or condition timestamps)")

// Time is the snapshot time the request plans at: Now, else the latest
// time the snapshot records, else ErrNoTime.
func (r *Request) Time() (time.Time, error) {
	now := r.Now
	if now.IsZero() {
		now = r.Snapshot.Latest()
	}
	if now.IsZero() {
		return now, ErrNoTime
	}
	return now, nil
}

// Facts are the facts a request plans from.
type Facts struct {
	Request *Request
	// Now: the request's Time.
	Now time.Time
	// Rollouts: the facts of the selected workloads, sorted by kind,
	// namespace and name.
	Rollouts []*facts.Rollout
	// Failed: the selected workloads whose facts cannot be built (none
	// under Strict).
	Failed []*facts.WorkloadError
}

// NoMatchError: the request selects no workload of a snapshot that has
// some. Namespaces are those where the snapshot has a workload of the kind
// and name asked for (sorted), for a message saying where to look.
type NoMatchError struct {
	Workload   Workload
	Namespaces []string
}

// Error says where the snapshot has what was asked for, in the words of
// rollplan plan's flags (policy tests select as --workload does).
func (e *NoMatchError) Error() string {
	w, nss := e.Workload, e.Namespaces
	switch {
	case w.Arg != "" && w.Namespace != "" && len(nss) > 0:
		return fmt.Sprintf("--workload %s: no %s %s in namespace %q of the snapshot; it has one in %s: name that namespace (--workload %s/%s/%s, without -n)", w.Arg, w.Kind, w.Name, w.Namespace, Namespaces(nss), strings.Split(w.Arg, "/")[0], nss[0], w.Name)
	case w.Arg != "" && w.Namespace != "":
		return fmt.Sprintf("--workload %s: no %s %s in namespace %q of the snapshot: check the name, or capture the workload (rollplan snapshot %s/%s -n %s)", w.Arg, w.Kind, w.Name, w.Namespace, strings.ToLower(w.Kind), w.Name, w.Namespace)
	case w.Arg != "":
		return fmt.Sprintf("--workload %s: no %s %s in the snapshot: check the name, or capture the workload (rollplan snapshot %s/%s)", w.Arg, w.Kind, w.Name, strings.ToLower(w.Kind), w.Name)
	case w.Namespace != "" && len(nss) > 0:
		return fmt.Sprintf("-n %s: no Deployment, StatefulSet or DaemonSet in namespace %q of the snapshot; it has workloads in %s: pass one of them to -n, or drop -n to plan them all", w.Namespace, w.Namespace, Namespaces(nss))
	}
	return fmt.Sprintf("no %s %s/%s in the snapshot", w.Kind, w.Namespace, w.Name)
}

// Namespaces lists namespace names for a message: namespace "a", or
// namespaces "a", "b".
func Namespaces(nss []string) string {
	q := make([]string, len(nss))
	for i, ns := range nss {
		q[i] = strconv.Quote(ns)
	}
	if len(q) == 1 {
		return "namespace " + q[0]
	}
	return "namespaces " + strings.Join(q, ", ")
}

// Facts builds the facts of the workloads the request selects. A
// selection that matches nothing is a *NoMatchError, unless it names a
// namespace alone and the snapshot has no workload at all (an empty plan).
func (r *Request) Facts() (*Facts, error) {
	now, err := r.Time()
	if err != nil {
		return nil, err
	}
	o := r.Cluster
	o.Now = now
	f := &Facts{Request: r, Now: now}
	var rollouts []*facts.Rollout
	var failed []*facts.WorkloadError
	if r.Strict {
		rollouts, err = facts.Build(r.Snapshot, o)
	} else {
		rollouts, failed, err = facts.BuildEach(r.Snapshot, o)
	}
	if err != nil {
		return nil, err
	}
	w := r.Workload
	elsewhere := map[string]bool{}
	for _, ro := range rollouts {
		if w.selects(ro.Workload.Kind, ro.Workload.Namespace, ro.Workload.Name) {
			f.Rollouts = append(f.Rollouts, ro)
		}
		if (Workload{Kind: w.Kind, Name: w.Name}).selects(ro.Workload.Kind, ro.Workload.Namespace, ro.Workload.Name) {
			elsewhere[ro.Workload.Namespace] = true
		}
	}
	for _, e := range failed {
		if w.selects(e.Kind, e.Namespace, e.Name) {
			f.Failed = append(f.Failed, e)
		}
		if (Workload{Kind: w.Kind, Name: w.Name}).selects(e.Kind, e.Namespace, e.Name) {
			elsewhere[e.Namespace] = true
		}
	}
	if len(f.Rollouts)+len(f.Failed) == 0 && !w.IsZero() && (w.Kind != "" || w.Name != "" || len(elsewhere) > 0) {
		return nil, &NoMatchError{Workload: w, Namespaces: slices.Sorted(maps.Keys(elsewhere))}
	}
	return f, nil
}
