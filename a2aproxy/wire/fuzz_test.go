package wire_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// Under plain `go test` the fuzz targets run their seeds only; run them
// with -fuzz=FuzzParseRequest (etc.) to explore.

func FuzzParseRequest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "translate", "*_request.v*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		header := "0.3"
		if strings.HasSuffix(file, ".v10.json") {
			header = "1.0"
		}
		f.Add(b, header)
	}
	for _, s := range []string{
		``, `{`, `[]`, `null`, `{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t","id":"u"}}`,
		`{"jsonrpc":"2.0","id":"\u0000","method":"message/send","params":{"message":{"parts":[{"text":"\ud800"}]}}}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"GetTask","params":{"i\u0064":"x"}}`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "1.0")
	}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		req, werr := wire.ParseRequest(body, header)
		if parseErr := werr != nil && werr.Code == wire.CodeParseError; parseErr != !json.Valid(body) {
			t.Fatalf("ParseRequest says parse error %v, json.Valid says %v", parseErr, json.Valid(body))
		}
		var id json.RawMessage
		if req != nil {
			id = req.ID
		}
		if out := wire.ErrorResponse(id, werr); werr != nil && !json.Valid(out) {
			t.Fatalf("ErrorResponse is not JSON: %s", out)
		}
		if werr != nil {
			return
		}
		if req.Name != wire.MethodName(req.Method, req.Version) {
			t.Fatalf("Name %q, Method %v, Version %s", req.Name, req.Method, req.Version)
		}
		to := other(req.Version)
		out, err := wire.TranslateRequest(req, to)
		if err != nil {
			return // ListTasks to 0.3
		}
		if !json.Valid(out) {
			t.Fatalf("translation is not JSON: %s", out)
		}
		back, werr := wire.ParseRequest(out, string(to))
		if werr != nil {
			t.Fatalf("translation does not parse: %v\n%s\n%s", werr, body, out)
		}
		if back.Method != req.Method || back.TaskID() != req.TaskID() {
			t.Fatalf("translation reads differently: %v %q vs %v %q\n%s\n%s", back.Method, back.TaskID(), req.Method, req.TaskID(), body, out)
		}
	})
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\n",
		"data: one\r\n\r\ndata: two\r\n\r\n",
		"data: one\r\rdata: two\r\r",
		"id: 7\nevent: update\ndata:line1\ndata: line2\ndata\nretry: 100\n\n",
		": keep-alive\n\n: note\ndata: x\n\n",
		"\n\ndata: a\n\n\ndata: b",
		"\xEF\xBB\xBFdata: x\r\n\r",
		"",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		var r io.Reader = bytes.NewReader(in)
		if chunk > 0 {
			r = &chunkReader{b: in, n: int(chunk)}
		}
		sr := wire.NewSSEReader(r)
		var raw bytes.Buffer
		for i := 0; ; i++ {
			ev, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ev.Raw) == 0 {
				t.Fatal("an event without bytes")
			}
			if bytes.ContainsAny(ev.Data, "\r") {
				t.Fatalf("data holds a CR: %q", ev.Data)
			}
			raw.Write(ev.Raw)
			if i > len(in) {
				t.Fatal("more events than bytes")
			}
		}
		if !bytes.Equal(raw.Bytes(), in) {
			t.Fatalf("the Raws do not add up to the stream:\n%q\n%q", raw.Bytes(), in)
		}
	})
}

// FuzzObserveTranslate feeds arbitrary results to Observe and
// TranslateResult: neither may panic, and a translation is JSON.
func FuzzObserveTranslate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "translate", "*.v*.json"))
	for _, file := range files {
		if strings.Contains(file, "_request") {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(wire.MethodStream), strings.HasSuffix(file, ".v10.json"))
	}
	f.Add([]byte(`{"kind":"task","status":{"state":3}}`), uint8(wire.MethodGetTask), false)
	f.Fuzz(func(t *testing.T, result []byte, method uint8, v10 bool) {
		from := wire.V03
		if v10 {
			from = wire.V10
		}
		m := wire.Method(method % 12)
		wire.Observe(from, m, result)
		out, err := wire.TranslateResult(from, other(from), m, result)
		if err == nil && !json.Valid(out) {
			t.Fatalf("translation is not JSON: %s -> %s", result, out)
		}
	})
}

// chunkReader hands out at most n bytes per Read.
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(r.n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// FuzzValidJSON checks the package's validator against json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		``, ` `, `0`, `-0`, `01`, `-`, `1.`, `1.5e`, `1e+5`, `-12.50E-3`, `1x`,
		`"a"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, "\"a\x01\"", "\"\x7f\xff\"", `"\/\b\f\n\r\t\"\\"`,
		`true`, `tru`, `nulls`, `[]`, `[1,]`, `[,1]`, `{}`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `{"a":[{"b":null}]}`,
		` [ 1 , { "x" : "y" } ] `, `[1]]`, `{"a":1}}`, `[1}`, `{"a":1]`, "\t\r\n1\n",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := wire.ValidJSON(b), json.Valid(b); got != want {
			show := b
			if len(show) > 200 {
				show = show[:200]
			}
			t.Fatalf("validJSON(%q… %d bytes) = %v, json.Valid = %v", show, len(b), got, want)
		}
	})
}
