package analysis

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/rollplan/rollplan/planner/engine"
)

// RenderQuery renders m's Query over t with rollplan's one template
// renderer (engine.RenderTemplate): for Prometheus with every value
// escaped for a double-quoted PromQL string (namespace="{{.Namespace}}",
// pod=~"{{.PodRegex}}"), for the web provider escaped for a URL query. A
// Rendered query (rollplan's plan renders every gate's queries) is
// returned as it is.
func RenderQuery(m Measurement, t Target) (string, error) {
	if m.Rendered {
		return m.Query, nil
	}
	out, err := engine.RenderTemplate("query", m.Query, queryTarget(m, t), engine.EscapeFor(m.Provider))
	if err != nil {
		return "", fmt.Errorf("measurement %q: %w", m.Name, err)
	}
	return out, nil
}

// renderBody renders a web measurement's Body, values escaped for a JSON
// string.
func renderBody(m Measurement, t Target) (string, error) {
	out, err := engine.RenderTemplate("body", m.Web.Body, queryTarget(m, t), engine.EscapeJSON)
	if err != nil {
		return "", fmt.Errorf("measurement %q: %w", m.Name, err)
	}
	return out, nil
}

// queryTarget is t as the renderer reads it: the pods as a regex
// alternation, each name quoted (none when the wave has no pods, which
// {{.PodRegex}} refuses), and the durations as PromQL writes them (5m).
func queryTarget(m Measurement, t Target) engine.QueryTarget {
	q := engine.QueryTarget{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, Revision: t.Revision, Wave: t.Wave, Pods: t.Pods,
		Window: promDuration(m.Window), Interval: promDuration(m.Interval)}
	quoted := make([]string, len(t.Pods))
	for i, p := range t.Pods {
		quoted[i] = regexp.QuoteMeta(p)
	}
	q.PodRegex = strings.Join(quoted, "|")
	return q
}

func promDuration(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return model.Duration(d).String()
}
