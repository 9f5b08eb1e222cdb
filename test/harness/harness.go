// Package harness is what the cluster test packages under test/ (e2e,
// controller, controllerscale) share: one control plane per test binary,
// the rollplan binary built once per test binary, the gate's serving
// certificate and webhook configuration, and small helpers. The _test.go
// files of those packages import it, and test/devcluster (a program) uses
// the helpers that take no *testing.T (WriteServingCert, NamespaceWebhook).
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/gate/certs"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/test/controlplane"
)

// Version is the Kubernetes version of the shared control plane:
// rollplan's newest, the one the executor, the gate and the controller
// plan for when nothing says otherwise, with that version's default
// feature gates.
var Version = kubeversion.Newest.String()

var (
	planeOnce sync.Once
	plane     *controlplane.ControlPlane
	planeErr  error

	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

// Main is a test binary's TestMain: it runs the tests, then stops the
// shared control plane and removes the rollplan binary, if they were
// started or built, and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	if plane != nil {
		if err := plane.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// Cluster returns the test binary's shared control plane, started on
// first use; it skips the test when the binaries are not built.
func Cluster(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if _, err := controlplane.VersionDir(Version); err != nil {
		t.Skip(err)
	}
	planeOnce.Do(func() {
		plane, planeErr = controlplane.Start(context.Background(), controlplane.Options{Version: Version})
	})
	if planeErr != nil {
		t.Fatalf("start control plane: %v", planeErr)
	}
	return plane
}

// BuildRollplan builds cmd/rollplan once per test binary, into a
// temporary folder Main removes, and returns its path. It is safe to call
// from any goroutine.
func BuildRollplan() (string, error) {
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "rollplan-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "rollplan")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/rollplan/rollplan/cmd/rollplan").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/rollplan: %w\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// RollplanBinary is BuildRollplan that fails the test when the build does.
func RollplanBinary(t *testing.T) string {
	t.Helper()
	bin, err := BuildRollplan()
	if err != nil {
		t.Fatalf("build rollplan: %v", err)
	}
	return bin
}

// ServingCert makes a CA and a serving certificate for 127.0.0.1, writes
// the certificate and its key into a temporary folder of the test, and
// returns the CA and the two files.
func ServingCert(t *testing.T) (ca []byte, certFile, keyFile string) {
	t.Helper()
	ca, certFile, keyFile, err := WriteServingCert(t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca, certFile, keyFile
}

// WriteServingCert makes a CA and a serving certificate for 127.0.0.1,
// valid for validity, writes the certificate and its key into dir as
// tls.crt and tls.key, and returns the CA and the two files: ServingCert
// for a program (test/devcluster).
func WriteServingCert(dir string, validity time.Duration) (ca []byte, certFile, keyFile string, err error) {
	ca, cert, key, err := certs.ForHosts(nil, []net.IP{net.IPv4(127, 0, 0, 1)}, validity, time.Now())
	if err != nil {
		return nil, "", "", fmt.Errorf("serving certificate for 127.0.0.1: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		return nil, "", "", fmt.Errorf("serving certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return nil, "", "", fmt.Errorf("serving certificate key: %w", err)
	}
	return ca, certFile, keyFile, nil
}

// ServeGate serves g, through handler, with gate.Server over TLS on a
// free local port until ctx ends. It returns the webhook's URL, the CA of
// its certificate, and the channel the server's result arrives on.
func ServeGate(ctx context.Context, t *testing.T, g *gate.Gate, handler http.Handler, log *slog.Logger) (url string, ca []byte, done <-chan error) {
	t.Helper()
	ca, certFile, keyFile := ServingCert(t)
	addr := make(chan string, 1)
	srv := &gate.Server{Gate: g, Handler: handler, Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, Log: log,
		Listening: func(s string) { addr <- s }}
	result := make(chan error, 1)
	go func() { result <- srv.Run(ctx) }()
	select {
	case s := <-addr:
		return "https://" + s + "/validate", ca, result
	case err := <-result:
		t.Fatalf("gate server: %v", err)
		return "", nil, nil
	}
}

// WebhookConfiguration is deploy/'s ValidatingWebhookConfiguration, as
// `rollplan gate manifests` renders it, pointed at url and at namespace
// ns only (the other tests keep their own), named after ns.
func WebhookConfiguration(t *testing.T, ca []byte, url, ns string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc, err := NamespaceWebhook(ca, url, ns)
	if err != nil {
		t.Fatal(err)
	}
	return vwc
}

// NamespaceWebhook is WebhookConfiguration for a program
// (test/devcluster): the webhook configuration of a gate at url serving
// with ca, for namespace ns only, named rollplan-gate-NS.
func NamespaceWebhook(ca []byte, url, ns string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	raw, err := deploy.Render(deploy.Options{CABundle: ca})
	if err != nil {
		return nil, fmt.Errorf("render deploy/ manifests: %w", err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if !strings.Contains(doc, "kind: ValidatingWebhookConfiguration") {
			continue
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := yaml.UnmarshalStrict([]byte(doc), &vwc); err != nil {
			return nil, fmt.Errorf("deploy/ ValidatingWebhookConfiguration: %w", err)
		}
		vwc.Name = "rollplan-gate-" + ns
		for i := range vwc.Webhooks {
			w := &vwc.Webhooks[i]
			w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		}
		return &vwc, nil
	}
	return nil, errors.New("deploy.Render has no ValidatingWebhookConfiguration")
}

// PodHandlers are what WatchPods calls; each does its own locking.
type PodHandlers struct {
	// Put is called with every pod added or updated.
	Put func(*corev1.Pod)
	// Delete is called with every pod deleted.
	Delete func(*corev1.Pod)
	// Synced is called once, with the pods of the synced cache: handlers
	// are told of the initial list after the cache syncs, so a watcher
	// starts from the cache itself.
	Synced func([]*corev1.Pod)
}

// WatchPods runs a pod informer on namespace ns (the pods matching
// selector; "" for all) until the test ends, and returns once its cache
// has synced and h.Synced has returned.
func WatchPods(t *testing.T, client kubernetes.Interface, ns, selector string, h PodHandlers) {
	t.Helper()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	set := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			h.Put(p)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				h.Delete(p)
			}
		},
	})
	// Stopped before the test's context ends: Shutdown waits for the
	// informer to stop.
	stop := make(chan struct{})
	f.Start(stop)
	f.WaitForCacheSync(stop)
	var pods []*corev1.Pod
	for _, obj := range inf.GetStore().List() {
		pods = append(pods, obj.(*corev1.Pod))
	}
	h.Synced(pods)
	t.Cleanup(func() { close(stop); f.Shutdown() })
}

// Available tells whether a pod counts as available: not terminating,
// Ready, and every container running its spec's image (a pod updated in
// place is not available until its containers run the new image).
func Available(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, c := range p.Spec.Containers {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == c.Name && cs.Image != c.Image {
				return false
			}
		}
	}
	return ready
}

// FreeAddr returns a local TCP address no one listened on a moment ago,
// for a process the test starts to bind.
func FreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
