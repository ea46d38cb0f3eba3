package wire

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The reading rule: the meter decides on exactly the request the agent
// will read.
//
// Agents' JSON parsers match object keys leniently: Go's encoding/json
// (the official a2a-go SDK) folds case, Unicode's folds included, so
// "TaskId", "TASKID", "taſkId" (U+017F) and "tasKId" (U+212A) all fill
// taskId; ProtoJSON parsers take the proto name (task_id) as well; and
// parsers disagree on duplicates (last wins, first wins, merged). The
// meter reads the members it decides on (the task a message continues,
// the tasks it references, the task of a task operation, the parent task,
// the text it estimates usage from) with an exact-key scanner. So in every
// object the meter reads fields of:
//
//   - no two keys may be taken for the same field (looseCollision), and
//   - a key that a lenient parser could take for one of those fields must
//     be spelled exactly as the field (nearMiss), else the request is
//     refused as invalid, naming the key.
//
// What is left passes through byte for byte: the agent cannot read a
// field the meter did not.

// foldRune maps r to the ASCII lower-case letter a lenient parser could
// take it for, or to its own case fold: ASCII letters fold to lower case,
// and the four non-ASCII letters whose folds reach ASCII (ſ U+017F → s,
// K U+212A → k, İ U+0130 and ı U+0131 → i) fold to that letter.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	for _, f := range [...]rune{unicode.ToLower(unicode.ToUpper(r)), unicode.ToUpper(unicode.ToLower(r))} {
		if f < utf8.RuneSelf {
			return foldRune(f)
		}
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRune(f)
		}
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// looseKey is a key as the most lenient parser could match it to a field:
// case folded (foldRune), underscores and dashes ignored.
func looseKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == '_' || r == '-' {
			continue
		}
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// looseEqual compares two keys as looseKey does, without allocating when
// neither is escaped or non-ASCII.
func looseEqual(a, b member) bool {
	if a.esc || b.esc || !ascii(a.key) || !ascii(b.key) {
		return looseKey(a.name()) == looseKey(b.name())
	}
	return asciiLooseEqual(a.key, b.key)
}

// asciiLooseEqual compares two ASCII keys ignoring case, '_' and '-'.
func asciiLooseEqual(x, y []byte) bool {
	i, j := 0, 0
	for {
		for i < len(x) && (x[i] == '_' || x[i] == '-') {
			i++
		}
		for j < len(y) && (y[j] == '_' || y[j] == '-') {
			j++
		}
		if i == len(x) || j == len(y) {
			return i == len(x) && j == len(y)
		}
		c, d := x[i], y[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
		i, j = i+1, j+1
	}
}

// looseCollision returns a key of ms that a lenient parser could take for
// another key of ms.
func looseCollision(ms []member) (string, bool) {
	if len(ms) < 2 {
		return "", false
	}
	if len(ms) > 16 { // linear, whatever a body holds
		seen := make(map[string]struct{}, len(ms))
		for _, m := range ms {
			k := looseKey(m.name())
			if _, dup := seen[k]; dup {
				return m.name(), true
			}
			seen[k] = struct{}{}
		}
		return "", false
	}
	for i := 1; i < len(ms); i++ {
		for j := 0; j < i; j++ {
			if looseEqual(ms[i], ms[j]) {
				return ms[i].name(), true
			}
		}
	}
	return "", false
}

// nearMiss returns a member of ms whose key is not one of fields but that
// a lenient parser could take for one, and that field.
func nearMiss(ms []member, fields []string) (key, field string, found bool) {
	for _, m := range ms {
		for _, f := range fields {
			if m.is(f) {
				break
			}
			if looseEqual(m, member{key: []byte(f)}) {
				return m.name(), f, true
			}
		}
	}
	return "", "", false
}

// readable applies the reading rule to the members of the object at where
// (a JSON path such as "params.message"; "" for the request itself) of
// which the meter reads fields.
func readable(ms []member, where string, fields []string) *Error {
	return readableAt(ms, where, -1, "", fields)
}

// readableAt is readable of the object at where[i] (i >= 0) followed by
// rest, a path made only when there is an error to name (the parts of a
// message are read on every send).
func readableAt(ms []member, where string, i int, rest string, fields []string) *Error {
	if i >= 0 {
		if _, dup := looseCollision(ms); !dup {
			if _, _, bad := nearMiss(ms, fields); !bad {
				return nil
			}
		}
		where = where + "[" + strconv.Itoa(i) + "]" + rest
	}
	if k, dup := looseCollision(ms); dup {
		if where == "" {
			return InvalidRequest(fmt.Sprintf("member %s appears twice (keys are compared ignoring case and underscores)", quoteKey(k)))
		}
		return InvalidParams(fmt.Sprintf("%s.%s appears twice (keys are compared ignoring case and underscores)", where, quoteKey(k)))
	}
	if k, f, bad := nearMiss(ms, fields); bad {
		at := "member " + quoteKey(k)
		if where != "" {
			at = where + "." + quoteKey(k)
		}
		return InvalidRequest(fmt.Sprintf("%s is refused: agents may read it as %q, which must be spelled exactly so", at, f))
	}
	return nil
}

// quoteKey is a key for an error message: as it is when it is a plain
// name, else quoted with Go's escapes (so "taſkId" shows as "ta\u017fkId"
// and control characters are visible); cut at 64 bytes.
func quoteKey(k string) string {
	if len(k) > 64 {
		cut := 64
		for cut > 0 && !utf8.RuneStart(k[cut]) {
			cut--
		}
		k = k[:cut] + "…"
	}
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '/'
	}
	if plain {
		return k
	}
	return strconv.QuoteToASCII(k)
}

// The fields the meter reads, per object.
var (
	envelopeFields  = []string{"jsonrpc", "id", "method", "params"}
	sendFields      = []string{"message", "configuration", "metadata"}
	messageFields   = []string{"taskId", "contextId", "messageId", "parts", "metadata", "referenceTaskIds"}
	configFields    = []string{"blocking", "returnImmediately"}
	part03Fields    = []string{"kind", "text", "file", "data"}
	part10Fields    = []string{"text", "raw", "url", "data"}
	file03Fields    = []string{"bytes"}
	listFields      = []string{"pageSize", "pageToken"}
	taskParamFields = map[string][]string{
		"id":     {"id", "metadata"},
		"taskId": {"taskId", "metadata"},
	}
)

// Proto key names: ProtoJSON parsers take a field's proto name (task_id)
// as well as its JSON name (taskId), so REST bodies are read with both in
// mind.

// restUnambiguous refuses params (and a send's message) two of whose keys
// a ProtoJSON parser could take for the same field: it accepts the json
// name and the proto name (taskId, task_id) and some fold case, so
// {"taskId":"a","task_id":"b"} could name either task to the agent.
func restUnambiguous(m Method, params []byte) *Error {
	var buf [12]member
	ms, _ := splitObject(params, buf[:0])
	if k, dup := looseCollision(ms); dup {
		return InvalidParams(fmt.Sprintf("%s appears twice (keys are compared ignoring case and underscores)", k))
	}
	if m != MethodSend && m != MethodStream {
		return nil
	}
	for _, p := range ms {
		if p.is("message") {
			var mbuf [12]member
			mm, _ := splitObject(p.val, mbuf[:0])
			if k, dup := looseCollision(mm); dup {
				return InvalidParams(fmt.Sprintf("message.%s appears twice (keys are compared ignoring case and underscores)", k))
			}
		}
	}
	return nil
}

// camelMember renames the proto field names (task_id) among the members of
// o's object member name to their JSON names (taskId), as ProtoJSON reads
// them, so that what the meter reads (the task a message names, the send
// configuration) is what the agent will read. A key whose JSON name is
// also present is left for looseCollision to refuse.
func camelMember(o *object, name string) {
	v, ok := o.get(name)
	if !ok || firstByte(v) != '{' || bytes.IndexByte(v, '_') < 0 {
		return
	}
	var buf [12]member
	ms, _ := splitObject(v, buf[:0])
	if !slices.ContainsFunc(ms, func(m member) bool { return bytes.IndexByte(m.key, '_') >= 0 }) {
		return // the underscores are in values
	}
	names := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		names[m.name()] = struct{}{}
	}
	in := &object{ms: slices.Clone(ms)}
	changed := false
	for i, m := range in.ms {
		key := m.name()
		if strings.IndexByte(key, '_') < 0 {
			continue
		}
		camel := lowerCamel(key)
		if _, has := names[camel]; has || camel == key {
			continue
		}
		in.ms[i] = member{key: []byte(camel), val: m.val}
		changed = true
	}
	if changed {
		o.set(name, in.bytes())
	}
}

// lowerCamel is the JSON name protoc gives a proto field name.
func lowerCamel(s string) string {
	var b strings.Builder
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// Proto names in JSON-RPC params. A2A 1.0's JSON is ProtoJSON, whose
// parsers take a field's proto name (task_id) for its JSON name (taskId);
// the 0.3 reference SDKs read their Python field names the same way. So
// in every object of a JSON-RPC request's params that the meter reads
// fields of, a key spelled as a proto name whose JSON name is absent is
// renamed to the JSON name before the meter reads it, and the agent gets
// the renamed bytes: both read the same field, whatever the agent's
// parser. A key given under both names is left as it is, for the reading
// rule to refuse.

// camelParams returns params with the proto names renamed (see above)
// and whether any was.
func camelParams(m Method, v Version, params []byte) ([]byte, bool) {
	if !mayHaveProtoKey(params) || !protoKeys(m, v, params) {
		return params, false
	}
	p, ok := parseObject(params)
	if !ok {
		return params, false
	}
	changed := camelKeys(p)
	switch m {
	case MethodSend, MethodStream:
		changed = camelIn(p, "message", func(msg *object) bool {
			c := camelKeys(msg)
			if pv, ok := msg.get("parts"); ok && firstByte(pv) == '[' {
				renamed := false
				parts := mapArray(pv, func(el []byte) []byte {
					return camelObject(el, func(part *object) bool {
						pc := camelKeys(part)
						if v == V03 {
							pc = camelIn(part, "file", camelKeys) || pc
						}
						renamed = renamed || pc
						return pc
					})
				})
				if renamed {
					msg.set("parts", parts)
					c = true
				}
			}
			return c
		}) || changed
		changed = camelIn(p, "configuration", camelKeys) || changed
	case MethodPushSet:
		if v == V03 {
			changed = camelIn(p, "pushNotificationConfig", camelKeys) || changed
		}
	}
	if !changed {
		return params, false
	}
	return p.bytes(), true
}

// mayHaveProtoKey is a quick look for what could end a proto name as a
// key: an underscore followed by lower-case letters, digits and
// underscores, a quote and a colon ("_id":); or an escape, which could
// spell anything. Most bodies have neither (ROLE_USER is no key).
func mayHaveProtoKey(b []byte) bool {
	if bytes.Contains(b, []byte(`\u`)) {
		return true
	}
	for i := bytes.IndexByte(b, '_'); i >= 0; {
		j := i + 1
		for j < len(b) && ('a' <= b[j] && b[j] <= 'z' || '0' <= b[j] && b[j] <= '9' || b[j] == '_') {
			j++
		}
		if j < len(b) && b[j] == '"' {
			if k := skipSpace(b, j+1); k < len(b) && b[k] == ':' {
				return true
			}
		}
		next := bytes.IndexByte(b[j:], '_')
		if next < 0 {
			break
		}
		i = j + next
	}
	return false
}

// protoKeys reports, without allocating, whether camelParams has a key
// to rename: it looks at the keys of the same objects.
func protoKeys(m Method, v Version, params []byte) bool {
	var buf [8]member
	ps, ok := splitObject(params, buf[:0])
	if !ok {
		return false
	}
	if anyProtoKey(ps) {
		return true
	}
	switch m {
	case MethodSend, MethodStream:
		for _, p := range ps {
			switch {
			case p.is("configuration"):
				if objectHasProtoKey(p.val) {
					return true
				}
			case p.is("message"):
				var mbuf [12]member
				mm, _ := splitObject(p.val, mbuf[:0])
				if anyProtoKey(mm) {
					return true
				}
				for _, x := range mm {
					if !x.is("parts") {
						continue
					}
					var abuf [8][]byte
					els, _ := splitArray(x.val, abuf[:0])
					for _, el := range els {
						var pbuf [6]member
						pm, _ := splitObject(el, pbuf[:0])
						if anyProtoKey(pm) {
							return true
						}
						for _, f := range pm {
							if v == V03 && f.is("file") && objectHasProtoKey(f.val) {
								return true
							}
						}
					}
				}
			}
		}
	case MethodPushSet:
		for _, p := range ps {
			if v == V03 && p.is("pushNotificationConfig") && objectHasProtoKey(p.val) {
				return true
			}
		}
	}
	return false
}

func objectHasProtoKey(b []byte) bool {
	var buf [8]member
	ms, _ := splitObject(b, buf[:0])
	return anyProtoKey(ms)
}

func anyProtoKey(ms []member) bool {
	for _, m := range ms {
		if (m.esc || bytes.IndexByte(m.key, '_') >= 0) && protoName(m.name()) {
			return true
		}
	}
	return false
}

// camelIn applies f to the object member name of o, when it is one, and
// keeps what f changed.
func camelIn(o *object, name string, f func(*object) bool) bool {
	v, ok := o.get(name)
	if !ok || firstByte(v) != '{' {
		return false
	}
	in, ok := parseObject(v)
	if !ok || !f(in) {
		return false
	}
	o.set(name, in.bytes())
	return true
}

// camelObject is the object b as f leaves it; b itself when f changes
// nothing or b is not an object.
func camelObject(b []byte, f func(*object) bool) []byte {
	o, ok := parseObject(b)
	if !ok || !f(o) {
		return b
	}
	return o.bytes()
}

// camelKeys renames o's members spelled as proto names (lower snake case)
// to their JSON names, where no member has that JSON name already.
func camelKeys(o *object) bool {
	changed := false
	for i, m := range o.ms {
		if bytes.IndexByte(m.key, '_') < 0 && !m.esc {
			continue
		}
		name := m.name()
		if !protoName(name) {
			continue
		}
		camel := lowerCamel(name)
		if slices.ContainsFunc(o.ms, func(x member) bool { return x.is(camel) }) {
			continue
		}
		o.ms[i] = member{key: []byte(camel), val: m.val}
		changed = true
	}
	return changed
}

// protoName reports whether s is spelled as a proto field name with an
// underscore, the only ones whose JSON name differs: lower case letters
// and digits in words joined by single underscores.
func protoName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '_' || strings.IndexByte(s, '_') < 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '_' && s[i-1] != '_':
		default:
			return false
		}
	}
	return true
}
