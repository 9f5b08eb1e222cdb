package cel

import (
	"fmt"
	"reflect"
	"strings"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/rollplan/rollplan/planner/facts"
)

// DefaultCostLimit is Kubernetes' per-call CEL cost limit
// (PerCallLimit in k8s.io/apiserver/pkg/apis/cel).
const DefaultCostLimit = 1_000_000

// interruptEvery: comprehension iterations between two checks of the
// policy timeout. An expression under the cost limit can still loop for
// seconds; checking every 100 iterations (as Kubernetes does) stops it
// within milliseconds at a negligible cost.
const interruptEvery = 100

// baseEnv declares what every expression may read. Per-pod names (pod,
// defaults.order) are declared in every environment so that the checker
// gives a clear error; compile decides per expression whether it is
// evaluated per pod.
func baseEnv() (*celgo.Env, error) {
	return celgo.NewEnv(
		// The Kubernetes CEL libraries (as in ValidatingAdmissionPolicy).
		// Optional types and ip/cidr come before NativeTypes (engines
		// reference, tooling gotchas).
		celgo.OptionalTypes(),
		library.URLs(), library.Regex(), library.Lists(), library.Quantity(),
		library.IP(), library.CIDR(), library.SemverLib(), library.Format(),
		ext.Strings(), ext.Sets(), ext.Lists(), ext.Math(),
		ext.NativeTypes(
			reflect.TypeFor[facts.Pod](), reflect.TypeFor[facts.Change](),
			reflect.TypeFor[facts.PDB](), reflect.TypeFor[facts.Revision](),
			reflect.TypeFor[facts.Node](), reflect.TypeFor[facts.ReplicaSet](),
			reflect.TypeFor[Workload](), reflect.TypeFor[Strategy](),
			reflect.TypeFor[facts.Analysis](), reflect.TypeFor[facts.MeasurementResults](), reflect.TypeFor[facts.Result](),
			ext.ParseStructTag("json"),
		),
		celgo.Variable("workload", celgo.ObjectType("cel.Workload")),
		celgo.Variable("pods", celgo.IntType), // the pod count; no list, so no whole-snapshot comprehension
		celgo.Variable("pdbs", celgo.ListType(celgo.ObjectType("facts.PDB"))),
		celgo.Variable("revisions", celgo.ListType(celgo.ObjectType("facts.Revision"))),
		celgo.Variable("nodes", celgo.ListType(celgo.ObjectType("facts.Node"))),
		celgo.Variable("replicaSets", celgo.ListType(celgo.ObjectType("facts.ReplicaSet"))),
		celgo.Variable("featureGates", celgo.MapType(celgo.StringType, celgo.BoolType)),
		celgo.Variable("kubernetesVersion", celgo.StringType), // "v1.37": the version planned for
		celgo.Variable("now", celgo.StringType),
		// the wave the analysis judges and its measurements' results
		celgo.Variable("analysis", celgo.ObjectType("facts.Analysis")),
		celgo.Variable("params", celgo.DynType),
		celgo.Variable("pod", celgo.ObjectType("facts.Pod")),
		celgo.Variable("defaults.order", celgo.ListType(celgo.DynType)),
	)
}

// program is one compiled expression.
type program struct {
	prg    celgo.Program
	perPod bool   // reads pod (directly or through a per-pod variable)
	field  string // spec path, for messages
	src    string
	// podFields: the pod fields read (through variables too); podWhole:
	// pod is used as a whole value, so any field may matter.
	podFields map[string]bool
	podWhole  bool
	// loops: has a comprehension, the only thing a context interrupts
	// (the variables it reads are evaluated, and interrupted, on their own).
	loops bool
	// ast: the checked expression, for the fast path's translator.
	ast *celast.AST
	// fast: the expression as Go closures (fast.go), nil when it is not
	// translated.
	fast *fastProgram
	// nowOnly: a variable that reads only now, params and other such
	// variables: computed once per snapshot time (globals.go).
	nowOnly bool
}

// revisionOnly reports programs whose answer depends on the pod only
// through its revision and changes, so that one evaluation per revision and
// change list answers all the pods that share them.
func revisionOnly(ps ...*program) bool {
	for _, p := range ps {
		if p == nil {
			continue
		}
		if p.podWhole {
			return false
		}
		for f := range p.podFields {
			if f != "changes" && f != "revision" {
				return false
			}
		}
	}
	return true
}

// compiled is a RolloutPolicy ready to evaluate.
type compiled struct {
	policy    *RolloutPolicy
	selector  labels.Selector
	costLimit uint64 // per evaluation, for messages

	vars     []*program
	varIndex map[string]int

	scope, scopeMsg  *program
	inPlace, reasons *program
	orderAll         *program // all order variants as one expression
	budgets          []budgetProgram
	pacing           *program
	nodePreparation  *program
	analysis         *analysisProgram
	halt, deny       []messageProgram
	// eligibilityByRevision: see revisionOnly.
	eligibilityByRevision bool
	// notes: the per-pod expressions the fast path leaves to cel-go, and why.
	notes []string
	// slots: how many per-workload subexpressions the fast path caches;
	// boxes: how many string order keys it boxes (activation.box).
	slots, boxes int
	// wl and budgetCache: budgets per distinct input (wlcache.go); wl nil
	// without the fast path.
	wl          *wlDeps
	budgetCache budgetCache
	// globals: the now-only variables' values per snapshot time.
	globals globalCache
}

type budgetProgram struct {
	spec                                                      BudgetSpec
	field                                                     string // spec.budgets[i], for messages
	forEach, when, name                                       *program
	maxUnavailable, maxSurge, groupBy, maxGroups, pdb, advise *program
	source                                                    *program
}

type messageProgram struct {
	when, msg *program
}

// compiler compiles one policy's expressions in an environment that grows
// with its variables.
type compiler struct {
	env       *celgo.Env
	p         *RolloutPolicy
	c         *compiled
	costLimit uint64
	podVars   map[string]bool
	nowVars   map[string]bool // the now-only variables so far
	varProgs  map[string]*program
}

func compilePolicy(base *celgo.Env, p *RolloutPolicy, costLimit uint64, fast bool) (*compiled, error) {
	c := &compiled{policy: p, varIndex: map[string]int{}, selector: labels.Everything(), costLimit: costLimit}
	if mc := p.Spec.MatchConstraints; mc != nil && mc.LabelSelector != nil {
		sel, err := metav1LabelSelector(mc.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.matchConstraints.labelSelector: %w", p.where(), err)
		}
		c.selector = sel
	}
	cc := &compiler{env: base, p: p, c: c, costLimit: costLimit, podVars: map[string]bool{}, nowVars: map[string]bool{}, varProgs: map[string]*program{}}
	for i, v := range p.Spec.Variables {
		field := fmt.Sprintf("spec.variables[%d] (%s)", i, v.Name)
		if v.Name == "" || strings.ContainsAny(v.Name, ". ") {
			return nil, fmt.Errorf("%s: %s: name must be a non-empty identifier", p.where(), field)
		}
		if _, dup := c.varIndex[v.Name]; dup {
			return nil, fmt.Errorf("%s: %s: variable %q is defined twice", p.where(), field, v.Name)
		}
		prg, out, err := cc.compile(field+".expression", v.Expression, nil)
		if err != nil {
			return nil, err
		}
		env, err := cc.env.Extend(celgo.Variable("variables."+v.Name, out))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p.where(), field, err)
		}
		cc.env = env
		c.varIndex[v.Name] = len(c.vars)
		prg.nowOnly = readsOnlyNow(prg.ast, cc.nowVars)
		if prg.nowOnly {
			cc.nowVars["variables."+v.Name] = true
		}
		c.vars = append(c.vars, prg)
		if prg.perPod {
			cc.podVars["variables."+v.Name] = true
		}
		cc.varProgs["variables."+v.Name] = prg
	}
	var err error
	s := p.Spec
	if s.Scope != nil {
		if c.scope, _, err = cc.compile("spec.scope.expression", s.Scope.Expression, celgo.BoolType); err != nil {
			return nil, err
		}
		if c.scopeMsg, _, err = cc.compile("spec.scope.messageExpression", s.Scope.MessageExpression, celgo.StringType); err != nil {
			return nil, err
		}
	}
	if s.Eligibility != nil {
		if c.inPlace, _, err = cc.compile("spec.eligibility.expression", s.Eligibility.Expression, celgo.BoolType); err != nil {
			return nil, err
		}
		if s.Eligibility.ReasonsExpression != "" {
			if c.reasons, _, err = cc.compile("spec.eligibility.reasonsExpression", s.Eligibility.ReasonsExpression, celgo.ListType(celgo.StringType)); err != nil {
				return nil, err
			}
		}
	}
	c.eligibilityByRevision = revisionOnly(c.inPlace, c.reasons)
	if c.orderAll, err = cc.order(s.Order); err != nil {
		return nil, err
	}
	for i, b := range s.Budgets {
		bp, err := cc.budget(i, b)
		if err != nil {
			return nil, err
		}
		c.budgets = append(c.budgets, bp)
	}
	if s.Pacing != nil {
		if c.pacing, _, err = cc.compile("spec.pacing.expression", s.Pacing.Expression, celgo.StringType); err != nil {
			return nil, err
		}
	}
	if s.NodePreparation != nil {
		if c.nodePreparation, _, err = cc.compile("spec.nodePreparation.expression", s.NodePreparation.Expression, celgo.StringType); err != nil {
			return nil, err
		}
		if c.nodePreparation.perPod {
			return nil, fmt.Errorf("%s: spec.nodePreparation.expression: node preparation is decided per workload and cannot read pod", p.where())
		}
	}
	if c.analysis, err = cc.analysis(s.Analysis); err != nil {
		return nil, err
	}
	for _, rules := range []struct {
		name string
		in   []MessageRule
		out  *[]messageProgram
	}{{"halt", s.Halt, &c.halt}, {"deny", s.Deny, &c.deny}} {
		for i, r := range rules.in {
			field := fmt.Sprintf("spec.%s[%d]", rules.name, i)
			var m messageProgram
			if m.when, _, err = cc.compile(field+".expression", r.Expression, celgo.BoolType); err != nil {
				return nil, err
			}
			if m.msg, _, err = cc.compile(field+".messageExpression", r.MessageExpression, celgo.StringType); err != nil {
				return nil, err
			}
			if rules.name == "deny" && (m.when.perPod || m.msg.perPod) {
				return nil, fmt.Errorf("%s: %s: deny rules judge the workload's spec and cannot read pod", p.where(), field)
			}
			*rules.out = append(*rules.out, m)
		}
	}
	if fast {
		cc.translateAll()
		c.wl = c.dependencies()
	}
	return c, nil
}

// translateAll gives the expressions evaluated for every pod their fast
// path (fast.go). Messages and reasons are evaluated for few pods (held,
// halted) or once per revision: cel-go answers them.
func (cc *compiler) translateAll() {
	c := cc.c
	try := func(p *program, want string, note bool) {
		if p == nil || !p.perPod {
			return
		}
		fp, why := cc.translate(p.ast, want, cc.costLimit)
		switch {
		case !note:
		case fp == nil:
			c.notes = append(c.notes, fmt.Sprintf("%s: %s is evaluated by cel-go for every pod: the fast path does not translate %s", cc.p.where(), p.field, why))
		case len(fp.bails) > 0:
			c.notes = append(c.notes, fmt.Sprintf("%s: %s is evaluated by cel-go for the pods where it reaches %s", cc.p.where(), p.field, strings.Join(fp.bails, ", ")))
		}
		p.fast = fp
	}
	try(c.scope, "bool", true)
	// Eligibility decided once per revision costs little on cel-go.
	try(c.inPlace, "bool", !c.eligibilityByRevision)
	try(c.orderAll, "key", true)
	for _, m := range c.halt {
		try(m.when, "bool", true)
	}
}

// order checks every variant's `when` and keys on their own (so errors
// point at spec.order[i].keys[j]) and folds the variants into one
// conditional list expression: one evaluation per pod instead of one per key
// and per `when`. Variants after one without `when` can never apply and are
// an error; when no variant applies the expression yields false, which
// orderKey reports.
func (cc *compiler) order(variants []OrderKeys) (*program, error) {
	if len(variants) == 0 {
		return nil, nil
	}
	var expr strings.Builder
	closing := ""
	for i, o := range variants {
		if len(o.Keys) == 0 {
			return nil, fmt.Errorf("%s: spec.order[%d].keys: at least one key expression is required", cc.p.where(), i)
		}
		if o.When != "" {
			if _, _, err := cc.compile(fmt.Sprintf("spec.order[%d].when", i), o.When, celgo.BoolType); err != nil {
				return nil, err
			}
		}
		parts := make([]string, len(o.Keys))
		for j, k := range o.Keys {
			if _, _, err := cc.compile(fmt.Sprintf("spec.order[%d].keys[%d]", i, j), k, nil); err != nil {
				return nil, err
			}
			parts[j] = "(" + k + ")"
		}
		list := "dyn([" + strings.Join(parts, ", ") + "])"
		if o.When == "" {
			if i != len(variants)-1 {
				return nil, fmt.Errorf("%s: spec.order[%d]: a variant without when must be the last one", cc.p.where(), i)
			}
			expr.WriteString(list)
			break
		}
		fmt.Fprintf(&expr, "(%s) ? %s : (", o.When, list)
		closing += ")"
		if i == len(variants)-1 {
			expr.WriteString("dyn(false)")
		}
	}
	expr.WriteString(closing)
	prg, _, err := cc.compile("spec.order", expr.String(), nil)
	return prg, err
}

func (cc *compiler) budget(i int, b BudgetSpec) (budgetProgram, error) {
	field := fmt.Sprintf("spec.budgets[%d]", i)
	bp := budgetProgram{spec: b, field: field}
	if (b.Name == "") == (b.NameExpression == "") {
		return bp, fmt.Errorf("%s: %s: set exactly one of name and nameExpression", cc.p.where(), field)
	}
	if b.MaxUnavailable == "" && b.MaxSurge == "" && b.MaxGroups == "" {
		return bp, fmt.Errorf("%s: %s: set maxUnavailable, maxSurge or maxGroups", cc.p.where(), field)
	}
	env := cc.env
	if b.ForEach != "" {
		prg, _, err := cc.compile(field+".forEach", b.ForEach, celgo.ListType(celgo.DynType))
		if err != nil {
			return bp, err
		}
		bp.forEach = prg
		e, err := cc.env.Extend(celgo.Variable("item", celgo.DynType))
		if err != nil {
			return bp, err
		}
		cc.env = e
	}
	defer func() { cc.env = env }()
	var err error
	for _, f := range []struct {
		name, src string
		typ       *celgo.Type
		out       **program
	}{
		{"when", b.When, celgo.BoolType, &bp.when},
		{"nameExpression", b.NameExpression, celgo.StringType, &bp.name},
		{"maxUnavailable", b.MaxUnavailable, celgo.IntType, &bp.maxUnavailable},
		{"maxSurge", b.MaxSurge, celgo.IntType, &bp.maxSurge},
		{"groupBy", b.GroupBy, celgo.StringType, &bp.groupBy},
		{"maxGroups", b.MaxGroups, celgo.IntType, &bp.maxGroups},
		{"pdb", b.PDB, celgo.StringType, &bp.pdb},
		{"advisory", b.Advisory, celgo.BoolType, &bp.advise},
		{"source", b.Source, celgo.StringType, &bp.source},
	} {
		if f.src == "" {
			continue
		}
		if *f.out, _, err = cc.compile(field+"."+f.name, f.src, f.typ); err != nil {
			return bp, err
		}
		if (*f.out).perPod {
			return bp, fmt.Errorf("%s: %s.%s: budgets are per workload and cannot read pod", cc.p.where(), field, f.name)
		}
	}
	return bp, nil
}

// compile type-checks one expression; want nil accepts any type. Errors
// name the policy, the field and the position in the expression.
func (cc *compiler) compile(field, src string, want *celgo.Type) (*program, *celgo.Type, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil, fmt.Errorf("%s: %s: expression is empty", cc.p.where(), field)
	}
	ast, iss := cc.env.Compile(src)
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("%s: %s: %s", cc.p.where(), field, iss.Err())
	}
	out := ast.OutputType()
	if want != nil && !want.IsAssignableType(out) && out != celgo.DynType {
		return nil, nil, fmt.Errorf("%s: %s: expression returns %s, want %s", cc.p.where(), field, out, want)
	}
	perPod, fields, whole := false, map[string]bool{}, false
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == "pod" || ref.Name == "defaults.order" || cc.podVars[ref.Name] {
			perPod = true
		}
		if ref.Name == "defaults.order" {
			whole = true
		}
		if v := cc.varProgs[ref.Name]; v != nil {
			whole = whole || v.podWhole
			for f := range v.podFields {
				fields[f] = true
			}
		}
	}
	idents, selects, loops := 0, 0, false
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.ComprehensionKind:
			loops = true
		case celast.IdentKind:
			if e.AsIdent() == "pod" {
				idents++
			}
		case celast.SelectKind:
			if op := e.AsSelect().Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "pod" {
				selects++
				fields[e.AsSelect().FieldName()] = true
			}
		}
	}))
	whole = whole || idents > selects
	prg, err := cc.env.Program(ast,
		celgo.EvalOptions(celgo.OptOptimize),
		celgo.CostLimit(cc.costLimit),
		celgo.InterruptCheckFrequency(interruptEvery),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", cc.p.where(), field, err)
	}
	return &program{prg: prg, perPod: perPod, field: field, src: src, podFields: fields, podWhole: whole, loops: loops, ast: ast.NativeRep()}, out, nil
}

func (p *RolloutPolicy) where() string {
	return fmt.Sprintf("policy %s (RolloutPolicy %s)", p.File, p.Metadata.Name)
}
