package cel

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

func policy(t *testing.T, spec string) []*RolloutPolicy {
	t.Helper()
	src := "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: p\nspec:\n" + spec
	ps, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: p}\nspec:\n  scop: {}\n", `unknown field "scop"`},
		{"wrong kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", `want apiVersion rollplan.dev/v1alpha1, kind RolloutPolicy`},
		{"no name", "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nspec: {}\n", "metadata.name is required"},
		{"empty", "# nothing\n", "no RolloutPolicy document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml") {
				t.Fatalf("got %v, want an error naming bad.yaml and containing %q", err, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"syntax error with position", "  scope:\n    expression: pod.ordinal >\n    messageExpression: \"'x'\"\n",
			[]string{"spec.scope.expression", "1:14", "RolloutPolicy p"}},
		{"undefined field", "  scope:\n    expression: pod.ordinl > 1\n    messageExpression: \"'x'\"\n",
			[]string{"spec.scope.expression", "undefined field 'ordinl'"}},
		{"wrong type", "  pacing:\n    expression: \"1\"\n", []string{"spec.pacing.expression", "returns int, want string"}},
		{"node preparation reads pod", "  nodePreparation:\n    expression: pod.name\n", []string{"spec.nodePreparation.expression", "cannot read pod"}},
		{"node preparation not a string", "  nodePreparation:\n    expression: \"true\"\n", []string{"spec.nodePreparation.expression", "returns bool, want string"}},
		{"deny reads pod", "  deny:\n  - expression: pod.ready\n    messageExpression: \"'x'\"\n", []string{"spec.deny[0]", "cannot read pod"}},
		{"budget reads pod", "  budgets:\n  - name: b\n    maxUnavailable: pod.ordinal\n", []string{"spec.budgets[0].maxUnavailable", "cannot read pod"}},
		{"budget without limit", "  budgets:\n  - name: b\n", []string{"spec.budgets[0]", "set maxUnavailable, maxSurge or maxGroups"}},
		{"variable order", "  variables:\n  - name: a\n    expression: variables.b\n  - name: b\n    expression: \"1\"\n", []string{"spec.variables[0] (a)", "undeclared reference"}},
		{"catch-all order variant not last", "  order:\n  - keys: [pod.name]\n  - when: \"true\"\n    keys: [pod.ordinal]\n", []string{"spec.order[0]", "without when must be the last"}},
		{"bad order key", "  order:\n  - keys: [pod.name, pod.nme]\n", []string{"spec.order[0].keys[1]", "undefined field 'nme'"}},
		{"bad selector", "  matchConstraints:\n    labelSelector:\n      matchExpressions:\n      - {key: a, operator: Bogus}\n", []string{"spec.matchConstraints.labelSelector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(policy(t, tc.spec), Options{})
			if err == nil {
				t.Fatal("compiled, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func rollout() *facts.Rollout {
	return &facts.Rollout{
		Workload: facts.Workload{Kind: "StatefulSet", Namespace: "prod", Name: "db", Replicas: 3, Labels: map[string]string{"tier": "critical"},
			Strategy: facts.Strategy{Type: "RollingUpdate", MaxUnavailable: "50%"}, UpdateRevision: "r2", PodManagementPolicy: "Parallel"},
		Pods: []facts.Pod{
			{Name: "db-0", Ordinal: 0, Index: 0, Revision: "r1", Ready: true, Available: true, Zone: "a", Labels: map[string]string{"role": "leader"}},
			{Name: "db-1", Ordinal: 1, Index: 1, Revision: "r1", Ready: true, Available: true, Zone: "b"},
			{Name: "db-2", Ordinal: 2, Index: 2, Revision: "r2", Updated: true, Ready: true, Available: true, Zone: "c", Restarts: 5},
		},
	}
}

func decide(t *testing.T, ps []*RolloutPolicy) *engine.Decisions {
	t.Helper()
	e, err := New(ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), rollout())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestComposition(t *testing.T) {
	t.Run("scope intersects with the default", func(t *testing.T) {
		d := decide(t, policy(t, "  scope:\n    expression: pod.zone != 'a'\n    messageExpression: \"'zone ' + pod.zone + ' is frozen'\"\n"))
		if d.Pods[0].InScope || d.Pods[0].HeldReason != "zone a is frozen" || !d.Pods[1].InScope {
			t.Fatalf("got %+v", d.Pods)
		}
	})
	t.Run("recreate beats in place", func(t *testing.T) {
		d := decide(t, policy(t, "  eligibility:\n    expression: \"true\"\n    reasonsExpression: \"['policy says in place']\"\n"))
		if d.Pods[0].Action != engine.Recreate {
			t.Fatalf("the default (not opted in) says Recreate; got %+v", d.Pods[0])
		}
	})
	t.Run("order replaces the default and splices defaults.order", func(t *testing.T) {
		d := decide(t, policy(t, "  order:\n  - keys: [\"'role' in pod.labels ? 1 : 0\", defaults.order]\n"))
		if got := d.Pods[0].Order; len(got) != 2 || got[0] != int64(1) || got[1] != int64(0) {
			t.Fatalf("leader key: got %#v, want [1 0] (native StatefulSet default key [-ordinal])", got)
		}
		if got := d.Pods[1].Order; got[0] != int64(0) || got[1] != int64(-1) {
			t.Fatalf("got %#v", got)
		}
	})
	t.Run("budgets, halts and denials add up; params and match", func(t *testing.T) {
		d := decide(t, policy(t, `  matchConstraints:
    kinds: [StatefulSet]
    labelSelector: {matchLabels: {tier: critical}}
  params: {limit: 40}
  budgets:
  - name: zones
    groupBy: "'zone'"
    maxGroups: "1"
    source: "'one zone'"
  deny:
  - expression: int(workload.strategy.maxUnavailable.replace('%', '')) > params.limit
    messageExpression: "'maxUnavailable %s above %d%% on tier=critical'.format([workload.strategy.maxUnavailable, params.limit])"
`))
		if n := len(d.Budgets); n != 2 || d.Budgets[1].Name != "zones" || *d.Budgets[1].MaxGroups != 1 {
			t.Fatalf("budgets %+v", d.Budgets)
		}
		if len(d.Deny) != 1 || d.Deny[0] != "maxUnavailable 50% above 40% on tier=critical" {
			t.Fatalf("deny %q", d.Deny)
		}
		if len(d.Halt) != 1 || !strings.Contains(d.Halt[0], "db-2 is crash-looping") {
			t.Fatalf("halt %q", d.Halt)
		}
	})
	t.Run("node preparation: the first matching policy that answers, else none", func(t *testing.T) {
		if d := decide(t, nil); d.NodePreparation != engine.NodePrepNone {
			t.Fatalf("default %q, want none", d.NodePreparation)
		}
		ps := append(policy(t, "  nodePreparation:\n    expression: \"workload.kind == 'StatefulSet' ? 'drain' : 'none'\"\n"),
			policy(t, "  nodePreparation:\n    expression: \"'cordon'\"\n")...)
		ps[1].Metadata.Name = "q"
		if d := decide(t, ps); d.NodePreparation != engine.NodePrepDrain {
			t.Fatalf("got %q, want drain from policy p (first by name)", d.NodePreparation)
		}
	})
	t.Run("a node preparation that is not a value is an error naming the field", func(t *testing.T) {
		e, err := New(policy(t, "  nodePreparation:\n    expression: \"'reboot'\"\n"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Decide(context.Background(), rollout())
		for _, w := range []string{"spec.nodePreparation.expression", "StatefulSet prod/db", `want "none", "cordon" or "drain"`, "reboot", "RolloutPolicy p"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v lacks %q", err, w)
			}
		}
	})
	t.Run("a policy that does not match adds nothing", func(t *testing.T) {
		d := decide(t, policy(t, "  matchConstraints:\n    namespaces: [staging]\n  deny:\n  - expression: \"true\"\n    messageExpression: \"'no'\"\n"))
		if len(d.Deny) != 0 {
			t.Fatalf("deny %q", d.Deny)
		}
	})
}

func TestCostLimit(t *testing.T) {
	ps := policy(t, "  halt:\n  - expression: \"[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, a+b+c > 0)))\"\n    messageExpression: \"'x'\"\n")
	e, err := New(ps, Options{CostLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Decide(context.Background(), rollout())
	if err == nil || !strings.Contains(err.Error(), "cost limit") || !strings.Contains(err.Error(), "spec.halt[0].expression") {
		t.Fatalf("got %v, want a cost-limit error naming the field", err)
	}
}

// TestEligibilityPerPodChanges: pods of one revision whose changes differ
// (their revision is not in the snapshot, so facts diff each pod's own
// spec) are answered from their own changes, not the first pod's, by the
// memoised default eligibility and by the InPlaceOnly halt.
func TestEligibilityPerPodChanges(t *testing.T) {
	env := facts.Change{Path: "spec.containers[app].env", Class: facts.ClassEnv, Detail: "env cannot change on a running container"}
	image := facts.Change{Path: "spec.containers[app].image", Class: facts.ClassImage, InPlace: true}
	r := rollout()
	r.Workload.Managed, r.Workload.PodUpdatePolicy = true, "InPlaceOnly"
	r.Pods[0].Changes = []facts.Change{env, image}
	r.Pods[1].Changes = []facts.Change{image}
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if a := d.Pods[0]; a.Action != engine.Recreate || len(a.Reasons) != 1 || !strings.Contains(a.Reasons[0], "env changed") {
		t.Errorf("db-0 (env and image changed): got %s %q, want Recreate for the env", a.Action, a.Reasons)
	}
	if a := d.Pods[1]; a.Action != engine.InPlace || len(a.Reasons) != 1 || a.Reasons[0] != "only spec.containers[app].image changed" {
		t.Errorf("db-1 (image changed, same revision): got %s %q, want InPlace from its own changes", a.Action, a.Reasons)
	}
	var inPlaceOnly []string
	for _, h := range d.Halt {
		if strings.HasPrefix(h, "InPlaceOnly:") {
			inPlaceOnly = append(inPlaceOnly, h)
		}
	}
	if len(inPlaceOnly) != 1 || !strings.Contains(inPlaceOnly[0], "pod db-0 cannot be updated in place") {
		t.Errorf("InPlaceOnly halts %q, want db-0's only", inPlaceOnly)
	}
}

// Two policies that both answer order, pacing or node preparation for one
// workload: the first by name wins (unchanged), and loading says which
// answer is ignored, once per pair, when their matchConstraints let them
// match one workload.
func TestOverrideWarnings(t *testing.T) {
	named := func(name, spec string) *RolloutPolicy {
		ps, err := Parse(name+".yaml", []byte("apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: "+name+"\nspec:\n"+spec))
		if err != nil {
			t.Fatal(err)
		}
		return ps[0]
	}
	const (
		order   = "  order:\n  - keys: [pod.name]\n"
		pacing  = "  pacing:\n    expression: \"'rolling'\"\n"
		ssOnly  = "  matchConstraints:\n    kinds: [StatefulSet]\n"
		why     = ": that policy defines "
		tail    = " too and comes first by metadata.name (one policy answers order, pacing, node preparation and analysis)"
		a, b, c = "policy a.yaml (RolloutPolicy a)", "policy b.yaml (RolloutPolicy b)", "policy c.yaml (RolloutPolicy c)"
	)
	never := func(later, points, first string) string {
		verb := map[bool]string{true: "are", false: "is"}[strings.Contains(points, " and ")]
		return later + ": " + points + " " + verb + " never used: " + first + " matches every workload this one matches" + why + points + tail
	}
	some := func(later, points, first string) string {
		return later + ": " + points + " is ignored for the workloads " + first + " also matches" + why + points + tail
	}
	tests := []struct {
		name  string
		specs []string // policies a, b, c...
		want  []string
	}{
		{"both answer order everywhere", []string{order, order}, []string{never(b, "spec.order", a)}},
		{"one warning per pair, naming every point", []string{order + pacing, order + pacing}, []string{never(b, "spec.order and spec.pacing", a)}},
		{"only one answers order", []string{order, pacing}, nil},
		{"disjoint kinds", []string{order + ssOnly, order + "  matchConstraints:\n    kinds: [Deployment]\n"}, nil},
		{"disjoint namespaces", []string{order + "  matchConstraints:\n    namespaces: [a]\n", order + "  matchConstraints:\n    namespaces: [b]\n"}, nil},
		{"contradicting selectors", []string{
			order + "  matchConstraints:\n    labelSelector: {matchLabels: {tier: critical}}\n",
			order + "  matchConstraints:\n    labelSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [critical]}]}\n"}, nil},
		{"selectors that may meet", []string{
			order + "  matchConstraints:\n    labelSelector: {matchLabels: {tier: critical}}\n",
			order + "  matchConstraints:\n    labelSelector: {matchLabels: {app: db}}\n"}, []string{some(b, "spec.order", a)}},
		{"the first matches fewer workloads", []string{order + ssOnly, order}, []string{some(b, "spec.order", a)}},
		{"the first matches more workloads", []string{order, order + ssOnly}, []string{never(b, "spec.order", a)}},
		{"three policies: every pair, in name order", []string{pacing, pacing, pacing},
			[]string{never(b, "spec.pacing", a), never(c, "spec.pacing", a), never(c, "spec.pacing", b)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*RolloutPolicy
			for i, s := range tt.specs {
				ps = append(ps, named(string(rune('a'+i)), s))
			}
			e, err := New(ps, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Warnings(); !slices.Equal(got, tt.want) {
				t.Fatalf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
	t.Run("the first by name still wins", func(t *testing.T) {
		e, err := New([]*RolloutPolicy{named("a", "  pacing:\n    expression: \"'rolling'\"\n"), named("b", "  pacing:\n    expression: \"'wave'\"\n")}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.Decide(context.Background(), rollout())
		if err != nil {
			t.Fatal(err)
		}
		if d.Pacing != engine.PacingRolling {
			t.Fatalf("pacing %q, want rolling from policy a", d.Pacing)
		}
	})
}

// A policy can branch on the Kubernetes version the plan is for.
func TestPolicyReadsKubernetesVersion(t *testing.T) {
	ps := policy(t, "  pacing:\n    expression: \"kubernetesVersion == 'v1.36' ? 'wave' : 'rolling'\"\n")
	e, err := New(ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for version, want := range map[string]string{"v1.36": engine.PacingWave, "v1.37": engine.PacingRolling} {
		r := rollout()
		r.KubernetesVersion = version
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if d.Pacing != want {
			t.Errorf("%s: pacing %q, want %q", version, d.Pacing, want)
		}
	}
}
