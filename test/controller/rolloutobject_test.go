package controller

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	rolloutv1 "github.com/rollplan/rollplan/api/v1alpha1"
	ctrl "github.com/rollplan/rollplan/controller"
	"github.com/rollplan/rollplan/deploy/health"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// updateCaptures rewrites testdata/rollout-status from this run: the
// Rollout and the StatefulSet at each phase, which the Argo CD and Flux
// health checks are tested on without a cluster (deploy/health).
var updateCaptures = flag.Bool("update-captures", false, "rewrite ../../testdata/rollout-status from the objects this run captures")

// captureDir holds the captured objects, one folder per phase.
const captureDir = "../../testdata/rollout-status"

// installRolloutCRD applies deploy/rollout-crd.yaml as the manifests ship
// it, and waits until the API server serves Rollouts.
func (e *env) installRolloutCRD() dynamic.NamespaceableResourceInterface {
	e.t.Helper()
	e.kubectl("apply", "-f", "../../deploy/rollout-crd.yaml")
	e.kubectl("wait", "--for=condition=Established", "crd/rollouts.rollplan.dev", "--timeout=30s")
	dyn, err := dynamic.NewForConfig(harness.Cluster(e.t).Config)
	if err != nil {
		e.t.Fatal(err)
	}
	return dyn.Resource(rolloutv1.GroupVersionResource)
}

// rolloutIn is the Rollout's kstatus and a condition's status, once cond
// says so, within timeout.
func (e *env) waitRollout(res dynamic.NamespaceableResourceInterface, name, what string, timeout time.Duration, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	e.t.Helper()
	var got *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		u, err := res.Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got = u
		return cond(u), nil
	})
	if err != nil {
		e.t.Fatalf("Rollout %s/%s: not %s within %s: %v\nlast seen:\n%s", e.ns, name, what, timeout, err, dump(got))
	}
	return got
}

// condition is the status of the Rollout's condition typ ("" if absent).
func condition(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func dump(u *unstructured.Unstructured) string {
	if u == nil {
		return "(none)"
	}
	b, _ := yaml.Marshal(u.Object)
	return string(b)
}

// kstatusOf is what kstatus (sigs.k8s.io/cli-utils, as Flux and kpt run
// it) computes for an object.
func kstatusOf(t *testing.T, u *unstructured.Unstructured) *status.Result {
	t.Helper()
	r, err := status.Compute(u)
	if err != nil {
		t.Fatalf("kstatus of %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return r
}

// checkHealth asserts what the shipped Argo CD health customisations and
// Flux healthCheckExprs (deploy/argocd, deploy/flux, run by deploy/health
// as the tools run them) say of a live object.
func checkHealth(t *testing.T, u *unstructured.Unstructured, argo, flux string) {
	t.Helper()
	got, msg, err := health.ArgoHealth(u.Object)
	if err != nil {
		t.Errorf("Argo CD health of %s %s: %v", u.GetKind(), u.GetName(), err)
	} else if got != argo {
		t.Errorf("Argo CD health of %s %s: %s (%s), want %s\n%s", u.GetKind(), u.GetName(), got, msg, argo, dump(u))
	}
	f, err := health.FluxHealth(u.Object)
	if err != nil {
		t.Errorf("Flux health of %s %s: %v", u.GetKind(), u.GetName(), err)
	} else if f != flux {
		t.Errorf("Flux health of %s %s: %s, want %s\n%s", u.GetKind(), u.GetName(), f, flux, dump(u))
	}
}

// captured keeps the Rollout (nil: none of this phase) and the
// StatefulSet of one phase, for -update-captures.
type captured struct {
	phase             string
	rollout, workload *unstructured.Unstructured
}

func (e *env) captureWorkload(kind, name string) *unstructured.Unstructured {
	e.t.Helper()
	dyn, err := dynamic.NewForConfig(harness.Cluster(e.t).Config)
	if err != nil {
		e.t.Fatal(err)
	}
	gvr := map[string]string{"StatefulSet": "statefulsets", "DaemonSet": "daemonsets", "Deployment": "deployments"}[kind]
	u, err := dyn.Resource(appsGVR(gvr)).Namespace(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// TestRolloutObject follows one managed StatefulSet through the controller
// and checks its Rollout (rollouts.rollplan.dev) at every phase, as the
// tools that read it do: kstatus says Current when rolled out, InProgress
// while rolling and Failed when halted; so do rollplan's Argo CD health
// scripts (Healthy, Progressing, Degraded) and Flux healthCheckExprs, of
// the Rollout and of the StatefulSet, also in the moment after a template
// change that rollplan's controller has not seen yet; `kubectl wait
// --for=condition=Ready` returns when the rollout is done, not before;
// `kubectl get rollouts.rollplan.dev` shows the printer columns; the
// schema refuses a bad object; and the Rollout goes with its workload.
func TestRolloutObject(t *testing.T) {
	e := newEnv(t, "rollout", 3, 4*time.Minute)
	rollouts := e.installRolloutCRD()
	leases := e.watchLeases()
	replicas := []*replica{e.startController("ctrl-a")}
	e.waitLeader(leases, replicas, "", 15*time.Second)

	const slow, bad = "example.com/app:v2-slow", "example.com/app:broken"
	e.kubelet.SetImage(slow, kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 1500 * time.Millisecond})
	e.kubelet.SetImage(bad, kubelet.Behavior{CrashLoop: true, CrashInterval: 200 * time.Millisecond})
	web := wl("StatefulSet", "web", 3, 1, true)
	e.create(statefulSet(e.ns, web.Name, 3, "1"))
	e.waitRolledOut([]workload{web}, 90*time.Second)
	name := ctrl.RolloutName("StatefulSet", web.Name)
	if name != "statefulset-web" {
		t.Fatalf("RolloutName(StatefulSet, web) = %q, want statefulset-web", name)
	}
	var captures []captured

	t.Run("rolled out: Ready, kstatus Current", func(t *testing.T) {
		u := e.waitRollout(rollouts, name, "Ready", 30*time.Second, func(u *unstructured.Unstructured) bool { return condition(u, "Ready") == "True" })
		if r := kstatusOf(t, u); r.Status != status.CurrentStatus {
			t.Errorf("kstatus of a rolled-out Rollout: %s (%s), want Current\n%s", r.Status, r.Message, dump(u))
		}
		refs := u.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "StatefulSet" || refs[0].Name != web.Name {
			t.Errorf("Rollout owner references %+v, want the StatefulSet web", refs)
		}
		for _, f := range u.GetManagedFields() {
			if f.Manager != "rollplan-controller" {
				t.Errorf("Rollout written by field manager %q, want only rollplan-controller", f.Manager)
			}
		}
		sts := e.captureWorkload("StatefulSet", web.Name)
		checkHealth(t, u, health.Healthy, health.Current)
		checkHealth(t, sts, health.Healthy, health.Current)
		captures = append(captures, captured{"current", u, sts})
		out := e.kubectl("get", "rollouts.rollplan.dev")
		for _, col := range []string{"KIND", "WORKLOAD", "PHASE", "READY", "WAVE", "WAVES", "UPDATED", "AVAILABLE", "DESIRED", "AGE"} {
			if !strings.Contains(out, col) {
				t.Errorf("kubectl get rollouts.rollplan.dev: no column %s:\n%s", col, out)
			}
		}
		if !strings.Contains(out, "statefulset-web   StatefulSet   web        Complete   True") {
			t.Errorf("kubectl get rollouts.rollplan.dev: no row for web, rolled out and Ready:\n%s", out)
		}
	})

	// A pipeline's deploy step, started right after the template change:
	// rollplan status --wait.
	type result struct {
		out     string
		code    int
		updated int
	}
	var waited chan result

	t.Run("just changed, before the controller: Progressing", func(t *testing.T) {
		// With no controller running, the StatefulSet controller sees the
		// new template and rollplan's state still says Complete, of the
		// generation before: the health checks must not believe it.
		replicas[0].stop()
		e.setTemplate("StatefulSet", web.Name, setImage(slow))
		// A pipeline's deploy step, started right after the change.
		waited = make(chan result, 1)
		go func() {
			out, errOut, code := e.cli("status", "statefulset/"+web.Name, "--wait", "--timeout", "90s")
			waited <- result{out + errOut, code, e.updatedPods(web.Name, slow)}
		}()
		var sts *unstructured.Unstructured
		err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			sts = e.captureWorkload("StatefulSet", web.Name)
			observed, _, _ := unstructured.NestedInt64(sts.Object, "status", "observedGeneration")
			cur, _, _ := unstructured.NestedString(sts.Object, "status", "currentRevision")
			upd, _, _ := unstructured.NestedString(sts.Object, "status", "updateRevision")
			return observed == sts.GetGeneration() && cur != upd, nil
		})
		if err != nil {
			t.Fatalf("the StatefulSet controller did not observe the new template: %v\n%s", err, dump(sts))
		}
		st, err := live.ParseRolloutState(sts.GetAnnotations()[facts.AnnRolloutState])
		if err != nil {
			t.Fatal(err)
		}
		if st == nil || st.Phase != live.RolloutComplete || st.Generation == sts.GetGeneration() {
			t.Fatalf("rollout state %+v at generation %d: want Complete of the generation before", st, sts.GetGeneration())
		}
		checkHealth(t, sts, health.Progressing, health.InProgress)
		captures = append(captures, captured{"justchanged", nil, sts})
		replicas = append(replicas, e.startController("ctrl-b"))
		e.waitLeader(leases, replicas, replicas[0].identity, 30*time.Second)
	})

	t.Run("rolling: Reconciling, kstatus InProgress, kubectl wait returns when done", func(t *testing.T) {
		u := e.waitRollout(rollouts, name, "Reconciling", 30*time.Second, func(u *unstructured.Unstructured) bool { return condition(u, "Reconciling") == "True" })
		if r := kstatusOf(t, u); r.Status != status.InProgressStatus {
			t.Errorf("kstatus of a rolling Rollout: %s (%s), want InProgress\n%s", r.Status, r.Message, dump(u))
		}
		if condition(u, "Ready") != "False" || condition(u, "Stalled") != "False" {
			t.Errorf("a rolling Rollout: Ready %q, Stalled %q, want both False\n%s", condition(u, "Ready"), condition(u, "Stalled"), dump(u))
		}
		sts := e.captureWorkload("StatefulSet", web.Name)
		checkHealth(t, u, health.Progressing, health.InProgress)
		checkHealth(t, sts, health.Progressing, health.InProgress)
		captures = append(captures, captured{"inprogress", u, sts})
		cp := harness.Cluster(t)
		start := time.Now()
		out, err := exec.CommandContext(e.ctx, filepath.Join(cp.BinDir, "kubectl"), "--kubeconfig", cp.Kubeconfig, "-n", e.ns,
			"wait", "--for=condition=Ready", "rollout.rollplan.dev/"+name, "--timeout=90s").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl wait --for=condition=Ready rollout.rollplan.dev/%s: %v\n%s", name, err, out)
		}
		if n := e.updatedPods(web.Name, slow); n != web.Want {
			t.Errorf("kubectl wait returned with %d of %d pods at %s: want it to wait until the rollout is done", n, web.Want, slow)
		}
		e.logf("kubectl wait --for=condition=Ready returned after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
		r := <-waited
		if r.code != 0 || r.updated != web.Want || !strings.Contains(r.out, "rolled out") {
			t.Errorf("rollplan status --wait: exit code %d with %d of %d pods at %s, want 0 once all are:\n%s", r.code, r.updated, web.Want, slow, r.out)
		}
		done := e.waitRollout(rollouts, name, "Ready", 5*time.Second, func(u *unstructured.Unstructured) bool { return condition(u, "Ready") == "True" })
		if r := kstatusOf(t, done); r.Status != status.CurrentStatus {
			t.Errorf("kstatus once rolled out again: %s, want Current", r.Status)
		}
		checkHealth(t, done, health.Healthy, health.Current)
		checkHealth(t, e.captureWorkload("StatefulSet", web.Name), health.Healthy, health.Current)
	})

	t.Run("halted: Stalled, kstatus Failed", func(t *testing.T) {
		e.setTemplate("StatefulSet", web.Name, setImage(bad))
		u := e.waitRollout(rollouts, name, "Stalled", 60*time.Second, func(u *unstructured.Unstructured) bool { return condition(u, "Stalled") == "True" })
		r := kstatusOf(t, u)
		if r.Status != status.FailedStatus {
			t.Errorf("kstatus of a halted Rollout: %s (%s), want Failed\n%s", r.Status, r.Message, dump(u))
		}
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Halted" || !strings.Contains(r.Message, "crash-looping") {
			t.Errorf("halted Rollout: phase %q, kstatus message %q: want Halted and the halt reason", phase, r.Message)
		}
		sts := e.captureWorkload("StatefulSet", web.Name)
		checkHealth(t, u, health.Degraded, health.Failed)
		checkHealth(t, sts, health.Degraded, health.Failed)
		captures = append(captures, captured{"halted", u, sts})
		if out, errOut, code := e.cli("status", "statefulset/"+web.Name, "--wait", "--timeout", "30s"); code != 3 || !strings.Contains(errOut, "crash-looping") {
			t.Errorf("rollplan status --wait on a halted rollout: exit code %d, want 3 naming the halt:\n%s%s", code, out, errOut)
		}
	})

	t.Run("the schema refuses a bad Rollout", func(t *testing.T) {
		bad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rollplan.dev/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"name": "pod-x"},
			"spec":     map[string]any{"workloadRef": map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "x"}},
		}}
		_, err := rollouts.Namespace(e.ns).Create(e.ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.workloadRef.kind") {
			t.Errorf("creating a Rollout of a Pod: %v, want Invalid naming spec.workloadRef.kind", err)
		}
	})

	if *updateCaptures {
		writeCaptures(t, captures)
	}

	t.Run("goes with its workload", func(t *testing.T) {
		e.kubectl("delete", "statefulset", web.Name, "--cascade=foreground", "--wait=true", "--timeout=60s")
		err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := rollouts.Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("Rollout %s still there 30s after its StatefulSet was deleted", name)
		}
	})
}

// writeCaptures writes each phase's objects, without what changes from
// run to run in ways no health check reads (managedFields).
func writeCaptures(t *testing.T, cs []captured) {
	t.Helper()
	for _, c := range cs {
		dir := filepath.Join(captureDir, c.phase)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, u := range map[string]*unstructured.Unstructured{"rollout.yaml": c.rollout, "statefulset.yaml": c.workload} {
			if u == nil {
				continue
			}
			u = u.DeepCopy()
			u.SetManagedFields(nil)
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			header := fmt.Sprintf("# Captured by test/controller TestRolloutObject -update-captures from the\n# real control plane (%s): phase %s.\n", harness.Cluster(t).ServerVersion, c.phase)
			if err := os.WriteFile(filepath.Join(dir, file), append([]byte(header), b...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func appsGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: resource}
}
