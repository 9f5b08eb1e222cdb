package facts

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/rollplan/rollplan/planner/kubeversion"
)

// The pod-template hash (reference §1.5.1) is FNV-1a over go-spew's %#v
// dump of the template (k8s.io/utils/dump.ForHash), which prints every
// field of the k8s.io/api structs compiled into the controller, zero or
// not. rollplan is built with one k8s.io/api version, so to hash as an
// older controller does, the dumper below reproduces spew's output for the
// ForHash config (Indent " ", SortKeys, DisableMethods, SpewKeys,
// DisablePointerAddresses, DisableCapacities; only SortKeys, SpewKeys and
// DisableMethods matter to %#v) while printing each struct with the fields
// it had in that version's k8s.io/api.

// fieldChange is a field of a compiled k8s.io/api struct that older
// Kubernetes versions' structs lack.
type fieldChange struct {
	typ   reflect.Type
	field string
	// since: the first Kubernetes minor whose k8s.io/api has the field.
	since kubeversion.Version
	// replaces: the field older versions had in its place. rollplan
	// decodes templates with the compiled structs, which lack it, so it is
	// always nil.
	replaces *nilField
}

// nilField is a nil pointer field, by name and spew type string.
type nilField struct{ name, typ string }

// fieldChanges: the differences between the compiled k8s.io/api (v0.37.2)
// and the releases of the older supported minors, over every struct
// reachable from PodTemplateSpec (found by diffing the type.field lists of
// k8s.io/api v0.35.4, v0.36.3 and v0.37.2; field order and types are
// otherwise equal). TestDumpLayoutIsPinned fails when a k8s.io/api bump
// changes those structs.
var fieldChanges = []fieldChange{
	// k8s.io/api v0.36: SchedulingGroup took the place of v0.35's last
	// PodSpec field, WorkloadRef (alpha, gate GenericWorkload).
	{reflect.TypeFor[corev1.PodSpec](), "SchedulingGroup", kubeversion.V1_36, &nilField{"WorkloadRef", "*v1.WorkloadReference"}},

	// k8s.io/api v0.37.
	{reflect.TypeFor[corev1.ClusterTrustBundleProjection](), "User", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.ConfigMapVolumeSource](), "DefaultUser", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.DownwardAPIVolumeFile](), "User", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.DownwardAPIVolumeSource](), "DefaultUser", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.EmptyDirVolumeSource](), "Mode", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.GRPCAction](), "Mode", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.HTTPGetAction](), "Protocol", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.KeyToPath](), "User", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.PodCertificateProjection](), "User", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.PodSpec](), "EvictionResponders", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.ProjectedVolumeSource](), "DefaultUser", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.SecretVolumeSource](), "DefaultUser", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.ServiceAccountTokenProjection](), "User", kubeversion.V1_37, nil},
	{reflect.TypeFor[corev1.VolumeMount](), "BindMountOptions", kubeversion.V1_37, nil},
}

// dumpField is one field of a struct as a version's k8s.io/api has it.
type dumpField struct {
	name string
	// index into the compiled struct, or -1 for a field the compiled
	// struct lacks, printed as a nil pointer of type nilType.
	index   int
	nilType string
}

// dumpLayout: the fields of every struct type reachable from
// PodTemplateSpec, for one version. Read-only once built.
type dumpLayout struct {
	version kubeversion.Version
	structs map[reflect.Type][]dumpField
}

var layouts sync.Map // Version.Minor → *dumpLayout

// layoutFor returns v's layout, built on first use.
func layoutFor(v kubeversion.Version) *dumpLayout {
	if l, ok := layouts.Load(v.Minor); ok {
		return l.(*dumpLayout)
	}
	l := &dumpLayout{version: v, structs: map[reflect.Type][]dumpField{}}
	l.add(reflect.TypeFor[corev1.PodTemplateSpec]())
	actual, _ := layouts.LoadOrStore(v.Minor, l)
	return actual.(*dumpLayout)
}

func (l *dumpLayout) add(t reflect.Type) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		l.add(t.Elem())
	case reflect.Map:
		l.add(t.Key())
		l.add(t.Elem())
	case reflect.Struct:
		if _, ok := l.structs[t]; ok {
			return
		}
		fields := structFields(t, l.version)
		l.structs[t] = fields
		for _, f := range fields {
			if f.index >= 0 {
				l.add(t.Field(f.index).Type)
			}
		}
	}
}

// fields returns t's fields in l's version. Types outside the layout (none
// is reachable from a PodTemplateSpec) are computed each time.
func (l *dumpLayout) fields(t reflect.Type) []dumpField {
	if f, ok := l.structs[t]; ok {
		return f
	}
	return structFields(t, l.version)
}

func structFields(t reflect.Type, v kubeversion.Version) []dumpField {
	out := make([]dumpField, 0, t.NumField())
	for i := range t.NumField() {
		name := t.Field(i).Name
		if c := findFieldChange(t, name); c != nil && !v.AtLeast(c.since) {
			if c.replaces != nil {
				out = append(out, dumpField{name: c.replaces.name, index: -1, nilType: c.replaces.typ})
			}
			continue
		}
		out = append(out, dumpField{name: name, index: i})
	}
	return out
}

func findFieldChange(t reflect.Type, field string) *fieldChange {
	for i := range fieldChanges {
		if c := &fieldChanges[i]; c.typ == t && c.field == field {
			return c
		}
	}
	return nil
}

// dumper is a go-spew formatState for the dump.ForHash config and the %#v
// verb. Values are read through reflect's typed getters, never Interface,
// so unexported fields (resource.Quantity's, time.Time's) print as spew
// prints them.
type dumper struct {
	buf    []byte
	layout *dumpLayout
	depth  int
	// ignoreNextType is spew's flag of the same name, including its
	// quirks: a nil pointer printed without its type leaves it set, so the
	// next struct field's type is not printed either.
	ignoreNextType bool
	// pointers is spew's map of dereferenced pointers to the depth they
	// were met at, used to detect cycles. Spew drops the entries at or
	// below the current depth on entering each pointer, so the depths only
	// grow from bottom to top and a stack holds the same entries.
	pointers []seenPointer
}

type seenPointer struct {
	addr  uintptr
	depth int
}

var dumpers = sync.Pool{New: func() any { return new(dumper) }}

// largeDump: buffers grown past this are not pooled.
const largeDump = 1 << 20

// dumpTemplate returns what dump.ForHash(*t) prints in a controller built
// with the k8s.io/api of v (zero: kubeversion.Newest).
func dumpTemplate(t *corev1.PodTemplateSpec, v kubeversion.Version) string {
	d := newDumper(v)
	d.format(reflect.ValueOf(t).Elem())
	s := string(d.buf)
	d.release()
	return s
}

func newDumper(v kubeversion.Version) *dumper {
	d := dumpers.Get().(*dumper)
	d.buf, d.pointers = d.buf[:0], d.pointers[:0]
	d.layout = layoutFor(v.Or(kubeversion.Newest))
	d.depth, d.ignoreNextType = 0, false
	return d
}

func (d *dumper) release() {
	if cap(d.buf) <= largeDump {
		dumpers.Put(d)
	}
}

// unpack is spew's unpackValue.
func (d *dumper) unpack(v reflect.Value) reflect.Value {
	if v.Kind() == reflect.Interface {
		d.ignoreNextType = false
		if !v.IsNil() {
			v = v.Elem()
		}
	}
	return v
}

// format is spew's formatState.format.
func (d *dumper) format(v reflect.Value) {
	kind := v.Kind()
	if kind == reflect.Invalid {
		d.buf = append(d.buf, "<invalid>"...)
		return
	}
	if kind == reflect.Pointer {
		d.formatPtr(v)
		return
	}
	if !d.ignoreNextType {
		d.writeType(v.Type().String())
	}
	d.ignoreNextType = false

	switch kind {
	case reflect.Bool:
		d.buf = strconv.AppendBool(d.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.buf = strconv.AppendInt(d.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.buf = strconv.AppendUint(d.buf, v.Uint(), 10)
	case reflect.Float32:
		d.buf = strconv.AppendFloat(d.buf, v.Float(), 'g', -1, 32)
	case reflect.Float64:
		d.buf = strconv.AppendFloat(d.buf, v.Float(), 'g', -1, 64)
	case reflect.Complex64:
		d.appendComplex(v.Complex(), 32)
	case reflect.Complex128:
		d.appendComplex(v.Complex(), 64)
	case reflect.Slice, reflect.Array:
		if kind == reflect.Slice && v.IsNil() {
			d.buf = append(d.buf, "<nil>"...)
			return
		}
		d.buf = append(d.buf, '[')
		d.depth++
		for i := range v.Len() {
			if i > 0 {
				d.buf = append(d.buf, ' ')
			}
			d.ignoreNextType = true
			d.format(d.unpack(v.Index(i)))
		}
		d.depth--
		d.buf = append(d.buf, ']')
	case reflect.String:
		d.buf = append(d.buf, v.String()...)
	case reflect.Interface:
		// Only a nil interface gets here (unpack unwraps the others).
		if v.IsNil() {
			d.buf = append(d.buf, "<nil>"...)
		}
	case reflect.Map:
		if v.IsNil() {
			d.buf = append(d.buf, "<nil>"...)
			return
		}
		d.buf = append(d.buf, "map["...)
		d.depth++
		keys := v.MapKeys()
		d.sortKeys(keys)
		for i, k := range keys {
			if i > 0 {
				d.buf = append(d.buf, ' ')
			}
			d.ignoreNextType = true
			d.format(d.unpack(k))
			d.buf = append(d.buf, ':')
			d.ignoreNextType = true
			d.format(d.unpack(v.MapIndex(k)))
		}
		d.depth--
		d.buf = append(d.buf, ']')
	case reflect.Struct:
		d.buf = append(d.buf, '{')
		d.depth++
		for i, f := range d.layout.fields(v.Type()) {
			if i > 0 {
				d.buf = append(d.buf, ' ')
			}
			d.buf = append(d.buf, f.name...)
			d.buf = append(d.buf, ':')
			if f.index < 0 {
				d.nilPointer(f.nilType)
				continue
			}
			d.format(d.unpack(v.Field(f.index)))
		}
		d.depth--
		d.buf = append(d.buf, '}')
	case reflect.Uintptr:
		d.appendHexPtr(uintptr(v.Uint()))
	case reflect.UnsafePointer, reflect.Chan, reflect.Func:
		d.appendHexPtr(v.Pointer())
	}
}

// formatPtr is spew's formatState.formatPtr for %#v.
func (d *dumper) formatPtr(v reflect.Value) {
	if v.IsNil() && d.ignoreNextType {
		d.buf = append(d.buf, "<nil>"...)
		return
	}
	d.dropPointers()

	nilFound, cycleFound := false, false
	indirects := 0
	ve := v
	for ve.Kind() == reflect.Pointer {
		if ve.IsNil() {
			nilFound = true
			break
		}
		indirects++
		addr := ve.Pointer()
		if d.seen(addr) {
			cycleFound = true
			indirects--
			break
		}
		d.pointers = append(d.pointers, seenPointer{addr, d.depth})
		ve = ve.Elem()
		if ve.Kind() == reflect.Interface {
			if ve.IsNil() {
				nilFound = true
				break
			}
			ve = ve.Elem()
		}
	}

	typ := ve.Type().String()
	if !d.ignoreNextType {
		d.buf = append(d.buf, '(')
		d.appendStars(indirects)
		d.buf = append(d.buf, typ...)
		d.buf = append(d.buf, ')')
	} else {
		if nilFound || cycleFound {
			indirects += strings.Count(typ, "*")
		}
		d.buf = append(d.buf, '<')
		d.appendStars(indirects)
		d.buf = append(d.buf, '>')
	}

	switch {
	case nilFound:
		d.buf = append(d.buf, "<nil>"...)
	case cycleFound:
		d.buf = append(d.buf, "<shown>"...)
	default:
		d.ignoreNextType = true
		d.format(ve)
	}
}

// nilPointer prints a nil pointer of spew type string typ, as formatPtr
// does, for a field the compiled structs lack.
func (d *dumper) nilPointer(typ string) {
	if d.ignoreNextType {
		d.buf = append(d.buf, "<nil>"...)
		return
	}
	d.dropPointers()
	d.writeType(typ)
	d.buf = append(d.buf, "<nil>"...)
}

// dropPointers forgets the pointers met at or below the current depth.
func (d *dumper) dropPointers() {
	n := len(d.pointers)
	for n > 0 && d.pointers[n-1].depth >= d.depth {
		n--
	}
	d.pointers = d.pointers[:n]
}

// seen reports a cycle: addr was met at a smaller depth.
func (d *dumper) seen(addr uintptr) bool {
	for _, p := range d.pointers {
		if p.addr == addr && p.depth < d.depth {
			return true
		}
	}
	return false
}

func (d *dumper) writeType(typ string) {
	d.buf = append(d.buf, '(')
	d.buf = append(d.buf, typ...)
	d.buf = append(d.buf, ')')
}

func (d *dumper) appendStars(n int) {
	for range n {
		d.buf = append(d.buf, '*')
	}
}

func (d *dumper) appendComplex(c complex128, bits int) {
	d.buf = append(d.buf, '(')
	d.buf = strconv.AppendFloat(d.buf, real(c), 'g', -1, bits)
	if imag(c) >= 0 {
		d.buf = append(d.buf, '+')
	}
	d.buf = strconv.AppendFloat(d.buf, imag(c), 'g', -1, bits)
	d.buf = append(d.buf, "i)"...)
}

// appendHexPtr is spew's printHexPtr.
func (d *dumper) appendHexPtr(p uintptr) {
	if p == 0 {
		d.buf = append(d.buf, "<nil>"...)
		return
	}
	d.buf = append(d.buf, "0x"...)
	d.buf = strconv.AppendUint(d.buf, uint64(p), 16)
}

// sortKeys is spew's sortValues with DisableMethods. Every map reachable
// from a PodTemplateSpec has string keys. Spew sorts other keys (structs,
// pointers, interfaces) by their dump in its default config, which calls
// String methods; these are sorted by their ForHash dump instead, which
// differs only for keys with such methods.
func (d *dumper) sortKeys(keys []reflect.Value) {
	if len(keys) < 2 {
		return
	}
	if simpleSortKind(keys[0].Kind()) {
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			switch {
			case valueLess(a, b):
				return -1
			case valueLess(b, a):
				return 1
			}
			return 0
		})
		return
	}
	dumps := make([]string, len(keys))
	for i, k := range keys {
		kd := newDumper(d.layout.version)
		kd.format(kd.unpack(k))
		dumps[i] = string(kd.buf)
		kd.release()
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(dumps[a], dumps[b]) })
	sorted := make([]reflect.Value, len(keys))
	for i, j := range idx {
		sorted[i] = keys[j]
	}
	copy(keys, sorted)
}

// simpleSortKind is spew's canSortSimply.
func simpleSortKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String, reflect.Uintptr, reflect.Array:
		return true
	}
	return false
}

// valueLess is spew's valueSortLess.
func valueLess(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Bool:
		return !a.Bool() && b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() < b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() < b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() < b.Float()
	case reflect.String:
		return a.String() < b.String()
	case reflect.Array:
		for i := range a.Len() {
			av, bv := a.Index(i), b.Index(i)
			if av.Equal(bv) {
				continue
			}
			return valueLess(av, bv)
		}
	}
	return a.String() < b.String()
}
