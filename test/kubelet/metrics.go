package kubelet

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Metrics configures the exporters the kubelet runs (Options.Metrics): for
// every container it runs, an HTTP server on a loopback port of its own
// whose /metrics reports the traffic the container serves, as an
// instrumented application would:
//
//	http_requests_total{code="200"|"500"}       counter
//	http_request_duration_seconds{le=...}      histogram
//
// A container serves RequestRate requests a second while its pod is Ready
// (a Service sends traffic to Ready pods only); its image's Behavior says
// which share it answers 500 (ErrorRatio) and how long requests take
// (Latency). The counts advance with time and start again from zero when
// the container restarts (an in-place image change is a new process), as
// an application's do; both codes are exported from the start, so a
// healthy container's error rate is 0, not absent.
//
// Prometheus finds the exporters through TargetsFile, a file_sd_configs
// file the kubelet rewrites as containers come and go: one target per
// container, labelled namespace, pod and container, as kubernetes_sd's
// usual relabelling names them.
type Metrics struct {
	// TargetsFile is the file_sd_configs file (JSON) to write; "" writes
	// none (Targets still lists them).
	TargetsFile string
	// RequestRate: requests per second a Ready container serves; default 10.
	RequestRate float64
}

// DefaultRequestRate is Metrics.RequestRate's default.
const DefaultRequestRate = 10

// DefaultLatency is the median request duration of an image whose
// Behavior sets no Latency.
const DefaultLatency = 20 * time.Millisecond

// MetricsTarget is one exporter: its address and its labels.
type MetricsTarget struct {
	Addr   string
	Labels map[string]string
}

// exporters are the kubelet's exporters, by pod UID and container name.
type exporters struct {
	opts     Metrics
	behavior func(image string) Behavior
	now      func() time.Time

	mu      sync.Mutex
	byKey   map[string]*exporter
	written string // the targets file's last content
	closed  bool
}

func newExporters(opts Metrics, behavior func(string) Behavior) *exporters {
	if opts.RequestRate <= 0 {
		opts.RequestRate = DefaultRequestRate
	}
	return &exporters{opts: opts, behavior: behavior, now: time.Now, byKey: map[string]*exporter{}}
}

// observe brings the pod's exporters in line with its status: one for
// every container that has run, serving while it runs.
func (x *exporters) observe(pod *corev1.Pod) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	now := x.now()
	ready := false
	if c := condition(&pod.Status, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		ready = pod.DeletionTimestamp == nil
	}
	changed := false
	for _, cs := range pod.Status.ContainerStatuses {
		key := string(pod.UID) + "/" + cs.Name
		e := x.byKey[key]
		if e == nil {
			if cs.State.Running == nil {
				continue // never ran: nothing listens yet
			}
			var err error
			if e, err = x.start(pod, cs.Name); err != nil {
				return err
			}
			x.byKey[key] = e
			changed = true
		}
		running := cs.State.Running != nil
		e.set(now, running, ready && running, cs.ContainerID, x.behavior(cs.Image))
	}
	if changed {
		return x.writeTargets()
	}
	return nil
}

// forget stops the exporters of a pod that is gone.
func (x *exporters) forget(uid types.UID) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	changed := false
	for key, e := range x.byKey {
		if e.uid == uid {
			_ = e.srv.Close()
			delete(x.byKey, key)
			changed = true
		}
	}
	if changed && !x.closed {
		return x.writeTargets()
	}
	return nil
}

// close stops every exporter.
func (x *exporters) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	for key, e := range x.byKey {
		_ = e.srv.Close()
		delete(x.byKey, key)
	}
}

func (x *exporters) start(pod *corev1.Pod, container string) (*exporter, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("test kubelet: exporter of %s/%s container %s: %w", pod.Namespace, pod.Name, container, err)
	}
	e := &exporter{
		uid: pod.UID, addr: l.Addr().String(), rate: x.opts.RequestRate, now: x.now,
		labels: map[string]string{"namespace": pod.Namespace, "pod": pod.Name, "container": container},
	}
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.srv.Serve(l) }()
	return e, nil
}

// targets lists the exporters, sorted by namespace, pod and container.
func (x *exporters) targets() []MetricsTarget {
	out := make([]MetricsTarget, 0, len(x.byKey))
	for _, e := range x.byKey {
		out = append(out, MetricsTarget{Addr: e.addr, Labels: e.labels})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Labels, out[j].Labels
		if a["namespace"] != b["namespace"] {
			return a["namespace"] < b["namespace"]
		}
		if a["pod"] != b["pod"] {
			return a["pod"] < b["pod"]
		}
		return a["container"] < b["container"]
	})
	return out
}

// writeTargets writes the file_sd file when it changed, through a rename:
// Prometheus watches the file and must never read half of it.
func (x *exporters) writeTargets() error {
	if x.opts.TargetsFile == "" {
		return nil
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	groups := []group{}
	for _, t := range x.targets() {
		groups = append(groups, group{Targets: []string{t.Addr}, Labels: t.Labels})
	}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return err
	}
	if string(b) == x.written {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(x.opts.TargetsFile), "."+filepath.Base(x.opts.TargetsFile)+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("test kubelet: metrics targets: %w", err)
	}
	if err := os.Rename(tmp, x.opts.TargetsFile); err != nil {
		return fmt.Errorf("test kubelet: metrics targets: %w", err)
	}
	x.written = string(b)
	return nil
}

// exporter is one container's: the traffic it served since it started.
type exporter struct {
	uid    types.UID
	addr   string
	labels map[string]string
	rate   float64
	now    func() time.Time
	srv    *http.Server

	mu          sync.Mutex
	containerID string
	running     bool
	ready       bool
	b           Behavior
	since       time.Time // traffic is counted up to here
	carry       float64   // a request begun but not done
	served      uint64
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	duration    prometheus.Histogram
}

// set counts the traffic up to now under the old state, then takes the
// new one; a new container ID is a new process, with new counts.
func (e *exporter) set(now time.Time, running, ready bool, containerID string, b Behavior) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reg == nil || (running && containerID != e.containerID) {
		e.reset(now, containerID)
	} else {
		e.advance(now)
	}
	e.running, e.ready, e.b = running, ready, b
}

func (e *exporter) reset(now time.Time, containerID string) {
	e.containerID, e.since, e.carry, e.served = containerID, now, 0, 0
	e.reg = prometheus.NewRegistry()
	e.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total", Help: "HTTP requests served, by status code.",
	}, []string{"code"})
	e.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "http_request_duration_seconds", Help: "HTTP request durations.", Buckets: prometheus.DefBuckets,
	})
	e.reg.MustRegister(e.requests, e.duration)
	e.requests.WithLabelValues("200")
	e.requests.WithLabelValues("500")
}

// goldenFraction spreads request durations evenly over their range
// without a random source: request i takes latency*(0.5 + frac(i*φ)).
const goldenFraction = 0.6180339887498949

// advance counts the requests served between since and now: none unless
// Ready; of those, request i is answered 500 when it carries the error
// count floor(i*ErrorRatio) one further, so errors come evenly spread.
func (e *exporter) advance(now time.Time) {
	if now.Before(e.since) {
		return
	}
	if e.ready {
		n := e.rate*now.Sub(e.since).Seconds() + e.carry
		whole := math.Floor(n)
		e.carry = n - whole
		latency := e.b.Latency
		if latency <= 0 {
			latency = DefaultLatency
		}
		ok, failed := e.requests.WithLabelValues("200"), e.requests.WithLabelValues("500")
		for range int(whole) {
			e.served++
			i := float64(e.served)
			if math.Floor(i*e.b.ErrorRatio) > math.Floor((i-1)*e.b.ErrorRatio) {
				failed.Inc()
			} else {
				ok.Inc()
			}
			_, frac := math.Modf(i * goldenFraction)
			e.duration.Observe(latency.Seconds() * (0.5 + frac))
		}
	}
	e.since = now
}

// serve is /metrics: the counts up to now; 503 while the container does
// not run (Prometheus marks the target down, as a refused connection).
func (e *exporter) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	e.mu.Lock()
	running := e.running
	if running {
		e.advance(e.now())
	}
	reg := e.reg
	e.mu.Unlock()
	if !running {
		http.Error(w, "container not running", http.StatusServiceUnavailable)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// Targets lists the exporters running now (Options.Metrics), sorted by
// namespace, pod and container.
func (k *Kubelet) Targets() []MetricsTarget {
	if k.metrics == nil {
		return nil
	}
	k.metrics.mu.Lock()
	defer k.metrics.mu.Unlock()
	return k.metrics.targets()
}

// watchMetrics keeps the exporters in line with the pods of this
// kubelet's nodes, as their status changes and as they go.
func (k *Kubelet) watchMetrics(informer cache.SharedIndexInformer) error {
	observe := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if _, ours := k.node(pod.Spec.NodeName); !ours {
			return
		}
		if err := k.metrics.observe(pod); err != nil {
			klog.Background().Error(err, "test kubelet: metrics", "pod", pod.Namespace+"/"+pod.Name)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				if err := k.metrics.forget(pod.UID); err != nil {
					klog.Background().Error(err, "test kubelet: metrics", "pod", pod.Namespace+"/"+pod.Name)
				}
			}
		},
	})
	if err != nil {
		return fmt.Errorf("test kubelet: metrics handler: %w", err)
	}
	// An empty list to start with: a Prometheus started before the first
	// container runs reads a file, not a missing one.
	k.metrics.mu.Lock()
	defer k.metrics.mu.Unlock()
	return k.metrics.writeTargets()
}
