package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/facts"
)

// history, undo --dry-run=client, pause and resume against a fake cluster
// holding the deploy-inplace-managed scenario: a managed Deployment whose
// template (api:1.4) is newer than its one ReplicaSet's (revision 1, api:1.3).
func TestHistoryUndoPause(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string
	}{
		{name: "history lists the ReplicaSet revision", args: []string{"history", "deploy/api"},
			stdout: []string{"Deployment default/api", "REVISION", "SOURCE", "ReplicaSet/api-647569c96f"}},
		{name: "history -o json", args: []string{"history", "deploy/api", "-o", "json"},
			stdout: []string{`"revision": 1`, `"source": "ReplicaSet/api-647569c96f"`}},
		{name: "history --revision prints the template", args: []string{"history", "deploy/api", "--revision", "1"},
			stdout: []string{"# Deployment default/api revision 1", "image: "}},
		{name: "history of an unknown revision names the ones there are", args: []string{"history", "deploy/api", "--revision", "7"},
			code: exitError},
		{name: "undo --dry-run=client previews the rollback plan and changes nothing", args: []string{"undo", "deploy/api", "--dry-run=client"},
			stdout: []string{"Deployment default/api"}, stderr: []string{"preview of the rollback to revision 1", "nothing changed"}},
		{name: "undo to a missing revision", args: []string{"undo", "deploy/api", "--to-revision", "9"}, code: exitError},
		{name: "bad undo --dry-run", args: []string{"undo", "deploy/api", "--dry-run=server"}, code: exitUsage},
		{name: "pause", args: []string{"pause", "deploy/api"}, stdout: []string{"Deployment default/api paused", "rollplan resume deployment/api"}},
		{name: "resume", args: []string{"resume", "deploy/api"}, stdout: []string{"Deployment default/api resumed"}},
		{name: "pause needs a workload", args: []string{"pause"}, code: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeApply(t, march, "deploy-inplace-managed")
			stdout, stderr, err := run(t, tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d, want %d (err %v)\nstdout:\n%s\nstderr:\n%s", got, tt.code, err, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// pause annotates the workload and holds a managed Deployment (spec.paused);
// resume removes the annotation and leaves spec.paused to the executor.
func TestPauseResumeState(t *testing.T) {
	client := fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "deploy-inplace-managed")
	if _, _, err := run(t, "pause", "deploy/api"); err != nil {
		t.Fatal(err)
	}
	d, err := client.AppsV1().Deployments("default").Get(context.Background(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Annotations[facts.AnnPaused] != "true" || !d.Spec.Paused {
		t.Fatalf("after pause: annotation %q, spec.paused %t", d.Annotations[facts.AnnPaused], d.Spec.Paused)
	}
	if _, _, err := run(t, "resume", "deploy/api"); err != nil {
		t.Fatal(err)
	}
	d, _ = client.AppsV1().Deployments("default").Get(context.Background(), "api", metav1.GetOptions{})
	if _, ok := d.Annotations[facts.AnnPaused]; ok || !d.Spec.Paused {
		t.Fatalf("after resume: annotations %v, spec.paused %t (resume must leave it to the executor)", d.Annotations, d.Spec.Paused)
	}
	// apply --once on the paused rollout starts nothing and says why.
	if _, _, err := run(t, "pause", "deploy/api"); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, "apply", "deploy/api", "--once")
	if err != nil || strings.Contains(stderr, "outcome=done") || !strings.Contains(stderr, "paused (annotation rollplan.dev/paused)") {
		t.Fatalf("apply --once on a paused rollout: err %v\n%s", err, stderr)
	}
}

// A StatefulSet's history is its ControllerRevisions; undo --dry-run=client
// previews the way back in place.
func TestHistoryStatefulSet(t *testing.T) {
	fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "sts-inplace-image-only")
	out, _, err := run(t, "history", "sts/web")
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot holds only the old revision: the new template is pending.
	for _, want := range []string{"ControllerRevision/web-6545fdd768", "-*", "the workload's template (not rolled out yet)", "spec.containers[app].image (in place)"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	out, stderr, err := run(t, "undo", "sts/web", "--dry-run=client")
	if err != nil || !strings.Contains(stderr, "preview of the rollback to revision 1") {
		t.Fatalf("undo --dry-run=client: %v\n%s\n%s", err, stderr, out)
	}
	t.Logf("history:\n%s", out)
}
