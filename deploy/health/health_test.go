package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// captures holds the objects test/controller TestRolloutObject captured
// from the real control plane, one folder per phase.
const captures = "../../testdata/rollout-status"

func load(t *testing.T, phase, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(captures, phase, file))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := Decode(b)
	if err != nil {
		t.Fatalf("%s/%s: %v", phase, file, err)
	}
	return obj
}

// edit returns a copy of obj with each path (dot-separated) set; a nil
// value removes the field.
func edit(obj map[string]any, kv ...any) map[string]any {
	u := (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
	for i := 0; i < len(kv); i += 2 {
		path := strings.Split(kv[i].(string), ".")
		// annotation keys hold dots: "metadata.annotations.rollplan.dev/x"
		if len(path) > 2 && path[0] == "metadata" && path[1] == "annotations" {
			path = []string{"metadata", "annotations", strings.Join(path[2:], ".")}
		}
		if kv[i+1] == nil {
			unstructured.RemoveNestedField(u, path...)
			continue
		}
		v := kv[i+1]
		if n, ok := v.(int); ok {
			v = int64(n)
		}
		if err := unstructured.SetNestedField(u, v, path...); err != nil {
			panic(err)
		}
	}
	return u
}

// workload is a synthetic workload of kind with the given status fields,
// generation 2 observed, 3 replicas; managed adds rollplan's annotation
// (and OnDelete, or a Deployment held paused, as rollplan has them).
func workload(kind string, managed bool, kv ...any) map[string]any {
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": kind,
		"metadata": map[string]any{"name": "web", "namespace": "default", "generation": int64(2), "annotations": map[string]any{}},
		"spec":     map[string]any{},
		"status":   map[string]any{"observedGeneration": int64(2)},
	}
	if kind != "DaemonSet" {
		obj["spec"].(map[string]any)["replicas"] = int64(3)
	}
	if managed {
		obj = edit(obj, "metadata.annotations.rollplan.dev/managed", "true")
		if kind == "Deployment" {
			obj = edit(obj, "spec.paused", true)
		} else {
			obj = edit(obj, "spec.updateStrategy.type", "OnDelete")
		}
	}
	return edit(obj, kv...)
}

const stateAnn = "metadata.annotations.rollplan.dev/rollout-state"

type healthCase struct {
	name string
	obj  map[string]any
	argo string // Argo CD health status
	flux string // Flux status
	// msg: in Argo CD's message (the built-in's message in full for an
	// unmanaged workload).
	msg string
}

func check(t *testing.T, c healthCase) {
	t.Helper()
	got, msg, err := ArgoHealth(c.obj)
	if err != nil {
		t.Fatalf("Argo CD: %v", err)
	}
	if got != c.argo {
		t.Errorf("Argo CD: %s (%s), want %s", got, msg, c.argo)
	}
	if c.msg != "" && !strings.Contains(msg, c.msg) {
		t.Errorf("Argo CD message %q, want it to contain %q", msg, c.msg)
	}
	f, err := FluxHealth(c.obj)
	if err != nil {
		t.Fatalf("Flux: %v", err)
	}
	if f != c.flux {
		t.Errorf("Flux: %s, want %s", f, c.flux)
	}
}

// TestCaptured: the Rollout and the StatefulSet as the real control plane
// had them, rolled out, rolling and halted.
func TestCaptured(t *testing.T) {
	halted := load(t, "halted", "statefulset.yaml")
	for _, c := range []healthCase{
		{name: "current/rollout", obj: load(t, "current", "rollout.yaml"), argo: Healthy, flux: Current},
		{name: "inprogress/rollout", obj: load(t, "inprogress", "rollout.yaml"), argo: Progressing, flux: InProgress, msg: "wave 1 of 3"},
		{name: "halted/rollout", obj: load(t, "halted", "rollout.yaml"), argo: Degraded, flux: Failed, msg: "crash-looping"},
		{name: "current/statefulset", obj: load(t, "current", "statefulset.yaml"), argo: Healthy, flux: Current, msg: "3 pods at revision"},
		{name: "inprogress/statefulset", obj: load(t, "inprogress", "statefulset.yaml"), argo: Progressing, flux: InProgress, msg: "wave 1 of 3"},
		{name: "halted/statefulset", obj: halted, argo: Degraded, flux: Failed, msg: "crash-looping"},
		{
			// Captured with rollplan's controller stopped: the StatefulSet
			// controller has seen a new template, the state still says
			// Complete, of the generation before.
			name: "justchanged/statefulset", obj: load(t, "justchanged", "statefulset.yaml"),
			argo: Progressing, flux: InProgress, msg: "0 of 3 pods updated to revision",
		},
		{
			// A new template after the halt, observed by the StatefulSet
			// controller, not yet by rollplan's: the halt was for the old.
			name: "halted/statefulset, then a new template",
			obj: edit(halted, "metadata.generation", 4, "status.observedGeneration", 4,
				"status.updateRevision", "web-5d8f7c9b6", "status.updatedReplicas", 0),
			argo: Progressing, flux: InProgress, msg: "0 of 3 pods updated to revision web-5d8f7c9b6",
		},
		{
			name: "halted/statefulset, new template not yet observed",
			obj:  edit(halted, "metadata.generation", 4),
			argo: Progressing, flux: InProgress,
		},
		{
			// What the built-in checks say of the same object, for the
			// record: kstatus calls an OnDelete StatefulSet Current at
			// once; Argo CD waits for ready pods only, and would call it
			// Healthy once the crash-looping pod is deleted.
			name: "halted/statefulset without rollplan's annotation",
			obj:  edit(halted, "metadata.annotations.rollplan.dev/managed", nil),
			argo: Progressing, flux: Current, msg: "Waiting for 1 pods to be ready...",
		},
	} {
		t.Run(c.name, func(t *testing.T) { check(t, c) })
	}
}

// state is a rollout state annotation as the controller writes it
// (planner/live RolloutState.Encode).
func state(phase string, gen, updated int, extra string) string {
	s := `{"phase":"` + phase + `","revision":"web-6f7d8c9b5","generation":` + itoa(gen) + `,"wave":1,"waves":3,"desired":3,"updated":` + itoa(updated) + `,"available":2,"inFlight":1`
	return s + extra + "}"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestStatefulSet(t *testing.T) {
	rolled := []any{"status.replicas", 3, "status.readyReplicas", 3, "status.updatedReplicas", 3, "status.currentReplicas", 3,
		"status.availableReplicas", 3, "status.currentRevision", "web-1", "status.updateRevision", "web-1"}
	rolling := []any{"status.replicas", 3, "status.readyReplicas", 3, "status.updatedReplicas", 1, "status.currentReplicas", 2,
		"status.currentRevision", "web-1", "status.updateRevision", "web-2"}
	for _, c := range []healthCase{
		{name: "unmanaged OnDelete, pods not updated", obj: workload("StatefulSet", false, append(rolling, "spec.updateStrategy.type", "OnDelete")...),
			argo: Healthy, flux: Current, msg: "statefulset has 3 ready pods"},
		{name: "unmanaged rolling update", obj: workload("StatefulSet", false, append(rolling, "spec.updateStrategy.type", "RollingUpdate")...),
			argo: Progressing, flux: InProgress, msg: "waiting for statefulset rolling update to complete 1 pods at revision web-2..."},
		{name: "unmanaged rolled out", obj: workload("StatefulSet", false, rolled...),
			argo: Healthy, flux: Current, msg: "statefulset rolling update complete 3 pods at revision web-1..."},
		{name: "unmanaged partition", obj: workload("StatefulSet", false, append(rolling, "spec.updateStrategy.type", "RollingUpdate", "spec.updateStrategy.rollingUpdate.partition", 1)...),
			argo: Progressing, flux: InProgress, msg: "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated..."},
		{name: "unmanaged partition done", obj: workload("StatefulSet", false, append(rolling, "spec.updateStrategy.type", "RollingUpdate", "spec.updateStrategy.rollingUpdate.partition", 2)...),
			argo: Healthy, flux: Current, msg: "partitioned roll out complete: 1 new pods have been updated..."},
		{name: "unmanaged pods not ready", obj: workload("StatefulSet", false, append(rolled, "status.readyReplicas", 1)...),
			argo: Progressing, flux: InProgress, msg: "Waiting for 2 pods to be ready..."},
		{name: "unmanaged spec not observed", obj: workload("StatefulSet", false, append(rolled, "metadata.generation", 3)...),
			argo: Progressing, flux: InProgress, msg: "Waiting for statefulset spec update to be observed..."},
		{name: "unmanaged, Stalled condition", obj: workload("StatefulSet", false, append(rolled, "status.conditions", []any{map[string]any{"type": "Stalled", "status": "True"}})...),
			argo: Healthy, flux: Failed},
		{name: "managed, just changed, no state yet", obj: workload("StatefulSet", true, rolling...),
			argo: Progressing, flux: InProgress, msg: "1 of 3 pods updated to revision web-2"},
		{name: "managed, no state, rolled out", obj: workload("StatefulSet", true, rolled...), argo: Healthy, flux: Current},
		{name: "managed, state Complete of the spec before", obj: workload("StatefulSet", true, append(rolling, stateAnn, state("Complete", 1, 3, ""))...),
			argo: Progressing, flux: InProgress},
		{name: "managed, Complete, a pod not ready", obj: workload("StatefulSet", true, append(rolled, "status.readyReplicas", 2, stateAnn, state("Complete", 2, 3, ""))...),
			argo: Progressing, flux: InProgress, msg: "2 of 3 pods ready"},
		{name: "managed, paused", obj: workload("StatefulSet", true, append(rolling, "metadata.annotations.rollplan.dev/paused", "true", stateAnn, state("Paused", 2, 1, `,"message":"paused: no new action until `+"`rollplan resume`"+`"`))...),
			argo: Suspended, flux: InProgress},
		{name: "managed, paused, halted", obj: workload("StatefulSet", true, append(rolling, "metadata.annotations.rollplan.dev/paused", "true", stateAnn, state("Halted", 2, 1, `,"message":"halted"`))...),
			argo: Degraded, flux: Failed},
		{name: "managed, stalled", obj: workload("StatefulSet", true, append(rolling, stateAnn, state("InProgress", 2, 1, `,"message":"budget \"zone\" used up \u003c1\u003e","stalled":true`))...),
			argo: Degraded, flux: Failed, msg: `stalled: budget "zone" used up <1>`},
		{name: "managed, not drivable", obj: workload("StatefulSet", true, append(rolling, stateAnn, `{"phase":"Waiting","generation":2,"desired":0,"updated":0,"available":0,"inFlight":0,"message":"policy \"x\" unknown","notDriven":true}`)...),
			argo: Degraded, flux: Failed, msg: `policy "x" unknown`},
		{name: "managed, driven by a person", obj: workload("StatefulSet", true, append(rolling, stateAnn, state("Waiting", 2, 1, `,"driver":"alice","message":"driven by alice"`))...),
			argo: Progressing, flux: InProgress, msg: "driven by alice"},
		{name: "managed, an unreadable state", obj: workload("StatefulSet", true, append(rolled, stateAnn, "{not json")...),
			argo: Healthy, flux: Current},
	} {
		t.Run(c.name, func(t *testing.T) { check(t, c) })
	}
}

func TestDaemonSet(t *testing.T) {
	rolled := []any{"status.desiredNumberScheduled", 3, "status.currentNumberScheduled", 3, "status.updatedNumberScheduled", 3,
		"status.numberAvailable", 3, "status.numberReady", 3}
	rolling := []any{"status.desiredNumberScheduled", 3, "status.currentNumberScheduled", 3, "status.updatedNumberScheduled", 1,
		"status.numberAvailable", 2, "status.numberReady", 2}
	for _, c := range []healthCase{
		{name: "unmanaged rolling update", obj: workload("DaemonSet", false, rolling...),
			argo: Progressing, flux: InProgress, msg: `Waiting for daemon set "web" rollout to finish: 1 out of 3 new pods have been updated...`},
		{name: "unmanaged, updated, not all available", obj: workload("DaemonSet", false, append(rolled, "status.numberAvailable", 2)...),
			argo: Progressing, flux: InProgress, msg: `Waiting for daemon set "web" rollout to finish: 2 of 3 updated pods are available...`},
		{name: "unmanaged rolled out", obj: workload("DaemonSet", false, rolled...), argo: Healthy, flux: Current},
		{name: "unmanaged OnDelete", obj: workload("DaemonSet", false, append(rolling, "spec.updateStrategy.type", "OnDelete")...),
			argo: Healthy, flux: InProgress, msg: "daemon set 1 out of 3 new pods have been updated"},
		{name: "unmanaged, no observedGeneration", obj: workload("DaemonSet", false, append(rolled, "status.observedGeneration", nil)...),
			argo: Progressing, flux: InProgress},
		{name: "managed, just changed: state of the generation before", obj: workload("DaemonSet", true, append(rolling, stateAnn, state("Complete", 1, 3, ""))...),
			argo: Progressing, flux: InProgress, msg: "1 of 3 pods updated"},
		{name: "managed, rolling", obj: workload("DaemonSet", true, append(rolling, stateAnn, state("InProgress", 2, 1, ""))...),
			argo: Progressing, flux: InProgress, msg: "wave 1 of 3; 1 of 3 pods updated"},
		{name: "managed, halted", obj: workload("DaemonSet", true, append(rolling, stateAnn, state("Halted", 2, 1, `,"message":"halted by policy: pod web-x is crash-looping"`))...),
			argo: Degraded, flux: Failed, msg: "crash-looping"},
		{name: "managed, halted, then a new template", obj: workload("DaemonSet", true, append(rolling, "metadata.generation", 3, "status.observedGeneration", 3, "status.updatedNumberScheduled", 0, stateAnn, state("Halted", 2, 1, `,"message":"halted"`))...),
			argo: Progressing, flux: InProgress},
		{name: "managed, rolled out", obj: workload("DaemonSet", true, append(rolled, stateAnn, state("Complete", 2, 3, ""))...), argo: Healthy, flux: Current},
		{name: "managed, paused", obj: workload("DaemonSet", true, append(rolling, "metadata.annotations.rollplan.dev/paused", "true")...),
			argo: Suspended, flux: InProgress},
	} {
		t.Run(c.name, func(t *testing.T) { check(t, c) })
	}
}

func TestDeployment(t *testing.T) {
	available := []any{map[string]any{"type": "Available", "status": "True"},
		map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}}
	rolled := []any{"status.replicas", 3, "status.updatedReplicas", 3, "status.readyReplicas", 3, "status.availableReplicas", 3, "status.conditions", available}
	// rolling: one pod of the new ReplicaSet, three old.
	rolling := []any{"status.replicas", 4, "status.updatedReplicas", 1, "status.readyReplicas", 3, "status.availableReplicas", 3}
	halt := `,"message":"halted by policy: pod web-7c-x is crash-looping"`
	for _, c := range []healthCase{
		{name: "unmanaged rolled out", obj: workload("Deployment", false, rolled...), argo: Healthy, flux: Current},
		{name: "unmanaged rolling", obj: workload("Deployment", false, rolling...),
			argo: Progressing, flux: InProgress, msg: "Waiting for rollout to finish: 1 out of 3 new replicas have been updated..."},
		{name: "unmanaged, old replicas left", obj: workload("Deployment", false, append(rolled, "status.replicas", 4)...),
			argo: Progressing, flux: InProgress, msg: "Waiting for rollout to finish: 1 old replicas are pending termination..."},
		{name: "unmanaged paused", obj: workload("Deployment", false, append(rolled, "spec.paused", true, "status.conditions", []any{map[string]any{"type": "Available", "status": "True"}, map[string]any{"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused"}}, "spec.progressDeadlineSeconds", 600)...),
			argo: Suspended, flux: InProgress, msg: "Deployment is paused"},
		{name: "unmanaged, progress deadline exceeded", obj: workload("Deployment", false, append(rolling, "status.conditions", []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}})...),
			argo: Degraded, flux: Failed, msg: `Deployment "web" exceeded its progress deadline`},
		{name: "unmanaged, not observed", obj: workload("Deployment", false, append(rolled, "metadata.generation", 3)...),
			argo: Progressing, flux: InProgress, msg: "Waiting for rollout to finish: observed deployment generation less than desired generation"},
		{name: "managed, held paused, rolled out, no state", obj: workload("Deployment", true, rolled...), argo: Healthy, flux: Current},
		// The generation quirk: each state write moved the Deployment's
		// generation, so the state of this spec records an earlier one.
		{name: "managed, halted, state written once since", obj: workload("Deployment", true, append(rolling, "metadata.generation", 7, "status.observedGeneration", 7, stateAnn, state("Halted", 6, 1, halt))...),
			argo: Degraded, flux: Failed, msg: "crash-looping"},
		{name: "managed, halted after several writes", obj: workload("Deployment", true, append(rolling, "metadata.generation", 9, "status.observedGeneration", 9, stateAnn, state("Halted", 4, 1, halt))...),
			argo: Degraded, flux: Failed, msg: "crash-looping"},
		{name: "managed, halted, then a new template", obj: workload("Deployment", true, append(rolling, "metadata.generation", 10, "status.observedGeneration", 10, "status.updatedReplicas", 0, "status.replicas", 3, stateAnn, state("Halted", 4, 1, halt))...),
			argo: Progressing, flux: InProgress, msg: "0 of 3 replicas updated"},
		{name: "managed, halted, then the template before (a revert)", obj: workload("Deployment", true, append(rolling, "metadata.generation", 10, "status.observedGeneration", 10, "status.updatedReplicas", 3, stateAnn, state("Halted", 4, 1, halt))...),
			argo: Progressing, flux: InProgress, msg: "1 old replicas pending termination"},
		{name: "managed, just changed, not observed", obj: workload("Deployment", true, append(rolled, "metadata.generation", 5, "status.observedGeneration", 4, stateAnn, state("Complete", 3, 3, ""))...),
			argo: Progressing, flux: InProgress},
		{name: "managed, just changed: no new ReplicaSet yet", obj: workload("Deployment", true, append(rolled, "metadata.generation", 5, "status.observedGeneration", 5, "status.updatedReplicas", 0, stateAnn, state("Complete", 3, 3, ""))...),
			argo: Progressing, flux: InProgress, msg: "0 of 3 replicas updated"},
		{name: "managed, rolling", obj: workload("Deployment", true, append(rolling, "metadata.generation", 6, "status.observedGeneration", 6, stateAnn, state("InProgress", 3, 1, ""))...),
			argo: Progressing, flux: InProgress, msg: "rollplan is rolling it out: wave 1 of 3"},
		{name: "managed, rolled out after several writes", obj: workload("Deployment", true, append(rolled, "metadata.generation", 8, "status.observedGeneration", 8, stateAnn, state("Complete", 3, 3, ""))...),
			argo: Healthy, flux: Current},
		{name: "managed, paused", obj: workload("Deployment", true, append(rolling, "metadata.annotations.rollplan.dev/paused", "true", stateAnn, state("Paused", 1, 1, `,"message":"paused"`))...),
			argo: Suspended, flux: InProgress},
	} {
		t.Run(c.name, func(t *testing.T) { check(t, c) })
	}
}

// TestUnmanagedIsKstatus: for a workload rollplan does not manage, the
// Flux expressions give what kstatus (Flux's built-in health) gives, on
// every unmanaged object of the tests above and the captured ones without
// rollplan's annotation. (kstatus's Terminating is InProgress to Flux's
// expressions: neither is Current.)
func TestUnmanagedIsKstatus(t *testing.T) {
	var objs []map[string]any
	for _, phase := range []string{"current", "inprogress", "halted"} {
		objs = append(objs, edit(load(t, phase, "statefulset.yaml"), "metadata.annotations.rollplan.dev/managed", nil))
	}
	for _, kind := range []string{"StatefulSet", "DaemonSet", "Deployment"} {
		for _, kv := range [][]any{
			{},
			{"status.replicas", 3, "status.readyReplicas", 3, "status.updatedReplicas", 3, "status.currentReplicas", 3, "status.availableReplicas", 3,
				"status.currentRevision", "a", "status.updateRevision", "a", "status.desiredNumberScheduled", 3, "status.currentNumberScheduled", 3,
				"status.updatedNumberScheduled", 3, "status.numberAvailable", 3, "status.numberReady", 3,
				"status.conditions", []any{map[string]any{"type": "Available", "status": "True"}, map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}}},
			{"status.replicas", 3, "status.readyReplicas", 2, "status.updatedReplicas", 3, "status.currentReplicas", 3, "status.availableReplicas", 2,
				"status.currentRevision", "a", "status.updateRevision", "a", "status.desiredNumberScheduled", 3, "status.currentNumberScheduled", 3,
				"status.updatedNumberScheduled", 3, "status.numberAvailable", 2, "status.numberReady", 2},
			{"status.replicas", 3, "status.readyReplicas", 3, "status.updatedReplicas", 3, "status.currentReplicas", 3, "status.availableReplicas", 3,
				"status.currentRevision", "a", "status.updateRevision", "b", "spec.progressDeadlineSeconds", 600},
			{"status.conditions", []any{map[string]any{"type": "Reconciling", "status": "True"}}},
			{"metadata.deletionTimestamp", "2026-01-01T00:00:00Z"},
			{"spec.replicas", nil, "status.replicas", 1, "status.readyReplicas", 1, "status.updatedReplicas", 1, "status.currentReplicas", 1, "status.availableReplicas", 1},
		} {
			objs = append(objs, workload(kind, false, kv...))
		}
	}
	for _, obj := range objs {
		want, err := status.Compute(&unstructured.Unstructured{Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		w := string(want.Status)
		if want.Status == status.TerminatingStatus {
			w = InProgress
		}
		got, err := FluxHealth(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s %v: Flux expressions %s, kstatus %s (%s)", obj["kind"], obj["status"], got, w, want.Message)
		}
	}
	if len(objs) < 20 {
		t.Fatalf("%d objects compared, want the whole table", len(objs))
	}
}

// TestWithoutOpenLibs: an argocd-cm with the scripts but not the
// useOpenLibs keys still gives Argo CD's built-in health to unmanaged
// workloads, and judges a managed one by its own status, saying what is
// missing.
func TestWithoutOpenLibs(t *testing.T) {
	for _, obj := range []map[string]any{
		workload("StatefulSet", false, "status.readyReplicas", 3, "spec.updateStrategy.type", "OnDelete"),
		workload("DaemonSet", false, "status.desiredNumberScheduled", 3, "status.updatedNumberScheduled", 1),
		workload("Deployment", false, "status.replicas", 4, "status.updatedReplicas", 1),
		load(t, "current", "rollout.yaml"),
		load(t, "halted", "rollout.yaml"),
	} {
		s1, m1, err := ArgoHealth(obj)
		if err != nil {
			t.Fatal(err)
		}
		s2, m2, err := ArgoHealthWithoutOpenLibs(obj)
		if err != nil {
			t.Fatal(err)
		}
		if s1 != s2 || m1 != m2 {
			t.Errorf("%s: without open libraries %s %q, with %s %q: want the same", obj["kind"], s2, m2, s1, m1)
		}
	}
	s, m, err := ArgoHealthWithoutOpenLibs(load(t, "halted", "statefulset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s != Progressing || !strings.Contains(m, "resource.customizations.useOpenLibs.apps_StatefulSet") {
		t.Errorf("halted StatefulSet without open libraries: %s %q, want Progressing naming the useOpenLibs key", s, m)
	}
}
