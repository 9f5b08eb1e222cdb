package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/rollplan/rollplan/gate"
)

func TestControllerFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no workers", []string{"controller", "--concurrent-rollouts", "0"}, "--concurrent-rollouts 0: want at least 1"},
		{"bad delete method", []string{"controller", "--delete-method", "drain"}, `--delete-method "drain"`},
		{"renew deadline past the lease", []string{"controller", "--leader-elect-renew-deadline", "20s"}, "must hold"},
		{"bad selector", []string{"controller", "--selector", "a in (b"}, `--selector "a in (b"`},
		{"named policy without a path", []string{"controller", "--named-policy", "canary"}, "want NAME=PATH"},
		{"arguments", []string{"controller", "sts/web"}, "takes no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if got := exitCode(err); got != exitUsage {
				t.Fatalf("exit code %d, want %d (err %v)", got, exitUsage, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

func TestPolicySet(t *testing.T) {
	ctx := context.Background()
	ps := &policySet{kind: "native", named: map[string][]string{"zones": {"policies/examples/one-zone-at-a-time"}}, timeout: time.Minute}
	if err := ps.load(ctx); err != nil {
		t.Fatal(err)
	}
	if e, err := ps.For(""); err != nil || e.Name() != "native" {
		t.Errorf(`For("") = %v, %v; want the default`, e, err)
	}
	if e, err := ps.For("zones"); err != nil || e.Name() != "rego" {
		t.Errorf(`For("zones") = %v, %v; want the named Rego policy`, e, err)
	}
	_, err := ps.For("typo")
	if err == nil || !strings.Contains(err.Error(), `rollplan.dev/policy="typo"`) || !strings.Contains(err.Error(), "it has zones") || !strings.Contains(err.Error(), "--named-policy typo=PATH") {
		t.Errorf(`For("typo") = %v; want an error naming the annotation, the policies it has and the flag`, err)
	}
	// Without named policies every workload rolls with the default.
	plain := &policySet{kind: "native", timeout: time.Minute}
	if err := plain.load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.For("anything"); err != nil {
		t.Errorf("without named policies a name is the default policy's business: %v", err)
	}
}

func TestControllerReadiness(t *testing.T) {
	var log bytes.Buffer
	ctx := context.Background()
	client := fake.NewClientset()
	var synced bool
	ready := gate.NewReadiness(slog.New(slog.NewTextHandler(&log, nil))).
		Add("informer caches", func(context.Context) error {
			if !synced {
				return errors.New("informer caches are not synced yet")
			}
			return nil
		}).
		Add("leader-election Lease", func(ctx context.Context) error {
			return leaseUsable(ctx, client, "rollplan-system", "rollplan-controller")
		})
	// The fake takes any namespace: answer as the API server does when
	// rollplan-system does not exist.
	exists := false
	client.PrependReactor("create", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if !exists {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "rollplan-system")
		}
		return true, nil, nil
	})
	h := healthHandler(ready)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Errorf("before any check: %d, want 503", code)
	}
	ready.Evaluate(ctx)
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "not synced") {
		t.Errorf("caches not synced: %d %q", code, body)
	}
	synced = true
	ready.Evaluate(ctx)
	ready.Evaluate(ctx)
	code, body := get()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "namespace rollplan-system not found: create it") {
		t.Errorf("Lease namespace missing: %d %q, want 503 saying what to do", code, body)
	}
	exists = true
	ready.Evaluate(ctx)
	if code, _ := get(); code != http.StatusOK {
		t.Errorf("all checks pass: %d, want 200", code)
	}
	if n := strings.Count(log.String(), "rollplan-system not found"); n != 1 {
		t.Errorf("the reason was logged %d times, want once:\n%s", n, log.String())
	}
}

// The controller's and the gate's log is JSON, one object a line: what
// client-go logs through klog (leader election, informers, reflectors)
// goes through the same slog handler instead of klog's text format.
func TestKlogThroughSlog(t *testing.T) {
	var out bytes.Buffer
	log := jsonLog(&out)
	t.Cleanup(klog.ClearLogger)
	log.Info("rollplan's own line")
	klog.InfoS("attempting to acquire leader lease", "lease", "rollplan-system/rollplan-controller")
	klog.Infof("failed to renew lease %s: %v", "rollplan-system/rollplan-controller", "timed out")
	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "reflector", "pods")
	klog.Warning("a plain warning")
	klog.Flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), out.String())
	}
	for _, want := range []struct{ level, msg string }{
		{"INFO", "rollplan's own line"},
		{"INFO", "attempting to acquire leader lease"},
		{"INFO", "failed to renew lease rollplan-system/rollplan-controller: timed out"},
		{"ERROR", "Failed to watch"},
		{"INFO", "a plain warning"}, // logr has no warning level: klog logs warnings as Info through it
	} {
		line := lines[0]
		lines = lines[1:]
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON line: %s (%v)", line, err)
			continue
		}
		if rec["level"] != want.level || rec["msg"] != want.msg {
			t.Errorf("line %s: want level %s, msg %q", line, want.level, want.msg)
		}
	}
}
