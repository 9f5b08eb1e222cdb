package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/test/harness"
)

// cli runs the rollplan binary against the test control plane in the
// env's namespace; it fails the test unless the exit code is want.
func (e *env) cli(want int, args ...string) string {
	e.t.Helper()
	args = append(args, "--kubeconfig", harness.Cluster(e.t).Kubeconfig, "-n", e.ns)
	cmd := exec.CommandContext(e.ctx, harness.RollplanBinary(e.t), args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		e.t.Fatalf("rollplan %s: %v", strings.Join(args, " "), err)
	}
	if code != want {
		e.t.Fatalf("rollplan %s: exit code %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return string(out)
}

// TestDeploymentCLISession runs the README's Deployment session with the
// rollplan binary: apply holds the Deployment, an image change goes in
// place, history lists both revisions, undo --dry-run=client previews an
// in-place rollback, undo carries it out, pause and resume.
func TestDeploymentCLISession(t *testing.T) {
	e := newEnv(t, 3)
	const name, n = "api", 4
	sel := "app=" + name
	d := managedDeployment(e.ns, name, n, "1")
	d.Annotations = nil // annotated by "kubectl annotate" below, as the README does
	if _, err := e.client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployment(name, "rolled out", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == n })
	before := uids(e.pods(sel))

	if out := e.cli(1, "apply", "deploy/"+name); !strings.Contains(out, "not managed by rollplan") {
		t.Errorf("apply on an unmanaged Deployment:\n%s", out)
	}
	e.kubectl("annotate", "deploy/"+name, "rollplan.dev/managed=true", "rollplan.dev/pod-update-policy=InPlaceIfPossible")
	if out := e.cli(0, "apply", "deploy/"+name, "--timeout", "1m"); !strings.Contains(out, "spec.paused=true") || !strings.Contains(out, ": done:") {
		t.Errorf("apply on a rolled-out managed Deployment should hold it and be done:\n%s", out)
	}
	e.kubectl("set", "image", "deploy/"+name, "app=example.com/app:v2")
	out := e.cli(0, "apply", "deploy/"+name, "--timeout", "1m")
	if !strings.Contains(out, "msg=adopt") || !strings.Contains(out, fmt.Sprintf("done: %d InPlaceUpdate", n)) {
		t.Errorf("apply of an image change:\n%s", out)
	}
	if !strings.Contains(e.kubectl("rollout", "status", "deploy/"+name, "--timeout=30s"), "successfully rolled out") {
		t.Errorf("kubectl rollout status does not report the rollout complete")
	}

	out = e.cli(0, "history", "deploy/"+name)
	t.Logf("rollplan history:\n%s", out)
	for _, want := range []string{"REVISION", "(replaced in place)", "2*", "spec.containers[app].image changed in place"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	out = e.cli(0, "undo", "deploy/"+name, "--dry-run=client")
	t.Logf("rollplan undo --dry-run=client:\n%s", out)
	if !strings.Contains(out, "preview of the rollback to revision 1") || !strings.Contains(out, "InPlaceUpdate") {
		t.Errorf("undo --dry-run=client:\n%s", out)
	}
	if img := e.deployment(name).Spec.Template.Spec.Containers[0].Image; img != "example.com/app:v2" {
		t.Errorf("undo --dry-run=client changed the template to %s", img)
	}
	out = e.cli(0, "undo", "deploy/"+name, "--timeout", "1m")
	if !strings.Contains(out, "template rolled back to revision 1") || !strings.Contains(out, ": done:") {
		t.Errorf("undo:\n%s", out)
	}
	if got := e.deployment(name).Annotations["deployment.kubernetes.io/revision"]; got != "3" {
		t.Errorf("revision %q after undo, want 3", got)
	}
	for _, p := range e.pods(sel) {
		if before[p.Name] != p.UID || p.Spec.Containers[0].Image != "example.com/app:v1" {
			t.Errorf("pod %s after undo: uid %s (was %s), image %s", p.Name, p.UID, before[p.Name], p.Spec.Containers[0].Image)
		}
	}

	if out := e.cli(0, "pause", "deploy/"+name); !strings.Contains(out, "paused") {
		t.Errorf("pause:\n%s", out)
	}
	e.kubectl("set", "image", "deploy/"+name, "app=example.com/app:v3")
	if out := e.cli(0, "apply", "deploy/"+name, "--once"); !strings.Contains(out, "no action") || !strings.Contains(out, "rollplan resume") {
		t.Errorf("apply --once while paused:\n%s", out)
	}
	if out := e.cli(0, "status", "deploy/"+name); !strings.Contains(out, "paused by rollplan pause") {
		t.Errorf("status while paused:\n%s", out)
	}
	e.cli(0, "resume", "deploy/"+name)
	e.cli(0, "apply", "deploy/"+name, "--timeout", "1m")
	for _, p := range e.pods(sel) {
		if before[p.Name] != p.UID || p.Spec.Containers[0].Image != "example.com/app:v3" {
			t.Errorf("pod %s after resume: uid %s (was %s), image %s", p.Name, p.UID, before[p.Name], p.Spec.Containers[0].Image)
		}
	}
}

// kubectl runs kubectl against the test control plane in the env's
// namespace and returns its output; it fails the test on an error.
func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	kubectl := filepath.Join(harness.Cluster(e.t).BinDir, "kubectl")
	args = append([]string{"--kubeconfig", harness.Cluster(e.t).Kubeconfig, "-n", e.ns}, args...)
	out, err := exec.CommandContext(e.ctx, kubectl, args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
