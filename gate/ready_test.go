package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rollplan/rollplan/gate/certs"
)

// logLines are the JSON lines of a slog buffer, as msg, level and reason.
func logLines(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		s := fmt.Sprintf("%v %v", m["level"], m["msg"])
		if r, ok := m["reason"]; ok {
			s += fmt.Sprintf(" %v", r)
		}
		out = append(out, s)
	}
	return out
}

// TestReadiness: the first failing check is the verdict, named; checks
// after it are not run; each change of verdict is logged once, the first
// at Info (expected at start), later failures at Warn.
func TestReadiness(t *testing.T) {
	var buf bytes.Buffer
	var a, b error = errors.New("not synced yet"), nil
	bCalls := 0
	r := NewReadiness(slog.New(slog.NewJSONHandler(&buf, nil))).
		Add("caches", func(context.Context) error { return a }).
		Add("store", func(context.Context) error { bCalls++; return b })
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "not checked yet") {
		t.Errorf("before the first evaluation: %v, want not checked yet", err)
	}
	ctx := context.Background()
	steps := []struct {
		a, b error
		want string
	}{
		{a, nil, "caches: not synced yet"},
		{a, nil, "caches: not synced yet"}, // unchanged: not logged again
		{nil, nil, ""},
		{nil, nil, ""},
		{nil, errors.New("namespace x not found"), "store: namespace x not found"},
		{nil, errors.New("namespace x not found"), "store: namespace x not found"},
		{nil, errors.New("forbidden"), "store: forbidden"},
		{nil, nil, ""},
	}
	for i, s := range steps {
		a, b = s.a, s.b
		err := r.Evaluate(ctx)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != s.want {
			t.Errorf("step %d: verdict %q, want %q", i, got, s.want)
		}
		if e := r.Err(); (e == nil) != (err == nil) || (e != nil && e.Error() != got) {
			t.Errorf("step %d: Err() %v, Evaluate %v", i, e, err)
		}
	}
	if bCalls != len(steps)-2 {
		t.Errorf("store checked %d times, want %d: not while caches fail", bCalls, len(steps)-2)
	}
	want := []string{
		"INFO not ready caches: not synced yet",
		"INFO ready",
		"WARN not ready store: namespace x not found",
		"WARN not ready store: forbidden",
		"INFO ready",
	}
	if got := logLines(t, &buf); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReadinessRun: Run evaluates at once and then every interval, so a
// condition that comes true is seen without anyone calling Evaluate.
func TestReadinessRun(t *testing.T) {
	var mu sync.Mutex
	fail := errors.New("namespace x not found")
	r := NewReadiness(slog.New(slog.DiscardHandler)).Add("store", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return fail
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { return r.Err() != nil && strings.Contains(r.Err().Error(), "namespace x not found") })
	mu.Lock()
	fail = nil
	mu.Unlock()
	waitFor(t, func() bool { return r.Err() == nil })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never met")
		}
	}
}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// apiServerCreates makes the fake API server answer ConfigMap creates as
// the real one does: NotFound while the namespace does not exist
// (NamespaceLifecycle admission), Forbidden while it is being deleted, and
// nothing stored on a dry run (the fake would store it). creates counts
// the dry runs.
func apiServerCreates(c *fake.Clientset, creates *int) {
	c.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		obj, err := c.Tracker().Get(namespaces, "", ca.GetNamespace())
		if apierrors.IsNotFound(err) {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ca.GetNamespace())
		}
		if err != nil {
			return true, nil, err
		}
		if obj.(*corev1.Namespace).Status.Phase == corev1.NamespaceTerminating {
			e := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ca.GetNamespace()))
			e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace is terminating", Field: "metadata.namespace"})
			return true, nil, e
		}
		if !slices.Contains(ca.CreateOptions.DryRun, metav1.DryRunAll) {
			return false, nil, nil
		}
		*creates++
		return true, ca.GetObject(), nil
	})
}

// TestConfigMapStoreCheck: the store is unusable while its namespace is
// missing or being deleted, or the gate may not write there, each with
// what to do; usable once the namespace exists, and the dry run stores
// nothing.
func TestConfigMapStoreCheck(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	creates := 0
	apiServerCreates(c, &creates)
	s := &ConfigMapStore{Client: c, Namespace: gateNS}
	want := "namespace rollplan-system not found: create it (kubectl create namespace rollplan-system) or run the gate with -n NAMESPACE"
	if err := s.Check(ctx); err == nil || err.Error() != want {
		t.Errorf("namespace missing: %v, want %q", err, want)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gateNS}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("namespace created: %v, want usable", err)
	}
	if creates != 1 {
		t.Errorf("%d dry-run creates, want 1", creates)
	}
	if l, _ := c.CoreV1().ConfigMaps(gateNS).List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("the check stored %d configmaps", len(l.Items))
	}

	ns.Status.Phase = corev1.NamespaceTerminating
	if _, err := c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "namespace rollplan-system is being deleted") {
		t.Errorf("namespace terminating: %v", err)
	}

	c.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "gate" cannot list resource "configmaps"`))
	})
	err := s.Check(ctx)
	for _, w := range []string{"list reservation configmaps in namespace rollplan-system", `cannot list resource "configmaps"`, "the gate needs get, list, create, update and delete on configmaps in namespace rollplan-system"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("forbidden: %v, want it to say %q", err, w)
		}
	}
}

// TestConfigMapStoreReadinessCheck: an API server that does not answer
// fails the check only once no check succeeded for the grace; a definite
// answer (namespace missing) fails it at once.
func TestConfigMapStoreReadinessCheck(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gateNS}})
	creates := 0
	apiServerCreates(c, &creates)
	var down error
	c.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return down != nil, nil, down
	})
	const grace = 200 * time.Millisecond
	check := (&ConfigMapStore{Client: c, Namespace: gateNS}).ReadinessCheck(grace)
	down = apierrors.NewServiceUnavailable("etcd leader changed")
	if err := check(ctx); err == nil {
		t.Error("never checked and the API server fails: want not ready")
	}
	down = nil
	if err := check(ctx); err != nil {
		t.Fatalf("usable: %v", err)
	}
	down = apierrors.NewTimeoutError("slow", 1)
	if err := check(ctx); err != nil {
		t.Errorf("a timeout right after a success: %v, want ready (within the grace)", err)
	}
	time.Sleep(grace)
	if err := check(ctx); err == nil {
		t.Error("timeouts for longer than the grace: want not ready")
	}
	down = nil
	if err := check(ctx); err != nil {
		t.Fatalf("usable again: %v", err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, gateNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := check(ctx); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("namespace deleted right after a success: %v, want not ready at once", err)
	}
}

// TestReadyz: /readyz answers 503 with the reason while the reservation
// store's namespace is missing and 200 once it exists; /healthz answers
// 200 throughout, and the reason is logged once, however often probed.
func TestReadyz(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(3)...)
	_, cert, key, err := certs.ForHosts(nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(certFile, cert, 0o600)
	_ = os.WriteFile(keyFile, key, 0o600)
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	health := hl.Addr().String()
	hl.Close()

	client := fake.NewClientset()
	creates := 0
	apiServerCreates(client, &creates)
	var logBuf syncBuf
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	ready := NewReadiness(log).Add("reservation store", (&ConfigMapStore{Client: client, Namespace: gateNS}).ReadinessCheck(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ready.Run(ctx, 20*time.Millisecond)
	addr := make(chan string, 1)
	srv := &Server{Gate: f.gate, Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, HealthAddr: health,
		Ready: ready.Err, Log: slog.New(slog.DiscardHandler), Listening: func(a string) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-addr
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, strings.TrimSpace(b.String())
	}
	const reason = "not ready: reservation store: namespace rollplan-system not found: create it (kubectl create namespace rollplan-system) or run the gate with -n NAMESPACE"
	waitFor(t, func() bool { c, body := get("/readyz"); return c == 503 && body == reason })
	for range 5 {
		if c, body := get("/readyz"); c != 503 || body != reason {
			t.Errorf("/readyz: %d %q, want 503 %q", c, body, reason)
		}
		if c, _ := get("/healthz"); c != 200 {
			t.Errorf("/healthz: %d, want 200 (alive)", c)
		}
		time.Sleep(30 * time.Millisecond) // a few checks in between
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gateNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { c, body := get("/readyz"); return c == 200 && body == "ok" })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	var b bytes.Buffer
	b.WriteString(logBuf.String())
	got := logLines(t, &b)
	want := []string{"INFO not ready reservation store: namespace rollplan-system not found: create it (kubectl create namespace rollplan-system) or run the gate with -n NAMESPACE", "INFO ready"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant (each change once):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// syncBuf is a bytes.Buffer safe for the logger's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
