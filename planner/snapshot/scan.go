package snapshot

import (
	"bytes"
	"unicode/utf8"
)

// scanner walks JSON without decoding it: it finds a List's items for
// decoding in parallel, and notes what the YAML reader (sigs.k8s.io/yaml,
// through which every file used to go) could read otherwise than
// encoding/json does. Anything it does not know to read alike is marked
// odd, and read the old way, so that a file decodes to the same objects
// and the same errors whichever way it is read.
type scanner struct {
	data []byte
	pos  int
	// odd: the value scanned holds something YAML may read differently
	// (see str and number).
	odd bool
	// topOdd: a key of the outermost object is odd.
	topOdd bool
	depth  int
}

// maxDepth: deeper values are left to the decoders and their limits.
const maxDepth = 1000

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one JSON value; false when it is not JSON.
func (s *scanner) value() bool {
	s.ws()
	if s.pos >= len(s.data) {
		return false
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array(nil)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return false
	}
	s.pos += len(lit)
	return true
}

// number scans a JSON number. Only integers of up to 18 digits (not -0)
// are read alike: YAML reads others as floats and writes them back
// otherwise (1.0 as 1, 1e3 as 1000).
func (s *scanner) number() bool {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	digits := s.pos
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if s.pos < len(s.data) && s.data[s.pos] >= '1' && s.data[s.pos] <= '9' {
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
		}
	} else {
		return false
	}
	if s.pos-digits > 18 || string(s.data[start:s.pos]) == "-0" {
		s.odd = true
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.odd = true
		s.pos++
		if !s.digits() {
			return false
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.odd = true
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos > start
}

// str scans a string and returns its content (without the quotes; nil
// when it holds escapes). Odd: characters YAML does not allow in a
// stream (DEL, C1 controls but NEL, U+FFFE, U+FFFF, invalid UTF-8), the
// escape \/ that YAML lacks, and escaped surrogates, which YAML rejects
// and encoding/json pairs.
func (s *scanner) str() ([]byte, bool) {
	s.pos++ // "
	start := s.pos
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			content := s.data[start:s.pos]
			s.pos++
			if escaped {
				return nil, true
			}
			return content, true
		case c < 0x20:
			return nil, false
		case c == 0x7f:
			s.odd = true
			s.pos++
		case c == '\\':
			escaped = true
			if s.pos+1 >= len(s.data) {
				return nil, false
			}
			switch s.data[s.pos+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case '/':
				s.odd = true
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) {
					return nil, false
				}
				var r rune
				for _, h := range s.data[s.pos+2 : s.pos+6] {
					switch {
					case h >= '0' && h <= '9':
						r = r<<4 | rune(h-'0')
					case h >= 'a' && h <= 'f':
						r = r<<4 | rune(h-'a'+10)
					case h >= 'A' && h <= 'F':
						r = r<<4 | rune(h-'A'+10)
					default:
						return nil, false
					}
				}
				if r >= 0xd800 && r <= 0xdfff {
					s.odd = true
				}
				s.pos += 6
			default:
				return nil, false
			}
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n == 1 || r >= 0x80 && r <= 0x9f && r != 0x85 || r == 0xfffe || r == 0xffff {
				s.odd = true
			}
			s.pos += n
		}
	}
	return nil, false
}

// member is one key of an object: its name (nil when escaped) and value.
type member struct {
	key   []byte
	value []byte
}

// object scans an object; each member is passed to fn when not nil.
// Odd: a key YAML reads otherwise ("<<", the merge key) or not at all
// (a line break between a key and its colon, or more than 1,000 bytes
// from a key's start to its colon: YAML's simple keys are one line of at
// most 1,024 characters).
func (s *scanner) object(fn func(member) bool) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.pos++ // {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	for {
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		start := s.pos
		key, ok := s.str()
		if !ok {
			return false
		}
		end := s.pos
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return false
		}
		if string(key) == "<<" || s.pos-start > 1000 || bytes.ContainsAny(s.data[end:s.pos], "\r\n") {
			s.odd = true
			s.topOdd = s.topOdd || s.depth == 1
		}
		s.pos++
		s.ws()
		vstart := s.pos
		if !s.value() {
			return false
		}
		if fn != nil && !fn(member{key: key, value: s.data[vstart:s.pos]}) {
			return false
		}
		s.ws()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// array scans an array; each element is passed to fn when not nil, with
// whether it is odd.
func (s *scanner) array(fn func(elem []byte, odd bool)) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.pos++ // [
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	for {
		s.ws()
		start, odd := s.pos, s.odd
		s.odd = false
		if !s.value() {
			return false
		}
		if fn != nil {
			fn(s.data[start:s.pos], s.odd)
		}
		s.odd = s.odd || odd
		s.ws()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}
