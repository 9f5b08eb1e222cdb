package rego

import (
	"fmt"
	"hash/maphash"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/planner/facts"
)

// The VM's values (vm.go) are Go values held in an any, nil meaning
// undefined:
//
//   - vnull{}, bool, string;
//   - int64 for an integer whose canonical text is its OPA number, and
//     ast.Number for every other number (fractions, big integers, or an
//     integer written otherwise, as 1.0), so that what the VM hands back
//     reads exactly as the interpreter's answer would;
//   - *varray, *vobject, *vset;
//   - *facts.Pod (one pod of the input, read field by field without a copy)
//     and *vpods (input.pods).
//
// Scalars compare natively; anything else compares through OPA's own
// ast.Compare, so that order and equality are OPA's.
type vnull struct{}

type varray struct{ e []any }

// newArray is an empty array with room for n elements, small ones in one
// allocation with their backing array.
func newArray(n int) *varray {
	switch {
	case n <= 2:
		a := &struct {
			varray
			buf [2]any
		}{}
		a.e = a.buf[:0:2]
		return &a.varray
	case n <= 4:
		a := &struct {
			varray
			buf [4]any
		}{}
		a.e = a.buf[:0:4]
		return &a.varray
	case n <= 12:
		a := &struct {
			varray
			buf [12]any
		}{}
		a.e = a.buf[:0:12]
		return &a.varray
	}
	return &varray{e: make([]any, 0, n)}
}

// newObject is an empty object with room for two entries (most answers'
// objects) in one allocation.
func newObject() *vobject {
	o := &struct {
		vobject
		buf [4]any
	}{}
	o.k, o.v = o.buf[:0:2], o.buf[2:2:4]
	return &o.vobject
}

// vobject keeps its entries in insertion order; scans go in OPA's sorted key
// order (sortedKeys). Larger objects index their keys by hash (idx), of
// whatever kind: a policy may key an object by pod index or build a set of
// objects over every pod.
type vobject struct {
	k, v   []any
	idx    hashIndex
	sorted []int
}

type vset struct {
	e      []any
	idx    hashIndex
	sorted []int
}

// hashIndex: positions by vhash of the key; nil below indexAt entries.
type hashIndex map[uint64][]int

// vpods is input.pods: the rollout's pods, read in place.
type vpods struct{ pods []facts.Pod }

const indexAt = 8 // objects and sets index their keys from this size

// find is the position of k among keys, or -1.
func find(keys []any, idx hashIndex, k any) int {
	if idx != nil {
		for _, i := range idx[vhash(k)] {
			if equal(keys[i], k) {
				return i
			}
		}
		return -1
	}
	if s, ok := k.(string); ok {
		for i, x := range keys {
			if xs, ok := x.(string); ok && xs == s {
				return i
			}
		}
		return -1
	}
	for i, x := range keys {
		if equal(x, k) {
			return i
		}
	}
	return -1
}

// indexed adds the last of keys to idx, building idx once keys are many.
func indexed(keys []any, idx hashIndex) hashIndex {
	if idx == nil {
		if len(keys) < indexAt {
			return nil
		}
		idx = make(hashIndex, len(keys))
		for i, k := range keys {
			h := vhash(k)
			idx[h] = append(idx[h], i)
		}
		return idx
	}
	i := len(keys) - 1
	h := vhash(keys[i])
	idx[h] = append(idx[h], i)
	return idx
}

func (o *vobject) find(k any) int { return find(o.k, o.idx, k) }

func (o *vobject) get(k any) any {
	if i := o.find(k); i >= 0 {
		return o.v[i]
	}
	return nil
}

func (o *vobject) insert(k, v any) {
	if i := o.find(k); i >= 0 {
		o.v[i] = v
		return
	}
	o.k = append(o.k, k)
	o.v = append(o.v, v)
	o.sorted = nil
	o.idx = indexed(o.k, o.idx)
}

// reindex indexes an object built entry by entry.
func (o *vobject) reindex() {
	o.idx = nil
	if len(o.k) >= indexAt {
		o.idx = make(hashIndex, len(o.k))
		for i, k := range o.k {
			h := vhash(k)
			o.idx[h] = append(o.idx[h], i)
		}
	}
}

func (o *vobject) sortedKeys() []int {
	if o.sorted == nil || len(o.sorted) != len(o.k) {
		o.sorted = sortedIndex(o.k)
	}
	return o.sorted
}

func (s *vset) find(v any) int { return find(s.e, s.idx, v) }

func (s *vset) add(v any) {
	if s.find(v) >= 0 {
		return
	}
	s.e = append(s.e, v)
	s.sorted = nil
	s.idx = indexed(s.e, s.idx)
}

func (s *vset) sortedElems() []int {
	if s.sorted == nil || len(s.sorted) != len(s.e) {
		s.sorted = sortedIndex(s.e)
	}
	return s.sorted
}

var hashSeed = maphash.MakeSeed()

// vhash hashes a value so that equal values (compare == 0) hash alike:
// numbers by their float64 value (1 and 1.0 are equal), objects and sets
// whatever their order, pods and the input as the objects they stand for.
func vhash(v any) uint64 {
	switch x := v.(type) {
	case vnull:
		return 1
	case bool:
		if x {
			return 3
		}
		return 2
	case int64:
		return math.Float64bits(float64(x)) * 0x9E3779B97F4A7C15
	case ast.Number:
		if f, ok := x.Float64(); ok {
			return math.Float64bits(f) * 0x9E3779B97F4A7C15
		}
		return maphash.String(hashSeed, string(x))
	case string:
		return maphash.String(hashSeed, x)
	case *varray:
		h := uint64(17)
		for _, e := range x.e {
			h = h*31 + vhash(e)
		}
		return h
	case *vobject:
		h := uint64(19)
		for i := range x.k {
			h += vhash(x.k[i])*31 ^ vhash(x.v[i])
		}
		return h
	case *vset:
		h := uint64(23)
		for _, e := range x.e {
			h += vhash(e)
		}
		return h
	case *facts.Pod:
		// Rare as a key: hashed as the object it stands for.
		return vhash(scratch().materialize(x))
	case *vpods:
		h := uint64(17)
		m := scratch()
		for i := range x.pods {
			h = h*31 + vhash(m.materialize(&x.pods[i]))
		}
		return h
	case *vinput:
		if o, err := x.object(); err == nil {
			return vhash(o)
		}
	}
	return 0
}

// scratch is a machine for reading pods outside an evaluation.
func scratch() *machine { return &machine{changes: map[changesKey]*varray{}} }

func sortedIndex(vs []any) []int {
	out := make([]int, len(vs))
	for i := range out {
		out[i] = i
	}
	sort.SliceStable(out, func(a, b int) bool { return compare(vs[out[a]], vs[out[b]]) < 0 })
	return out
}

// rank orders the kinds of values as ast.Compare does; -1: not a scalar.
func rank(v any) int {
	switch v.(type) {
	case vnull:
		return 0
	case bool:
		return 1
	case int64, ast.Number:
		return 2
	case string:
		return 3
	}
	return -1
}

// compare is ast.Compare over VM values.
func compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra >= 0 && rb >= 0 {
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		switch x := a.(type) {
		case vnull:
			return 0
		case bool:
			y := b.(bool)
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		case int64:
			if y, ok := b.(int64); ok {
				switch {
				case x < y:
					return -1
				case x > y:
					return 1
				}
				return 0
			}
		case string:
			return strings.Compare(x, b.(string))
		}
	}
	return ast.Compare(toAST(a, nil), toAST(b, nil))
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x == y
		}
	case bool:
		if y, ok := b.(bool); ok {
			return x == y
		}
	case int64:
		if y, ok := b.(int64); ok {
			return x == y
		}
	}
	return compare(a, b) == 0
}

// intValue is n as a VM value; small ones are boxed without allocating.
func intValue(n int64) any {
	if n >= -smallInt && n < smallInt {
		return smallInts[n+smallInt]
	}
	return n
}

const smallInt = 1024

var smallInts = func() []any {
	out := make([]any, 2*smallInt)
	for i := range out {
		out[i] = int64(i - smallInt)
	}
	return out
}()

// numberValue is an OPA number as a VM value.
func numberValue(n ast.Number) any {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil && strconv.FormatInt(i, 10) == string(n) {
		return intValue(i)
	}
	return n
}

// fromAST converts an OPA value (a builtin's answer, the workload facts).
func fromAST(v ast.Value) any {
	switch x := v.(type) {
	case ast.Null:
		return vnull{}
	case ast.Boolean:
		return bool(x)
	case ast.Number:
		return numberValue(x)
	case ast.String:
		return string(x)
	case *ast.Array:
		a := &varray{e: make([]any, x.Len())}
		for i := range a.e {
			a.e[i] = fromAST(x.Elem(i).Value)
		}
		return a
	case ast.Object:
		o := &vobject{k: make([]any, 0, x.Len()), v: make([]any, 0, x.Len())}
		x.Foreach(func(k, v *ast.Term) {
			o.k = append(o.k, fromAST(k.Value))
			o.v = append(o.v, fromAST(v.Value))
		})
		if len(o.k) >= indexAt {
			o.reindex()
		}
		return o
	case ast.Set:
		s := &vset{}
		x.Foreach(func(t *ast.Term) { s.add(fromAST(t.Value)) })
		return s
	}
	return nil
}

// toAST converts a VM value to OPA's, pods exactly as inputValue does; c
// (nil: a fresh one) shares the pods' repeated terms.
func toAST(v any, c *converter) ast.Value {
	switch x := v.(type) {
	case vnull:
		return ast.Null{}
	case bool:
		return ast.Boolean(x)
	case int64:
		return ast.Number(strconv.FormatInt(x, 10))
	case ast.Number:
		return x
	case string:
		return ast.String(x)
	case *varray:
		ts := make([]*ast.Term, len(x.e))
		for i, e := range x.e {
			ts[i] = ast.NewTerm(toAST(e, c))
		}
		return ast.NewArray(ts...)
	case *vobject:
		items := make([][2]*ast.Term, len(x.k))
		for i := range x.k {
			items[i] = [2]*ast.Term{ast.NewTerm(toAST(x.k[i], c)), ast.NewTerm(toAST(x.v[i], c))}
		}
		return ast.NewObject(items...)
	case *vset:
		ts := make([]*ast.Term, len(x.e))
		for i, e := range x.e {
			ts[i] = ast.NewTerm(toAST(e, c))
		}
		return ast.NewSet(ts...)
	case *facts.Pod:
		if c == nil {
			c = newConverter()
		}
		return c.pod(x).Value
	case *vinput:
		o, err := x.object()
		if err != nil {
			panic(fmt.Sprintf("rego VM: input: %v", err)) // field() converted it before
		}
		return toAST(o, c)
	case *vpods:
		if c == nil {
			c = newConverter()
		}
		ts := make([]*ast.Term, len(x.pods))
		for i := range x.pods {
			ts[i] = c.pod(&x.pods[i])
		}
		return ast.NewArray(ts...)
	}
	panic("rego VM: no OPA value for undefined")
}

func newConverter() *converter {
	return &converter{changes: map[changesKey]*ast.Term{}, strings: map[string]*ast.Term{}}
}

// podField reads one field of a pod as inputValue writes it; nil: no such
// field. Labels, changes and PDBs are built through the evaluation's cache.
func (m *machine) podField(p *facts.Pod, key string) any {
	return m.podFieldID(p, podFieldIDs[key])
}

// podFieldID reads field id (podFieldIDs; 0: none).
func (m *machine) podFieldID(p *facts.Pod, id int) any {
	switch id {
	case 1: // name
		return p.Name
	case 2: // uid
		return p.UID
	case 3: // revision
		return p.Revision
	case 4: // updated
		return p.Updated
	case 5: // ordinal
		return intValue(int64(p.Ordinal))
	case 6: // index
		return intValue(int64(p.Index))
	case 7: // node
		return p.Node
	case 8: // zone
		return p.Zone
	case 9: // phase
		return p.Phase
	case 10: // scheduled
		return p.Scheduled
	case 11: // ready
		return p.Ready
	case 12: // readySeconds
		return intValue(int64(int(p.ReadySeconds)))
	case 13: // available
		return p.Available
	case 14: // unavailableSeconds
		return intValue(int64(int(p.UnavailableSeconds)))
	case 15: // terminating
		return p.Terminating
	case 16: // terminal
		return p.Terminal
	case 17: // restarts
		return intValue(int64(p.Restarts))
	case 18: // sidecarRestarts
		return intValue(int64(p.SidecarRestarts))
	case 19: // owner
		return p.Owner
	case 20: // labels
		o := &vobject{k: make([]any, 0, len(p.Labels)), v: make([]any, 0, len(p.Labels))}
		for k, v := range p.Labels {
			o.k = append(o.k, k)
			o.v = append(o.v, v)
		}
		if len(o.k) >= indexAt {
			o.reindex()
		}
		return o
	case 21: // deletionCost
		return intValue(int64(p.DeletionCost))
	case 22: // colocated
		return intValue(int64(p.Colocated))
	case 23: // readyBucket
		return intValue(int64(p.ReadyBucket))
	case 24: // createdBucket
		return intValue(int64(p.CreatedBucket))
	case 25: // changes
		k := keyOf(p.Changes)
		if a, ok := m.changes[k]; ok {
			return a
		}
		a := &varray{e: make([]any, len(p.Changes))}
		for i, ch := range p.Changes {
			a.e[i] = &vobject{
				k: []any{"path", "class", "inPlace", "detail"},
				v: []any{ch.Path, ch.Class, ch.InPlace, ch.Detail},
			}
		}
		m.changes[k] = a
		return a
	case 26: // pdbs
		a := &varray{e: make([]any, len(p.PDBs))}
		for i, n := range p.PDBs {
			a.e[i] = n
		}
		return a
	}
	return nil
}

// podFieldIDs numbers podKeys from 1, as podFieldID reads them.
var podFieldIDs = func() map[string]int {
	out := make(map[string]int, len(podKeys))
	for i, k := range podKeys {
		out[k] = i + 1
	}
	return out
}()

// podKeys are a pod's fields, as inputValue writes them.
var podKeys = []string{"name", "uid", "revision", "updated", "ordinal", "index", "node", "zone", "phase", "scheduled", "ready", "readySeconds", "available", "unavailableSeconds", "terminating", "terminal", "restarts", "sidecarRestarts", "owner", "labels", "deletionCost", "colocated", "readyBucket", "createdBucket", "changes", "pdbs"}

// vinput is the input document: each top-level field of the facts is
// converted when first read, as inputValue converts it (a DaemonSet's nodes
// are many, and most policies never read them); the pods are read in place.
type vinput struct {
	r      *facts.Rollout
	fields [len(inputFields)]any
	whole  *vobject
}

// inputFields are the facts' top-level JSON names, in field order.
var inputFields = func() [12]string {
	var out [12]string
	t := reflect.TypeFor[facts.Rollout]()
	if t.NumField() != len(out) {
		panic(fmt.Sprintf("rego VM: facts.Rollout has %d fields, want %d", t.NumField(), len(out)))
	}
	for i := range out {
		tag := t.Field(i).Tag.Get("json")
		if tag == "" || strings.Contains(tag, ",") || tag == "-" {
			panic("rego VM: facts.Rollout field " + t.Field(i).Name + " needs a plain json name")
		}
		out[i] = tag
	}
	return out
}()

// field is the top-level field named key; nil: none (or not convertible,
// err).
func (in *vinput) field(key string) (any, error) {
	for i, k := range inputFields {
		if k != key {
			continue
		}
		if v := in.fields[i]; v != nil {
			return v, nil
		}
		var v any
		if key == "pods" {
			v = &vpods{pods: in.r.Pods}
		} else {
			av, err := ast.InterfaceToValue(reflect.ValueOf(in.r).Elem().Field(i).Interface())
			if err != nil {
				return nil, err
			}
			v = fromAST(av)
		}
		in.fields[i] = v
		return v, nil
	}
	return nil, nil
}

// object is the whole input as an object.
func (in *vinput) object() (*vobject, error) {
	if in.whole != nil {
		return in.whole, nil
	}
	o := &vobject{}
	for _, k := range inputFields {
		v, err := in.field(k)
		if err != nil {
			return nil, err
		}
		o.insert(k, v)
	}
	in.whole = o
	return o, nil
}
