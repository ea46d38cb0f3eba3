package wire_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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

// ---- errors, both ways ----

type restErrorCase struct {
	name string
	e    *wire.Error
}

func restErrorCases() []restErrorCase {
	own := func(code int, msg string) *wire.Error { return &wire.Error{Code: code, Message: msg} }
	return []restErrorCase{
		{"parse", wire.ParseError("")},
		{"invalid_request", wire.InvalidRequest("")},
		{"method_not_found", wire.MethodNotFound("GET /x is not an A2A operation")},
		{"invalid_params", wire.InvalidParams("params.message is required")},
		{"internal", wire.InternalError("")},
		{"task_not_found", wire.TaskNotFound("task-1")},
		{"task_not_found_no_id", wire.TaskNotFound("")},
		{"task_not_cancelable", wire.TaskNotCancelable("task-1")},
		{"push_not_supported", wire.PushNotificationNotSupported("")},
		{"unsupported_operation", wire.UnsupportedOperation("")},
		{"content_type", wire.ContentTypeNotSupported("")},
		{"invalid_agent_response", wire.InvalidAgentResponse("")},
		{"extended_card_not_configured", wire.ExtendedCardNotConfigured("")},
		{"extension_support_required", wire.ExtensionSupportRequired("")},
		{"version_not_supported", wire.VersionNotSupported("2.0")},
		{"unauthorized", own(-32040, "send your AgentMarket API key as: Authorization: Bearer amk_…")},
		{"not_entitled", own(-32041, "your organisation has no active subscription to listing \"l-1\"")},
		{"budget_exhausted", own(-32042, "the API key's monthly budget of 100 micros is spent (120 micros this month)")},
		{"listing_unavailable", own(-32043, "no listing \"l-9\"")},
		{"budget_unchecked", own(-32044, "the API key's monthly budget cannot be checked right now (spend is unavailable); retry shortly")},
		{"upstream_unreachable", own(-32050, "the agent could not be reached")},
		{"upstream_timeout", own(-32051, "the agent did not answer within 30s")},
		{"result_too_large", own(-32052, "the agent's answer exceeds the 262144-byte result limit")},
		{"request_too_large", own(-32053, "the request is 2000000 bytes; the limit is 1048576")},
		{"stream_idle", own(-32054, "the agent sent nothing for 2m0s")},
		{"upstream_refused", own(-32055, "the meter does not connect to this agent's address")},
		{"agent_defined", own(-32077, "quota of the agent's model exhausted")},
		{"free_data", &wire.Error{Code: -32602, Message: "bad field", Data: map[string]any{"field": "message.parts", "html": "<b>"}}},
		{"raw_typed_data", &wire.Error{Code: -32001, Message: "Task not found", Data: json.RawMessage(`[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"t-2"}},{"@type":"type.googleapis.com/google.rpc.DebugInfo","detail":"x"}]`)}},
		{"nil", nil},
	}
}

// restStatusTable is the documented table: code → HTTP status, reason.
var restStatusTable = map[int]struct {
	status int
	reason string
}{
	-32700: {400, "JSON_PARSE"}, -32600: {400, "INVALID_REQUEST"}, -32601: {404, "METHOD_NOT_FOUND"},
	-32602: {400, "INVALID_PARAMS"}, -32603: {500, "INTERNAL_ERROR"},
	-32001: {404, "TASK_NOT_FOUND"}, -32002: {400, "TASK_NOT_CANCELABLE"}, -32003: {400, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
	-32004: {400, "UNSUPPORTED_OPERATION"}, -32005: {400, "CONTENT_TYPE_NOT_SUPPORTED"}, -32006: {500, "INVALID_AGENT_RESPONSE"},
	-32007: {400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"}, -32008: {400, "EXTENSION_SUPPORT_REQUIRED"}, -32009: {400, "VERSION_NOT_SUPPORTED"},
	-32040: {401, "UNAUTHENTICATED"}, -32041: {403, "NOT_ENTITLED"}, -32042: {402, "BUDGET_EXHAUSTED"}, -32043: {404, "LISTING_UNAVAILABLE"},
	-32050: {502, "UPSTREAM_UNREACHABLE"}, -32051: {504, "UPSTREAM_TIMEOUT"}, -32052: {502, "RESULT_TOO_LARGE"},
	-32053: {413, "REQUEST_TOO_LARGE"}, -32054: {504, "STREAM_IDLE"}, -32055: {502, "UPSTREAM_REFUSED"},
	-32077: {500, "UNKNOWN_ERROR"},
}

// googleStatus is the google.rpc.Status body of a REST error.
type googleStatus struct {
	Error struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Details []struct {
			Type     string            `json:"@type"`
			Reason   string            `json:"reason"`
			Domain   string            `json:"domain"`
			Metadata map[string]string `json:"metadata"`
		} `json:"details"`
	} `json:"error"`
	Code    *int   `json:"code"`    // 0.3 only: the JSON-RPC code
	Message string `json:"message"` // 0.3 only
}

func TestRESTErrorGolden(t *testing.T) {
	want := map[string]restBody{}
	readRESTGolden(t, "errors.json", &want)
	got := map[string]restBody{}
	for _, tc := range restErrorCases() {
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			name := tc.name + "/" + string(v)
			t.Run(name, func(t *testing.T) {
				status, body := wire.RESTError(v, tc.e)
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
				e := tc.e
				if e == nil {
					e = wire.InternalError("")
				}
				var gs googleStatus
				if err := json.Unmarshal(body, &gs); err != nil {
					t.Fatalf("body is not a google.rpc.Status: %v\n%s", err, body)
				}
				if gs.Error.Code != status || gs.Error.Message != e.Message || gs.Error.Status == "" {
					t.Errorf("status body %+v for HTTP %d", gs.Error, status)
				}
				if row, ok := restStatusTable[e.Code]; ok {
					if status != row.status {
						t.Errorf("HTTP %d, the table says %d", status, row.status)
					}
					found := false
					for _, d := range gs.Error.Details {
						if d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Reason == row.reason && d.Domain != "" {
							found = true
						}
					}
					if !found {
						t.Errorf("no ErrorInfo with reason %s in %s", row.reason, body)
					}
				}
				if (v == wire.V03) != (gs.Code != nil) || (gs.Code != nil && (*gs.Code != e.Code || gs.Message != e.Message)) {
					t.Errorf("top-level JSON-RPC code %v in %s", gs.Code, body)
				}
				// An agent answering this is understood as the same error.
				for _, m := range []wire.Method{wire.MethodGetTask, wire.MethodSend} {
					res, back := wire.FromRESTResponse(v, m, status, wire.RESTContentType(v), body)
					if res != nil || back == nil || back.Code != e.Code || back.Message != e.Message {
						t.Errorf("FromRESTResponse(%v) = %s, %+v; want code %d", m, res, back, e.Code)
					}
				}
				// And so is the same error sent in the middle of a stream.
				ev, err := wire.NewSSEReader(bytes.NewReader(wire.RESTErrorEvent(v, tc.e))).Next()
				if err != nil || ev.Type != "error" {
					t.Fatalf("RESTErrorEvent: %v %+v", err, ev)
				}
				if _, back := wire.FromRESTEvent(v, wire.MethodStream, ev.Data); back == nil || back.Code != e.Code {
					t.Errorf("FromRESTEvent of the error event = %+v", back)
				}
			})
		}
	}
	if *updateREST {
		writeRESTGolden(t, "errors.json", got)
	}
}

// TestFromRESTResponseErrors reads the error answers REST agents give in
// the field: 1.0 google.rpc.Status, the 0.3 SDKs' bodies, and plain HTTP
// errors.
func TestFromRESTResponseErrors(t *testing.T) {
	tests := []struct {
		name   string
		v      wire.Version
		m      wire.Method
		status int
		ct     string
		body   string
		code   int
		msg    string
	}{
		{"1.0 task not found", wire.V10, wire.MethodGetTask, 404, "application/a2a+json",
			`{"error":{"code":404,"status":"NOT_FOUND","message":"The specified task ID does not exist","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"task-123"}}]}}`,
			-32001, "The specified task ID does not exist"},
		{"1.0 reason decides, not the status", wire.V10, wire.MethodCancelTask, 400, "application/a2a+json",
			`{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"no","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_CANCELABLE","domain":"a2a-protocol.org"}]}}`,
			-32002, "no"},
		{"1.0 other typed details first", wire.V10, wire.MethodSend, 400, "application/a2a+json",
			`{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"bad","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[]},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_PARAMS","domain":"a2a-protocol.org"}]}}`,
			-32602, "bad"},
		{"1.0 foreign domain: the status decides", wire.V10, wire.MethodSend, 404, "application/json",
			`{"error":{"code":404,"status":"NOT_FOUND","message":"nope","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"example.com"}]}}`,
			-32601, "nope"},
		{"1.0 without details", wire.V10, wire.MethodGetTask, 404, "application/json",
			`{"error":{"code":404,"status":"NOT_FOUND","message":"gone"}}`, -32001, "gone"},
		{"1.0 version not supported", wire.V10, wire.MethodSend, 400, "application/a2a+json",
			`{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"Version not supported","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"VERSION_NOT_SUPPORTED","domain":"a2a-protocol.org","metadata":{}}]}}`,
			-32009, "Version not supported"},
		{"0.3 a2a-js bare JSON-RPC error", wire.V03, wire.MethodGetTask, 404, "application/json",
			`{"code":-32001,"message":"Task not found: t-1","data":{"taskId":"t-1"}}`, -32001, "Task not found: t-1"},
		{"0.3 a2a-python message only", wire.V03, wire.MethodCancelTask, 409, "application/json",
			`{"message":"Task cannot be canceled"}`, -32002, "Task cannot be canceled"},
		{"0.3 a2a-python content type", wire.V03, wire.MethodSend, 415, "application/json", `{"message":"Incompatible content types"}`, -32005, "Incompatible content types"},
		{"0.3 a2a-python invalid params", wire.V03, wire.MethodSend, 422, "application/json", `{"message":"Invalid params"}`, -32602, "Invalid params"},
		{"0.3 a2a-python unsupported", wire.V03, wire.MethodPushSet, 501, "application/json", `{"message":"Push Notification is not supported"}`, -32004, "Push Notification is not supported"},
		{"0.3 reason of the 0.3 card error", wire.V03, wire.MethodExtendedCard, 400, "application/json",
			`{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"no card","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED","domain":"a2a-protocol.org"}]}}`,
			-32007, "no card"},
		{"plain 404 on a task", wire.V10, wire.MethodGetTask, 404, "text/plain", "404 page not found", -32001, "the agent answered HTTP 404 Not Found"},
		{"plain 404 on a send", wire.V10, wire.MethodSend, 404, "text/html", "<html>", -32601, "the agent answered HTTP 404 Not Found"},
		{"405 from a GET-only subscribe", wire.V03, wire.MethodSubscribe, 405, "", "", -32601, "the agent answered HTTP 405 Method Not Allowed"},
		{"401 is the marketplace's credentials, not the buyer's", wire.V10, wire.MethodSend, 401, "", "", -32603, "the agent answered HTTP 401 Unauthorized"},
		{"403", wire.V10, wire.MethodSend, 403, "", "", -32603, "the agent answered HTTP 403 Forbidden"},
		{"429", wire.V10, wire.MethodSend, 429, "", "", -32603, "the agent answered HTTP 429 Too Many Requests"},
		{"400 without a body", wire.V10, wire.MethodSend, 400, "", "", -32600, "the agent answered HTTP 400 Bad Request"},
		{"other 4xx", wire.V10, wire.MethodSend, 418, "", "", -32600, "the agent answered HTTP 418 I'm a teapot"},
		{"502 from a gateway", wire.V10, wire.MethodSend, 502, "text/html", "<h1>Bad Gateway</h1>", -32603, "the agent answered HTTP 502 Bad Gateway"},
		{"framework detail", wire.V10, wire.MethodSend, 404, "application/json", `{"detail":"Not Found"}`, -32601, "Not Found"},
		{"error string", wire.V10, wire.MethodSend, 500, "application/json", `{"error":"boom"}`, -32603, "boom"},
		{"JSON-RPC envelope from a confused agent", wire.V10, wire.MethodSend, 200, "application/json",
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"nope"}}`, -32004, "nope"},
		{"google.rpc.Status under HTTP 200", wire.V10, wire.MethodSend, 200, "application/json",
			`{"error":{"code":404,"status":"NOT_FOUND","message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`, -32001, "x"},
		{"success that is not JSON", wire.V10, wire.MethodGetTask, 200, "text/html", "<html>", -32006, ""},
		{"success that is not an object", wire.V10, wire.MethodGetTask, 200, "application/json", `[1]`, -32006, ""},
		{"empty success", wire.V10, wire.MethodGetTask, 200, "application/json", ``, -32006, ""},
		{"a stream where an answer was due", wire.V10, wire.MethodGetTask, 200, "text/event-stream", "data: {}\n\n", -32006, ""},
		{"0.3 send of neither", wire.V03, wire.MethodSend, 200, "application/json", `{"other":1}`, -32006, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, e := wire.FromRESTResponse(tc.v, tc.m, tc.status, tc.ct, []byte(tc.body))
			if e == nil {
				t.Fatalf("no error; result %s", res)
			}
			if e.Code != tc.code || (tc.msg != "" && e.Message != tc.msg) {
				t.Errorf("got %d %q, want %d %q", e.Code, e.Message, tc.code, tc.msg)
			}
			if out := wire.ErrorResponse(json.RawMessage(`1`), e); !json.Valid(out) {
				t.Errorf("the recovered error does not render: %s", out)
			}
		})
	}
}

func TestFromRESTResponseSuccess(t *testing.T) {
	tests := []struct {
		name   string
		v      wire.Version
		m      wire.Method
		status int
		body   string
		want   string
	}{
		{"1.0 delete 204", wire.V10, wire.MethodPushDelete, 204, "", `{}`},
		{"0.3 delete 204 (a2a-js)", wire.V03, wire.MethodPushDelete, 204, "", `null`},
		{"0.3 delete {}", wire.V03, wire.MethodPushDelete, 200, `{}`, `null`},
		{"0.3 send 201 (a2a-js)", wire.V03, wire.MethodSend, 201, `{"message":{"messageId":"m","role":"ROLE_AGENT","content":[{"text":"hi"}]}}`,
			`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`},
		{"0.3 proto name msg", wire.V03, wire.MethodSend, 200, `{"msg":{"messageId":"m","role":"ROLE_AGENT","content":[]}}`,
			`{"kind":"message","messageId":"m","role":"agent","parts":[]}`},
		{"0.3 cancel 202 (a2a-js)", wire.V03, wire.MethodCancelTask, 202, `{"id":"t","contextId":"c","status":{"state":"TASK_STATE_CANCELLED"}}`,
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"canceled"}}`},
		{"0.3 status numbers", wire.V03, wire.MethodGetTask, 200, `{"id":"t","contextId":"c","status":{"state":6,"message":{"role":2,"content":[]}}}`,
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required","message":{"kind":"message","role":"agent","parts":[]}}}`},
		{"0.3 push config without id in it", wire.V03, wire.MethodPushGet, 200, `{"name":"tasks/t-1/pushNotificationConfigs/c-1","pushNotificationConfig":{"url":"https://x"}}`,
			`{"taskId":"t-1","pushNotificationConfig":{"url":"https://x","id":"c-1"}}`},
		{"0.3 push list as a bare array", wire.V03, wire.MethodPushList, 200, `[{"name":"tasks/t-1/pushNotificationConfigs/c-1","pushNotificationConfig":{"id":"c-1","url":"https://x"}}]`,
			`[{"taskId":"t-1","pushNotificationConfig":{"id":"c-1","url":"https://x"}}]`},
		{"0.3 push list without configs", wire.V03, wire.MethodPushList, 200, `{}`, `[]`},
		{"0.3 JSON-RPC shaped task kept", wire.V03, wire.MethodGetTask, 200, `{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}`,
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}`},
		{"0.3 stream answered with one JSON object", wire.V03, wire.MethodStream, 200, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED"},"final":true}}`,
			`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"failed"},"final":true}`},
		{"1.0 as is", wire.V10, wire.MethodSend, 200, "{\n \"task\": {\"id\": \"t\"}\n}", `{"task":{"id":"t"}}`},
		{"JSON-RPC envelope from a confused agent", wire.V10, wire.MethodGetTask, 200, `{"jsonrpc":"2.0","id":1,"result":{"id":"t"}}`, `{"id":"t"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, e := wire.FromRESTResponse(tc.v, tc.m, tc.status, wire.RESTContentType(tc.v), []byte(tc.body))
			if e != nil {
				t.Fatalf("error %v", e)
			}
			equalJSON(t, res, []byte(tc.want))
			if bytes.ContainsAny(res, "\r\n") {
				t.Errorf("result is not one line: %s", res)
			}
		})
	}
}

func TestFromRESTEventCases(t *testing.T) {
	tests := []struct {
		name string
		v    wire.Version
		data string
		want string // "" when an error is wanted
		code int
	}{
		{"1.0 status update", wire.V10, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, 0},
		{"0.3 final defaults to false", wire.V03, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working"},"final":false}`, 0},
		{"0.3 artifact", wire.V03, `{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"file":{"fileWithBytes":"aGk=","mimeType":"text/plain"}}]},"lastChunk":true}}`,
			`{"kind":"artifact-update","taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"kind":"file","file":{"bytes":"aGk=","mimeType":"text/plain"}}]},"lastChunk":true}`, 0},
		{"1.0 error event", wire.V10, `{"error":{"code":500,"status":"INTERNAL","message":"boom","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INTERNAL_ERROR","domain":"a2a-protocol.org"}]}}`, "", -32603},
		{"0.3 a2a-js error event", wire.V03, `{"code":-32001,"message":"Task not found"}`, "", -32001},
		{"not JSON", wire.V10, `{`, "", -32006},
		{"empty", wire.V03, ``, "", -32006},
		{"not an object", wire.V10, `"x"`, "", -32006},
		{"0.3 of no known shape", wire.V03, `{"x":1}`, "", -32006},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, e := wire.FromRESTEvent(tc.v, wire.MethodStream, []byte(tc.data))
			if tc.want == "" {
				if e == nil || e.Code != tc.code {
					t.Fatalf("got %s, %v; want code %d", res, e, tc.code)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			equalJSON(t, res, []byte(tc.want))
		})
	}
}

// ---- agent side: RESTUpstream, and the agent parsing what it gets ----

type restUpstreamCase struct {
	Method string          `json:"method"`
	URL    string          `json:"url"`
	Body   json.RawMessage `json:"body,omitempty"`
	Error  int             `json:"error,omitempty"`
}

const restAgentBase = "https://agent.example.com/a2a/"

func TestRESTUpstreamGolden(t *testing.T) {
	want := map[string]restUpstreamCase{}
	readRESTGolden(t, "upstream.json", &want)
	got := map[string]restUpstreamCase{}
	for _, name := range requestPairs {
		for _, from := range []wire.Version{wire.V03, wire.V10} {
			for _, to := range []wire.Version{wire.V03, wire.V10} {
				for _, tenant := range []string{"", "t 9"} {
					if tenant != "" && (to == wire.V03 || from != to) {
						continue
					}
					key := name + "/" + string(from) + "to" + string(to)
					if tenant != "" {
						key += "/tenant"
					}
					t.Run(key, func(t *testing.T) {
						r, werr := wire.ParseRequest(golden(t, name, from), string(from))
						if werr != nil {
							t.Fatal(werr)
						}
						method, u, body, err := wire.RESTUpstream(r, to, restAgentBase, tenant)
						if err != nil {
							t.Fatalf("RESTUpstream: %v", err)
						}
						got[key] = restUpstreamCase{Method: method, URL: u, Body: raw(body)}
						if !*updateREST {
							w := want[key]
							if method != w.Method || u != w.URL {
								t.Errorf("%s %s, want %s %s", method, u, w.Method, w.URL)
							}
							if w.Body != nil || body != nil {
								equalJSON(t, body, w.Body)
							}
						}
						if (method == "GET" || method == "DELETE") != (body == nil) {
							t.Errorf("%s with body %s", method, body)
						}
						agentParses(t, r, to, tenant, method, u, body)
					})
				}
			}
		}
	}
	// The request's own tenant is the buyer's: the agent gets its own.
	r, _ := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"tenant":"buyer-side","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`), "1.0")
	for _, tenant := range []string{"", "agent-side"} {
		key := "send_with_tenant/1.0to1.0/" + tenant
		method, u, body, err := wire.RESTUpstream(r, wire.V10, restAgentBase, tenant)
		if err != nil {
			t.Fatal(err)
		}
		got[key] = restUpstreamCase{Method: method, URL: u, Body: raw(body)}
		if bytes.Contains(body, []byte("buyer-side")) {
			t.Errorf("the buyer's tenant went to the agent: %s", body)
		}
		agentParses(t, r, wire.V10, tenant, method, u, body)
	}
	// ListTasks, with its query.
	r, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"c 1","status":"TASK_STATE_WORKING","pageSize":10,"includeArtifacts":true,"historyLength":0}}`), "1.0")
	method, u, body, err := wire.RESTUpstream(r, wire.V10, restAgentBase, "")
	if err != nil {
		t.Fatal(err)
	}
	got["list_tasks/1.0to1.0"] = restUpstreamCase{Method: method, URL: u, Body: raw(body)}
	agentParses(t, r, wire.V10, "", method, u, body)
	if _, _, _, err := wire.RESTUpstream(r, wire.V03, restAgentBase, ""); err == nil {
		t.Error("ListTasks to a 0.3 agent: no error")
	} else if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeUnsupportedOperation {
		t.Errorf("ListTasks to a 0.3 agent: %v", err)
	}
	if !*updateREST {
		for _, key := range []string{"send_with_tenant/1.0to1.0/", "send_with_tenant/1.0to1.0/agent-side", "list_tasks/1.0to1.0"} {
			g, w := got[key], want[key]
			if g.Method != w.Method || g.URL != w.URL {
				t.Errorf("%s: %s %s, want %s %s", key, g.Method, g.URL, w.Method, w.URL)
			}
			if g.Body != nil || w.Body != nil {
				equalJSON(t, g.Body, w.Body)
			}
		}
	}
	if *updateREST {
		writeRESTGolden(t, "upstream.json", got)
	}
}

// agentParses plays a REST agent receiving RESTUpstream's request: it
// must read the same operation, task, message and params (but for what
// the target version or the REST form cannot carry).
func agentParses(t *testing.T, r *wire.Request, v wire.Version, tenant, method, rawURL string, body []byte) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("bad URL %q: %v", rawURL, err)
	}
	path, ok := strings.CutPrefix(u.EscapedPath(), "/a2a")
	if !ok {
		t.Fatalf("URL %q is not under the base", rawURL)
	}
	ct := ""
	if body != nil {
		ct = wire.RESTContentType(v)
	}
	header := ""
	if v == wire.V10 {
		header = "1.0"
	}
	ar, werr := wire.ParseREST(method, path, u.Query(), ct, body, header)
	if werr != nil {
		t.Fatalf("the agent cannot parse %s %s %s: %v", method, rawURL, body, werr)
	}
	if ar.Method != r.Method || ar.Version != v || ar.Tenant != tenant || ar.TaskID() != r.TaskID() ||
		ar.Blocking() != r.Blocking() || ar.ContextID() != r.ContextID() || ar.ParentTaskID() != r.ParentTaskID() ||
		partsOf(ar) != partsOf(r) || !reflect.DeepEqual(ar.MessageTexts(), r.MessageTexts()) {
		t.Errorf("the agent reads it differently: method %v/%v task %q/%q tenant %q/%q blocking %v/%v",
			ar.Method, r.Method, ar.TaskID(), r.TaskID(), ar.Tenant, tenant, ar.Blocking(), r.Blocking())
	}
	// The params the agent gets are the request's in its version, but
	// for what REST cannot carry.
	want := paramsIn(t, r, v)
	delete(want, "tenant")
	if tenant != "" {
		want["tenant"] = tenant
	}
	switch {
	case v == wire.V03 && r.Method == wire.MethodSend:
		cfg, _ := want["configuration"].(map[string]any)
		if cfg == nil {
			cfg = map[string]any{}
		}
		cfg["blocking"] = r.Blocking()
		want["configuration"] = cfg
		fallthrough
	case v == wire.V03 && r.Method == wire.MethodStream:
		if msg, ok := want["message"].(map[string]any); ok {
			delete(msg, "referenceTaskIds") // not in the 0.3 proto
		}
	case v == wire.V03 && r.Method == wire.MethodPushGet, v == wire.V03 && r.Method == wire.MethodPushDelete:
		if _, ok := want["pushNotificationConfigId"]; !ok {
			want["pushNotificationConfigId"] = want["id"]
		}
		delete(want, "metadata")
	case r.Method != wire.MethodSend && r.Method != wire.MethodStream && !(v == wire.V10 && r.Method == wire.MethodCancelTask):
		delete(want, "metadata") // only a POST body carries objects
	}
	wantJSON, _ := json.Marshal(want)
	if len(want) == 0 && ar.Params == nil {
		return
	}
	equalJSON(t, ar.Params, wantJSON)
}

// partsOf counts a request's parts but for DataBytes, the length of the
// data parts' JSON as sent, which re-encoding compacts.
func partsOf(r *wire.Request) wire.PartStats {
	p := r.MessageParts()
	p.DataBytes = 0
	return p
}

// paramsIn is r's params in version v, as a map.
func paramsIn(t *testing.T, r *wire.Request, v wire.Version) map[string]any {
	t.Helper()
	body := r.Raw
	if r.Version != v {
		var err error
		if body, err = wire.TranslateRequest(r, v); err != nil {
			t.Fatal(err)
		}
	}
	var env struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Params == nil {
		env.Params = map[string]any{}
	}
	return env.Params
}

func TestRESTUpstreamErrors(t *testing.T) {
	if _, _, _, err := wire.RESTUpstream(nil, wire.V10, restAgentBase, ""); err == nil {
		t.Error("nil request: no error")
	}
	r, _ := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"t"}}`), "1.0")
	if _, _, _, err := wire.RESTUpstream(r, wire.V10, restAgentBase, ""); err == nil {
		t.Error("1.0 push config get without a config id: no error")
	}
	if _, _, _, err := wire.RESTUpstream(r, "2.0", restAgentBase, ""); err == nil {
		t.Error("unknown version: no error")
	}
	// Ids with every awkward character survive the path.
	r, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"a/b:cancel?x#y %z"}}`), "1.0")
	method, u, body, err := wire.RESTUpstream(r, wire.V10, "https://agent.example.com/a2a", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(u, "/tasks/a%2Fb%3Acancel%3Fx%23y%20%25z:cancel") {
		t.Errorf("URL %s", u)
	}
	agentParses(t, r, wire.V10, "", method, u, body)
}

// ---- all four pairings of bindings, in every pair of versions ----

func TestRESTBridgesEveryPairing(t *testing.T) {
	type side struct {
		binding wire.Binding
		v       wire.Version
	}
	var sides []side
	for _, b := range []wire.Binding{wire.BindingJSONRPC, wire.BindingREST} {
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			sides = append(sides, side{b, v})
		}
	}
	for _, buyer := range sides {
		for _, agent := range sides {
			name := buyer.binding.String() + "-" + string(buyer.v) + "_to_" + agent.binding.String() + "-" + string(agent.v)
			t.Run(name, func(t *testing.T) {
				// The buyer sends the golden send request in its binding.
				rpc, werr := wire.ParseRequest(golden(t, "send_request", buyer.v), string(buyer.v))
				if werr != nil {
					t.Fatal(werr)
				}
				r := rpc
				if buyer.binding == wire.BindingREST {
					method, u, body, err := wire.RESTUpstream(rpc, buyer.v, "https://meter.example.com/a2a/l-1", "")
					if err != nil {
						t.Fatal(err)
					}
					pu, _ := url.Parse(u)
					path, _ := strings.CutPrefix(pu.EscapedPath(), "/a2a/l-1")
					header := map[wire.Version]string{wire.V03: "", wire.V10: "1.0"}[buyer.v]
					if r, werr = wire.ParseREST(method, path, pu.Query(), wire.RESTContentType(buyer.v), body, header); werr != nil {
						t.Fatal(werr)
					}
				}
				// The meter forwards it in the agent's binding and version;
				// the agent reads the same call.
				var seen *wire.Request
				if agent.binding == wire.BindingJSONRPC {
					out, err := wire.TranslateRequest(r, agent.v)
					if err != nil {
						t.Fatal(err)
					}
					seen, werr = wire.ParseRequest(out, string(agent.v))
				} else {
					method, u, body, err := wire.RESTUpstream(r, agent.v, restAgentBase, "")
					if err != nil {
						t.Fatal(err)
					}
					pu, _ := url.Parse(u)
					path, _ := strings.CutPrefix(pu.EscapedPath(), "/a2a")
					header := map[wire.Version]string{wire.V03: "", wire.V10: "1.0"}[agent.v]
					seen, werr = wire.ParseREST(method, path, pu.Query(), wire.RESTContentType(agent.v), body, header)
				}
				if werr != nil {
					t.Fatal(werr)
				}
				if seen.Method != wire.MethodSend || seen.TaskID() != rpc.TaskID() || seen.Blocking() != rpc.Blocking() ||
					!reflect.DeepEqual(seen.MessageTexts(), rpc.MessageTexts()) || seen.ParentTaskID() != rpc.ParentTaskID() {
					t.Errorf("the agent reads another call: %v %q %v", seen.Method, seen.TaskID(), seen.Blocking())
				}

				// The agent answers the golden task in its binding; the
				// meter reads it as JSON-RPC, translates it, and answers
				// the buyer in the buyer's binding.
				answer := golden(t, "send_result_task", agent.v)
				var result json.RawMessage
				if agent.binding == wire.BindingJSONRPC {
					resp, err := wire.ParseResponse(wire.ResultResponse(json.RawMessage(`"x"`), answer))
					if err != nil {
						t.Fatal(err)
					}
					result = resp.Result
				} else {
					status, body := wire.RESTResult(agent.v, wire.MethodSend, answer)
					if result, werr = wire.FromRESTResponse(agent.v, wire.MethodSend, status, wire.RESTContentType(agent.v), body); werr != nil {
						t.Fatal(werr)
					}
				}
				obs := wire.Observe(agent.v, wire.MethodSend, result)
				if obs.Kind != wire.KindTask || obs.TaskID == "" || obs.State == "" {
					t.Errorf("the meter observes nothing: %+v", obs)
				}
				tr, err := wire.TranslateResult(agent.v, buyer.v, wire.MethodSend, result)
				if err != nil {
					t.Fatal(err)
				}
				var got []byte
				if buyer.binding == wire.BindingJSONRPC {
					resp, err := wire.ParseResponse(wire.ResultResponse(r.ID, tr))
					if err != nil {
						t.Fatal(err)
					}
					got = resp.Result
				} else {
					status, body := wire.RESTResult(buyer.v, wire.MethodSend, tr)
					if got, werr = wire.FromRESTResponse(buyer.v, wire.MethodSend, status, wire.RESTContentType(buyer.v), body); werr != nil {
						t.Fatal(werr)
					}
				}
				equalJSON(t, got, golden(t, "send_result_task", buyer.v))

				// An error goes the same way.
				agentErr := wire.TaskNotFound("task-1")
				var e *wire.Error
				if agent.binding == wire.BindingJSONRPC {
					resp, _ := wire.ParseResponse(wire.ErrorResponse(json.RawMessage(`"x"`), agentErr))
					e = resp.Error
				} else {
					status, body := wire.RESTError(agent.v, agentErr)
					_, e = wire.FromRESTResponse(agent.v, wire.MethodSend, status, wire.RESTContentType(agent.v), body)
				}
				e = wire.TranslateError(agent.v, buyer.v, e)
				if buyer.binding == wire.BindingREST {
					status, body := wire.RESTError(buyer.v, e)
					if status != http.StatusNotFound {
						t.Errorf("HTTP %d", status)
					}
					_, e = wire.FromRESTResponse(buyer.v, wire.MethodSend, status, "", body)
				}
				if e == nil || e.Code != wire.CodeTaskNotFound {
					t.Errorf("the buyer gets %+v", e)
				}
			})
		}
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

func BenchmarkFromRESTEvent03(b *testing.B) {
	data := []byte(`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","message":{"role":"ROLE_AGENT","content":[{"text":"Reading sources"}]}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.FromRESTEvent(wire.V03, wire.MethodStream, data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestParseRESTRefusesKeysParsersConfuse(t *testing.T) {
	for _, msg := range []string{
		`{"messageId":"m","role":"ROLE_USER","parts":[],"taskId":"a","task_id":"b"}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[],"taskId":"a","TASKID":"b"}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[],"taskId":"a","taſk_id":"b"}`,
		`{"messageId":"m","role":"ROLE_USER","parts":[],"taskId":"a","task\u005fid":"b"}`,
	} {
		body := []byte(`{"message":` + msg + `}`)
		if _, werr := wire.ParseREST("POST", "/message:send", nil, wire.ContentTypeA2A, body, "1.0"); werr == nil || werr.Code != wire.CodeInvalidParams {
			t.Errorf("%s: %v", msg, werr)
		}
	}
	// Many members: the check stays linear and still finds the pair.
	var b strings.Builder
	b.WriteString(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[]`)
	for i := 0; i < 5000; i++ {
		b.WriteString(`,"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `_` + strings.Repeat("y", i/26) + `":1`)
	}
	b.WriteString(`,"taskId":"a","Task_Id":"b"}}`)
	if _, werr := wire.ParseREST("POST", "/message:send", nil, wire.ContentTypeA2A, []byte(b.String()), "1.0"); werr == nil || werr.Code != wire.CodeInvalidParams {
		t.Errorf("large message: %v", werr)
	}
}

// FuzzFromREST feeds arbitrary agent answers to the REST readers: they
// never panic, a result is always one line of JSON that the proxy can
// relay and observe, and an error always renders.
func FuzzFromREST(f *testing.F) {
	for _, s := range []string{
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
		`{"message":{"role":"ROLE_AGENT","content":[{"text":"x"},{"file":{"fileWithUri":"u"}},{"data":{"data":{}}}]}}`,
		`{"statusUpdate":{"taskId":"t","status":{"state":5,"message":{"role":2}}}}`,
		`{"artifactUpdate":{"artifact":{"parts":[{"file":{"fileWithBytes":"aGk="}}]}}}`,
		`{"name":"tasks/a/pushNotificationConfigs/b","pushNotificationConfig":{}}`,
		`{"configs":[{"name":"tasks/a/pushNotificationConfigs/b"}]}`,
		`{"error":{"code":404,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNKNOWN_ERROR","domain":"agentmarket.dev","metadata":{"code":"-32077"}}]}}`,
		`{"code":-32001,"message":"x","data":null}`,
		`{"jsonrpc":"2.0","id":1,"result":[]}`,
		`[]`, `null`, `"x"`, ``, `{`,
	} {
		f.Add(200, s, uint8(0))
		f.Add(404, s, uint8(5))
	}
	f.Fuzz(func(t *testing.T, status int, body string, sel uint8) {
		v := []wire.Version{wire.V03, wire.V10}[sel%2]
		m := wire.Method(int(sel/2)%11 + 1)
		check := func(res json.RawMessage, e *wire.Error) {
			if e != nil {
				if res != nil {
					t.Fatalf("both a result and an error")
				}
				if out := wire.ErrorResponse(json.RawMessage(`1`), e); !json.Valid(out) {
					t.Fatalf("error does not render: %s", out)
				}
				if _, out := wire.RESTError(v, e); !json.Valid(out) {
					t.Fatalf("REST error does not render: %s", out)
				}
				return
			}
			if !json.Valid(res) || bytes.ContainsAny(res, "\r\n") {
				t.Fatalf("result is not one line of JSON: %q", res)
			}
			wire.Observe(v, m, res)
			_, out := wire.RESTResult(v, m, res)
			if !json.Valid(out) {
				t.Fatalf("RESTResult is not JSON: %s", out)
			}
			if ev := wire.RESTEvent(v, m, res); !json.Valid(ev) {
				t.Fatalf("RESTEvent is not JSON: %s", ev)
			}
		}
		check(wire.FromRESTResponse(v, m, status, wire.RESTContentType(v), []byte(body)))
		check(wire.FromRESTEvent(v, m, []byte(body)))
	})
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
// is checked for colliding keys in linear time (it used to be pairwise).
func TestParseRequestManyKeysIsLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]`)
	for i := 0; i < 40000; i++ {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	b.WriteString(`}}}`)
	start := time.Now()
	if _, err := wire.ParseRequest([]byte(b.String()), ""); err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("40k keys took %s", d)
	}
	dup := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[],"taskId":"a","task_id":"b"}}}`
	if _, err := wire.ParseRequest([]byte(dup), ""); err == nil {
		t.Fatal("taskId beside task_id was accepted")
	}
}
