// Package scenario reads the golden scenarios of testdata/scenarios the
// way cmd/rollplan plans them, for the tests of the engines and the
// planner: the snapshot, and the flags of its args file (--now, else the
// snapshot's latest time; --feature-gates; --workload; --policy; --change,
// put in the snapshot as plan --change puts it from files), as a planning request (planner/request) whose facts it keeps. The scenarios
// are planned for the newest Kubernetes version whatever their
// --kubernetes-version says: the tests compare engines and the planner on
// the same facts, not with the golden plans.
package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/change"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/request"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// Scenario is one directory of testdata/scenarios.
type Scenario struct {
	Name string
	Dir  string
	// Policies are the --policy paths of its args, relative to the
	// repository root; none means the default strategy.
	Policies []string
	// Rollouts are the facts of its workloads (only --workload's, when
	// the args name one).
	Rollouts []*facts.Rollout
	// Failed are the workloads whose facts cannot be built (a scenario of
	// an invalid workload beside valid ones): rollplan plan reports their
	// errors and plans the Rollouts.
	Failed []*facts.WorkloadError
}

// Load reads the scenario in dir.
func Load(dir string) (*Scenario, error) {
	b, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", dir, err)
	}
	s := &Scenario{Name: filepath.Base(dir), Dir: dir}
	var now time.Time
	gates := map[string]bool{}
	workload := ""
	var changes []string
	var changed []request.Workload
	args := strings.Fields(string(b))
	for i := 0; i < len(args); i++ {
		flag, val, hasVal := strings.Cut(args[i], "=")
		switch flag {
		case "--now", "--feature-gates", "--workload", "--policy", "-n", "--namespace", "--change":
			if !hasVal {
				if i+1 == len(args) {
					return nil, fmt.Errorf("scenario %s: args: %s without a value", dir, flag)
				}
				i++
				val = args[i]
			}
		}
		switch flag {
		case "--now":
			if now, err = time.Parse(time.RFC3339, val); err != nil {
				return nil, fmt.Errorf("scenario %s: args: --now %q: %w", dir, val, err)
			}
		case "--feature-gates":
			for _, kv := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
				if gates[k], err = strconv.ParseBool(v); err != nil {
					return nil, fmt.Errorf("scenario %s: args: --feature-gates %q: %w", dir, kv, err)
				}
			}
		case "--workload":
			workload = val
		case "--policy":
			s.Policies = append(s.Policies, val)
		case "--change":
			// Relative to the repository root, as the scenario's dir is
			// root/testdata/scenarios/NAME.
			changes = append(changes, filepath.Join(dir, "..", "..", "..", val))
		}
	}
	snap, _, err := snapshot.LoadFiles([]string{filepath.Join(dir, "snapshot.yaml")})
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", dir, err)
	}
	if len(changes) > 0 {
		// plan --change: the proposed workloads, defaulted, in place of
		// the snapshot's; only those are planned.
		objs, _, err := change.Read(changes, "")
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", dir, err)
		}
		for _, o := range objs {
			if err := change.Default(o, gates); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", dir, err)
			}
		}
		for _, oc := range change.Apply(snap, objs, change.FromFiles, gates) {
			if oc.Status == change.Replaced {
				changed = append(changed, request.Workload{Kind: oc.Object.Kind, Namespace: oc.Object.Namespace, Name: oc.Object.Name})
			}
		}
	}
	req := &request.Request{Snapshot: snap, Now: now, Cluster: facts.Options{FeatureGates: gates}}
	if workload != "" {
		parts := strings.Split(workload, "/")
		req.Workload = request.Workload{Kind: request.Kind(parts[0]), Name: parts[len(parts)-1], Arg: workload}
		if len(parts) == 3 {
			req.Workload.Namespace = parts[1]
		}
	}
	in, err := req.Facts()
	if err != nil {
		return nil, fmt.Errorf("scenario %s: build facts: %w", dir, err)
	}
	s.Rollouts, s.Failed = in.Rollouts, in.Failed
	if len(changes) > 0 {
		s.Rollouts = slices.DeleteFunc(s.Rollouts, func(r *facts.Rollout) bool {
			return !slices.Contains(changed, request.Workload{Kind: r.Workload.Kind, Namespace: r.Workload.Namespace, Name: r.Workload.Name})
		})
	}
	return s, nil
}

// All reads every scenario under root (testdata/scenarios), by name.
func All(root string) ([]*Scenario, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "*", "args"))
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no scenarios under %s", root)
	}
	out := make([]*Scenario, 0, len(dirs))
	for _, d := range dirs {
		s, err := Load(filepath.Dir(d))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Rollouts reads the named scenarios under root and returns their rollouts,
// in order.
func Rollouts(root string, names ...string) ([]*facts.Rollout, error) {
	var out []*facts.Rollout
	for _, name := range names {
		s, err := Load(filepath.Join(root, name))
		if err != nil {
			return nil, err
		}
		out = append(out, s.Rollouts...)
	}
	return out, nil
}
