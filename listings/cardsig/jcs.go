package cardsig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Canonical is the JSON text b in the JSON Canonicalization Scheme of RFC
// 8785: no insignificant whitespace, object members sorted by the UTF-16
// code units of their names, strings with the fewest escapes, numbers as
// ECMAScript writes an IEEE 754 double. b must be one JSON value; duplicate
// member names are refused (I-JSON, which the scheme requires).
func Canonical(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeStrict(d)
	if err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("jcs: more than one JSON value")
	}
	return appendCanonical(nil, v)
}

// decodeStrict decodes the next value with tokens, so that a name given
// twice in one object is seen (encoding/json would keep the last).
func decodeStrict(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, fmt.Errorf("jcs: %w", err)
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, fmt.Errorf("jcs: %w", err)
				}
				k := kt.(string)
				if _, dup := obj[k]; dup {
					return nil, fmt.Errorf("jcs: member %q appears twice", k)
				}
				if obj[k], err = decodeStrict(d); err != nil {
					return nil, err
				}
			}
			_, err := d.Token()
			return obj, err
		case '[':
			arr := []any{}
			for d.More() {
				v, err := decodeStrict(d)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := d.Token()
			return arr, err
		}
	}
	return t, nil
}

// CanonicalValue is Canonical of a value as encoding/json decodes it with
// UseNumber (maps, slices, strings, json.Number, bools, nil).
func CanonicalValue(v any) ([]byte, error) { return appendCanonical(nil, v) }

func appendCanonical(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if x {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return appendString(b, x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("jcs: %s is not an IEEE 754 double", x)
		}
		return appendNumber(b, f), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("jcs: %v is not a JSON number", x)
		}
		return appendNumber(b, x), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			var err error
			if b, err = appendCanonical(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("jcs: cannot canonicalize a %T", v)
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785
// §3.2.3), which differs from UTF-8 byte order above U+FFFF.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// appendString writes s as ECMAScript's JSON.stringify does: only '"',
// '\\' and the control characters escaped, the short forms where they
// exist, else \u00xx in lower case.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if r < 0x20 {
				b = append(b, fmt.Sprintf(`\u%04x`, r)...)
			} else {
				b = append(b, string(r)...)
			}
		}
	}
	return append(b, '"')
}

// appendNumber writes f as ECMAScript's Number.prototype.toString does
// (ECMA-262 §6.1.6.1.20): the shortest digits that read back as f, in
// plain notation for exponents from -6 to 20, else as d.ddde±n.
func appendNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0') // -0 too
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// 'e' with the shortest precision: d.ddddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	n := x + 1 // the position of the decimal point after the first digit, as ECMA-262 counts it
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for i := 0; i < n-k; i++ {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for i := 0; i < -n; i++ {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}
