// Package protoschema checks JSON documents against the A2A 1.0 data
// model the way a schema-checking client does (for tests), and removes the
// members a protobuf encoder would not write, as A2A 1.0's card signatures
// require before canonicalization (StripDefaults).
//
// A2A 1.0 defines its objects in a2a.proto and their JSON as ProtoJSON.
// The specification's proto of 1.0.1 is embedded here unchanged
// (a2a-v1.0.1.proto, Apache-2.0, from github.com/a2aproject/A2A). The specification's build derives a non-normative JSON
// schema from the proto (bufbuild's protoc-gen-jsonschema); Schema
// applies the rules of that derivation directly to the parsed proto, so
// no schema file and no validator dependency are needed:
//
//   - a message is a JSON object whose members are its fields, by JSON
//     name (lowerCamelCase) or proto name (snake_case); any other member is refused
//     (additionalProperties: false), and so is a field given under both
//     names;
//   - repeated fields are arrays, maps are objects, StringList and every
//     other message is an object, never null;
//   - strings, bools, integers (32-bit in range; 64-bit also as decimal
//     strings), floating point numbers, bytes (base64) and enums (value
//     names or numbers) as ProtoJSON writes them;
//   - google.protobuf.Struct is any object, Value any JSON value,
//     Timestamp an RFC 3339 string.
//
// Two checks go beyond the generated schema, as ProtoJSON parsers and the
// proto demand them: fields marked (google.api.field_behavior) = REQUIRED
// must be present, and a oneof takes at most one member.
package protoschema

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed a2a-v1.0.1.proto
var a2aProto string

// Schema is the data model of one proto file.
type Schema struct {
	messages  map[string]*message
	enums     map[string]map[string]bool
	enumOrder map[string][]string // the values in the order written: the first is the default
}

type message struct {
	name   string
	fields []*field
	byKey  map[string]*field // JSON name and proto name
}

type field struct {
	name, jsonName string
	typ            string // scalar, message or enum name
	key            string // map key type; "" for no map
	repeated       bool
	required       bool
	optional       bool // the proto3 optional keyword: explicit presence
	oneof          string
}

var (
	a2aOnce   sync.Once
	a2aSchema *Schema
	a2aErr    error
)

// A2A is the A2A 1.0.1 data model (package lf.a2a.v1).
func A2A() (*Schema, error) {
	a2aOnce.Do(func() { a2aSchema, a2aErr = Parse(a2aProto) })
	return a2aSchema, a2aErr
}

// Check checks a JSON document as the message typeName (a name of the
// proto, such as "AgentCard"). It returns every violation found, joined,
// each naming its JSON path; nil when the document conforms.
func (s *Schema) Check(typeName string, doc []byte) error {
	if _, ok := s.messages[typeName]; !ok {
		return fmt.Errorf("protoschema: no message %q", typeName)
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	c := checker{s: s}
	c.value("$", &field{typ: typeName}, v)
	return errors.Join(c.errs...)
}

type checker struct {
	s    *Schema
	errs []error
}

func (c *checker) fail(path, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// value checks v as one value of f: a whole repeated field or map when f
// says so.
func (c *checker) value(path string, f *field, v any) {
	switch {
	case f.repeated:
		items, ok := v.([]any)
		if !ok {
			c.fail(path, "want an array, got %s", kind(v))
			return
		}
		one := *f
		one.repeated = false
		for i, item := range items {
			c.value(fmt.Sprintf("%s[%d]", path, i), &one, item)
		}
	case f.key != "":
		entries, ok := v.(map[string]any)
		if !ok {
			c.fail(path, "want an object (a map), got %s", kind(v))
			return
		}
		one := &field{typ: f.typ}
		for _, k := range sortedKeys(entries) {
			c.single(path+"."+k, one, entries[k])
		}
	default:
		c.single(path, f, v)
	}
}

var (
	base64Std  = regexp.MustCompile(`^[A-Za-z0-9+/]*={0,2}$`)
	decimalInt = regexp.MustCompile(`^-?[0-9]+$`)
)

func (c *checker) single(path string, f *field, v any) {
	switch f.typ {
	case "string":
		if _, ok := v.(string); !ok {
			c.fail(path, "want a string, got %s", kind(v))
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			c.fail(path, "want true or false, got %s", kind(v))
		}
	case "int32", "sint32", "sfixed32":
		c.integer(path, v, math.MinInt32, math.MaxInt32, true)
	case "uint32", "fixed32":
		c.integer(path, v, 0, math.MaxUint32, true)
	case "int64", "sint64", "sfixed64", "uint64", "fixed64":
		c.integer(path, v, math.MinInt64, math.MaxInt64, true)
	case "float", "double":
		switch x := v.(type) {
		case json.Number:
		case string:
			if _, err := strconv.ParseFloat(x, 64); err != nil && x != "NaN" && x != "Infinity" && x != "-Infinity" {
				c.fail(path, "want a number, got the string %q", x)
			}
		default:
			c.fail(path, "want a number, got %s", kind(v))
		}
	case "bytes":
		x, ok := v.(string)
		if !ok || !base64Std.MatchString(x) {
			c.fail(path, "want base64 bytes, got %s", kind(v))
		} else if _, err := base64.StdEncoding.DecodeString(x); err != nil {
			if _, err := base64.RawStdEncoding.DecodeString(x); err != nil {
				c.fail(path, "want base64 bytes: %v", err)
			}
		}
	case "google.protobuf.Value":
	case "google.protobuf.Struct", "google.protobuf.Empty":
		if _, ok := v.(map[string]any); !ok {
			c.fail(path, "want an object, got %s", kind(v))
		}
	case "google.protobuf.Timestamp":
		x, ok := v.(string)
		if !ok {
			c.fail(path, "want an RFC 3339 timestamp string, got %s", kind(v))
		} else if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
			c.fail(path, "want an RFC 3339 timestamp: %v", err)
		}
	default:
		if values, ok := c.s.enums[f.typ]; ok {
			if x, ok := v.(string); ok {
				if !values[x] {
					c.fail(path, "%q is not a value of %s", x, f.typ)
				}
				return
			}
			c.integer(path, v, math.MinInt32, math.MaxInt32, false)
			return
		}
		m, ok := c.s.messages[f.typ]
		if !ok {
			c.fail(path, "the proto names an unknown type %s", f.typ)
			return
		}
		c.message(path, m, v)
	}
}

func (c *checker) integer(path string, v any, lo, hi float64, asString bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		if !asString || !decimalInt.MatchString(x) {
			c.fail(path, "want an integer, got the string %q", x)
			return
		}
		s = x
	default:
		c.fail(path, "want an integer, got %s", kind(v))
		return
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n != math.Trunc(n) || n < lo || n > hi {
		c.fail(path, "want an integer in [%.0f, %.0f], got %s", lo, hi, s)
	}
}

func (c *checker) message(path string, m *message, v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "want a %s object, got %s", m.name, kind(v))
		return
	}
	seen := map[*field]string{}
	oneofs := map[string]string{}
	for _, k := range sortedKeys(obj) {
		f, ok := m.byKey[k]
		if !ok {
			c.fail(path, "%s has no field %q", m.name, k)
			continue
		}
		if other, dup := seen[f]; dup {
			c.fail(path, "%s field %s is given twice, as %q and %q", m.name, f.name, other, k)
			continue
		}
		seen[f] = k
		if f.oneof != "" {
			if other, dup := oneofs[f.oneof]; dup {
				c.fail(path, "%s oneof %s has two members, %q and %q", m.name, f.oneof, other, k)
			}
			oneofs[f.oneof] = k
		}
		c.value(path+"."+k, f, obj[k])
	}
	for _, f := range m.fields {
		if _, ok := seen[f]; f.required && !ok {
			c.fail(path, "%s lacks the required field %q", m.name, f.jsonName)
		}
	}
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonName is protoc's JSON name of a field: underscores dropped, the
// letter after each in upper case.
func jsonName(name string) string {
	var b strings.Builder
	upper := false
	for _, r := range name {
		switch {
		case r == '_':
			upper = true
		case upper:
			b.WriteString(strings.ToUpper(string(r)))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// StripDefaults returns the JSON value v (as encoding/json decodes it,
// numbers as json.Number) read as the message typeName, without the
// members that hold their field's default value and that proto presence
// does not keep, as A2A 1.0 §8.4.1 asks before a card is canonicalized for
// its signature: an empty string, false, zero, the first enum value, an
// empty array or map are dropped unless the field is REQUIRED, marked
// optional or a member of a oneof; messages have presence and stay (their
// members stripped in turn). A null is ProtoJSON's "not set" and goes,
// optional or not, unless the field is REQUIRED or a google.protobuf.Value. Members the schema does not know are kept as
// they are.
func (s *Schema) StripDefaults(typeName string, v any) (any, error) {
	m, ok := s.messages[typeName]
	if !ok {
		return nil, fmt.Errorf("protoschema: no message %q", typeName)
	}
	return s.stripMessage(m, v), nil
}

func (s *Schema) stripMessage(m *message, v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(obj))
	for k, val := range obj {
		f, known := m.byKey[k]
		if !known {
			out[k] = val
			continue
		}
		if val == nil && !f.required && (f.repeated || f.key != "" || f.typ != "google.protobuf.Value") {
			// ProtoJSON's null: not set, whatever the field's presence
			// (an optional or oneof member too; only a Value holds null).
			continue
		}
		if !f.required && !f.optional && f.oneof == "" && s.isDefault(f, val) {
			continue
		}
		out[k] = s.stripValue(f, val)
	}
	return out
}

func (s *Schema) stripValue(f *field, v any) any {
	switch {
	case f.repeated:
		items, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(items))
		for i, item := range items {
			out[i] = s.stripSingle(f.typ, item)
		}
		return out
	case f.key != "":
		entries, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(entries))
		for k, e := range entries {
			out[k] = s.stripSingle(f.typ, e)
		}
		return out
	}
	return s.stripSingle(f.typ, v)
}

func (s *Schema) stripSingle(typ string, v any) any {
	if m, ok := s.messages[typ]; ok {
		return s.stripMessage(m, v)
	}
	return v
}

// isDefault reports whether v is the default value of f as protobuf sees
// it (a message field has presence: never default).
func (s *Schema) isDefault(f *field, v any) bool {
	switch {
	case f.repeated:
		a, ok := v.([]any)
		return ok && len(a) == 0
	case f.key != "":
		o, ok := v.(map[string]any)
		return ok && len(o) == 0
	}
	if f.typ == "google.protobuf.Value" {
		return false // a Value has presence; null is its NullValue
	}
	switch x := v.(type) {
	case nil:
		return true // ProtoJSON's null: not set
	case string:
		if values := s.enumOrder[f.typ]; len(values) > 0 {
			return x == values[0]
		}
		return x == "" && (f.typ == "string" || f.typ == "bytes")
	case bool:
		return !x && f.typ == "bool"
	case json.Number:
		n, err := strconv.ParseFloat(string(x), 64)
		_, enum := s.enums[f.typ]
		return err == nil && n == 0 && (scalars[f.typ] || enum)
	}
	return false
}
