// Package kubeversion names the Kubernetes minor versions rollplan plans
// for and the feature gates whose defaults change rollout behaviour
// between them, and inside a minor where upstream changed a default in a
// patch release. The default strategy predicts the controllers of the
// version it plans for: reference §0.1 and §8 list what each one does.
package kubeversion

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Version is a Kubernetes minor version (major 1), and the patch release
// when it is known (a cluster's gitVersion, a snapshot's annotation, a
// flag such as v1.35.2): gate defaults can differ by patch. Compare
// versions with Minor or AtLeast, not ==: v1.35.2 and v1.35 are the same
// minor.
type Version struct {
	Minor int
	// Patch is the patch release when HasPatch: v1.35.2 → 2.
	Patch    int
	HasPatch bool
}

// The supported minors, oldest first. Newest is the default when nothing
// says which version a snapshot comes from.
var (
	V1_35     = Version{Minor: 35}
	V1_36     = Version{Minor: 36}
	V1_37     = Version{Minor: 37}
	Supported = []Version{V1_35, V1_36, V1_37}
	Newest    = V1_37
)

// String is "v1.MINOR": the minor, which planning keys on (and policies
// read as kubernetesVersion).
func (v Version) String() string { return fmt.Sprintf("v1.%d", v.Minor) }

// Release is "v1.MINOR.PATCH" when the patch is known, else String().
func (v Version) Release() string {
	if !v.HasPatch {
		return v.String()
	}
	return fmt.Sprintf("v1.%d.%d", v.Minor, v.Patch)
}

// MinorOnly is v without its patch.
func (v Version) MinorOnly() Version { return Version{Minor: v.Minor} }

// IsZero reports whether v was never set.
func (v Version) IsZero() bool { return v.Minor == 0 }

// AtLeast reports whether v is minor o or newer.
func (v Version) AtLeast(o Version) bool { return v.Minor >= o.Minor }

// Or returns v, or d when v was never set.
func (v Version) Or(d Version) Version {
	if v.IsZero() {
		return d
	}
	return v
}

// SupportedList is "v1.35, v1.36 and v1.37", for messages.
func SupportedList() string {
	names := make([]string, len(Supported))
	for i, v := range Supported {
		names[i] = v.String()
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// ParseAny reads "v1.37", "1.37", "v1.37.2" or a build such as
// "v1.37.2-gke.1200": major 1 and a minor, whatever follows. It does not
// check that rollplan supports the minor.
func ParseAny(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	major, rest, ok := strings.Cut(t, ".")
	if !ok || major != "1" {
		return Version{}, fmt.Errorf("%q is not a Kubernetes version such as v1.37 or v1.37.2", s)
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	digits := rest
	if end >= 0 {
		digits = rest[:end]
		// After the minor only a patch (".2", ".2-gke.1") or a build
		// suffix ("+", "-") may follow.
		if tail := rest[end:]; !strings.HasPrefix(tail, ".") && !strings.HasPrefix(tail, "-") && !strings.HasPrefix(tail, "+") {
			return Version{}, fmt.Errorf("%q is not a Kubernetes version such as v1.37 or v1.37.2", s)
		}
	}
	minor, err := strconv.Atoi(digits)
	if err != nil || minor <= 0 {
		return Version{}, fmt.Errorf("%q is not a Kubernetes version such as v1.37 or v1.37.2", s)
	}
	v := Version{Minor: minor}
	if end >= 0 && rest[end] == '.' {
		// A patch: digits up to a build suffix ("2", "2-gke.1200", "3+k3s1").
		p := rest[end+1:]
		if stop := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' }); stop >= 0 {
			p = p[:stop]
		}
		if n, err := strconv.Atoi(p); err == nil {
			v.Patch, v.HasPatch = n, true
		}
	}
	return v, nil
}

// Parse reads a version rollplan supports (a patch suffix is accepted).
func Parse(s string) (Version, error) {
	v, err := ParseAny(s)
	if err != nil {
		return Version{}, fmt.Errorf("%w: rollplan plans for %s", err, SupportedList())
	}
	if !slices.ContainsFunc(Supported, func(s Version) bool { return s.Minor == v.Minor }) {
		return Version{}, fmt.Errorf("%s is not supported: rollplan plans for %s", v, SupportedList())
	}
	return v, nil
}

// Nearest is the supported version closest to v, and whether it is v
// itself: a cluster newer than rollplan knows is planned as the newest, an
// older one as the oldest.
func Nearest(v Version) (Version, bool) {
	switch {
	case v.Minor < Supported[0].Minor:
		return Supported[0], false
	case v.Minor > Newest.Minor:
		return Newest, false
	}
	return v, true
}

// The feature gates that change what a rollout controller does.
const (
	// MaxUnavailableStatefulSet: a RollingUpdate StatefulSet takes
	// maxUnavailable pods at once (KEP-961). Alpha, off, through 1.34;
	// beta and on in 1.35.0–1.35.3, off from 1.35.4 and in 1.36 (a patch
	// release changed the default: see gates); on from 1.37.
	MaxUnavailableStatefulSet = "MaxUnavailableStatefulSet"
	// StatefulSetRecreateStrategy: updateStrategy.type Recreate for
	// StatefulSets. Alpha, off, from 1.37.
	StatefulSetRecreateStrategy = "StatefulSetRecreateStrategy"
)

type gate struct {
	name string
	// since: the first minor that has the gate; onFrom: the first minor
	// where it is on by default (0: never).
	since, onFrom int
	// patches: defaults upstream changed inside a minor, in patch order.
	patches []patchDefault
}

// patchDefault: from patch fromPatch of the minor on, the gate's default
// is on; why cites upstream.
type patchDefault struct {
	minor, fromPatch int
	on               bool
	why              string
}

var gates = []gate{
	{MaxUnavailableStatefulSet, 24, 37, []patchDefault{
		{35, 0, true, "beta and on by default in v1.35.0 (kubernetes/kubernetes pkg/features/kube_features.go)"},
		{35, 4, false, "off by default from v1.35.4 (kubernetes/kubernetes#137904, cherry-picked as #137926) after the Parallel regression #137409"},
	}},
	{StatefulSetRecreateStrategy, 37, 0, nil},
}

// Gates returns the gates version v knows, by name, at their defaults: by
// minor, then by patch where upstream changed one inside the minor. A
// version whose patch is unknown gets the minor's last patch rule (the
// release clusters upgrade to); PatchRules says so.
func Gates(v Version) map[string]bool {
	out := map[string]bool{}
	for _, g := range gates {
		if v.Minor < g.since {
			continue
		}
		out[g.name] = g.onFrom != 0 && v.Minor >= g.onFrom
		for _, p := range g.patches {
			if p.minor == v.Minor && (!v.HasPatch || v.Patch >= p.fromPatch) {
				out[g.name] = p.on
			}
		}
	}
	return out
}

// PatchRules says which patch-release rules set v's gate defaults, one
// line per gate whose default changed inside v's minor, e.g.
// "MaxUnavailableStatefulSet on in v1.35.0–v1.35.3: beta and on by
// default in v1.35.0 (...)"; nil when no gate changed inside the minor.
func PatchRules(v Version) []string {
	var out []string
	for _, g := range gates {
		var rules []patchDefault
		for _, p := range g.patches {
			if p.minor == v.Minor {
				rules = append(rules, p)
			}
		}
		if len(rules) == 0 {
			continue
		}
		for i, p := range rules {
			last := i == len(rules)-1
			if v.HasPatch && (v.Patch < p.fromPatch || (!last && v.Patch >= rules[i+1].fromPatch)) {
				continue
			}
			span := fmt.Sprintf("from v1.%d.%d", v.Minor, p.fromPatch)
			if !last {
				span = fmt.Sprintf("in v1.%d.%d–v1.%d.%d", v.Minor, p.fromPatch, v.Minor, rules[i+1].fromPatch-1)
			}
			line := fmt.Sprintf("%s %s %s: %s", g.name, onOff(p.on), span, p.why)
			if !v.HasPatch {
				if !last {
					continue
				}
				line = fmt.Sprintf("patch unknown, %s's latest rule: %s", v, line)
			}
			out = append(out, line)
		}
	}
	return out
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// WithOverrides returns v's default gates with overrides applied. A gate v
// does not have is an error naming the gates it has.
func WithOverrides(v Version, overrides map[string]bool) (map[string]bool, error) {
	out := Gates(v)
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := out[name]; !ok {
			return nil, unknownGate(v, name)
		}
		out[name] = overrides[name]
	}
	return out, nil
}

func unknownGate(v Version, name string) error {
	for _, g := range gates {
		if g.name == name {
			return fmt.Errorf("feature gate %s does not exist in Kubernetes %s (it arrived in v1.%d): drop it, or plan for a newer version with --kubernetes-version", name, v, g.since)
		}
	}
	return fmt.Errorf("unknown feature gate %s: rollplan models %s", name, strings.Join(slices.Sorted(maps.Keys(Gates(v))), " and "))
}

// ParseGates reads "A=true,B=false" (kube-controller-manager's
// --feature-gates form) into overrides, checked against version v.
func ParseGates(v Version, s string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	known := Gates(v)
	for _, kv := range strings.Split(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=true|false", kv)
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not true or false", k, val)
		}
		if _, ok := known[k]; !ok {
			return nil, unknownGate(v, k)
		}
		out[k] = b
	}
	return out, nil
}

// Resolve picks the version to plan for: the one asked for (a flag; an
// unsupported one is an error naming the supported versions), else the one
// the source records (discovery's gitVersion, a snapshot's annotation),
// else Newest. source names where recorded came from, for the note that
// says why the version is not the source's own; note is "" when it is.
func Resolve(asked, recorded, source string) (v Version, note string, err error) {
	if asked != "" {
		v, err := Parse(asked)
		return v, "", err
	}
	if recorded == "" {
		return Newest, fmt.Sprintf("%s records no Kubernetes version: planning for %s's controllers (pass --kubernetes-version to plan for another)", source, Newest), nil
	}
	got, err := ParseAny(recorded)
	if err != nil {
		return Newest, fmt.Sprintf("%s records Kubernetes version %q, which rollplan cannot read: planning for %s's controllers (pass --kubernetes-version to plan for another)", source, recorded, Newest), nil
	}
	near, exact := Nearest(got)
	if !exact {
		return near, fmt.Sprintf("%s runs Kubernetes %s, which rollplan does not model (it plans for %s): planning for %s's controllers", source, recorded, SupportedList(), near), nil
	}
	return got, "", nil
}
