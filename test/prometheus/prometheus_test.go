package prometheus

import (
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
		RuleFiles: []string{"/r.yaml"},
	})
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
		jobs = append(jobs, sc.JobName+":"+strings.Join(targets, " "))
	}
	if got, want := strings.Join(jobs, "; "), "b:127.0.0.1:1=x 127.0.0.1:3=; rollplan:127.0.0.1:2="; got != want {
		t.Errorf("jobs %q, want %q", got, want)
	}
	if _, err := config(Config{Targets: []Target{{}}}); err == nil {
		t.Error("a target without an address: no error")
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
