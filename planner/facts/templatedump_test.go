package facts

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/dump"
	"sigs.k8s.io/randfill"

	"github.com/rollplan/rollplan/planner/kubeversion"
)

// randomTemplates fills n templates from a fixed seed: every exported
// field, Quantities in their int64, inf.Dec and cached-string forms, times
// in the local, UTC and fixed zones (time.Location is dumped too).
func randomTemplates(t testing.TB, n int, seed int64) []*corev1.PodTemplateSpec {
	t.Helper()
	suffixes := []string{"", "m", "k", "M", "Ki", "Mi", "Gi", "e3", "E-2"}
	f := randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			switch c.Intn(5) {
			case 0:
				*q = resource.MustParse(fmt.Sprint(c.Intn(5000)) + suffixes[c.Intn(len(suffixes))])
			case 1:
				*q = *resource.NewMilliQuantity(c.Int63n(1e9), resource.DecimalSI)
			case 2:
				*q = *resource.NewQuantity(c.Int63(), resource.BinarySI)
			case 3: // too large for int64: held as an inf.Dec
				*q = resource.MustParse(fmt.Sprintf("%d%09d%09d", c.Intn(1000)+1, c.Intn(1e9), c.Intn(1e9)))
			case 4:
				*q = resource.MustParse(fmt.Sprintf("%d.%03d", c.Intn(100), c.Intn(1000)))
				q.AsDec()
			}
			if c.Bool() {
				_ = q.String() // caches the string in the unexported field s
			}
		},
		func(tm *metav1.Time, c randfill.Continue) {
			u := time.Unix(c.Int63n(4e9), c.Int63n(1e9))
			switch c.Intn(3) {
			case 0:
				tm.Time = u.UTC()
			case 1:
				tm.Time = u.In(time.FixedZone("X", 3600*(c.Intn(24)-12)))
			default:
				tm.Time = u.Local()
			}
		},
	)
	out := make([]*corev1.PodTemplateSpec, n)
	for i := range out {
		out[i] = &corev1.PodTemplateSpec{}
		f.Fill(out[i])
	}
	return out
}

// sharePointers makes every non-nil pointer of a type the first one met of
// that type, so that the dump meets the same address at several depths
// (spew's cycle detection must not fire, nor our copy of it).
func sharePointers(v reflect.Value, first map[reflect.Type]reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if f, ok := first[v.Type()]; ok && v.CanSet() {
			v.Set(f)
			return
		}
		first[v.Type()] = v
		sharePointers(v.Elem(), first)
	case reflect.Slice:
		for i := range v.Len() {
			sharePointers(v.Index(i), first)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				sharePointers(v.Field(i), first)
			}
		}
	}
}

// Fields the k8s.io/api of each older version lacks, as the diff of the
// releases' type.field lists gives them.
var (
	v037Fields = []string{
		"ClusterTrustBundleProjection.User", "ConfigMapVolumeSource.DefaultUser", "DownwardAPIVolumeFile.User",
		"DownwardAPIVolumeSource.DefaultUser", "EmptyDirVolumeSource.Mode", "GRPCAction.Mode",
		"HTTPGetAction.Protocol", "KeyToPath.User", "PodCertificateProjection.User", "PodSpec.EvictionResponders",
		"ProjectedVolumeSource.DefaultUser", "SecretVolumeSource.DefaultUser", "ServiceAccountTokenProjection.User",
		"VolumeMount.BindMountOptions",
	}
	newerFields = map[kubeversion.Version][]string{
		kubeversion.V1_36: v037Fields,
		kubeversion.V1_35: append(slices.Clone(v037Fields), "PodSpec.SchedulingGroup"),
	}
)

// clearFields zeroes the core/v1 fields named Type.Field in v.
func clearFields(v reflect.Value, fields []string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			clearFields(v.Elem(), fields)
		}
	case reflect.Slice:
		for i := range v.Len() {
			clearFields(v.Index(i), fields)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if v.Type().PkgPath() == "k8s.io/api/core/v1" && slices.Contains(fields, v.Type().Name()+"."+f.Name) {
				v.Field(i).SetZero()
				continue
			}
			clearFields(v.Field(i), fields)
		}
	}
}

// For the compiled k8s.io/api (v1.37), the dump is spew's byte for byte.
func TestDumpTemplateMatchesSpew(t *testing.T) {
	empty := &corev1.PodTemplateSpec{}
	templates := []*corev1.PodTemplateSpec{empty}
	for _, o := range oracleTemplates {
		templates = append(templates, decodeTemplate(t, o.name, o.json))
	}
	uid := int64(1000)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	sc := &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &uid}
	templates = append(templates, &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		ActiveDeadlineSeconds: &uid,
		SecurityContext:       &corev1.PodSecurityContext{RunAsUser: &uid},
		InitContainers:        []corev1.Container{{Name: "i", SecurityContext: sc, StartupProbe: probe}},
		Containers:            []corev1.Container{{Name: "a", LivenessProbe: probe, ReadinessProbe: probe, SecurityContext: sc}},
	}})
	random := randomTemplates(t, 300, 1)
	for i, tmpl := range random {
		templates = append(templates, tmpl)
		if i%3 == 0 {
			shared := tmpl.DeepCopy()
			sharePointers(reflect.ValueOf(shared).Elem(), map[reflect.Type]reflect.Value{})
			templates = append(templates, shared)
		}
	}

	// The random templates reach the awkward corners.
	var multiKey, deleted, ports int
	for _, tmpl := range random {
		if len(tmpl.Labels) >= 2 {
			multiKey++
		}
		if tmpl.DeletionTimestamp != nil {
			deleted++
		}
		for _, c := range tmpl.Spec.Containers {
			if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil {
				ports++
			}
		}
	}
	var all strings.Builder
	for i, tmpl := range templates {
		want := dump.ForHash(*tmpl)
		all.WriteString(want)
		if got := dumpTemplate(tmpl, kubeversion.V1_37); got != want {
			at := 0
			for at < len(got) && at < len(want) && got[at] == want[at] {
				at++
			}
			t.Fatalf("template %d: dump differs from dump.ForHash at byte %d:\n got  ...%s\n want ...%s", i, at, excerpt(got, at), excerpt(want, at))
		}
	}
	for _, re := range []string{
		`Dec:\(\*inf\.Dec\)\{unscaled:\(big\.Int\)\{neg:\(bool\)(true|false) abs:\(big\.nat\)\[\d`, // Quantity as an inf.Dec
		`[{ ]s:\(string\)[^ }]`,                       // Quantity's cached string
		`loc:\(\*time\.Location\)\{name:\(string\)X `, // fixed zone
		`Type:\(intstr\.Type\)1 IntVal:\(int32\)0 StrVal:\(string\)[^ }]`,
		`Type:\(intstr\.Type\)0 IntVal:\(int32\)[1-9-]`,
		`map\[[^ \]]+:[^ \]]+ [^\]]`, // maps of 2+ entries
	} {
		if !regexp.MustCompile(re).MatchString(all.String()) {
			t.Errorf("no random template dump matches %s", re)
		}
	}
	// Spew's cycle map keeps pointers met in a finished subtree when no
	// shallower pointer follows: a shared pointer met deeper then prints as
	// <shown>. The shared-pointer templates must reach that.
	if !strings.Contains(all.String(), "<shown>") {
		t.Error("no template dump has <shown>")
	}
	if multiKey == 0 || deleted == 0 || ports == 0 {
		t.Errorf("random templates: %d with 2+ labels, %d with deletionTimestamp, %d HTTP liveness probes", multiKey, deleted, ports)
	}
}

func excerpt(s string, at int) string {
	lo, hi := max(0, at-80), min(len(s), at+80)
	return s[lo:hi]
}

type dumpNode struct {
	Name string
	Next *dumpNode
	Any  any
}

type dumpQuirks struct {
	Nils    []*int
	After   *int
	ByName  map[string]*int
	After2  int
	Iface   any
	TypedNi any
	PP      **int
	PPNil   **int
	C64     complex64
	C128    complex128
	F32     float32
	U       uintptr
	Arr     [2]int8
	Bytes   []byte
	ArrKey  map[[2]int]string
	BoolKey map[bool]int
	FltKey  map[float64]string
	StrKey  map[struct{ A, B int }]string
	AnyKey  map[any]int
	Ch      chan int
	Fn      func()
	hidden  struct{ n int }
}

// The dumper is go-spew's %#v beyond the shapes of PodTemplateSpec too:
// nil pointers that leave spew's ignoreNextType set, cycles, interfaces,
// non-string map keys.
func TestDumpValueMatchesSpew(t *testing.T) {
	one, two := 1, 2
	p := &one
	cycle := &dumpNode{Name: "a"}
	cycle.Next = &dumpNode{Name: "b", Next: cycle}
	self := &dumpNode{Name: "self"}
	self.Any = self
	var nilInt *int
	values := []any{
		nil,
		dumpQuirks{
			Nils: []*int{nil, &two, nil}, After: &one, ByName: map[string]*int{"a": nil, "b": &two}, After2: 3,
			Iface: &dumpNode{Name: "i"}, TypedNi: nilInt, PP: &p, PPNil: new(*int),
			C64: 1 - 2i, C128: complex(0.5, 3), F32: 0.1, U: 0xbeef, Arr: [2]int8{-1, 2}, Bytes: []byte("hi"),
			ArrKey: map[[2]int]string{{2, 1}: "x", {1, 9}: "y", {1, 2}: "z"}, BoolKey: map[bool]int{true: 1, false: 0},
			FltKey: map[float64]string{2.5: "b", -1: "a"}, StrKey: map[struct{ A, B int }]string{{2, 0}: "b", {1, 5}: "a"},
			AnyKey: map[any]int{"b": 1, 3: 2, "a": 3}, Ch: make(chan int), Fn: func() {}, hidden: struct{ n int }{7},
		},
		cycle,
		self,
		[]any{nil, 1, "s", cycle},
		&p,
	}
	for i, v := range values {
		want := dump.ForHash(v)
		d := newDumper(kubeversion.Newest)
		if v == nil {
			d.buf = append(d.buf, "(interface {})<nil>"...) // spew's Format handles a nil argument itself
		} else {
			d.format(reflect.ValueOf(v))
		}
		got := string(d.buf)
		d.release()
		if got != want {
			t.Errorf("value %d:\n got  %s\n want %s", i, got, want)
		}
	}
}

// The older versions print the structs as their k8s.io/api has them.
func TestDumpTemplateOlderLayouts(t *testing.T) {
	tmpl := oracleTemplate(t, "volumes-probes-new-fields")
	cases := []struct {
		v             kubeversion.Version
		want, without []string
	}{
		{kubeversion.V1_37, []string{"SchedulingGroup:(*v1.PodSchedulingGroup){", " EvictionResponders:([]v1.EvictionResponder)[", "BindMountOptions:([]string)[nosuid nodev]"}, []string{"WorkloadRef:"}},
		{kubeversion.V1_36, []string{"SchedulingGroup:(*v1.PodSchedulingGroup){PodGroupName:(*string)g1}}}"}, []string{"EvictionResponders:", "BindMountOptions:", "DefaultUser:", " User:(*int64)", "Protocol:(*v1.HTTPProtocol)", "Mode:(*v1.GRPCProbeMode)", "WorkloadRef:"}},
		{kubeversion.V1_35, []string{" HostnameOverride:(*string)<nil> WorkloadRef:(*v1.WorkloadReference)<nil>}}"}, []string{"SchedulingGroup:", "EvictionResponders:", "BindMountOptions:", "DefaultUser:"}},
	}
	for _, c := range cases {
		got := dumpTemplate(tmpl, c.v)
		for _, s := range c.want {
			if !strings.Contains(got, s) {
				t.Errorf("%s: dump lacks %q", c.v, s)
			}
		}
		for _, s := range c.without {
			if strings.Contains(got, s) {
				t.Errorf("%s: dump has %q", c.v, s)
			}
		}
	}
}

// Every fieldChanges entry names a field of the compiled structs.
func TestFieldChangesNameCompiledFields(t *testing.T) {
	for _, c := range fieldChanges {
		if _, ok := c.typ.FieldByName(c.field); !ok {
			t.Errorf("%s has no field %s", c.typ, c.field)
		}
		if !c.since.AtLeast(kubeversion.Supported[0]) || kubeversion.Newest.Minor < c.since.Minor {
			t.Errorf("%s.%s: since %s is not a supported version", c.typ, c.field, c.since)
		}
	}
}

// The structs reachable from PodTemplateSpec, as compiled: a k8s.io/api
// bump that changes them changes the hash of every template, so the new
// release's fields must go into fieldChanges (with since = its minor, once
// kubeversion supports it) and the pins below be updated.
func TestDumpLayoutIsPinned(t *testing.T) {
	var lines []string
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumField() {
				f := t.Field(i)
				lines = append(lines, fmt.Sprintf("%s.%03d.%s %s", t, i, f.Name, f.Type))
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[corev1.PodTemplateSpec]())
	slices.Sort(lines)
	h := fnv.New64a()
	h.Write([]byte(strings.Join(lines, "\n")))
	const wantFields, wantDigest = 568, uint64(0xbe43b2b77a13eda3)
	if len(lines) != wantFields || h.Sum64() != wantDigest {
		t.Errorf("the k8s.io/api structs reachable from PodTemplateSpec changed: %d fields, digest %#x; want %d, %#x", len(lines), h.Sum64(), wantFields, wantDigest)
	}
}
