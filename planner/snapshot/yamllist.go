package snapshot

import (
	"bytes"
	"sync/atomic"

	"sigs.k8s.io/yaml"
)

// addYAMLList reads a YAML document that is a List in the block layout
// sigs.k8s.io/yaml writes (rollplan snapshot, kubectl get -o yaml):
// "items:" at the start of a line, each item a "- " line and lines
// indented by two spaces. Each item is converted to JSON and decoded on
// its own, on every core, instead of the whole document at once: YAML's
// tree of a 150,000-pod List is gigabytes. YAML is read relative to its
// indentation, so an item dedented reads as it reads in the List; what
// an item cannot read on its own (an alias of another item's anchor, a
// quoted string cut by a line at column 0) is an error. It reports false,
// having changed nothing, when the document is laid out otherwise or on
// any error: the caller then converts the document whole, as before, and
// reports what that finds.
func (l *loader) addYAMLList(where string, doc []byte) (bool, error) {
	if !readYAMLItems || bytes.IndexByte(doc, '\r') >= 0 {
		return false, nil
	}
	headChunk, chunks, ok := splitYAMLList(doc)
	if !ok {
		return false, nil
	}
	headJS, err := yaml.YAMLToJSONStrict(headChunk)
	if err != nil {
		return false, nil
	}
	head, ok := listHead(headJS)
	if !ok {
		return false, nil
	}
	objs := make([]object, len(chunks))
	var failed atomic.Bool
	tick := l.decoded(len(chunks))
	parallel(len(chunks), func(i int) {
		if failed.Load() {
			return
		}
		js, err := yaml.YAMLToJSONStrict(dedent(chunks[i]))
		if err != nil {
			failed.Store(true)
			return
		}
		d, ok := decodeRaw(itemWhere(where, i), rawItem(js, false), true)
		if !ok {
			failed.Store(true)
			return
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

// listHead is the head (apiVersion, kind, metadata) of a List whose other
// keys, converted to JSON, are headJS; false unless those are plainly
// the List's (see headKey) and the kind a List.
func listHead(headJS []byte) ([]byte, bool) {
	s := &scanner{data: headJS}
	s.ws()
	if s.pos >= len(headJS) || headJS[s.pos] != '{' {
		return nil, false
	}
	var fields [4][]byte
	if !s.object(func(m member) bool {
		i := headKey(m.key)
		if i == -2 || i == 3 {
			return false
		}
		if i >= 0 {
			fields[i] = m.value
		}
		return true
	}) {
		return nil, false
	}
	head := headJSON(fields)
	var tm typeMeta
	if strictUnmarshal(head, &tm) != nil || len(tm.Kind) < 4 || tm.Kind[len(tm.Kind)-4:] != "List" {
		return nil, false
	}
	return head, true
}

// splitYAMLList cuts a document into the lines outside items (head) and
// each item's lines; false unless it has one "items:" line followed by
// "- " items.
func splitYAMLList(doc []byte) (head []byte, items [][]byte, ok bool) {
	var h bytes.Buffer
	inItems, seenItems := false, false
	start := -1 // of the current item
	for pos := 0; pos < len(doc); {
		end := bytes.IndexByte(doc[pos:], '\n')
		if end < 0 {
			end = len(doc)
		} else {
			end += pos + 1
		}
		line := doc[pos:end]
		text := bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case inItems && bytes.HasPrefix(text, []byte("- ")):
			if start >= 0 {
				items = append(items, doc[start:pos])
			}
			start = pos
		case inItems && (len(text) == 0 || bytes.HasPrefix(text, []byte("  "))):
			if start < 0 {
				return nil, nil, false
			}
		case inItems && text[0] == ' ':
			return nil, nil, false
		default:
			if inItems {
				if start < 0 {
					return nil, nil, false
				}
				items = append(items, doc[start:pos])
				start, inItems = -1, false
			}
			if string(text) == "items:" {
				if seenItems {
					return nil, nil, false
				}
				inItems, seenItems = true, true
				break
			}
			h.Write(line)
		}
		pos = end
	}
	if inItems {
		if start < 0 {
			return nil, nil, false
		}
		items = append(items, doc[start:])
	}
	return h.Bytes(), items, seenItems && len(items) > 0
}

// dedent is an item's lines without the "- " or two spaces that start
// them (lines shorter than that are blank).
func dedent(chunk []byte) []byte {
	out := make([]byte, 0, len(chunk))
	for len(chunk) > 0 {
		end := bytes.IndexByte(chunk, '\n') + 1
		if end == 0 {
			end = len(chunk)
		}
		line := chunk[:end]
		if len(line) >= 2 && (line[0] == ' ' || line[0] == '-') {
			line = line[2:]
		} else {
			line = bytes.TrimLeft(line, " ")
		}
		out = append(out, line...)
		chunk = chunk[end:]
	}
	return out
}
