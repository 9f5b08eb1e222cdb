package rego

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
	"github.com/open-policy-agent/opa/v1/rego"
)

// planTarget is the rego target under which the engine asks OPA's planner
// for a query's IR (ir.Policy), which the VM (vm.go) then runs.
const planTarget = "rollplan-ir"

func init() { rego.RegisterPlugin(planTarget, irPlugin{}) }

// irPlugin hands the planned policy to the caller through the context of
// PrepareForEval (planCapture): OPA calls the plugin with that context.
type irPlugin struct{}

type planKey struct{}

type planCapture struct{ policy *ir.Policy }

func (irPlugin) IsTarget(t string) bool { return t == planTarget }

func (irPlugin) PrepareForEval(ctx context.Context, p *ir.Policy, _ ...rego.PrepareOption) (rego.TargetPluginEval, error) {
	c, ok := ctx.Value(planKey{}).(*planCapture)
	if !ok {
		return nil, errors.New("rollplan IR target used outside the rego engine")
	}
	c.policy = p
	return irPlugin{}, nil
}

func (irPlugin) Eval(context.Context, *rego.EvalContext, ast.Value) (ast.Value, error) {
	return nil, errors.New("the rollplan IR target does not evaluate")
}

// planQuery plans query over the bundle to OPA's IR.
func planQuery(ctx context.Context, b *Bundle, query string) (*ir.Policy, error) {
	c := &planCapture{}
	if _, err := rego.New(b.options(query, rego.Target(planTarget))...).PrepareForEval(context.WithValue(ctx, planKey{}, c)); err != nil {
		return nil, fmt.Errorf("plan %s: %w", query, err)
	}
	if c.policy == nil {
		return nil, fmt.Errorf("plan %s: no plan", query)
	}
	return c.policy, nil
}
