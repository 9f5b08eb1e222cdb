package harness

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// LogLines decodes a rollplan process's JSON log (slog's JSON handler),
// one object a line; other lines are skipped.
func LogLines(s string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(s, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// GateLog reads the analysis gates of a workload (NAME, any kind and
// namespace) from a controller's log lines since a time: its soak and
// verdict lines as "soak:WAVE" and "VERDICT:WAVE", in order, and its
// measured values as "wave WAVE MEASUREMENT=VALUE" (with "(ERROR)").
func GateLog(lines []map[string]any, name string, since time.Time) (gates, values []string) {
	for _, l := range lines {
		wl, _ := l["workload"].(string)
		if !strings.HasSuffix(wl, "/"+name) || LogTime(l).Before(since) {
			continue
		}
		wave, _ := l["wave"].(float64)
		switch {
		case l["msg"] == "soak":
			gates = append(gates, fmt.Sprintf("soak:%d", int(wave)))
		case l["msg"] == "analysis" && l["verdict"] != nil:
			gates = append(gates, fmt.Sprintf("%s:%d", l["verdict"], int(wave)))
		case l["msg"] == "measure":
			v := fmt.Sprintf("wave %d %s=%v", int(wave), l["measurement"], l["value"])
			if e, _ := l["error"].(string); e != "" {
				v += " (" + e + ")"
			}
			values = append(values, v)
		}
	}
	return gates, values
}

// LogTime is a log line's time (zero when it has none).
func LogTime(l map[string]any) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
	return at
}
