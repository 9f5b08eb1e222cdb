package cel

import (
	"github.com/rollplan/rollplan/planner/facts"
)

// The fields of pod, workload and workload.strategy by JSON name, read
// without reflection (fields_test.go checks them against the structs).
// The pod's fields, read directly by order keys.
var (
	podBools = map[string]func(*facts.Pod) bool{
		"updated":     func(p *facts.Pod) bool { return p.Updated },
		"scheduled":   func(p *facts.Pod) bool { return p.Scheduled },
		"ready":       func(p *facts.Pod) bool { return p.Ready },
		"available":   func(p *facts.Pod) bool { return p.Available },
		"terminating": func(p *facts.Pod) bool { return p.Terminating },
		"terminal":    func(p *facts.Pod) bool { return p.Terminal },
	}
	podInts = map[string]func(*facts.Pod) int64{
		"ordinal":            func(p *facts.Pod) int64 { return int64(p.Ordinal) },
		"index":              func(p *facts.Pod) int64 { return int64(p.Index) },
		"readySeconds":       func(p *facts.Pod) int64 { return p.ReadySeconds },
		"unavailableSeconds": func(p *facts.Pod) int64 { return p.UnavailableSeconds },
		"restarts":           func(p *facts.Pod) int64 { return int64(p.Restarts) },
		"sidecarRestarts":    func(p *facts.Pod) int64 { return int64(p.SidecarRestarts) },
		"deletionCost":       func(p *facts.Pod) int64 { return int64(p.DeletionCost) },
		"colocated":          func(p *facts.Pod) int64 { return int64(p.Colocated) },
		"readyBucket":        func(p *facts.Pod) int64 { return int64(p.ReadyBucket) },
		"createdBucket":      func(p *facts.Pod) int64 { return int64(p.CreatedBucket) },
	}
	podStrs = map[string]func(*facts.Pod) string{
		"name":     func(p *facts.Pod) string { return p.Name },
		"uid":      func(p *facts.Pod) string { return p.UID },
		"revision": func(p *facts.Pod) string { return p.Revision },
		"node":     func(p *facts.Pod) string { return p.Node },
		"zone":     func(p *facts.Pod) string { return p.Zone },
		"phase":    func(p *facts.Pod) string { return p.Phase },
		"owner":    func(p *facts.Pod) string { return p.Owner },
	}
)

func podFields[G, F any](get map[string]G, wrap func(G) F) map[string]F {
	out := make(map[string]F, len(get))
	for name, g := range get {
		out[name] = wrap(g)
	}
	return out
}

var (
	boolFields = map[string]map[string]bfn{
		"pod": podFields(podBools, podBool),
		"workload": {
			"paused":  wlBool(func(w *Workload) bool { return w.Paused }),
			"managed": wlBool(func(w *Workload) bool { return w.Managed }),
		},
		"strategy": {
			"rollingUpdateSet": wlBool(func(w *Workload) bool { return w.Strategy.RollingUpdateSet }),
		},
		"change": {
			"inPlace": func(a *activation) (bool, bool) {
				if a.change == nil {
					return false, false
				}
				return a.change.InPlace, true
			},
		},
	}
	intFields = map[string]map[string]ifn{
		"pod": podFields(podInts, podInt),
		"workload": {
			"replicas":                wlInt(func(w *Workload) int64 { return int64(w.Replicas) }),
			"minReadySeconds":         wlInt(func(w *Workload) int64 { return int64(w.MinReadySeconds) }),
			"progressDeadlineSeconds": wlInt(func(w *Workload) int64 { return int64(w.ProgressDeadlineSeconds) }),
			"ordinalsStart":           wlInt(func(w *Workload) int64 { return int64(w.OrdinalsStart) }),
		},
		"strategy": {
			"partition": wlInt(func(w *Workload) int64 { return int64(w.Strategy.Partition) }),
		},
	}
	strFields = map[string]map[string]sfn{
		"pod": podFields(podStrs, podStr),
		"workload": {
			"kind":                wlStr(func(w *Workload) string { return w.Kind }),
			"namespace":           wlStr(func(w *Workload) string { return w.Namespace }),
			"name":                wlStr(func(w *Workload) string { return w.Name }),
			"uid":                 wlStr(func(w *Workload) string { return w.UID }),
			"podManagementPolicy": wlStr(func(w *Workload) string { return w.PodManagementPolicy }),
			"podUpdatePolicy":     wlStr(func(w *Workload) string { return w.PodUpdatePolicy }),
			"currentRevision":     wlStr(func(w *Workload) string { return w.CurrentRevision }),
			"updateRevision":      wlStr(func(w *Workload) string { return w.UpdateRevision }),
			"policy":              wlStr(func(w *Workload) string { return w.Policy }),
		},
		"strategy": {
			"type":                 wlStr(func(w *Workload) string { return w.Strategy.Type }),
			"maxSurge":             wlStr(func(w *Workload) string { return w.Strategy.MaxSurge }),
			"maxUnavailable":       wlStr(func(w *Workload) string { return w.Strategy.MaxUnavailable }),
			"maxUnavailableSource": wlStr(func(w *Workload) string { return w.Strategy.MaxUnavailableSource }),
			"maxSurgeSource":       wlStr(func(w *Workload) string { return w.Strategy.MaxSurgeSource }),
			"partitionSource":      wlStr(func(w *Workload) string { return w.Strategy.PartitionSource }),
		},
		"change": {
			"path":   changeStr(func(c *facts.Change) string { return c.Path }),
			"class":  changeStr(func(c *facts.Change) string { return c.Class }),
			"detail": changeStr(func(c *facts.Change) string { return c.Detail }),
		},
	}
	mapFields = map[string]map[string]mfn{
		"pod": {
			"labels": func(a *activation) (map[string]string, bool) {
				if a.pod == nil {
					return nil, false
				}
				return a.pod.Labels, true
			},
		},
		"workload": {
			"labels":      func(a *activation) (map[string]string, bool) { return a.b.workload.Labels, true },
			"annotations": func(a *activation) (map[string]string, bool) { return a.b.workload.Annotations, true },
		},
	}
)

// A pod field read without a pod (a per-workload evaluation) is cel-go's
// error to report.
func podBool(f func(*facts.Pod) bool) bfn {
	return func(a *activation) (bool, bool) {
		if a.pod == nil {
			return false, false
		}
		return f(a.pod), true
	}
}

func podInt(f func(*facts.Pod) int64) ifn {
	return func(a *activation) (int64, bool) {
		if a.pod == nil {
			return 0, false
		}
		return f(a.pod), true
	}
}

func podStr(f func(*facts.Pod) string) sfn {
	return func(a *activation) (string, bool) {
		if a.pod == nil {
			return "", false
		}
		s := f(a.pod)
		return s, len(s) <= fastMaxStr
	}
}

func changeStr(f func(*facts.Change) string) sfn {
	return func(a *activation) (string, bool) {
		if a.change == nil {
			return "", false
		}
		v := f(a.change)
		return v, len(v) <= fastMaxStr
	}
}

func wlBool(f func(*Workload) bool) bfn {
	return func(a *activation) (bool, bool) { return f(a.b.workload), true }
}

func wlInt(f func(*Workload) int64) ifn {
	return func(a *activation) (int64, bool) { return f(a.b.workload), true }
}

func wlStr(f func(*Workload) string) sfn {
	return func(a *activation) (string, bool) {
		s := f(a.b.workload)
		return s, len(s) <= fastMaxStr
	}
}
