package snapshot

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// readRawJSON, readYAMLItems and readParallel are off in tests that compare the two
// ways of reading.
var readRawJSON, readYAMLItems, readParallel = true, true, true

// item is one element of a List's items, as bytes of its document.
type item struct {
	raw []byte
	odd bool
	// kind and apiVersion, when the item is an object that has them as
	// plain strings (raw JSON only).
	kind, apiVersion string
}

// splitList finds a List's type metadata and items in a document already
// converted to JSON, without copying them, so that the items can be
// decoded in parallel. head holds the List's apiVersion, kind and
// metadata. ok is false when the document is not a List or when its
// keys are not plainly these four (a key "Items" would be read as the
// items by encoding/json, which matches keys without regard to case):
// addJSON then reads it as it always did.
func splitList(js []byte) (head []byte, items []item, ok bool) {
	s := &scanner{data: js}
	s.ws()
	if s.pos >= len(js) || js[s.pos] != '{' {
		return nil, nil, false
	}
	var fields [4][]byte // apiVersion, kind, metadata, items
	good := s.object(func(m member) bool {
		i := headKey(m.key)
		if i == -2 || i >= 0 && fields[i] != nil {
			return false
		}
		if i >= 0 {
			fields[i] = m.value
		}
		return true
	})
	if !good || fields[3] == nil || fields[3][0] != '[' {
		return nil, nil, false
	}
	head = headJSON(fields)
	var tm typeMeta
	if strictUnmarshal(head, &tm) != nil || !strings.HasSuffix(tm.Kind, "List") {
		return nil, nil, false
	}
	is := &scanner{data: fields[3]}
	is.array(func(elem []byte, _ bool) { items = append(items, item{raw: elem}) })
	return head, items, true
}

// headKey numbers the keys of typeMeta (apiVersion 0, kind 1, metadata
// 2, items 3); -1 for another key, -2 for one that encoding/json might
// take for one of them (another case, an escape, non-ASCII).
func headKey(key []byte) int {
	if key == nil {
		return -2
	}
	for i, k := range [...]string{"apiVersion", "kind", "metadata", "items"} {
		if string(key) == k {
			return i
		}
		if strings.EqualFold(string(key), k) {
			return -2
		}
	}
	for _, c := range key {
		if c >= 0x80 {
			return -2
		}
	}
	return -1
}

// headJSON is an object of the List's apiVersion, kind and metadata (in
// the order of their keys sorted, as converted YAML has them).
func headJSON(fields [4][]byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range [...]string{"apiVersion", "kind", "metadata"} {
		if fields[i] == nil {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", k)
		b.Write(fields[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// addList reads a List's items (JSON converted from YAML) in parallel and
// merges them in order: the first error in document order is reported.
func (l *loader) addList(where string, head []byte, items []item) error {
	if err := l.capturedAt(where, head); err != nil {
		return err
	}
	objs := make([]object, len(items))
	tick := l.decoded(len(items))
	parallel(len(items), func(i int) {
		objs[i] = decodeItem(itemWhere(where, i), items[i].raw)
		tick()
	})
	return l.mergeAll(where, objs)
}

func itemWhere(where string, i int) string {
	return fmt.Sprintf("%s, items[%d]", where, i)
}

func (l *loader) mergeAll(where string, objs []object) error {
	for i := range objs {
		if err := l.merge(itemWhere(where, i), objs[i]); err != nil {
			return err
		}
		objs[i] = object{}
	}
	return nil
}

// parallel calls fn(0..n-1) on every core.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 || !readParallel {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// addRawJSON reads a file that is one JSON List (rollplan snapshot -o
// json, kubectl get -o json) without converting it to JSON through YAML
// first, which costs more than decoding it: items are decoded in
// parallel by sigs.k8s.io/json, case-sensitively, with duplicate and
// unknown fields reported. It reads the file only when that gives what
// reading through YAML gives, object for object, and reports false
// otherwise, having changed nothing: the caller reads the file as
// before. An item with anything unknown, duplicate, odd to YAML (see
// scanner) or not a kind rollplan reads is converted through YAML alone;
// any error reads the whole file again the old way, so that errors are
// the same.
func (l *loader) addRawJSON(file string, data []byte) (bool, error) {
	if !readRawJSON {
		return false, nil
	}
	// Outside the object, YAML allows neither tabs nor anything else.
	start := len(data) - len(bytes.TrimLeft(data, " \r\n"))
	if start == len(data) || data[start] != '{' {
		return false, nil
	}
	s := &scanner{data: data, pos: start}
	var fields [4][]byte
	var items []item
	good := s.object(func(m member) bool {
		i := headKey(m.key)
		if i < 0 || fields[i] != nil {
			return false
		}
		fields[i] = m.value
		if i == 3 {
			if m.value[0] != '[' {
				return false
			}
			is := &scanner{data: m.value}
			is.array(func(elem []byte, odd bool) { items = append(items, rawItem(elem, odd)) })
		}
		return true
	})
	// Top-level oddness (a key's colon on another line) is YAML's to read.
	if !good || s.topOdd || fields[3] == nil || len(bytes.TrimLeft(data[s.pos:], " \r\n")) != 0 {
		return false, nil
	}
	head, err := yaml.YAMLToJSONStrict(headJSON(fields))
	if err != nil {
		return false, nil
	}
	var tm typeMeta
	if strictUnmarshal(head, &tm) != nil || !strings.HasSuffix(tm.Kind, "List") {
		return false, nil
	}
	where := fmt.Sprintf("%s: document 1", file)
	objs := make([]object, len(items))
	var failed atomic.Bool
	tick := l.decoded(len(items))
	parallel(len(items), func(i int) {
		if failed.Load() {
			return
		}
		d, ok := decodeRaw(itemWhere(where, i), items[i], false)
		if !ok {
			failed.Store(true)
		}
		objs[i] = d
		tick()
	})
	if failed.Load() {
		return false, nil
	}
	if err := l.capturedAt(where, head); err != nil {
		return true, err
	}
	return true, l.mergeAll(where, objs)
}

// rawItem notes an item's kind and apiVersion when it is an object that
// has them as plain strings.
func rawItem(raw []byte, odd bool) item {
	it := item{raw: raw, odd: odd}
	if odd || raw[0] != '{' {
		return it
	}
	s := &scanner{data: raw}
	s.object(func(m member) bool {
		if m.value[0] != '"' {
			return true
		}
		switch string(m.key) {
		case "kind":
			if v, ok := (&scanner{data: m.value}).str(); ok && v != nil {
				it.kind = string(v)
			}
		case "apiVersion":
			if v, ok := (&scanner{data: m.value}).str(); ok && v != nil {
				it.apiVersion = string(v)
			}
		}
		return true
	})
	return it
}

// decodeRaw decodes one item of a raw JSON List (converted: of JSON
// converted from YAML); false when the file is to be read the old way.
// sigs.k8s.io/json reads it when its keys are exactly the fields'
// (otherwise encoding/json, which the old way used, might match them
// without regard to case) and none is repeated.
func decodeRaw(where string, it item, converted bool) (object, bool) {
	if !it.odd && it.kind != "" && !strings.HasSuffix(it.kind, "List") {
		if o := newObject(it.apiVersion, it.kind); o != nil {
			strict, err := kjson.UnmarshalStrict(it.raw, o)
			if err == nil && len(strict) == 0 && o.GetName() != "" {
				if !converted && normalizeRaw(o) != nil {
					return object{}, false
				}
				return object{apiVersion: it.apiVersion, kind: it.kind, obj: o}, true
			}
		}
	}
	js := it.raw
	if !converted {
		var err error
		if js, err = yaml.YAMLToJSONStrict(it.raw); err != nil {
			return object{}, false
		}
	}
	d := decodeItem(where, js)
	return d, d.err == nil
}

// normalizeRaw rewrites the JSON an object keeps as bytes (managed
// fields, a ControllerRevision's data) as YAML conversion writes it:
// compact, keys sorted.
func normalizeRaw(o metav1.Object) error {
	for _, mf := range o.GetManagedFields() {
		if raw := mf.FieldsV1.GetRawBytes(); raw != nil {
			js, err := yaml.YAMLToJSONStrict(raw)
			if err != nil {
				return err
			}
			mf.FieldsV1.SetRawBytes(js)
		}
	}
	if cr, ok := o.(*appsv1.ControllerRevision); ok && cr.Data.Raw != nil {
		js, err := yaml.YAMLToJSONStrict(cr.Data.Raw)
		if err != nil {
			return err
		}
		cr.Data.Raw = js
	}
	return nil
}
