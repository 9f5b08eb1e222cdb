package fidelity

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/test/controlplane"
)

var (
	rollplanBin string
	runningMu   sync.Mutex
	running     = map[string]*controlplane.ControlPlane{} // by run label
	report      = &suiteReport{}
)

func TestMain(m *testing.M) {
	code := runMain(m)
	os.Exit(code)
}

func runMain(m *testing.M) int {
	if _, err := controlplane.BinDir(); err == nil {
		dir, err := os.MkdirTemp("", "rollplan-fidelity-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		rollplanBin = filepath.Join(dir, "rollplan")
		build := exec.Command("go", "build", "-o", rollplanBin, "github.com/rollplan/rollplan/cmd/rollplan")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build rollplan:", err)
			return 1
		}
	}
	defer func() {
		runningMu.Lock()
		defer runningMu.Unlock()
		for key, cp := range running {
			if err := cp.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stop control plane %s: %v\n", key, err)
			}
		}
	}()
	code := m.Run()
	report.print(os.Stdout)
	if path := os.Getenv("ROLLPLAN_FIDELITY_REPORT"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		report.print(f)
		_ = f.Close()
	}
	return code
}

// cluster returns the shared control plane of a run (a version and the
// gates it overrides), starting it on first use.
func cluster(t *testing.T, r run) *controlplane.ControlPlane {
	t.Helper()
	if _, err := controlplane.VersionDir(r.version); err != nil {
		t.Skip(err)
	}
	runningMu.Lock()
	defer runningMu.Unlock()
	if cp, ok := running[r.label()]; ok {
		return cp
	}
	cp, err := controlplane.Start(context.Background(), controlplane.Options{Version: r.version, FeatureGates: r.gates})
	if err != nil {
		t.Fatalf("start control plane %s: %v", r.label(), err)
	}
	running[r.label()] = cp
	report.setServer(r.version, cp.ServerVersion)
	return cp
}

// stopCluster stops a run's control plane, if it was started.
func stopCluster(r run) {
	runningMu.Lock()
	defer runningMu.Unlock()
	if cp, ok := running[r.label()]; ok {
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane %s: %v\n", r.label(), err)
		}
		delete(running, r.label())
	}
}

// recorder keeps the watch events of one namespace and says when the
// cluster has been quiet for a while.
type recorder struct {
	mu        sync.Mutex
	recording bool
	events    []event
	last      time.Time
}

type event struct {
	at   time.Time
	verb string // add, update, delete
	obj  any
	old  any
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	add := func(verb string, obj, old any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.last = time.Now()
		if r.recording {
			r.events = append(r.events, event{at: r.last, verb: verb, obj: obj, old: old})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { add("add", obj, nil) },
		UpdateFunc: func(old, obj any) { add("update", obj, old) },
		DeleteFunc: func(obj any) { add("delete", obj, nil) },
	}
}

// start records from now on. The quiet window counts from now too: the
// last event may be seconds old (the capture and the plan ran since), and
// waitQuiet must not take the controllers' silence before they resume
// for the end of their work (on a loaded machine it returned at once).
func (r *recorder) start() {
	r.mu.Lock()
	r.recording, r.events, r.last = true, nil, time.Now()
	r.mu.Unlock()
}

func (r *recorder) stop() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recording = false
	return r.events
}

// waitQuiet returns once no event arrived for quiet.
func (r *recorder) waitQuiet(ctx context.Context, quiet time.Duration) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r.mu.Lock()
		since := time.Since(r.last)
		r.mu.Unlock()
		if since >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not quiet for %s within 2m", quiet)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiet - since):
		}
	}
}

func watchNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) *recorder {
	t.Helper()
	r := &recorder{last: time.Now()}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	infs := []cache.SharedIndexInformer{
		f.Core().V1().Pods().Informer(),
		f.Apps().V1().ReplicaSets().Informer(),
		f.Apps().V1().Deployments().Informer(),
		f.Apps().V1().StatefulSets().Informer(),
		f.Apps().V1().DaemonSets().Informer(),
		f.Apps().V1().ControllerRevisions().Informer(),
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(r.handler()); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(ctx.Done())
	for _, inf := range infs {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("watch cache did not sync")
		}
	}
	t.Cleanup(f.Shutdown)
	return r
}

// capture runs `rollplan snapshot` on a namespace, as a user would, and
// returns the file and the pods in it.
func capture(ctx context.Context, kubeconfig, ns string) ([]byte, *state, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, rollplanBin, "snapshot", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("rollplan snapshot -n %s: %v: %s", ns, err, stderr.String())
	}
	snap, _, err := snapshot.Decode("snapshot of "+ns, stdout.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("read back the snapshot of %s: %w", ns, err)
	}
	st := &state{}
	for _, p := range snap.Pods {
		st.pods = append(st.pods, *p)
	}
	return stdout.Bytes(), st, nil
}

// state is what a capture saw, for reducing events to ops.
type state struct {
	pods []corev1.Pod
}

func (s *state) podNode() map[string]string {
	m := map[string]string{}
	for _, p := range s.pods {
		m[p.Name] = nodeOf(&p)
	}
	return m
}

// surged: nodes holding a pod at the update revision (hash) beside an old
// one.
func (s *state) surged(hash string) map[string]bool {
	newOn, oldOn := map[string]bool{}, map[string]bool{}
	for i := range s.pods {
		p := &s.pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if revisionOf(p) == hash {
			newOn[nodeOf(p)] = true
		} else {
			oldOn[nodeOf(p)] = true
		}
	}
	out := map[string]bool{}
	for n := range newOn {
		if oldOn[n] {
			out[n] = true
		}
	}
	return out
}

// nodeOf: the pod's node, or for an unscheduled DaemonSet pod the node its
// affinity names.
func nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

func available(p *corev1.Pod, minReady int32, now time.Time) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return !c.LastTransitionTime.Add(time.Duration(minReady) * time.Second).After(now)
		}
	}
	return false
}

// planArgs are the cluster flags of a run's plans: the control plane's
// version, and --feature-gates only for the gates the run overrides.
func planArgs(r run) []string {
	args := []string{"--kubernetes-version", r.version}
	if gs := gateArgs(r.gates); gs != "" {
		args = append(args, "--feature-gates", gs)
	}
	return args
}

// runPlan plans a snapshot with the rollplan binary, the default strategy,
// for the run's version and gates.
func runPlan(ctx context.Context, snap []byte, now time.Time, r run, workload string) (*plan.WorkloadPlan, []byte, error) {
	f, err := os.CreateTemp("", "fidelity-snapshot-*.json")
	if err != nil {
		return nil, nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(snap); err != nil {
		return nil, nil, err
	}
	_ = f.Close()
	args := []string{"plan", "-f", f.Name(), "-o", "json", "--now", now.UTC().Format(time.RFC3339Nano),
		"--workload", workload, "--recreate-duration", recreateEstimate, "--inplace-duration", recreateEstimate,
		"--terminate-duration", "0s",
		// A stalled or halted rollout is a plan to compare too (exit 0).
		"--allow-halted"}
	args = append(args, planArgs(r)...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, rollplanBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("rollplan %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var p plan.Plan
	if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
		return nil, nil, fmt.Errorf("decode plan: %w", err)
	}
	if len(p.Workloads) != 1 {
		return nil, nil, fmt.Errorf("plan has %d workloads for %s", len(p.Workloads), workload)
	}
	return &p.Workloads[0], stdout.Bytes(), nil
}

// gateArgs renders feature gates as a --feature-gates value.
func gateArgs(gates map[string]bool) string {
	var gs []string
	for k, v := range gates {
		gs = append(gs, fmt.Sprintf("%s=%t", k, v))
	}
	sort.Strings(gs)
	return strings.Join(gs, ",")
}

// observedOps reduces a step's watch events to ops. recreating: StatefulSet
// pods deleted in earlier steps whose replacement the controller makes when
// its ordering allows, the end of an earlier recreate rather than a new
// decision; replicas: the StatefulSet's, to tell a condemned pod.
func observedOps(kind string, events []event, recreating map[string]bool, replicas int) (ops []Op, log []string) {
	type scale struct {
		from, to int32
	}
	scales := map[string]*scale{}
	var rsOrder []string
	created := map[string]*corev1.Pod{}
	deleted := map[string]*corev1.Pod{}
	var createdOrder, deletedOrder []string
	for _, e := range events {
		switch o := e.obj.(type) {
		case *appsv1.ReplicaSet:
			n := int32(0)
			if o.Spec.Replicas != nil {
				n = *o.Spec.Replicas
			}
			s, ok := scales[o.Name]
			if !ok {
				from := int32(0)
				if old, ok := e.old.(*appsv1.ReplicaSet); ok && old.Spec.Replicas != nil {
					from = *old.Spec.Replicas
				}
				if e.verb == "add" || e.verb == "update" && from != n {
					s = &scale{from: from, to: n}
					scales[o.Name] = s
					rsOrder = append(rsOrder, o.Name)
					log = append(log, fmt.Sprintf("%s replicaset %s replicas %d -> %d", e.verb, o.Name, from, n))
				}
				continue
			}
			if s.to != n {
				log = append(log, fmt.Sprintf("update replicaset %s replicas %d -> %d", o.Name, s.to, n))
				s.to = n
			}
		case *corev1.Pod:
			key := o.Name + "/" + string(o.UID)
			switch {
			case e.verb == "add":
				created[key] = o
				createdOrder = append(createdOrder, key)
				log = append(log, fmt.Sprintf("create pod %s (revision %s)", o.Name, revisionOf(o)))
			case e.verb == "update" && o.DeletionTimestamp != nil:
				if old, ok := e.old.(*corev1.Pod); ok && old.DeletionTimestamp == nil {
					deleted[key] = o
					deletedOrder = append(deletedOrder, key)
					log = append(log, fmt.Sprintf("delete pod %s on %s", o.Name, nodeOf(o)))
				}
			case e.verb == "update":
				if c, ok := created[key]; ok && c.Spec.NodeName == "" && o.Spec.NodeName != "" {
					created[key] = o
				}
			case e.verb == "delete":
				if _, ok := deleted[key]; !ok && o.DeletionTimestamp == nil {
					deleted[key] = o
					deletedOrder = append(deletedOrder, key)
					log = append(log, fmt.Sprintf("delete pod %s on %s", o.Name, nodeOf(o)))
				}
			}
		}
	}
	for _, name := range rsOrder {
		if s := scales[name]; s.from != s.to {
			ops = append(ops, Op(fmt.Sprintf("scale %s %d->%d", name, s.from, s.to)))
		}
	}
	switch kind {
	case "Deployment":
		for _, key := range deletedOrder {
			ops = append(ops, Op("remove "+deleted[key].Name))
		}
	case "StatefulSet":
		gone := map[string]bool{}
		for _, key := range deletedOrder {
			name := deleted[key].Name
			gone[name] = true
			if ordinal(name) >= replicas {
				ops = append(ops, Op("delete "+name))
				continue
			}
			ops = append(ops, Op("recreate "+name))
			recreating[name] = true
		}
		for _, key := range createdOrder {
			name := created[key].Name
			switch {
			case gone[name]:
			case recreating[name]:
				delete(recreating, name)
			default:
				ops = append(ops, Op("create "+name))
			}
		}
		for name := range gone {
			for _, key := range createdOrder {
				if created[key].Name == name {
					delete(recreating, name)
				}
			}
		}
	case "DaemonSet":
		made := map[string]bool{}
		for _, key := range createdOrder {
			made[nodeOf(created[key])] = true
		}
		gone := map[string]bool{}
		for _, key := range deletedOrder {
			node := nodeOf(deleted[key])
			gone[node] = true
			if made[node] {
				ops = append(ops, Op("recreate node="+node))
			} else {
				ops = append(ops, Op("delete node="+node))
			}
		}
		for _, key := range createdOrder {
			if node := nodeOf(created[key]); !gone[node] {
				ops = append(ops, Op("surge node="+node))
			}
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	return ops, log
}

// ordinal of a StatefulSet pod name (<set>-<ordinal>), -1 if none.
func ordinal(name string) int {
	i := strings.LastIndex(name, "-")
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

func revisionOf(p *corev1.Pod) string {
	if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
		return h
	}
	return p.Labels[appsv1.ControllerRevisionHashLabelKey]
}

// suiteReport collects agreement per scenario for the summary lines, and
// figures per Kubernetes version.
type suiteReport struct {
	mu     sync.Mutex
	rows   []reportRow
	server map[string]string        // version → the apiserver's gitVersion
	wall   map[string]time.Duration // version → time its scenarios took
}

type reportRow struct {
	// version: the control plane's ("v1.36"); scenario: the run's label
	// and the scenario's name ("v1.36/sts-parallel").
	version, scenario   string
	steps, exact, agree int
}

func (r *suiteReport) add(row reportRow) {
	r.mu.Lock()
	r.rows = append(r.rows, row)
	r.mu.Unlock()
}

func (r *suiteReport) setServer(version, gitVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server == nil {
		r.server = map[string]string{}
	}
	r.server[version] = gitVersion
}

func (r *suiteReport) addWall(version string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wall == nil {
		r.wall = map[string]time.Duration{}
	}
	r.wall[version] += d
}

func (r *suiteReport) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rows) == 0 {
		return
	}
	sort.SliceStable(r.rows, func(i, j int) bool { return r.rows[i].scenario < r.rows[j].scenario })
	type total struct{ scenarios, steps, agree int }
	perVersion := map[string]*total{}
	var versions, servers []string
	for _, row := range r.rows {
		if perVersion[row.version] == nil {
			perVersion[row.version] = &total{}
			versions = append(versions, row.version)
		}
	}
	sort.Strings(versions)
	for _, v := range versions {
		servers = append(servers, cmp.Or(r.server[v], v))
	}
	fmt.Fprintf(w, "\nfidelity: plan's next wave vs kube-controller-manager %s\n", strings.Join(servers, ", "))
	width := len("SCENARIO")
	for _, row := range r.rows {
		width = max(width, len(row.scenario))
	}
	fmt.Fprintf(w, "%-*s %6s %6s %6s\n", width, "SCENARIO", "STEPS", "AGREE", "EXACT")
	var all total
	for _, row := range r.rows {
		fmt.Fprintf(w, "%-*s %6d %6d %6d\n", width, row.scenario, row.steps, row.agree, row.exact)
		for _, t := range []*total{perVersion[row.version], &all} {
			t.scenarios++
			t.steps += row.steps
			t.agree += row.agree
		}
	}
	for _, v := range versions {
		t := perVersion[v]
		wall := ""
		if d := r.wall[v]; d > 0 {
			wall = fmt.Sprintf(" (%s)", d.Round(time.Second))
		}
		server := ""
		if r.server[v] != "" {
			server = " (" + r.server[v] + ")"
		}
		fmt.Fprintf(w, "fidelity %s%s: %d scenarios, %d steps compared, %d agree%s\n", v, server, t.scenarios, t.steps, t.agree, wall)
	}
	fmt.Fprintf(w, "fidelity: %d scenarios, %d steps compared, %d agree\n", all.scenarios, all.steps, all.agree)
}
