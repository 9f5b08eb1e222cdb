package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/controller"
	"github.com/rollplan/rollplan/gate"
	promtest "github.com/rollplan/rollplan/test/prometheus"
)

var update = flag.Bool("update", false, "rewrite "+PrometheusRuleFile+" from "+RulesFile)

// promtool runs Debian's promtool; it returns its output and fails the
// test unless it exits 0.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtest.Binary(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The rule file is what Prometheus loads: promtool checks it as Prometheus
// reads it (YAML, PromQL, templates) and finds every alert.
func TestRulesPromtool(t *testing.T) {
	out := promtool(t, "check", "rules", RulesFile)
	alerts, err := Alerts(Rules)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(alerts)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules:\n%s\nwant %q", out, want)
	}
}

// Each alert at its real thresholds and for: durations, on made-up series
// (testdata/alerts_test.yaml): it fires where it should, after its for:,
// with its annotations rendered, and not beside it.
func TestRulesUnit(t *testing.T) {
	out := promtool(t, "test", "rules", filepath.Join("testdata", "alerts_test.yaml"))
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
	// Every alert has its unit test.
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := Alerts(Rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !bytes.Contains(tests, []byte("alertname: "+a.Name+"\n")) {
			t.Errorf("alert %s: no test in testdata/alerts_test.yaml", a.Name)
		}
	}
}

// Every alert says how bad it is and what to read, and docs/monitoring.md
// has its section (the anchor its description links).
func TestAlertsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := Alerts(Rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts")
	}
	for _, a := range alerts {
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", a.Name, s)
		}
		if a.Annotations["summary"] == "" {
			t.Errorf("alert %s: no summary", a.Name)
		}
		anchor := "docs/monitoring.md#" + strings.ToLower(a.Name)
		if !strings.Contains(a.Annotations["description"], anchor) {
			t.Errorf("alert %s: the description does not link %s", a.Name, anchor)
		}
		if !bytes.Contains(doc, []byte("\n### "+a.Name+"\n")) {
			t.Errorf("alert %s: no section \"### %s\" in docs/monitoring.md", a.Name, a.Name)
		}
	}
}

// The PrometheusRule is the rule file's groups, as generated.
func TestPrometheusRule(t *testing.T) {
	got, err := PrometheusRule(Rules, "rollplan-system")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(PrometheusRuleFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(PrometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what %s generates: run go test ./deploy/monitoring -run TestPrometheusRule -update", PrometheusRuleFile, RulesFile)
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(got, &obj); err != nil {
		t.Fatal(err)
	}
	alerts, err := Alerts(Rules)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, g := range obj.Spec.Groups {
		for _, r := range g.Rules {
			if n >= len(alerts) || r.Alert != alerts[n].Name || r.Expr != alerts[n].Expr || r.For != alerts[n].For ||
				!maps.Equal(r.Labels, alerts[n].Labels) || !maps.Equal(r.Annotations, alerts[n].Annotations) {
				t.Errorf("PrometheusRule rule %d: %s %q for %q; want the rule file's", n, r.Alert, r.Expr, r.For)
			}
			n++
		}
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" || obj.Metadata.Name != "rollplan" || obj.Metadata.Namespace != "rollplan-system" || n != len(alerts) {
		t.Errorf("%s %s with %d rules, want a monitoring.coreos.com/v1 PrometheusRule with %d", obj.APIVersion, obj.Kind, n, len(alerts))
	}
	if _, err := PrometheusRule([]byte("groups: []\n"), "x"); err == nil {
		t.Error("a rule file without groups: no error")
	}
}

// DashboardVars are values of the dashboard's Grafana variables that make
// its queries PromQL that Prometheus evaluates.
var DashboardVars = map[string]string{"namespace": ".*", "__rate_interval": "1m", "datasource": "prometheus"}

// The dashboard is a Grafana dashboard whose every query is PromQL: each
// is checked by promtool as a recording rule, Prometheus's own parser.
func TestDashboard(t *testing.T) {
	var d struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(Dashboard))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", DashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want all three", d.UID, d.Title, d.SchemaVersion)
	}
	if len(d.Templating.List) == 0 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" {
		t.Errorf("templating %+v: want a datasource variable first", d.Templating.List)
	}
	ids := map[int]bool{}
	var targets int
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside Grafana's 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: want a title and targets", p.ID, p.Title)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: target %q: want a unique refId and an expression", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			targets++
		}
	}
	qs, err := DashboardQueries(Dashboard, DashboardVars)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != targets+1 {
		t.Errorf("%d queries, want the %d targets and the namespace variable's", len(qs), targets)
	}
	// Every query as a recording rule: promtool parses each as PromQL.
	var rules []map[string]string
	for i, q := range qs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("rollplan:dashboard:query%d", i), "expr": q.Expr})
	}
	file, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	exprs := func() string {
		var b strings.Builder
		for _, q := range qs {
			fmt.Fprintf(&b, "  %s: %s\n", q.Where, q.Expr)
		}
		return b.String()
	}
	out, err := exec.Command(promtest.Binary(t, "promtool"), "check", "rules", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("SUCCESS: %d rules found", len(qs))) {
		t.Errorf("the dashboard's queries are not all PromQL: %v\n%s\nqueries:\n%s", err, out, exprs())
	}
}

func TestDashboardQueries(t *testing.T) {
	d := []byte(`{"templating": {"list": [
		{"name": "ds", "type": "datasource", "query": "prometheus"},
		{"name": "ns", "type": "query", "query": {"query": "label_values(up{job=\"x\"}, namespace)"}},
		{"name": "old", "type": "query", "query": "label_values(foo, bar)"}]},
	  "panels": [
		{"title": "a", "targets": [{"refId": "A", "expr": "rate(x{ns=~\"$ns\"}[$__rate_interval])"}]},
		{"type": "row", "title": "r", "panels": [{"title": "b", "targets": [{"refId": "B", "expr": "y{ns=~\"${ns}\"}"}]}]}]}`)
	got, err := DashboardQueries(d, map[string]string{"ns": "prod", "__rate_interval": "2m"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{{"variable ns", `up{job="x"}`}, {"variable old", "foo"}, {"a A", `rate(x{ns=~"prod"}[2m])`}, {"b B", `y{ns=~"prod"}`}}
	if !slices.Equal(got, want) {
		t.Errorf("queries %q, want %q", got, want)
	}
	if _, err := DashboardQueries(d, map[string]string{"ns": "prod"}); err == nil || !strings.Contains(err.Error(), "a A: $__rate_interval") {
		t.Errorf("a variable without a value: error %v, want it named", err)
	}
}

// metricName is a name of rollplan's (or its work queue's) in PromQL.
var metricName = regexp.MustCompile(`\b(?:rollplan|workqueue)_[a-z0-9_]+\b`)

// Every metric the rules and the dashboard name is one that rollplan's
// controller or gate registers (a histogram's _bucket, _sum and _count
// series included): a renamed metric fails here, not in a silent panel or
// an alert that can never fire.
func TestMetricsExist(t *testing.T) {
	known := map[string]bool{}
	reg := &describer{}
	controller.NewMetrics(reg)
	gate.NewMetrics(reg)
	for _, d := range reg.descs {
		m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			known[m[1]+suffix] = true
		}
	}
	alerts, err := Alerts(Rules)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := DashboardQueries(Dashboard, DashboardVars)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []Query
	for _, a := range alerts {
		exprs = append(exprs, Query{Where: "alert " + a.Name, Expr: a.Expr})
	}
	exprs = append(exprs, qs...)
	for _, q := range exprs {
		names := metricName.FindAllString(q.Expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: names no rollplan metric: %s", q.Where, q.Expr)
		}
		for _, n := range names {
			if !known[n] {
				t.Errorf("%s: metric %s: rollplan registers no such metric", q.Where, n)
			}
		}
	}
}

// describer collects the descriptions of what is registered on it.
type describer struct{ descs []*prometheus.Desc }

func (r *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 100)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		r.descs = append(r.descs, d)
	}
	return nil
}

func (r *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *describer) Unregister(prometheus.Collector) bool { return false }

// `kubectl apply -k deploy/monitoring` brings the PrometheusRule and the
// dashboard's ConfigMap: kubectl's own kustomize builds the base (the
// kubectl of the control-plane binaries; skipped without them).
func TestKustomization(t *testing.T) {
	bin := os.Getenv("ROLLPLAN_CLUSTER_BIN")
	if bin == "" {
		t.Skip("ROLLPLAN_CLUSTER_BIN is not set: no kubectl to build the kustomization with (make test-cluster sets it)")
	}
	kubectls, _ := filepath.Glob(filepath.Join(bin, "v*", "kubectl"))
	if len(kubectls) == 0 {
		t.Skipf("no kubectl under %s", bin)
	}
	out, err := exec.Command(kubectls[0], "kustomize", ".").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/monitoring: %v", err)
	}
	var kinds []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, obj.Kind+"/"+obj.Metadata.Name)
		if obj.Metadata.Namespace != "rollplan-system" {
			t.Errorf("%s %s in namespace %q, want rollplan-system", obj.Kind, obj.Metadata.Name, obj.Metadata.Namespace)
		}
		if obj.Kind == "ConfigMap" && (obj.Data[DashboardFile] != string(Dashboard) || obj.Metadata.Labels["grafana_dashboard"] != "1") {
			t.Errorf("ConfigMap %s: want the dashboard as %s and the label grafana_dashboard=1 (labels %v)", obj.Metadata.Name, DashboardFile, obj.Metadata.Labels)
		}
	}
	slices.Sort(kinds)
	if want := []string{"ConfigMap/rollplan-dashboard", "PrometheusRule/rollplan"}; !slices.Equal(kinds, want) {
		t.Errorf("kubectl kustomize: %v, want %v", kinds, want)
	}
}
