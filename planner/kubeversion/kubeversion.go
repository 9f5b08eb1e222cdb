// Package kubeversion names the Kubernetes minor versions rollplan plans
// for and the feature gates whose defaults change rollout behaviour
// between them. The default strategy predicts the controllers of the
// version it plans for: reference §0.1 and §8 list what each one does.
package kubeversion

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Version is a Kubernetes minor version (major 1).
type Version struct{ Minor int }

// The supported minors, oldest first. Newest is the default when nothing
// says which version a snapshot comes from.
var (
	V1_35     = Version{35}
	V1_36     = Version{36}
	V1_37     = Version{37}
	Supported = []Version{V1_35, V1_36, V1_37}
	Newest    = V1_37
)

// String is "v1.MINOR".
func (v Version) String() string { return fmt.Sprintf("v1.%d", v.Minor) }

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
	return Version{minor}, nil
}

// Parse reads a version rollplan supports (a patch suffix is accepted).
func Parse(s string) (Version, error) {
	v, err := ParseAny(s)
	if err != nil {
		return Version{}, fmt.Errorf("%w: rollplan plans for %s", err, SupportedList())
	}
	if !slices.Contains(Supported, v) {
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
	// maxUnavailable pods at once (KEP-961). Alpha, off, through 1.36;
	// beta and on from 1.37.
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
}

var gates = []gate{
	{MaxUnavailableStatefulSet, 24, 37},
	{StatefulSetRecreateStrategy, 37, 0},
}

// Gates returns the gates version v knows, by name, at their defaults.
func Gates(v Version) map[string]bool {
	out := map[string]bool{}
	for _, g := range gates {
		if v.Minor >= g.since {
			out[g.name] = g.onFrom != 0 && v.Minor >= g.onFrom
		}
	}
	return out
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
