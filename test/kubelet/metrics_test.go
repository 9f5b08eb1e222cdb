package kubelet

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/test/prometheus"
)

// metricsTags: the images' traffic in these tests, by tag.
var metricsTags = map[string]Behavior{
	"3.0":  {ErrorRatio: 0.3},
	"slow": {Latency: 400 * time.Millisecond},
}

// runningPod is a pod of one container "app" as the kubelet reports it:
// running as containerID (none: waiting), Ready or not.
func runningPod(name, image, containerID string, ready bool) *corev1.Pod {
	p := testobj.Pod("ns", name).UID(types.UID("uid-" + name)).Node("n1").Image(image).Obj()
	cs := corev1.ContainerStatus{Name: "app", Image: image, ContainerID: containerID, Ready: ready}
	if containerID != "" {
		cs.State.Running = &corev1.ContainerStateRunning{}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// fakeClock is the exporters' clock in a test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// scrape reads an exporter's /metrics: its status code, and the
// families when 200.
func scrape(t *testing.T, addr string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, fams
}

// requests: http_requests_total by code, and the histogram's count and
// mean.
func requests(t *testing.T, fams map[string]*dto.MetricFamily) (map[string]float64, uint64, float64) {
	t.Helper()
	codes := map[string]float64{}
	for _, m := range fams["http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" {
				codes[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	h := fams["http_request_duration_seconds"].GetMetric()
	if len(h) != 1 {
		t.Fatalf("http_request_duration_seconds: %d series, want 1", len(h))
	}
	n := h[0].GetHistogram().GetSampleCount()
	mean := 0.0
	if n > 0 {
		mean = h[0].GetHistogram().GetSampleSum() / float64(n)
	}
	return codes, n, mean
}

// The exporters' traffic, by image and state, on a fake clock: a Ready
// container serves 10 requests a second, its tag's share answered 500,
// durations around its latency; not Ready, it serves none; a restart
// (new container ID) starts the counts again under the new image; not
// running, /metrics answers 503; the pod gone, its target goes.
func TestExporters(t *testing.T) {
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.json")
	k := New(nil, Options{Tags: metricsTags, Metrics: &Metrics{TargetsFile: targets}})
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	k.metrics.now = clock.now
	t.Cleanup(k.metrics.close)

	observe := func(p *corev1.Pod) {
		t.Helper()
		if err := k.metrics.observe(p); err != nil {
			t.Fatal(err)
		}
	}
	addr := func(pod string) string {
		t.Helper()
		for _, tg := range k.Targets() {
			if tg.Labels["pod"] == pod {
				return tg.Addr
			}
		}
		t.Fatalf("no target for pod %s: %v", pod, k.Targets())
		return ""
	}
	for _, p := range []*corev1.Pod{
		runningPod("good", "r/app:2.0", "c1", true),
		runningPod("bad", "r/app:3.0", "c1", true),
		runningPod("slow", "r/app:slow", "c1", true),
		runningPod("unready", "r/app:3.0", "c1", false),
		runningPod("waiting", "r/app:2.0", "", false), // never ran: no target
	} {
		observe(p)
	}
	clock.add(10 * time.Second)

	for _, tc := range []struct {
		pod            string
		total, errors  float64
		meanLo, meanHi float64
	}{
		{"good", 100, 0, 0.019, 0.021},
		{"bad", 100, 30, 0.019, 0.021},
		{"slow", 100, 0, 0.38, 0.42},
		{"unready", 0, 0, 0, 0},
	} {
		t.Run(tc.pod, func(t *testing.T) {
			code, fams := scrape(t, addr(tc.pod))
			if code != http.StatusOK {
				t.Fatalf("/metrics: %d", code)
			}
			codes, n, mean := requests(t, fams)
			// Both codes from the start: a healthy pod's error rate is 0,
			// not absent.
			if _, ok := codes["500"]; !ok {
				t.Errorf("no code=500 series: %v", codes)
			}
			if got := codes["200"] + codes["500"]; got != tc.total || codes["500"] != tc.errors || float64(n) != tc.total {
				t.Errorf("after 10s: %v requests (histogram %d), want %v with %v answered 500", codes, n, tc.total, tc.errors)
			}
			if n > 0 && (mean < tc.meanLo || mean > tc.meanHi) {
				t.Errorf("mean duration %.4fs, want %.3f-%.3f", mean, tc.meanLo, tc.meanHi)
			}
		})
	}

	raw, err := os.ReadFile(targets)
	if err != nil {
		t.Fatal(err)
	}
	var groups []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(raw, &groups); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	var got []string
	for _, g := range groups {
		got = append(got, fmt.Sprintf("%s/%s/%s@%d", g.Labels["namespace"], g.Labels["pod"], g.Labels["container"], len(g.Targets)))
	}
	if want := "ns/bad/app@1 ns/good/app@1 ns/slow/app@1 ns/unready/app@1"; strings.Join(got, " ") != want {
		t.Errorf("targets file: %v, want %s", got, want)
	}

	t.Run("an in-place restart starts the counts again with the new image", func(t *testing.T) {
		bad := addr("bad")
		restarted := runningPod("bad", "r/app:2.0", "c2", false)
		observe(restarted)
		clock.add(time.Second) // restarting: not Ready, no traffic
		restarted = runningPod("bad", "r/app:2.0", "c2", true)
		observe(restarted)
		clock.add(5 * time.Second)
		if addr("bad") != bad {
			t.Errorf("the restarted container's exporter moved from %s to %s", bad, addr("bad"))
		}
		_, fams := scrape(t, bad)
		if codes, _, _ := requests(t, fams); codes["200"] != 50 || codes["500"] != 0 {
			t.Errorf("5s after the restart on 2.0: %v, want 50 answered 200, none 500", codes)
		}
	})
	t.Run("a container that does not run answers 503", func(t *testing.T) {
		observe(runningPod("good", "r/app:2.0", "", false))
		if code, _ := scrape(t, addr("good")); code != http.StatusServiceUnavailable {
			t.Errorf("/metrics: %d, want 503", code)
		}
	})
	t.Run("a pod gone loses its target", func(t *testing.T) {
		slow := addr("slow")
		if err := k.metrics.forget("uid-slow"); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(targets)
		if strings.Contains(string(raw), `"slow"`) || strings.Contains(string(raw), slow) {
			t.Errorf("targets file still names slow:\n%s", raw)
		}
		if _, err := http.Get("http://" + slow + "/metrics"); err == nil {
			t.Errorf("slow's exporter still answers at %s", slow)
		}
	})
}

// A real Prometheus finds the exporters through the targets file and
// reads, over the pods labelled as kubernetes_sd would label them, the
// 3.0 pod's error ratio at 0.3 and the 2.0 pod's at 0.
func TestExportersScraped(t *testing.T) {
	prom := prometheus.Start(t, prometheus.Config{Discovered: []string{"pods"}})
	k := New(nil, Options{Tags: metricsTags, Metrics: &Metrics{TargetsFile: prom.TargetsFile("pods")}})
	t.Cleanup(k.metrics.close)
	// Written after Prometheus started: it must see the file change.
	for _, p := range []*corev1.Pod{runningPod("good", "r/app:2.0", "c1", true), runningPod("bad", "r/app:3.0", "c1", true)} {
		if err := k.metrics.observe(p); err != nil {
			t.Fatal(err)
		}
	}
	ratio := func(pod string) string {
		return fmt.Sprintf(`sum(rate(http_requests_total{job="pods",namespace="ns",pod=%q,container="app",code=~"5.."}[3s])) / sum(rate(http_requests_total{job="pods",namespace="ns",pod=%q}[3s]))`, pod, pod)
	}
	// Both pods scraped for longer than the 3s window: a younger series'
	// rate is extrapolated to less than the window, and reads low.
	if _, err := prom.Wait(`count(count_over_time(up{job="pods"}[5s]) >= 5) == 2`, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pod  string
		want float64
	}{{"bad", 0.3}, {"good", 0}} {
		v, err := prom.Wait(ratio(tc.pod), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 1 || math.Abs(v[0].Value-tc.want) > 0.05 {
			t.Errorf("%s: error ratio %v, want %v ± 0.05", tc.pod, v, tc.want)
		}
	}
	v, err := prom.Query(`sum by (pod) (rate(http_requests_total{job="pods"}[3s]))`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v {
		if math.Abs(s.Value-DefaultRequestRate) > 2 {
			t.Errorf("%s: %.1f requests/s, want about %d", s.Labels["pod"], s.Value, DefaultRequestRate)
		}
	}
	if len(v) != 2 {
		t.Errorf("request rates of %d pods, want 2: %v", len(v), v)
	}
}
