package prometheus

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/yaml"
)

func TestConfig(t *testing.T) {
	got, err := config(Config{
		Targets: []Target{
			{Addr: "127.0.0.1:1", Labels: map[string]string{"job": "b", "namespace": "x"}},
			{Addr: "127.0.0.1:2"},
			{Addr: "127.0.0.1:3", Labels: map[string]string{"job": "b"}},
		},
		Discovered: []string{"pods"},
		RuleFiles:  []string{"/r.yaml"},
	}, "/sd")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Global        map[string]string `json:"global"`
		RuleFiles     []string          `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string          `json:"targets"`
				Labels  map[string]string `json:"labels"`
			} `json:"static_configs"`
			FileSDConfigs []struct {
				Files           []string `json:"files"`
				RefreshInterval string   `json:"refresh_interval"`
			} `json:"file_sd_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(got, &c); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if c.Global["scrape_interval"] != "1s" || c.Global["evaluation_interval"] != "1s" || len(c.RuleFiles) != 1 || c.RuleFiles[0] != "/r.yaml" {
		t.Errorf("global %v, rule files %v", c.Global, c.RuleFiles)
	}
	// One job per job label, sorted; the job label is the job's name,
	// not a target label.
	var jobs []string
	for _, sc := range c.ScrapeConfigs {
		var targets []string
		for _, st := range sc.StaticConfigs {
			targets = append(targets, strings.Join(st.Targets, ",")+"="+st.Labels["namespace"])
			if _, ok := st.Labels["job"]; ok {
				t.Errorf("job %s: a target has a job label", sc.JobName)
			}
		}
		for _, sd := range sc.FileSDConfigs {
			targets = append(targets, "file_sd "+strings.Join(sd.Files, ",")+" every "+sd.RefreshInterval)
		}
		jobs = append(jobs, sc.JobName+":"+strings.Join(targets, " "))
	}
	if got, want := strings.Join(jobs, "; "), "b:127.0.0.1:1=x 127.0.0.1:3=; pods:file_sd /sd/pods.json every 1s; rollplan:127.0.0.1:2="; got != want {
		t.Errorf("jobs %q, want %q", got, want)
	}
	if _, err := config(Config{Targets: []Target{{}}}, "/sd"); err == nil {
		t.Error("a target without an address: no error")
	}
	if _, err := config(Config{Targets: []Target{{Addr: "127.0.0.1:1", Labels: map[string]string{"job": "pods"}}}, Discovered: []string{"pods"}}, "/sd"); err == nil {
		t.Error("a job both static and discovered: no error")
	}
}

// The server scrapes a target, answers queries, says why an expression
// does not parse, and evaluates the rules it loads.
func TestServer(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_things_total", Help: "Things."}, []string{"kind"})
	reg.MustRegister(c)
	c.WithLabelValues("a").Add(3)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: test
    rules:
      - alert: ThingsHappened
        expr: test_things_total > 0
        for: 1h
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Start(t, Config{Targets: []Target{{Addr: strings.TrimPrefix(srv.URL, "http://"), Labels: map[string]string{"job": "things", "namespace": "ns"}}}, RuleFiles: []string{rules}})

	v, err := s.Wait(`test_things_total{job="things", namespace="ns"}`, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].Value != 3 || v[0].Labels["kind"] != "a" {
		t.Errorf("scraped %v, want one series kind=a at 3", v)
	}
	if v, err := s.Query("scalar(sum(test_things_total)) * 2"); err != nil || len(v) != 1 || v[0].Value != 6 {
		t.Errorf("scalar query: %v, %v; want 6", v, err)
	}
	if v, err := s.Query("absent_metric_total"); err != nil || len(v) != 0 {
		t.Errorf("a series nobody exposes: %v, %v; want an empty result", v, err)
	}
	if _, err := s.Query("sum(rate(test_things_total[5m])"); err == nil || !strings.Contains(err.Error(), "parse") {
		t.Errorf("an expression with a missing parenthesis: error %v, want a parse error", err)
	}
	// Pending: the expression holds, its for: has not passed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		alerts, err := s.Alerts()
		if err != nil {
			t.Fatal(err)
		}
		if len(alerts) == 1 && alerts[0].Labels["alertname"] == "ThingsHappened" && alerts[0].State == "pending" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alerts %+v, want ThingsHappened pending", alerts)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := s.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 1 || r[0].Name != "ThingsHappened" || r[0].Health != "ok" {
		t.Errorf("rules %+v, want ThingsHappened evaluated ok", r)
	}
}

// A discovered job follows SetTargets: targets added are scraped with
// their labels, a target removed is no longer.
func TestDiscovered(t *testing.T) {
	var addrs []string
	for range 2 {
		reg := prometheus.NewRegistry()
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	s := Start(t, Config{Discovered: []string{"pods"}})
	if err := s.SetTargets("other", nil); err == nil || !strings.Contains(err.Error(), `job "other" is not discovered`) {
		t.Errorf("SetTargets of a job not discovered: %v", err)
	}
	// The job's file, for a writer of its own, holds its targets: none yet.
	if b, err := os.ReadFile(s.TargetsFile("pods")); err != nil || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("TargetsFile(pods) %s: %q, %v; want an empty list", s.TargetsFile("pods"), b, err)
	}
	if f := s.TargetsFile("other"); f != "" {
		t.Errorf("TargetsFile of a job not discovered: %q, want none", f)
	}
	set := func(n int) {
		t.Helper()
		var tg []Target
		for i, a := range addrs[:n] {
			tg = append(tg, Target{Addr: a, Labels: map[string]string{"namespace": "ns", "pod": fmt.Sprintf("p-%d", i)}})
		}
		if err := s.SetTargets("pods", tg); err != nil {
			t.Fatal(err)
		}
	}
	set(2)
	if _, err := s.Wait(`count(up{job="pods",namespace="ns",pod=~"p-0|p-1"} == 1) == 2`, 20*time.Second); err != nil {
		t.Fatalf("two targets set: %v", err)
	}
	set(1)
	if _, err := s.Wait(`count(up{job="pods"}) == 1 and count(up{job="pods",pod="p-0"}) == 1`, 20*time.Second); err != nil {
		t.Fatalf("one target left: %v", err)
	}
}
