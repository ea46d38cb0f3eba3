package wire_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

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
