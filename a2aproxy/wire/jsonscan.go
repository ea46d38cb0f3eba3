package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A small scanner over JSON that is already known to be valid (checked with
// json.Valid or produced by encoding/json). It splits objects and arrays
// into their members without decoding them, so values can be copied
// through byte for byte and found without allocating. Every function
// stays in bounds on invalid input, but only valid input gives meaningful
// results.

// member is one member of a JSON object: its key as written between the
// quotes (still escaped when esc) and its raw value.
type member struct {
	key []byte
	esc bool
	val []byte
}

// is reports whether the member's key is name.
func (m member) is(name string) bool {
	if !m.esc {
		return string(m.key) == name
	}
	return m.name() == name
}

// name returns the member's key, unescaped.
func (m member) name() string {
	if !m.esc {
		return string(m.key)
	}
	q := make([]byte, 0, len(m.key)+2)
	q = append(append(append(q, '"'), m.key...), '"')
	var s string
	if json.Unmarshal(q, &s) != nil {
		return string(m.key)
	}
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string that starts at b[i].
func skipString(b []byte, i int) int {
	i++
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
	return len(b)
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// splitObject appends the members of the object b to dst. ok is false when
// b is not an object.
func splitObject(b []byte, dst []member) (_ []member, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return dst, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return dst, true
	}
	for i < len(b) && b[i] == '"' {
		end := skipString(b, i)
		if end-1 <= i {
			return dst, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return dst, false
		}
		i = skipSpace(b, i+1)
		vend := skipValue(b, i)
		dst = append(dst, member{key: key, esc: bytes.IndexByte(key, '\\') >= 0, val: b[i:vend]})
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		return dst, i < len(b) && b[i] == '}'
	}
	return dst, false
}

// splitArray appends the elements of the array b to dst. ok is false when
// b is not an array.
func splitArray(b []byte, dst [][]byte) (_ [][]byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return dst, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, true
	}
	for i < len(b) {
		end := skipValue(b, i)
		if end <= i {
			return dst, false
		}
		dst = append(dst, b[i:end])
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		return dst, i < len(b) && b[i] == ']'
	}
	return dst, false
}

// firstByte is the first non-space byte of b, or 0.
func firstByte(b []byte) byte {
	i := skipSpace(b, 0)
	if i >= len(b) {
		return 0
	}
	return b[i]
}

// isNull reports whether b is absent or the JSON null.
func isNull(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || string(b) == "null"
}

// unquote returns the string value of the JSON string b.
func unquote(b []byte) (string, bool) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		return string(b[1 : len(b)-1]), true
	}
	// Escapes, or bytes that are not UTF-8, which encoding/json reads as
	// U+FFFD: read as the agent's parser reads them.
	var s string
	if json.Unmarshal(b, &s) != nil {
		return "", false
	}
	return s, true
}

// quote returns s as a JSON string.
func quote(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// object is a JSON object being rewritten: its members in their original
// order, each either copied from the source or set anew.
type object struct {
	ms []member
}

func parseObject(b []byte) (*object, bool) {
	ms, ok := splitObject(b, nil)
	if !ok {
		return nil, false
	}
	return &object{ms: ms}, true
}

func (o *object) index(name string) int {
	for i := len(o.ms) - 1; i >= 0; i-- { // the last duplicate wins, as in encoding/json
		if o.ms[i].is(name) {
			return i
		}
	}
	return -1
}

func (o *object) get(name string) ([]byte, bool) {
	if i := o.index(name); i >= 0 {
		return o.ms[i].val, true
	}
	return nil, false
}

// set replaces the value of name, or appends the member.
func (o *object) set(name string, v []byte) {
	if i := o.index(name); i >= 0 {
		o.ms[i].val = v
		return
	}
	o.ms = append(o.ms, member{key: []byte(name), val: v})
}

// put sets a member taken from another object, in place of any member of
// the same name.
func (o *object) put(m member) {
	if i := o.index(m.name()); i >= 0 {
		o.ms[i] = m
		return
	}
	o.ms = append(o.ms, m)
}

// del removes name and returns its value.
func (o *object) del(name string) ([]byte, bool) {
	var v []byte
	found := false
	for i := 0; i < len(o.ms); {
		if o.ms[i].is(name) {
			v, found = o.ms[i].val, true
			o.ms = append(o.ms[:i], o.ms[i+1:]...)
			continue
		}
		i++
	}
	return v, found
}

// rename gives the member old the key name, keeping its place. A member
// already called name is dropped.
func (o *object) rename(old, name string) {
	i := o.index(old)
	if i < 0 {
		return
	}
	v := o.ms[i].val
	o.ms[i] = member{key: []byte(name), val: v}
	for j := 0; j < len(o.ms); {
		if j != i && o.ms[j].is(name) {
			o.ms = append(o.ms[:j], o.ms[j+1:]...)
			if j < i {
				i--
			}
			continue
		}
		j++
	}
}

func (o *object) bytes() []byte {
	n := 2
	for _, m := range o.ms {
		n += len(m.key) + len(m.val) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range o.ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		b = append(b, bytes.TrimSpace(m.val)...)
	}
	return append(b, '}')
}

// mapItems rewrites each element of the array member name with f, when
// there is one.
func (o *object) mapItems(name string, f func([]byte) []byte) {
	if v, ok := o.get(name); ok {
		o.set(name, mapArray(v, f))
	}
}

// stringMember is the string member name of the object b (the last one,
// as in encoding/json); "" when b is not an object or the member is
// absent or not a string.
func stringMember(b []byte, name string) string {
	var buf [8]member
	ms, _ := splitObject(b, buf[:0])
	var s string
	for _, m := range ms {
		if m.is(name) {
			s, _ = unquote(m.val)
		}
	}
	return s
}

// mapArray applies f to every element of the array b. A value that is not
// an array is returned unchanged.
func mapArray(b []byte, f func([]byte) []byte) []byte {
	els, ok := splitArray(b, nil)
	if !ok {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, '[')
	for i, e := range els {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, f(e)...)
	}
	return append(out, ']')
}

// wrap returns {"name":v}.
func wrap(name string, v []byte) []byte {
	b := make([]byte, 0, len(name)+len(v)+5)
	b = append(b, '{', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	b = append(b, v...)
	return append(b, '}')
}

var (
	jsonTrue  = []byte("true")
	jsonFalse = []byte("false")
)

func jsonBool(v bool) []byte {
	if v {
		return jsonTrue
	}
	return jsonFalse
}

// maxDepth is encoding/json's nesting limit, kept so that validJSON and
// json.Valid agree on every input.
const maxDepth = 10000

// validJSON reports whether b is one JSON value (with surrounding
// whitespace), exactly as json.Valid does, in a single pass without the
// per-byte state machine: it runs on every request, response and stream
// event.
func validJSON(b []byte) bool {
	var buf [32]byte
	stack := buf[:0] // the open containers, '{' or '['
	i := skipSpace(b, 0)
	var ok bool
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if len(stack) == maxDepth { // even an empty container counts
				return false
			}
			j := skipSpace(b, i+1)
			if j < len(b) && b[j] == end {
				i = j + 1
				break
			}
			stack = append(stack, c)
			i = j
			if c == '{' {
				if i, ok = objectKey(b, i); !ok {
					return false
				}
			}
			continue
		case '"':
			if i, ok = scanString(b, i); !ok {
				return false
			}
		case 't':
			if i, ok = literal(b, i, "true"); !ok {
				return false
			}
		case 'f':
			if i, ok = literal(b, i, "false"); !ok {
				return false
			}
		case 'n':
			if i, ok = literal(b, i, "null"); !ok {
				return false
			}
		default:
			if i, ok = scanNumber(b, i); !ok {
				return false
			}
		}
		// A value ended at i: close containers until another value is due.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if top == '{' {
					if i, ok = objectKey(b, i); !ok {
						return false
					}
				}
				break
			}
			if (top == '{' && b[i] == '}') || (top == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// objectKey reads `"key" :` at i and returns where the value starts.
func objectKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := scanString(b, i)
	if !ok {
		return i, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// scanString checks the string starting at b[i] == '"' and returns the
// index past it.
func scanString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); {
		c := b[j]
		if c >= 0x20 && c != '"' && c != '\\' {
			j++
			continue
		}
		switch c {
		case '"':
			return j + 1, true
		case '\\':
			if j+1 >= len(b) {
				return j, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return j, false
				}
				j += 6
			default:
				return j, false
			}
		default: // a control character
			return j, false
		}
	}
	return len(b), false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// scanNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}
