package kubeversion

import (
	"maps"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    Version
		wantErr string
	}{
		{"v1.37", V1_37, ""},
		{"1.36", V1_36, ""},
		{"v1.35.0", Version{Minor: 35, Patch: 0, HasPatch: true}, ""},
		{"v1.37.2-gke.1200", Version{Minor: 37, Patch: 2, HasPatch: true}, ""},
		{"v1.36.3+k3s1", Version{Minor: 36, Patch: 3, HasPatch: true}, ""},
		{"v1.35.12", Version{Minor: 35, Patch: 12, HasPatch: true}, ""},
		{" v1.37 ", V1_37, ""},
		{"v1.34", Version{}, "v1.34 is not supported: rollplan plans for v1.35, v1.36 and v1.37"},
		{"v1.38.1", Version{}, "v1.38 is not supported"},
		{"v2.0", Version{}, `"v2.0" is not a Kubernetes version`},
		{"v1.37x", Version{}, `"v1.37x" is not a Kubernetes version`},
		{"v1.", Version{}, `"v1." is not a Kubernetes version`},
		{"", Version{}, `"" is not a Kubernetes version`},
		{"latest", Version{}, `"latest" is not a Kubernetes version such as v1.37 or v1.37.2: rollplan plans for v1.35, v1.36 and v1.37`},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		switch {
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("Parse(%q) error %v, want one containing %q", c.in, err, c.wantErr)
		}
	}
}

// The gate defaults of each version (reference §0.1, §8).
func TestGates(t *testing.T) {
	cases := []struct {
		v    Version
		want map[string]bool
	}{
		// Patch unknown: the minor's last rule.
		{V1_35, map[string]bool{MaxUnavailableStatefulSet: false}},
		// kubernetes/kubernetes pkg/features/kube_features.go at each tag:
		// Default true in v1.35.0 to v1.35.3, false from v1.35.4 (#137926).
		{Version{Minor: 35, Patch: 0, HasPatch: true}, map[string]bool{MaxUnavailableStatefulSet: true}},
		{Version{Minor: 35, Patch: 3, HasPatch: true}, map[string]bool{MaxUnavailableStatefulSet: true}},
		{Version{Minor: 35, Patch: 4, HasPatch: true}, map[string]bool{MaxUnavailableStatefulSet: false}},
		{Version{Minor: 35, Patch: 9, HasPatch: true}, map[string]bool{MaxUnavailableStatefulSet: false}},
		{V1_36, map[string]bool{MaxUnavailableStatefulSet: false}},
		{Version{Minor: 36, Patch: 0, HasPatch: true}, map[string]bool{MaxUnavailableStatefulSet: false}},
		{Version{Minor: 37, Patch: 0, HasPatch: true}, map[string]bool{MaxUnavailableStatefulSet: true, StatefulSetRecreateStrategy: false}},
		{V1_37, map[string]bool{MaxUnavailableStatefulSet: true, StatefulSetRecreateStrategy: false}},
	}
	for _, c := range cases {
		if got := Gates(c.v); !maps.Equal(got, c.want) {
			t.Errorf("Gates(%s) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestOverrides(t *testing.T) {
	got, err := ParseGates(V1_37, "MaxUnavailableStatefulSet=false, StatefulSetRecreateStrategy=true")
	if err != nil {
		t.Fatal(err)
	}
	all, err := WithOverrides(V1_37, got)
	if err != nil || all[MaxUnavailableStatefulSet] || !all[StatefulSetRecreateStrategy] {
		t.Errorf("WithOverrides = %v, %v", all, err)
	}
	for _, c := range []struct {
		v        Version
		in, want string
	}{
		{V1_36, "StatefulSetRecreateStrategy=true", "feature gate StatefulSetRecreateStrategy does not exist in Kubernetes v1.36 (it arrived in v1.37)"},
		{V1_37, "Nope=true", "unknown feature gate Nope: rollplan models MaxUnavailableStatefulSet and StatefulSetRecreateStrategy"},
		{V1_37, "MaxUnavailableStatefulSet", `"MaxUnavailableStatefulSet": want NAME=true|false`},
		{V1_37, "MaxUnavailableStatefulSet=yes", `MaxUnavailableStatefulSet: "yes" is not true or false`},
	} {
		if _, err := ParseGates(c.v, c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseGates(%s, %q) error %v, want %q", c.v, c.in, err, c.want)
		}
	}
	if _, err := WithOverrides(V1_35, map[string]bool{StatefulSetRecreateStrategy: false}); err == nil {
		t.Error("WithOverrides accepted a gate v1.35 does not have")
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		asked, recorded string
		want            Version
		note, err       string
	}{
		{"v1.35", "v1.37.2", V1_35, "", ""},
		{"", "v1.36.3", Version{Minor: 36, Patch: 3, HasPatch: true}, "", ""},
		{"v1.35.2", "v1.37.2", Version{Minor: 35, Patch: 2, HasPatch: true}, "", ""},
		{"", "", V1_37, "the snapshot records no Kubernetes version: planning for v1.37's controllers", ""},
		{"", "v1.40.0", V1_37, "the snapshot runs Kubernetes v1.40.0, which rollplan does not model (it plans for v1.35, v1.36 and v1.37): planning for v1.37's controllers", ""},
		{"", "v1.30.1", V1_35, "planning for v1.35's controllers", ""},
		{"", "v0.0.0-master+$Format:%H$", V1_37, "which rollplan cannot read", ""},
		{"v1.20", "", Version{}, "", "v1.20 is not supported"},
	}
	for _, c := range cases {
		v, note, err := Resolve(c.asked, c.recorded, "the snapshot")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Resolve(%q, %q) error %v, want %q", c.asked, c.recorded, err, c.err)
			}
			continue
		}
		if err != nil || v != c.want || !strings.Contains(note, c.note) || (c.note == "") != (note == "") {
			t.Errorf("Resolve(%q, %q) = %v, %q, %v; want %v, %q", c.asked, c.recorded, v, note, err, c.want, c.note)
		}
	}
}

// The patch rules that set a version's gate defaults, for the plan's
// header: the one in effect at a known patch, the last one (and that the
// patch is unknown) without one, none in a minor without rules.
func TestPatchRules(t *testing.T) {
	for _, c := range []struct {
		v    Version
		want []string
	}{
		{Version{Minor: 35, Patch: 2, HasPatch: true}, []string{"MaxUnavailableStatefulSet on in v1.35.0–v1.35.3: beta and on by default in v1.35.0"}},
		{Version{Minor: 35, Patch: 4, HasPatch: true}, []string{"MaxUnavailableStatefulSet off from v1.35.4: off by default from v1.35.4 (kubernetes/kubernetes#137904, cherry-picked as #137926)"}},
		{V1_35, []string{"patch unknown, v1.35's latest rule: MaxUnavailableStatefulSet off from v1.35.4"}},
		{Version{Minor: 36, Patch: 3, HasPatch: true}, nil},
		{V1_37, nil},
	} {
		got := PatchRules(c.v)
		if len(got) != len(c.want) {
			t.Errorf("PatchRules(%s) = %q, want %d lines like %q", c.v.Release(), got, len(c.want), c.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("PatchRules(%s)[%d] = %q, want it to start %q", c.v.Release(), i, got[i], c.want[i])
			}
		}
	}
}
