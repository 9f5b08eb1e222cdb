// Package health runs rollplan's shipped GitOps health checks the way the
// tools run them, for tests: the Argo CD Lua scripts of deploy/argocd in
// gopher-lua with the libraries Argo CD opens for a custom health script,
// and the Flux healthCheckExprs of deploy/flux through Flux's own
// evaluator (github.com/fluxcd/pkg/runtime/cel). Both read the files as
// they ship (go:embed), so a test of this package is a test of what users
// install.
package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/deploy/argocd"
	"github.com/rollplan/rollplan/deploy/flux"
)

// Argo CD's health statuses.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Unknown     = "Unknown"
)

// Flux's (kstatus's) statuses the expressions give.
const (
	Current    = "Current"
	InProgress = "InProgress"
	Failed     = "Failed"
)

// argoScript is one argocd-cm health customisation as shipped.
type argoScript struct {
	script   string
	openLibs bool
}

// argoConfig reads argocd-cm.yaml's health scripts and useOpenLibs flags,
// by <group>_<kind>.
func argoConfig() (map[string]argoScript, error) {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(argocd.ConfigMap, &cm); err != nil {
		return nil, fmt.Errorf("%s: %w", argocd.ConfigMapFile, err)
	}
	out := map[string]argoScript{}
	for _, c := range argocd.Customizations() {
		s, ok := cm.Data[argocd.HealthKey(c.Key)]
		if !ok {
			continue
		}
		out[c.Key] = argoScript{script: s, openLibs: cm.Data[argocd.OpenLibsKey(c.Key)] == "true"}
	}
	return out, nil
}

// argoKey is Argo CD's key for an object's group and kind.
func argoKey(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Group + "_" + gvk.Kind
}

// ArgoHealth is the health Argo CD computes for obj with the argocd-cm
// patch rollplan ships: its script for obj's group and kind, run as Argo
// CD runs a health customisation.
func ArgoHealth(obj map[string]any) (status, message string, err error) {
	return argoHealth(obj, nil)
}

// ArgoHealthWithoutOpenLibs is ArgoHealth for an argocd-cm that has the
// health scripts but not the useOpenLibs keys.
func ArgoHealthWithoutOpenLibs(obj map[string]any) (status, message string, err error) {
	no := false
	return argoHealth(obj, &no)
}

func argoHealth(obj map[string]any, openLibs *bool) (string, string, error) {
	cfg, err := argoConfig()
	if err != nil {
		return "", "", err
	}
	key := argoKey(obj)
	s, ok := cfg[key]
	if !ok {
		return "", "", fmt.Errorf("%s: no health script for %s", argocd.ConfigMapFile, key)
	}
	if openLibs != nil {
		s.openLibs = *openLibs
	}
	return runArgoLua(obj, s.script, s.openLibs)
}

// runArgoLua runs a health script as Argo CD's util/lua does: standard
// libraries skipped unless useOpenLibs, then package, base and table opened
// (Argo CD also opens its own os with time and date only: no script here
// uses os), obj as a global, one second at most; the returned table's
// status must be one of Argo CD's.
func runArgoLua(obj map[string]any, script string, openLibs bool) (string, string, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.fn), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", fmt.Errorf("open Lua library %s: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj))
	if err := l.DoString(script); err != nil {
		return "", "", fmt.Errorf("health script: %w", err)
	}
	ret := l.Get(-1)
	t, ok := ret.(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("health script returned %s, want a table", ret.Type())
	}
	status, _ := t.RawGetString("status").(lua.LString)
	message, _ := t.RawGetString("message").(lua.LString)
	switch string(status) {
	case Healthy, Progressing, Degraded, Suspended, Unknown, "Missing":
	default:
		return Unknown, "Lua returned an invalid health status", nil
	}
	return string(status), string(message), nil
}

// luaValue converts a decoded object as Argo CD's decodeValue does.
func luaValue(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, luaValue(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(luaValue(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LString(fmt.Sprint(v))
}

// fluxChecks reads rollplan-health.yaml's healthCheckExprs.
func fluxChecks() ([]kustomize.CustomHealthCheck, error) {
	var k struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			HealthCheckExprs []kustomize.CustomHealthCheck `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(flux.Kustomization, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", flux.File, err)
	}
	if k.APIVersion != "kustomize.toolkit.fluxcd.io/v1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s: %s %s, want a kustomize.toolkit.fluxcd.io/v1 Kustomization", flux.File, k.APIVersion, k.Kind)
	}
	return k.Spec.HealthCheckExprs, nil
}

// FluxHealth is the status Flux's kustomize-controller computes for obj
// with rollplan's healthCheckExprs: Flux's evaluator for the entry of
// obj's group and kind (the entry is found as Flux finds it). Numbers in
// obj must be int64 where Kubernetes has integers, as a client decodes
// them (see Decode).
func FluxHealth(obj map[string]any) (string, error) {
	checks, err := fluxChecks()
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: obj}
	gk := u.GroupVersionKind().GroupKind()
	for i := range checks {
		c := checks[i]
		if schema.FromAPIVersionAndKind(c.APIVersion, c.Kind).GroupKind() != gk {
			continue
		}
		ev, err := fluxcel.NewStatusEvaluator(&c.HealthCheckExpressions)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", flux.File, gk, err)
		}
		res, err := ev.Evaluate(context.Background(), u)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", flux.File, gk, err)
		}
		return string(res.Status), nil
	}
	return "", fmt.Errorf("%s: no healthCheckExprs entry for %s", flux.File, gk)
}

// Decode reads one object from YAML (or JSON) with integers as int64, as
// the API machinery decodes objects.
func Decode(b []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, err
	}
	if u.Object == nil {
		return nil, errors.New("no object")
	}
	return u.Object, nil
}
