package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// MessageDigest is the SHA-256 of the canonical form of a send's message
// (params.message): the same for two messages an agent reads alike however
// they were serialized (whitespace, the order of object members, string
// escapes), different for any two an agent could read differently. The
// zero digest when the request is not a send.
//
// The canonical form is the message's JSON with no whitespace, every
// object's members sorted by their decoded key (stably: duplicates keep
// their order, so a message whose duplicates come in another order counts
// as another message), every string decoded as encoding/json decodes it
// and written with only '"', '\' and control characters escaped, and
// numbers, true, false and null as written. It is a function of what the
// agent's parser reads, so a retry serialized by another library is the
// same message; a retry that writes a number differently (1.0 for 1) is
// another message, which is the cautious side.
func (r *Request) MessageDigest() [32]byte {
	if r.message == nil {
		return [32]byte{}
	}
	b := appendCanonical(make([]byte, 0, len(r.message)), r.message, 0)
	return sha256.Sum256(b)
}

// DropBody lets go of the parsed body (Raw, Params and what aliases them)
// once the request was sent: a held stream keeps only its answers.
func (r *Request) DropBody() {
	r.Raw, r.Params, r.message = nil, nil, nil
}

// maxCanonicalDepth bounds the recursion of appendCanonical; encoding/json
// refuses deeper documents, so a valid body never reaches it.
const maxCanonicalDepth = 10000

// appendCanonical appends the canonical form of the JSON value v (valid
// JSON) to dst: no insignificant space, object members sorted by their
// (unescaped) names, strings with only the escapes JSON requires. It
// allocates nothing for objects of up to 16 members and strings without
// escapes (the common message), which it copies as they are.
func appendCanonical(dst, v []byte, depth int) []byte {
	i := skipSpace(v, 0)
	if i >= len(v) {
		return dst
	}
	if depth > maxCanonicalDepth {
		return append(dst, v[i:]...)
	}
	switch v[i] {
	case '{':
		var buf [16]member
		ms, ok := splitObject(v, buf[:0])
		if !ok {
			return append(dst, v[i:]...)
		}
		var kbuf [16]canonMember
		kvs := kbuf[:0]
		for _, m := range ms {
			k := canonMember{key: m.key, val: m.val}
			if m.esc {
				k.key = []byte(m.name())
			}
			kvs = append(kvs, k)
		}
		slices.SortStableFunc(kvs, func(a, b canonMember) int { return bytes.Compare(a.key, b.key) })
		dst = append(dst, '{')
		for j, m := range kvs {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonBytes(dst, m.key)
			dst = append(dst, ':')
			dst = appendCanonical(dst, m.val, depth+1)
		}
		return append(dst, '}')
	case '[':
		var buf [16][]byte
		els, ok := splitArray(v, buf[:0])
		if !ok {
			return append(dst, v[i:]...)
		}
		dst = append(dst, '[')
		for j, el := range els {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, el, depth+1)
		}
		return append(dst, ']')
	case '"':
		end := skipString(v, i)
		if end <= len(v) && end-i >= 2 && v[end-1] == '"' {
			inner := v[i+1 : end-1]
			if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
				// Nothing to unescape, nothing to escape (JSON has no raw
				// control characters in strings): the string is canonical.
				return append(dst, v[i:end]...)
			}
		}
		s, ok := unquote(v[i:])
		if !ok {
			return append(dst, v[i:]...)
		}
		return appendCanonString(dst, s)
	}
	end := skipValue(v, i)
	return append(dst, v[i:end]...)
}

// canonMember is an object member as appendCanonical sorts it: its name
// unescaped.
type canonMember struct{ key, val []byte }

// appendCanonBytes is appendCanonString of a name held as bytes.
func appendCanonBytes(dst, s []byte) []byte {
	plain := utf8.Valid(s)
	for _, c := range s {
		if c == '"' || c == '\\' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendCanonString(dst, string(s))
}

// appendCanonString appends s as a JSON string escaping only what JSON
// requires: '"', '\' and the control characters below U+0020.
func appendCanonString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			dst = utf8.AppendRune(dst, r) // invalid bytes become U+FFFD, as decoders read them
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}

// TaskAsSendResult turns a Task the agent answered a GetTask with, in
// version from, into the result of a send in version to: 0.3 answers the
// Task itself (kind "task"), 1.0 wraps it as {"task": …}. The meter
// answers a send it does not forward again (its messageId was sent
// before) with it.
func TaskAsSendResult(from, to Version, task json.RawMessage) (json.RawMessage, error) {
	if firstByte(task) != '{' || !validJSON(task) {
		return nil, InvalidAgentResponse("the agent's task is not an object")
	}
	t, err := TranslateResult(from, to, MethodGetTask, task)
	if err != nil {
		return nil, err
	}
	if to == V10 {
		return wrap("task", t), nil
	}
	o, ok := parseObject(t)
	if !ok {
		return nil, InvalidAgentResponse("the agent's task is not an object")
	}
	setKind(o, "task", V03)
	return o.bytes(), nil
}
