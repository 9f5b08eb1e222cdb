package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	explainpkg "github.com/rollplan/rollplan/planner/explain"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
)

// explainHTML writes the plan of res as the HTML page to path (`explain
// --html FILE`) and prints to stderr a file:// link to the anchor of pod
// arg (POD or NAMESPACE/POD, namespace from -n), which opens the page
// with that pod selected and its explain shown. The link goes to stderr
// so that what explain prints on stdout stays its own.
func explainHTML(stderr io.Writer, path string, res *planned, arg, namespace string) error {
	wi, pi, err := explainpkg.FindPod(res.Result, res.failed, arg, namespace)
	if err != nil {
		return err
	}
	r := res.Details[wi].Facts
	anchor := render.PodAnchor(r.Workload.Namespace, r.Pods[pi].Name)
	p := *res.Plan
	p.Workloads = slices.Clone(p.Workloads)
	plan.WithFailed(&p, res.failedPlans())
	var buf bytes.Buffer
	if err := renderPlan(&buf, render.HTML{}, &p, res.Result); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := os.WriteFile(abs, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--html %s: %w: pass a file in an existing, writable directory", path, err)
	}
	_, err = fmt.Fprintf(stderr, "plan: file://%s#%s\n", abs, anchor)
	return err
}
