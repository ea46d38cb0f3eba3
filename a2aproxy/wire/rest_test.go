package wire_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// The golden files under testdata/rest hold inputs and the outputs they
// must give. Run `go test ./a2aproxy/wire/ -run REST -update-rest` to
// rewrite the outputs from the code, then review the diff.
var updateREST = flag.Bool("update-rest", false, "rewrite the outputs in testdata/rest from the code")

func restGoldenPath(name string) string { return filepath.Join("testdata", "rest", name) }

func readRESTGolden(tb testing.TB, name string, v any) {
	tb.Helper()
	b, err := os.ReadFile(restGoldenPath(name))
	if err != nil {
		if *updateREST && os.IsNotExist(err) {
			return
		}
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
}

func writeRESTGolden(tb testing.TB, name string, v any) {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(restGoldenPath(name), buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// raw is a JSON text kept as written, or absent.
func raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// ---- buyer side, in: ParseREST over every path and verb ----

type restParseCase struct {
	Name        string          `json:"name"`
	Verb        string          `json:"verb"`
	Path        string          `json:"path"`
	Query       string          `json:"query,omitempty"`
	Header      string          `json:"header,omitempty"`
	ContentType string          `json:"contentType,omitempty"`
	Body        json.RawMessage `json:"body,omitempty"`
	RawBody     string          `json:"rawBody,omitempty"`
	Want        *restParseWant  `json:"want,omitempty"`
}

// restParseWant is what ParseREST gives: the JSON-RPC method, version,
// tenant, what the proxy reads (task, blocking) and params; or the error
// and the HTTP status RESTError answers it with.
type restParseWant struct {
	Method   string          `json:"method,omitempty"`
	Version  string          `json:"version"`
	Tenant   string          `json:"tenant,omitempty"`
	TaskID   string          `json:"taskId,omitempty"`
	Blocking bool            `json:"blocking,omitempty"`
	Params   json.RawMessage `json:"params,omitempty"`
	Code     int             `json:"code,omitempty"`
	Status   int             `json:"status,omitempty"`
}

func (c *restParseCase) body() []byte {
	if c.RawBody != "" {
		return []byte(c.RawBody)
	}
	return c.Body
}

func (c *restParseCase) run(tb testing.TB) (*wire.Request, *wire.Error) {
	q, err := url.ParseQuery(c.Query)
	if err != nil {
		tb.Fatalf("query %q: %v", c.Query, err)
	}
	return wire.ParseREST(c.Verb, c.Path, q, c.ContentType, c.body(), c.Header)
}

func TestParseRESTGolden(t *testing.T) {
	var cases []*restParseCase
	readRESTGolden(t, "parse.json", &cases)
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Fatalf("case %q appears twice", c.Name)
		}
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			r, werr := c.run(t)
			if r == nil {
				t.Fatal("ParseREST returned a nil Request")
			}
			if r.Binding != wire.BindingREST {
				t.Errorf("Binding = %v", r.Binding)
			}
			got := &restParseWant{Method: r.Name, Version: string(r.Version), Tenant: r.Tenant}
			if werr != nil {
				got.Code = werr.Code
				got.Status, _ = wire.RESTError(r.Version, werr)
			} else {
				got.TaskID, got.Blocking, got.Params = r.TaskID(), r.Blocking(), r.Params
				checkSynthesized(t, r)
			}
			if *updateREST {
				c.Want = got
				return
			}
			if c.Want == nil {
				t.Fatal("no want: run with -update-rest")
			}
			want := *c.Want
			gotParams, wantParams := got.Params, want.Params
			got.Params, want.Params = nil, nil
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("got  %+v (err %v)\nwant %+v", *got, werr, want)
			}
			if wantParams != nil || gotParams != nil {
				equalJSON(t, gotParams, wantParams)
			}
		})
	}
	if *updateREST {
		writeRESTGolden(t, "parse.json", cases)
	}
}

// checkSynthesized checks that a parsed REST request is what a JSON-RPC
// client could have sent: Raw is a one-line JSON-RPC request with a fresh
// id that ParseRequest reads to the same Request.
func checkSynthesized(t *testing.T, r *wire.Request) {
	t.Helper()
	if bytes.ContainsAny(r.Raw, "\r\n") {
		t.Errorf("Raw is not one line: %s", r.Raw)
	}
	var id string
	if json.Unmarshal(r.ID, &id) != nil || !strings.HasPrefix(id, "rest-") {
		t.Errorf("ID = %s, want a fresh string id", r.ID)
	}
	back, werr := wire.ParseRequest(r.Raw, string(r.Version))
	if werr != nil {
		t.Fatalf("Raw does not parse as JSON-RPC: %v\n%s", werr, r.Raw)
	}
	if back.Method != r.Method || back.Name != r.Name || back.TaskID() != r.TaskID() || back.Blocking() != r.Blocking() ||
		back.ContextID() != r.ContextID() || back.ParentTaskID() != r.ParentTaskID() || back.MessageParts() != r.MessageParts() {
		t.Errorf("Raw reads differently from the Request")
	}
	if back.Binding != wire.BindingJSONRPC || back.Tenant != "" {
		t.Errorf("ParseRequest set Binding %v, Tenant %q", back.Binding, back.Tenant)
	}
}

func TestParseRESTEveryRoute(t *testing.T) {
	// Every method in both versions (but 0.3 ListTasks) has a golden case.
	var cases []*restParseCase
	readRESTGolden(t, "parse.json", &cases)
	covered := map[string]bool{}
	for _, c := range cases {
		if c.Want != nil && c.Want.Code == 0 {
			covered[c.Want.Method] = true
		}
	}
	for m := wire.MethodSend; m <= wire.MethodExtendedCard; m++ {
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			if name := wire.MethodName(m, v); name != "" && !covered[name] {
				t.Errorf("no golden REST case parses to %s", name)
			}
		}
	}
}

func TestParseRESTTenantAndSubscribeVerbs(t *testing.T) {
	r, werr := wire.ParseREST("POST", "/acme/tasks/abc:cancel", nil, "", nil, "1.0")
	if werr != nil {
		t.Fatal(werr)
	}
	if r.Tenant != "acme" || r.TaskID() != "abc" || r.Method != wire.MethodCancelTask {
		t.Errorf("got tenant %q task %q method %v", r.Tenant, r.TaskID(), r.Method)
	}
	// A JSON-RPC request never has a tenant of its own: Tenant is the
	// path's, and params carries it for the agent.
	if !bytes.Contains(r.Params, []byte(`"tenant":"acme"`)) {
		t.Errorf("params %s lack the tenant", r.Params)
	}
	for _, verb := range []string{"GET", "POST", "get", "post"} {
		for _, path := range []string{"/tasks/t-1:subscribe", "/v1/tasks/t-1:subscribe"} {
			header := "1.0"
			if strings.HasPrefix(path, "/v1") {
				header = ""
			}
			r, werr := wire.ParseREST(verb, path, nil, "", nil, header)
			if werr != nil || r.Method != wire.MethodSubscribe || r.TaskID() != "t-1" {
				t.Errorf("%s %s: %v %v", verb, path, r.Method, werr)
			}
		}
	}
}

// ---- buyer side, out: RESTResult and RESTEvent ----

type restBody struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

var restExtraResults = []struct {
	name   string
	v      wire.Version
	method wire.Method
	result string
}{
	{"list_tasks", wire.V10, wire.MethodListTasks, `{"tasks":[{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}],"nextPageToken":"","pageSize":1,"totalSize":1}`},
	{"card", wire.V10, wire.MethodExtendedCard, `{"name":"Agent","description":"d","version":"1","supportedInterfaces":[{"url":"https://meter.example.com/a2a/l-1","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}]}`},
	{"card", wire.V03, wire.MethodExtendedCard, `{"name":"Agent","description":"d","url":"https://meter.example.com/a2a/l-1","version":"1","protocolVersion":"0.3.0","preferredTransport":"HTTP+JSON"}`},
	{"push_list_empty", wire.V03, wire.MethodPushList, `[]`},
	{"task_canceled", wire.V03, wire.MethodCancelTask, `{"kind":"task","id":"task-1","contextId":"ctx-1","status":{"state":"canceled"}}`},
	{"task_unknown_state", wire.V03, wire.MethodGetTask, `{"kind":"task","id":"task-1","contextId":"ctx-1","status":{"state":"unknown"}}`},
}

func TestRESTResultGolden(t *testing.T) {
	want := map[string]restBody{}
	readRESTGolden(t, "results.json", &want)
	got := map[string]restBody{}
	check := func(name string, v wire.Version, m wire.Method, result []byte) {
		t.Run(name, func(t *testing.T) {
			status, body := wire.RESTResult(v, m, result)
			if !json.Valid(body) || bytes.ContainsAny(body, "\r\n") {
				t.Fatalf("body is not one line of JSON: %s", body)
			}
			got[name] = restBody{status, raw(body)}
			if !*updateREST {
				w, ok := want[name]
				if !ok {
					t.Fatal("no golden: run with -update-rest")
				}
				if status != w.Status {
					t.Errorf("status %d, want %d", status, w.Status)
				}
				equalJSON(t, body, w.Body)
			}
			// The buyer's REST client reading it, or the meter reading
			// the same answer from a REST agent, gets the result back.
			back, werr := wire.FromRESTResponse(v, m, status, wire.RESTContentType(v), body)
			if werr != nil {
				t.Fatalf("FromRESTResponse: %v", werr)
			}
			equalJSON(t, back, result)
		})
	}
	for _, tc := range resultPairs {
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			check(tc.name+"/"+tc.method.String()+"/"+string(v), v, tc.method, golden(t, tc.name, v))
		}
	}
	for _, tc := range restExtraResults {
		check(tc.name+"/"+tc.method.String()+"/"+string(tc.v), tc.v, tc.method, []byte(tc.result))
	}
	if *updateREST {
		writeRESTGolden(t, "results.json", got)
	}
}

func TestRESTEventGolden(t *testing.T) {
	want := map[string]json.RawMessage{}
	readRESTGolden(t, "events.json", &want)
	got := map[string]json.RawMessage{}
	for _, tc := range resultPairs {
		if !tc.method.Streaming() {
			continue
		}
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			name := tc.name + "/" + tc.method.String() + "/" + string(v)
			t.Run(name, func(t *testing.T) {
				result := golden(t, tc.name, v)
				data := wire.RESTEvent(v, tc.method, result)
				got[name] = raw(data)
				if bytes.ContainsAny(data, "\r\n") || !json.Valid(data) {
					t.Fatalf("event data is not one line of JSON: %s", data)
				}
				if bytes.Contains(data, []byte(`"jsonrpc"`)) {
					t.Errorf("REST event data is a JSON-RPC envelope: %s", data)
				}
				if !*updateREST {
					equalJSON(t, data, want[name])
				}
				// Through SSE and back, as the meter reads a REST agent's
				// stream.
				var sse bytes.Buffer
				if err := wire.WriteEvent(&sse, data); err != nil {
					t.Fatal(err)
				}
				ev, err := wire.NewSSEReader(&sse).Next()
				if err != nil {
					t.Fatal(err)
				}
				back, werr := wire.FromRESTEvent(v, tc.method, ev.Data)
				if werr != nil {
					t.Fatalf("FromRESTEvent: %v", werr)
				}
				equalJSON(t, back, result)
				// What the proxy observes of it is what it observes of the
				// JSON-RPC event.
				if o1, o2 := wire.Observe(v, tc.method, back), wire.Observe(v, tc.method, result); !reflect.DeepEqual(o1, o2) {
					t.Errorf("observations differ: %+v vs %+v", o1, o2)
				}
			})
		}
	}
	if *updateREST {
		writeRESTGolden(t, "events.json", got)
	}
}

// ---- fuzzing ----

func FuzzParseREST(f *testing.F) {
	var cases []*restParseCase
	b, err := os.ReadFile(restGoldenPath("parse.json"))
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add(c.Verb, c.Path, c.Query, c.ContentType, c.body(), c.Header)
	}
	f.Add("GET", "/tasks/%2e%2e", "", "", []byte(nil), "1.0")
	f.Add("POST", "/a/b/c/d/e/f/g", "", "", []byte(nil), "1.0")
	f.Add("POST", "/message:send", "", "application/json", []byte(`{"message":{"taskId":"a","TaskId":"b","parts":[]}}`), "1.0")
	f.Fuzz(func(t *testing.T, verb, path, query, ct string, body []byte, header string) {
		q, _ := url.ParseQuery(query)
		r, werr := wire.ParseREST(verb, path, q, ct, body, header)
		if r == nil {
			t.Fatal("nil Request")
		}
		if werr != nil {
			status, out := wire.RESTError(r.Version, werr)
			if status < 400 || !json.Valid(out) {
				t.Fatalf("RESTError: %d %s", status, out)
			}
			return
		}
		if !json.Valid(r.Raw) || bytes.ContainsAny(r.Raw, "\r\n") {
			t.Fatalf("Raw: %s", r.Raw)
		}
		back, werr := wire.ParseRequest(r.Raw, string(r.Version))
		if werr != nil || back.Method != r.Method || back.TaskID() != r.TaskID() {
			t.Fatalf("Raw reads differently: %v", werr)
		}
		// Sent on to a REST agent of either version, it is the same call.
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			method, u, out, err := wire.RESTUpstream(r, v, restAgentBase, r.Tenant)
			if err != nil {
				continue // ListTasks to 0.3
			}
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatalf("URL %q: %v", u, err)
			}
			p, _ := strings.CutPrefix(pu.EscapedPath(), "/a2a")
			h := map[wire.Version]string{wire.V03: "", wire.V10: "1.0"}[v]
			ar, werr := wire.ParseREST(method, p, pu.Query(), wire.RESTContentType(v), out, h)
			if werr != nil {
				t.Fatalf("the agent cannot parse %s %s %s: %v", method, u, out, werr)
			}
			if ar.Method != r.Method || ar.TaskID() != r.TaskID() {
				t.Fatalf("the agent reads %v %q, not %v %q", ar.Method, ar.TaskID(), r.Method, r.TaskID())
			}
		}
	})
}

// ---- speed ----

func BenchmarkParseREST(b *testing.B) {
	body := []byte(`{"message":{"messageId":"m-1","role":"ROLE_USER","taskId":"task-1","parts":[{"text":"Summarise the attached report, please."}]},"configuration":{"returnImmediately":false}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseREST("POST", "/message:send", nil, wire.ContentTypeA2A, body, "1.0"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBindingAndContentTypes(t *testing.T) {
	var zero wire.Request
	if zero.Binding != wire.BindingJSONRPC || wire.BindingJSONRPC.String() != "JSONRPC" || wire.BindingREST.String() != "HTTP+JSON" {
		t.Error("bindings")
	}
	if wire.RESTContentType(wire.V03) != "application/json" || wire.RESTContentType(wire.V10) != "application/a2a+json" {
		t.Error("content types")
	}
	// JSON-RPC requests are unaffected.
	r, werr := wire.ParseRequest(golden(t, "send_request", wire.V10), "1.0")
	if werr != nil || r.Binding != wire.BindingJSONRPC || r.Tenant != "" {
		t.Errorf("ParseRequest: %v %v %q", werr, r.Binding, r.Tenant)
	}
}

// TestParseRequestManyKeysIsLinear: a body with tens of thousands of keys
