package cel

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rollplan/rollplan/planner/facts"
)

// Workload is facts.Workload as CEL sees it (type cel.Workload): the same
// fields, with int-or-percent strategy values as strings so that they
// type-check (CEL has no union type).
type Workload struct {
	Kind                    string            `json:"kind"`
	Namespace               string            `json:"namespace"`
	Name                    string            `json:"name"`
	UID                     string            `json:"uid"`
	Labels                  map[string]string `json:"labels"`
	Annotations             map[string]string `json:"annotations"`
	Replicas                int               `json:"replicas"`
	MinReadySeconds         int               `json:"minReadySeconds"`
	Strategy                Strategy          `json:"strategy"`
	PodManagementPolicy     string            `json:"podManagementPolicy"`
	ProgressDeadlineSeconds int               `json:"progressDeadlineSeconds"`
	Paused                  bool              `json:"paused"`
	Managed                 bool              `json:"managed"`
	PodUpdatePolicy         string            `json:"podUpdatePolicy"`
	CurrentRevision         string            `json:"currentRevision"`
	UpdateRevision          string            `json:"updateRevision"`
	OrdinalsStart           int               `json:"ordinalsStart"`
	Policy                  string            `json:"policy"`
}

// Strategy is facts.Strategy for CEL. MaxSurge and MaxUnavailable hold the
// value as written: "" when unset, "3" for an integer, "25%" for a percent.
type Strategy struct {
	Type                 string `json:"type"`
	MaxSurge             string `json:"maxSurge"`
	MaxUnavailable       string `json:"maxUnavailable"`
	MaxUnavailableSource string `json:"maxUnavailableSource"`
	MaxSurgeSource       string `json:"maxSurgeSource"`
	Partition            int    `json:"partition"`
	PartitionSource      string `json:"partitionSource"`
	RollingUpdateSet     bool   `json:"rollingUpdateSet"`
}

func workloadView(w *facts.Workload) (*Workload, error) {
	surge, err := intOrPercent(w.Strategy.MaxSurge)
	if err != nil {
		return nil, fmt.Errorf("strategy.maxSurge: %w", err)
	}
	unavailable, err := intOrPercent(w.Strategy.MaxUnavailable)
	if err != nil {
		return nil, fmt.Errorf("strategy.maxUnavailable: %w", err)
	}
	return &Workload{
		Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID,
		Labels: w.Labels, Annotations: w.Annotations,
		Replicas: w.Replicas, MinReadySeconds: w.MinReadySeconds,
		Strategy: Strategy{
			Type: w.Strategy.Type, MaxSurge: surge, MaxUnavailable: unavailable,
			MaxUnavailableSource: w.Strategy.MaxUnavailableSource, MaxSurgeSource: w.Strategy.MaxSurgeSource,
			Partition: w.Strategy.Partition, PartitionSource: w.Strategy.PartitionSource,
			RollingUpdateSet: w.Strategy.RollingUpdateSet,
		},
		PodManagementPolicy: w.PodManagementPolicy, ProgressDeadlineSeconds: w.ProgressDeadlineSeconds,
		Paused: w.Paused, Managed: w.Managed, PodUpdatePolicy: w.PodUpdatePolicy,
		CurrentRevision: w.CurrentRevision, UpdateRevision: w.UpdateRevision,
		OrdinalsStart: w.OrdinalsStart, Policy: w.Policy,
	}, nil
}

// intOrPercent renders a validated facts value (nil, an integer, or "N%").
func intOrPercent(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case int:
		return strconv.Itoa(x), nil
	case int32:
		return strconv.Itoa(int(x)), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10), nil
		}
	case string:
		return x, nil
	}
	return "", fmt.Errorf("want an integer or a percent, got %v (%T)", v, v)
}

func metav1LabelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s)
}
