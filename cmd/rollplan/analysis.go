package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/analysis"
	"github.com/rollplan/rollplan/planner/facts"
)

// loadAnalysisResults reads --analysis-results (nil without it). A workload
// key that names none of the planned workloads is an error: a typo would
// leave every gate pending without a word.
func (f *planFlags) loadAnalysisResults(rollouts []*facts.Rollout) (*facts.AnalysisResults, error) {
	if f.analysisResults == "" {
		return nil, nil
	}
	b, err := os.ReadFile(f.analysisResults)
	if err != nil {
		return nil, fmt.Errorf("--analysis-results: %w", err)
	}
	res, err := facts.ParseAnalysisResults("--analysis-results "+f.analysisResults, b)
	if err != nil {
		return nil, err
	}
	planned := map[string]bool{}
	var names []string
	for _, r := range rollouts {
		k := r.Workload.Kind + "/" + r.Workload.Namespace + "/" + r.Workload.Name
		planned[k] = true
		names = append(names, k)
	}
	keys := make([]string, 0, len(res.Workloads))
	for k := range res.Workloads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !planned[k] {
			return nil, fmt.Errorf("--analysis-results %s: workloads[%s]: no such workload is planned (planned: %s)", f.analysisResults, k, strings.Join(names, ", "))
		}
	}
	return res, nil
}

// analysisConfigHelp is --analysis-config's help, on apply, undo and
// controller.
const analysisConfigHelp = "the measurement providers of the policies' analysis gates (YAML: providers: {NAME: {type: prometheus|web, address, bearerTokenFile, basicAuth, tls, headers, timeout}}; a measurement names one by its options, else by its provider); none: every measurement is an error, so a gate is inconclusive, never passed"

// loadAnalysisConfig reads --analysis-config (nil without it).
func loadAnalysisConfig(path string) (*analysis.Resolver, error) {
	if path == "" {
		return nil, nil
	}
	r, err := analysis.LoadConfig(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--analysis-config: %w", err)}
	}
	return r, nil
}

// controllerAnalysisConfig is the controller's --analysis-config: as
// loadAnalysisConfig, except that a file that does not exist means no
// providers, said in the log. The manifests always pass the flag and mount
// the ConfigMap holding the file optionally, so that an install without
// analysis gates needs nothing and one with them needs only the ConfigMap.
func controllerAnalysisConfig(path string, log *slog.Logger) (*analysis.Resolver, error) {
	if path != "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			log.Warn("no analysis config: running without measurement providers; a policy's analysis gate is inconclusive, then halts, never passes",
				"file", path, "hint", "the manifests mount it from the ConfigMap rollplan-analysis, key analysis.yaml; the controller reads it at start")
			return nil, nil
		}
	}
	return loadAnalysisConfig(path)
}
