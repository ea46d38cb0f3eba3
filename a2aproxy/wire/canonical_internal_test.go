package wire

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// appendCanonicalRef is appendCanonical as it was written first (it
// allocated per member and string): the reference the faster one must
// equal byte for byte, since digests of earlier sends are kept.
// appendCanonicalRef appends the canonical form of the JSON value v (valid
// JSON) to dst.
func appendCanonicalRef(dst, v []byte, depth int) []byte {
	i := skipSpace(v, 0)
	if i >= len(v) {
		return dst
	}
	if depth > maxCanonicalDepth {
		return append(dst, v[i:]...)
	}
	switch v[i] {
	case '{':
		ms, ok := splitObject(v, nil)
		if !ok {
			return append(dst, v[i:]...)
		}
		type kv struct {
			key string
			val []byte
		}
		kvs := make([]kv, len(ms))
		for j, m := range ms {
			kvs[j] = kv{m.name(), m.val}
		}
		sort.SliceStable(kvs, func(a, b int) bool { return kvs[a].key < kvs[b].key })
		dst = append(dst, '{')
		for j, m := range kvs {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonString(dst, m.key)
			dst = append(dst, ':')
			dst = appendCanonicalRef(dst, m.val, depth+1)
		}
		return append(dst, '}')
	case '[':
		els, ok := splitArray(v, nil)
		if !ok {
			return append(dst, v[i:]...)
		}
		dst = append(dst, '[')
		for j, el := range els {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonicalRef(dst, el, depth+1)
		}
		return append(dst, ']')
	case '"':
		s, ok := unquote(v[i:])
		if !ok {
			return append(dst, v[i:]...)
		}
		return appendCanonString(dst, s)
	}
	end := skipValue(v, i)
	return append(dst, v[i:end]...)
}

// TestCanonicalEqualsReference: the canonical form (and so every message
// digest the meter keeps to recognise a retry) is byte for byte what it
// was, on the wire golden files, odd spellings and hostile strings.
func TestCanonicalEqualsReference(t *testing.T) {
	var docs [][]byte
	files, _ := filepath.Glob(filepath.Join("testdata", "translate", "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	for _, s := range []string{
		`{"b":1,"a":[1,2,{"z":"x","y":null}],"c":"\u00e9t\u00e9"}`,
		`{"k\u0065y":"v","key ":"w","ke":"\"quoted\"","e":"\n\t\u0001"}`,
		"{\"s\":\"caf\xc3\xa9 \xff bad\",\"t\":\"\xe2\x82\xac\"}",
		`{"a":{"a":{"a":{"a":[[[[]]],{}]}}},"n":-1.5e3,"t":true,"f":false}`,
		`{"x":1,"x":2,"y":"dup"}`,
		`  { "spaced" : [ 1 , 2 ] , "s" : " a b " }  `,
		`{"m":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"},{"data":{"k":[1,{"b":2,"a":1}]}}],"metadata":{"z":1,"a":{"\u0041":"A"}}}}`,
	} {
		docs = append(docs, []byte(s))
	}
	big := []byte(`{`)
	for i := 0; i < 40; i++ {
		if i > 0 {
			big = append(big, ',')
		}
		big = append(big, []byte(`"k`+string(rune('z'-i%26))+string(rune('a'+i/26))+`":"v"`)...)
	}
	docs = append(docs, append(big, '}'))
	for _, d := range docs {
		want := appendCanonicalRef(nil, d, 0)
		got := appendCanonical(nil, d, 0)
		if !bytes.Equal(got, want) {
			t.Errorf("%s\ngot  %s\nwant %s", d, got, want)
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	msg := []byte(`{"messageId":"m-123456","role":"ROLE_USER","parts":[{"text":"` + string(bytes.Repeat([]byte("lorem ipsum "), 80)) + `"}],"metadata":{"trace":"abc","n":1}}`)
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendCanonicalRef(make([]byte, 0, len(msg)), msg, 0)
		}
	})
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendCanonical(make([]byte, 0, len(msg)), msg, 0)
		}
	})
}

// FuzzCanonical: on any valid JSON the canonical form equals the
// reference's.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":"\u00e9","a":[1,"x\"y"]}`))
	f.Add([]byte("{\"s\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, d []byte) {
		if !validJSON(d) {
			return
		}
		if got, want := appendCanonical(nil, d, 0), appendCanonicalRef(nil, d, 0); !bytes.Equal(got, want) {
			t.Fatalf("%q\ngot  %q\nwant %q", d, got, want)
		}
	})
}
