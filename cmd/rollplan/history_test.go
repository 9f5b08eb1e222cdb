package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
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
		err            string // the whole error, when given
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
		{name: "pause", args: []string{"pause", "deploy/api"}, stdout: []string{"Deployment default/api paused", "`rollplan resume deployment/api -n default`"}},
		{name: "pause names the namespace and context to resume with", args: []string{"pause", "deploy/api", "-n", "default", "--context", "staging"},
			stdout: []string{"`rollplan resume deployment/api -n default --context staging`"}},
		{name: "undo to a missing revision says how to list them", args: []string{"undo", "deploy/api", "--to-revision", "9", "--context", "staging"}, code: exitError,
			err: "Deployment default/api: revision 9 not found (revisions: 1): see `rollplan history deployment/api -n default --context staging`"},
		{name: "history of a missing revision says how to list them", args: []string{"history", "deploy/api", "--revision", "9"}, code: exitError,
			err: "Deployment default/api: revision 9 not found (revisions: 1): list them with `rollplan history deployment/api -n default`"},
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
			if tt.err != "" && (err == nil || err.Error() != tt.err) {
				t.Errorf("error\n%v\nwant\n%s", err, tt.err)
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
	for _, want := range []string{"ControllerRevision/web-6545fdd768", "-*", "the workload's template (not rolled out yet)", "spec.containers[app].image changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	// Not rolled out: nothing went in place (the image could, which is no
	// claim of how a revision was rolled out).
	if strings.Contains(out, "(in place)") || strings.Contains(out, "changed in place") {
		t.Errorf("history claims an in-place update that did not happen:\n%s", out)
	}
	out, stderr, err := run(t, "undo", "sts/web", "--dry-run=client")
	if err != nil || !strings.Contains(stderr, "preview of the rollback to revision 1") {
		t.Fatalf("undo --dry-run=client: %v\n%s\n%s", err, stderr, out)
	}
	t.Logf("history:\n%s", out)
}

// undo of a workload rollplan does not manage hands it to its controller
// and names the kubectl command to follow it, with the namespace and the
// context it ran with.
func TestUndoUnmanagedHint(t *testing.T) {
	fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "deploy-rolling-4-25pct")
	_, stderr, err := run(t, "undo", "deploy/api", "--context", "staging")
	if err != nil {
		t.Fatal(err)
	}
	if want := "its controller rolls it back; follow it with `kubectl rollout status deployment/api -n default --context staging`\n"; !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr %q, want it to end %q", stderr, want)
	}
}

// A workload that does not exist is named the same way by every command
// that reads one from the cluster: as rollplan snapshot, status and apply
// word it.
func TestWorkloadNotFoundWording(t *testing.T) {
	for _, ref := range []string{"sts/nope", "deploy/nope", "ds/nope"} {
		kind := map[string]string{"sts": "statefulset", "deploy": "deployment", "ds": "daemonset"}[strings.Split(ref, "/")[0]]
		want := kind + ` "nope" not found in namespace "prod"`
		for _, args := range [][]string{
			{"snapshot"}, {"status"}, {"apply"},
			{"pause"}, {"resume"}, {"history"}, {"history", "--revision", "1"}, {"undo"}, {"undo", "--dry-run=client"},
		} {
			t.Run(ref+" "+strings.Join(args, " "), func(t *testing.T) {
				fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "deploy-inplace-managed")
				_, errLine, code := execute(t, append([]string{args[0], ref, "-n", "prod"}, args[1:]...)...)
				if code != exitError || errLine != "error: "+want {
					t.Errorf("exit %d, %q; want exit %d, %q", code, errLine, exitError, "error: "+want)
				}
			})
		}
	}
}

// resume says who carries the rollout on: the driver that holds the
// workload's driver Lease (the controller, or a running apply), else
// nobody yet, with the command that would.
func TestResumeSaysWhoCarriesOn(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	target := live.Target{Namespace: "default", Kind: "Deployment", Name: "api"}
	tests := []struct {
		name   string
		driver *executor.Driver
		want   string
	}{
		{"the controller holds it", &executor.Driver{Identity: "controller ctl-1", Liveness: "rollplan-system/rollplan-controller"},
			"Deployment default/api resumed: the rollplan controller carries on (it holds the driver Lease: controller ctl-1)"},
		{"an apply holds it", &executor.Driver{Identity: "apply alice@laptop (pid 1)"},
			"Deployment default/api resumed: the running rollplan apply carries on (it holds the driver Lease: apply alice@laptop (pid 1))"},
		{"nobody holds it", nil,
			"Deployment default/api resumed: no driver holds it now: run `rollplan apply deployment/api -n default` to carry on, or install the rollplan controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fakeApply(t, march, "deploy-inplace-managed")
			ctx := context.Background()
			if tt.driver != nil {
				id, renew, secs := "ctl-1", metav1.NewMicroTime(march), int32(15)
				leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "rollplan-system", Name: "rollplan-controller"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, RenewTime: &renew, LeaseDurationSeconds: &secs}}
				if _, err := client.CoordinationV1().Leases("rollplan-system").Create(ctx, leader, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := executor.AcquireDriver(ctx, client, target, "", *tt.driver, func() time.Time { return march }); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := run(t, "pause", "deploy/api"); err != nil {
				t.Fatal(err)
			}
			out, _, err := run(t, "resume", "deploy/api")
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != tt.want {
				t.Errorf("resume printed\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
	// The controller gives the driver Lease up while the rollout is
	// paused; its record on the workload says it drives it.
	t.Run("the controller recorded it paused", func(t *testing.T) {
		client := fakeApply(t, march, "deploy-inplace-managed")
		if _, _, err := run(t, "pause", "deploy/api"); err != nil {
			t.Fatal(err)
		}
		rec := live.RolloutState{Phase: live.RolloutPaused, Driver: "controller ctl-1"}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, facts.AnnRolloutState, rec.Encode())
		if _, err := client.AppsV1().Deployments("default").Patch(context.Background(), "api", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		out, _, err := run(t, "resume", "deploy/api")
		if want := "Deployment default/api resumed: the rollplan controller carries on (it recorded the rollout as Paused; where it no longer runs: `rollplan apply deployment/api -n default`)"; err != nil || strings.TrimSpace(out) != want {
			t.Errorf("resume: %v\n%s\nwant\n%s", err, out, want)
		}
	})
}
