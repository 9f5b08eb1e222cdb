// Package monitoring holds rollplan's Prometheus alerting rules
// (rollplan-alerts.yaml, a plain rule file) and Grafana dashboard
// (rollplan-dashboard.json), and renders the rules as the Prometheus
// Operator's PrometheusRule (rollplan-prometheusrule.yaml, generated: the
// rule file is the one source). kustomization.yaml here is a kustomize base
// of its own, for clusters that run the Prometheus Operator and Grafana's
// dashboard sidecar; deploy/'s base and `rollplan manifests` leave it out,
// so that installing rollplan needs neither. docs/monitoring.md says what
// each alert means.
package monitoring

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	// RulesFile, DashboardFile and PrometheusRuleFile name the files of
	// this directory.
	RulesFile          = "rollplan-alerts.yaml"
	DashboardFile      = "rollplan-dashboard.json"
	PrometheusRuleFile = "rollplan-prometheusrule.yaml"
)

// Rules is the rule file, as Prometheus loads it.
//
//go:embed rollplan-alerts.yaml
var Rules []byte

// Dashboard is the Grafana dashboard (JSON).
//
//go:embed rollplan-dashboard.json
var Dashboard []byte

// prometheusRuleHeader starts the generated PrometheusRule.
const prometheusRuleHeader = `# Generated from ` + RulesFile + ` by
# go test ./deploy/monitoring -run TestPrometheusRule -update
# Do not edit: edit ` + RulesFile + `, the one source of the rules.
#
# The Prometheus Operator loads the PrometheusRules its Prometheus's
# ruleSelector matches: add the label it selects on (kube-prometheus-stack:
# release: <its release name>) with a kustomize overlay or kubectl label.
`

// PrometheusRule renders rules (a Prometheus rule file) as a
// monitoring.coreos.com/v1 PrometheusRule named rollplan in the namespace
// ns, whose spec is the file's groups.
func PrometheusRule(rules []byte, ns string) ([]byte, error) {
	var file struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(rules, &file); err != nil {
		return nil, fmt.Errorf("rule file: %w", err)
	}
	if len(file.Groups) == 0 {
		return nil, fmt.Errorf("rule file: no groups")
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "rollplan",
			"namespace": ns,
			"labels":    map[string]string{"app.kubernetes.io/name": "rollplan"},
		},
		"spec": map[string]any{"groups": file.Groups},
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append([]byte(prometheusRuleHeader), out...), nil
}

// Alert is one alerting rule of a rule file.
type Alert struct {
	Name string
	Expr string
	// For: how long Expr must hold before the alert fires ("" at once).
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// Alerts lists the alerting rules of a rule file, in order.
func Alerts(rules []byte) ([]Alert, error) {
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(rules, &file); err != nil {
		return nil, fmt.Errorf("rule file: %w", err)
	}
	var out []Alert
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, Alert{Name: r.Alert, Expr: r.Expr, For: r.For, Labels: r.Labels, Annotations: r.Annotations})
			}
		}
	}
	return out, nil
}

// Query is one PromQL expression of the dashboard: a panel's target, or a
// template variable's query.
type Query struct {
	// Where: the panel's title and the target's refId, or "variable
	// NAME".
	Where string
	Expr  string
}

// variable is a Grafana variable in an expression: $name or ${name}.
var variable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// labelValues is a query variable's label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// DashboardQueries lists the PromQL expressions of a dashboard, every
// Grafana variable in them replaced by its value in vars (name without
// "$"), so that Prometheus can evaluate them; a query variable
// label_values(SELECTOR, LABEL) gives SELECTOR. A variable vars does not
// name is an error.
func DashboardQueries(dashboard []byte, vars map[string]string) ([]Query, error) {
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []Query
	var missing []string
	add := func(where, expr string) {
		expr = variable.ReplaceAllStringFunc(expr, func(v string) string {
			name := variable.FindStringSubmatch(v)[1]
			val, ok := vars[name]
			if !ok {
				missing = append(missing, where+": $"+name)
				return v
			}
			return val
		})
		out = append(out, Query{Where: where, Expr: expr})
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if m := labelValues.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		add("variable "+v.Name, q)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				add(p.Title+" "+t.RefID, t.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(missing) > 0 {
		return nil, fmt.Errorf("dashboard: variables without a value: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// panel is what DashboardQueries reads of a panel (a row holds panels).
type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}
