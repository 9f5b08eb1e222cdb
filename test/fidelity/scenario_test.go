package fidelity

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/test/kubelet"
)

const (
	imageV1 = "registry.example/app:v1"
	imageV2 = "registry.example/app:v2"
	imageV3 = "registry.example/app:v3"
	// scenarioLabel selects a scenario's nodes and keeps its pods on them.
	scenarioLabel = "fidelity.rollplan.dev/scenario"
)

// scenario is one rollout run on the real controllers.
type scenario struct {
	name string
	// runs: the control planes it runs on; nil: everyVersion.
	runs  []run
	nodes int
	zones int
	// workload returns the object to create at imageV1.
	workload func(ns string, tmpl corev1.PodTemplateSpec) any
	// prepare runs after the first rollout settles, before the update.
	prepare func(ctx context.Context, e *env) error
	// update changes the workload at step 0 (default: image → v2).
	update func(obj any)
	// hooks run at a step, with the controllers paused, before pods are
	// released.
	hooks map[int]func(ctx context.Context, e *env) error
	// minReady: the workload's minReadySeconds, which every quiet wait
	// must outlast.
	minReady int32
}

type env struct {
	c    kubernetes.Interface
	ns   string
	name string
	k    *kubelet.Kubelet
	sc   *scenario
}

func (e *env) nodeName(i int) string { return fmt.Sprintf("%s-node-%d", e.sc.name, i) }

func labelsFor(name string) map[string]string { return map[string]string{"app": name} }

func template(name, scenario, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{scenarioLabel: scenario},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers:                    []corev1.Container{{Name: "app", Image: image}},
		},
	}
}

// rankRaces: the step scales a ReplicaSet up, or more than one ReplicaSet;
// their controllers then run concurrently, and the co-location ranks one
// of them sees depend on how far the others have got.
func rankRaces(ops []Op) bool {
	scaled := 0
	for _, op := range ops {
		var rs string
		var from, to int
		if _, err := fmt.Sscanf(string(op), "scale %s %d->%d", &rs, &from, &to); err == nil {
			scaled++
			if to > from {
				return true
			}
		}
	}
	return scaled > 1
}

// revisionHash: the hash a revision name (<workload>-<hash>) ends with,
// which pods carry as their revision label.
func revisionHash(rev string) string { return rev[strings.LastIndex(rev, "-")+1:] }

// workloadReady: the workload's controller has seen its spec and reports
// every pod it wants Ready.
func workloadReady(ctx context.Context, c kubernetes.Interface, obj any) (bool, error) {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		s, err := c.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return s.Status.ObservedGeneration == s.Generation && s.Spec.Replicas != nil && s.Status.ReadyReplicas == *s.Spec.Replicas, nil
	case *appsv1.Deployment:
		d, err := c.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Spec.Replicas != nil && d.Status.ReadyReplicas == *d.Spec.Replicas, nil
	case *appsv1.DaemonSet:
		d, err := c.AppsV1().DaemonSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.NumberReady == d.Status.DesiredNumberScheduled, nil
	}
	return true, nil
}

func stsReplicas(obj any) int {
	if s, ok := obj.(*appsv1.StatefulSet); ok && s.Spec.Replicas != nil {
		return int(*s.Spec.Replicas)
	}
	return 0
}

// kindName is the --workload argument and the kind for reducing events.
func kindOf(obj any) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *appsv1.DaemonSet:
		return "DaemonSet"
	}
	panic(fmt.Sprintf("fidelity: unsupported workload %T", obj))
}

func setImage(image string) func(any) {
	return func(obj any) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Spec.Template.Spec.Containers[0].Image = image
		case *appsv1.StatefulSet:
			o.Spec.Template.Spec.Containers[0].Image = image
		case *appsv1.DaemonSet:
			o.Spec.Template.Spec.Containers[0].Image = image
		}
	}
}

func create(ctx context.Context, c kubernetes.Interface, obj any) error {
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		_, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.StatefulSet:
		_, err = c.AppsV1().StatefulSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		_, err = c.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	return err
}

// mutate reads the workload, changes it and writes it back, retrying on
// conflicts.
func (e *env) mutate(ctx context.Context, kind string, change func(any)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		switch kind {
		case "Deployment":
			o, err := e.c.AppsV1().Deployments(e.ns).Get(ctx, e.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(o)
			_, err = e.c.AppsV1().Deployments(e.ns).Update(ctx, o, metav1.UpdateOptions{})
			return err
		case "StatefulSet":
			o, err := e.c.AppsV1().StatefulSets(e.ns).Get(ctx, e.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(o)
			_, err = e.c.AppsV1().StatefulSets(e.ns).Update(ctx, o, metav1.UpdateOptions{})
			return err
		default:
			o, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, e.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(o)
			_, err = e.c.AppsV1().DaemonSets(e.ns).Update(ctx, o, metav1.UpdateOptions{})
			return err
		}
	})
}

const maxSteps = 40

// captureDir: with -fidelity.capture DIR, the snapshots of the steps named
// in captureSteps that agreed with the controllers are written as golden
// scenarios DIR/<name>/ (snapshot from rollplan snapshot, args, README);
// `make golden` then records the plans. That is how
// testdata/scenarios/captured-* were made.
var captureDir = flag.String("fidelity.capture", "", "write golden scenarios captured from the control plane into this directory")

// captureStep: the step of a run's scenario to capture, and the golden
// scenario's name (those of the v1.36 runs keep the names they had when
// gates were set per scenario).
type captureStep struct {
	step int
	name string
}

// captureSteps by run label and scenario name.
var captureSteps = map[string]captureStep{
	"v1.36/deploy-rolling-10-25pct":                                     {1, "captured-deploy-rolling-10-25pct-step-1"},
	"v1.36/deploy-rollover-10":                                          {3, "captured-deploy-rollover-10-step-3"},
	"v1.36/ds-unready-old-pod":                                          {0, "captured-ds-unready-old-pod-step-0"},
	"v1.36/ds-maxunavailable-40pct":                                     {1, "captured-ds-maxunavailable-40pct-step-1"},
	"v1.36+MaxUnavailableStatefulSet=true/sts-orderedready-maxunavail2": {2, "captured-sts-orderedready-maxunavail2-gate-on-step-2"},
	"v1.36/sts-partition-2":                                             {1, "captured-sts-partition-2-gate-off-step-1"},
}

func writeCaptured(r run, server string, sc *scenario, cs captureStep, snap []byte, now time.Time, expected, observed []Op) error {
	dir := filepath.Join(*captureDir, cs.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	yamlSnap, err := yaml.JSONToYAML(snap)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "snapshot.yaml"), yamlSnap, 0o644); err != nil {
		return err
	}
	args := "--now " + now.UTC().Format(time.RFC3339Nano) + " " + strings.Join(planArgs(r), " ")
	if err := os.WriteFile(filepath.Join(dir, "args"), []byte(args+"\n"), 0o644); err != nil {
		return err
	}
	gates := "its default feature gates"
	if len(r.gates) > 0 {
		gates = "feature gates " + gateArgs(r.gates)
	}
	readme := fmt.Sprintf("# %s\n\nCaptured with `rollplan snapshot` from the test control plane (kube-apiserver and\n"+
		"kube-controller-manager %s with %s, test/fidelity scenario `%s/%s`), at step %d of the rollout, with the\n"+
		"controllers paused. The plan's next wave was compared with what kube-controller-manager then did, and agreed:\n\n"+
		"- plan: %v\n- controllers: %v\n\n(Ops as test/fidelity names them; DaemonSet nodes and tied ReplicaSet pods may differ,\n"+
		"upstream picks among equals at random.)\n", cs.name, server, gates, r.label(), sc.name, cs.step, expected, observed)
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644)
}

// runScenario runs one scenario on the control plane of run r; the report
// and the kept snapshots name it <label>/<scenario>.
func runScenario(t *testing.T, r run, sc scenario) {
	cp := cluster(t, r)
	id := r.label() + "/" + sc.name
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := cp.Client
	ns := sc.name
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, ns: ns, name: "app", sc: &sc}
	nodes := make([]kubelet.Node, sc.nodes)
	for i := range nodes {
		zone := ""
		if sc.zones > 0 {
			zone = fmt.Sprintf("zone-%c", 'a'+i%sc.zones)
		}
		nodes[i] = kubelet.Node{Name: e.nodeName(i), Zone: zone, Labels: map[string]string{scenarioLabel: sc.name}}
	}
	e.k = kubelet.New(c, kubelet.Options{Nodes: nodes, Namespace: ns, HoldReady: true})
	if err := e.k.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec := watchNamespace(ctx, t, c, ns)
	obj := sc.workload(ns, template(e.name, sc.name, imageV1))
	kind := kindOf(obj)
	workload := kind + "/" + ns + "/" + e.name
	if err := create(ctx, c, obj); err != nil {
		t.Fatalf("create %s: %v", workload, err)
	}
	quiet := time.Second + time.Duration(sc.minReady)*time.Second + 500*time.Millisecond

	// The first rollout: let every pod become Ready until nothing is held.
	for i := 0; ; i++ {
		if err := rec.waitQuiet(ctx, quiet); err != nil {
			t.Fatal(err)
		}
		released, err := e.k.Release(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Nothing held: done once the controller reports every pod Ready.
		// A quiet second is not enough on a loaded machine: an
		// OrderedReady StatefulSet creates its next pod only after the
		// previous one's Ready reached the controller. A few more rounds
		// for a workload that never reports so (pods meant to stay
		// unready).
		if len(released) == 0 {
			if ready, err := workloadReady(ctx, c, obj); err != nil {
				t.Fatal(err)
			} else if ready || i >= 10 {
				break
			}
		}
		if i > 50 {
			t.Fatalf("%s did not settle after creation", workload)
		}
	}
	if pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Logf("%s settled with %d pods", workload, len(pods.Items))
		if len(pods.Items) == 0 {
			t.Fatalf("%s created no pods", workload)
		}
	}
	if sc.prepare != nil {
		if err := sc.prepare(ctx, e); err != nil {
			t.Fatalf("prepare: %v", err)
		}
		if err := rec.waitQuiet(ctx, quiet); err != nil {
			t.Fatal(err)
		}
	}
	update := sc.update
	if update == nil {
		update = setImage(imageV2)
	}
	lastHook := 0
	for i := range sc.hooks {
		lastHook = max(lastHook, i)
	}

	row := reportRow{version: r.version, scenario: id}
	recreating := map[string]bool{}
	var failures []string
	for step := 0; step < maxSteps; step++ {
		if err := cp.PauseControllers(); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				if err := cp.ResumeControllers(); err != nil {
					t.Fatal(err)
				}
			}
		}
		defer resume()
		var released []string
		if step == 0 {
			if err := e.mutate(ctx, kind, update); err != nil {
				t.Fatalf("update %s: %v", workload, err)
			}
		}
		if hook := sc.hooks[step]; hook != nil {
			if err := hook(ctx, e); err != nil {
				t.Fatalf("step %d hook: %v", step, err)
			}
		}
		if step > 0 {
			var err error
			if released, err = e.k.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		snap, before, err := capture(ctx, cp.Kubeconfig, ns)
		if err != nil {
			t.Fatalf("step %d: capture: %v", step, err)
		}
		now := time.Now()
		wp, planJSON, err := runPlan(ctx, snap, now, r, workload)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		surged := before.surged(revisionHash(wp.ToRevision))
		expected, err := ExpectedOps(wp, before.podNode(), surged)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		planned, err := PlannedOps(wp, before.podNode(), surged)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		rec.start()
		resume()
		if err := rec.waitQuiet(ctx, quiet); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		events := rec.stop()
		observed, log := observedOps(kind, events, recreating, stsReplicas(obj))
		s := Step{Index: step, Expected: expected, Observed: observed, Events: log, Candidates: candidates(kind, wp, before, sc.minReady, now, rankRaces(observed)), Planned: planned}
		if len(expected) == 0 && len(observed) == 0 && step > 0 {
			if step >= lastHook && len(released) == 0 && step > 0 {
				break
			}
			continue
		}
		row.steps++
		ok, exact, diff := Compare(s)
		if ok {
			row.agree++
			if cs, capture := captureSteps[id]; capture && cs.step == step && *captureDir != "" {
				if err := writeCaptured(r, cp.ServerVersion, &sc, cs, snap, now, expected, observed); err != nil {
					t.Fatalf("capture: %v", err)
				}
			}
		}
		if exact {
			row.exact++
		}
		t.Logf("step %d: plan %v, controllers %v", step, expected, observed)
		if !ok {
			// Kept after the test, to replay with rollplan plan -f.
			dir := filepath.Join(os.TempDir(), "rollplan-fidelity", r.label(), sc.name)
			path := filepath.Join(dir, fmt.Sprintf("step-%d-snapshot.json", step))
			if err := os.MkdirAll(dir, 0o755); err == nil {
				_ = os.WriteFile(path, snap, 0o644)
			}
			failures = append(failures, fmt.Sprintf("step %d (snapshot at %s, now %s):\n%s  events:\n    %s\n  plan: %s",
				step, path, now.UTC().Format(time.RFC3339Nano), diff, strings.Join(log, "\n    "), planJSON))
		}
	}
	report.add(row)
	for _, f := range failures {
		t.Errorf("%s: the plan (--kubernetes-version %s) and kube-controller-manager %s differ at %s", id, strings.Join(planArgs(r)[1:], " "), cp.ServerVersion, f)
	}
}

// candidates: the subjects upstream chooses among at random. DaemonSet:
// nodes whose old pod is available (upstream shuffles them, §3.7); a
// ReplicaSet's pods that its ranking cannot tell apart.
func candidates(kind string, wp *plan.WorkloadPlan, before *state, minReady int32, now time.Time, rankRace bool) map[string]string {
	out := map[string]string{}
	switch kind {
	case "DaemonSet":
		hash := revisionHash(wp.ToRevision)
		for i := range before.pods {
			p := &before.pods[i]
			if revisionOf(p) != hash && available(p, minReady, now) {
				out["node="+nodeOf(p)] = "available old pod"
			}
		}
	case "Deployment":
		// Upstream's ReplicaSet ranking (ActivePodsWithRanks, reference
		// §2.10) is a total order except between pods equal on every key:
		// the same node assignment, phase, readiness and deletion cost, as
		// many active pods of the Deployment on their node, the same Ready
		// and creation times to the second, the same restarts. Only such
		// pods are interchangeable. When the step also scales another
		// ReplicaSet of the Deployment, the co-location rank upstream
		// computes depends on how far that ReplicaSet's controller has got
		// (new pods bound somewhere, old ones already terminating), which
		// no snapshot can know: then only the keys before the rank count
		// (docs/fidelity.md).
		onNode := map[string]int{}
		for i := range before.pods {
			if p := &before.pods[i]; p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				onNode[p.Spec.NodeName]++
			}
		}
		for i := range before.pods {
			p := &before.pods[i]
			owner := ""
			if ref := metav1.GetControllerOf(p); ref != nil {
				owner = ref.Name
			}
			readyAt := ""
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					readyAt = c.LastTransitionTime.UTC().Format(time.RFC3339)
				}
			}
			restarts := int32(0)
			for _, cs := range p.Status.ContainerStatuses {
				restarts = max(restarts, cs.RestartCount)
			}
			// Keys 1-4 of the ranking; the rank (5) comes before the ready
			// time (6), so when the rank is unknowable, so is the order
			// under it.
			class := fmt.Sprintf("%s assigned=%t phase=%s ready=%t cost=%s", owner, p.Spec.NodeName != "", p.Status.Phase,
				readyAt != "", p.Annotations["controller.kubernetes.io/pod-deletion-cost"])
			if !rankRace {
				class += fmt.Sprintf(" rank=%d readyAt=%s restarts=%d created=%s", onNode[p.Spec.NodeName], readyAt,
					restarts, p.CreationTimestamp.UTC().Format(time.RFC3339))
			}
			out[p.Name] = class
		}
	}
	return out
}
