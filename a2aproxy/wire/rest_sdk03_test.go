package wire_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// The 0.3 HTTP+JSON of the official Go SDK (a2a-go's a2acompat/a2av0):
// 1.0 paths, 0.3 JSON-RPC objects, snake_case keys. These tables hold
// what its client sends and its server answers, as that SDK v2.3.1 writes
// them.

func TestSDK03Keys(t *testing.T) {
	for _, tc := range []struct{ camel, snake string }{
		{"messageId", "message_id"},
		{"contextId", "context_id"},
		{"pushNotificationConfig", "push_notification_config"},
		{"kind", "kind"},
		{"@type", "@type"},
		{"x-vendor", "x-vendor"},
		{"inputTokens", "input_tokens"},
		{"agentmarket/parentTaskId", "agentmarket/parent_task_id"},
		{"https://agentmarket.dev/a2a/extensions/usage/v1", "https://agentmarket.dev/a2a/extensions/usage/v1"},
	} {
		if got := wire.SDKSnake(tc.camel); got != tc.snake {
			t.Errorf("snake(%q) = %q, want %q", tc.camel, got, tc.snake)
		}
		if got := wire.SDKCamel(tc.snake); got != tc.camel {
			t.Errorf("camel(%q) = %q, want %q", tc.snake, got, tc.camel)
		}
	}
	// Spellings that do not come back: the dialect's own rules.
	for in, want := range map[string]string{"URLField": "url_field", "taskID": "task_id", "A2A": "a2a", "Éclair": "éclair", "fooÉclair": "foo_éclair"} {
		if got := wire.SDKSnake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"_a": "A", "a__b": "aB", "a_": "a", "a_1b": "a1b", "messageId": "messageId"} {
		if got := wire.SDKCamel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRESTVersionOf(t *testing.T) {
	for _, tc := range []struct {
		path, header, query string
		v                   wire.Version
		d                   wire.Dialect
	}{
		{"/v1/message:send", "", "", wire.V03, wire.DialectSpec},
		{"/v1/tasks/t", "1.0", "", wire.V03, wire.DialectSpec}, // ParseREST refuses it
		{"/message:send", "1.0", "", wire.V10, wire.DialectSpec},
		{"/message:send", "", "A2A-Version=1.0", wire.V10, wire.DialectSpec},
		{"/message:send", "1.0.1", "", wire.V10, wire.DialectSpec},
		{"/message:send", "2.0", "", wire.V10, wire.DialectSpec},
		{"/message:send", "", "", wire.V03, wire.DialectSDK03},
		{"/message:send", "0.3", "", wire.V03, wire.DialectSDK03},
		{"/tasks/t:cancel", "0.3.0", "", wire.V03, wire.DialectSDK03},
		{"/tasks/t", "", "A2A-Version=0.3", wire.V03, wire.DialectSDK03},
	} {
		q, _ := url.ParseQuery(tc.query)
		if v, d := wire.RESTVersionOf(tc.path, tc.header, q); v != tc.v || d != tc.d {
			t.Errorf("%s header %q query %q: %s %s, want %s %s", tc.path, tc.header, tc.query, v, d, tc.v, tc.d)
		}
	}
}

// ---- buyer side, in ----

func TestParseRESTSDK03(t *testing.T) {
	send := `{"configuration":{"blocking":true,"accepted_output_modes":["text/plain"],"history_length":2},` +
		`"message":{"kind":"message","message_id":"m-1","context_id":"c-1","task_id":"task-1","role":"user",` +
		`"parts":[{"kind":"text","text":"Hello"},{"kind":"data","data":{"row_count":3}}],` +
		`"metadata":{"agentmarket/parent_task_id":"parent-7"}},"metadata":{"trace_id":"abc"}}`
	tests := []struct {
		name, verb, path, query, header, ct, body string

		method   string // the JSON-RPC method read, or the method of the error
		version  wire.Version
		task     string
		blocking bool
		parent   string
		params   string // the JSON-RPC params, when read
		code     int    // the error, else 0
		status   int    // its HTTP status in the dialect
	}{
		{name: "send", verb: "POST", path: "/message:send", header: "0.3", ct: "application/json", body: send,
			method: "message/send", version: wire.V03, task: "task-1", blocking: true, parent: "parent-7",
			params: `{"configuration":{"blocking":true,"acceptedOutputModes":["text/plain"],"historyLength":2},` +
				`"message":{"kind":"message","messageId":"m-1","contextId":"c-1","taskId":"task-1","role":"user",` +
				`"parts":[{"kind":"text","text":"Hello"},{"kind":"data","data":{"rowCount":3}}],` +
				`"metadata":{"agentmarket/parentTaskId":"parent-7"}},"metadata":{"traceId":"abc"}}`},
		{name: "send without a version header", verb: "POST", path: "/message:send", ct: "application/json",
			body:   `{"message":{"kind":"message","message_id":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`,
			method: "message/send", version: wire.V03, blocking: true,
			params: `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`},
		{name: "send with the patch version, not blocking", verb: "POST", path: "/message:send", header: "0.3.0", ct: "application/json",
			body:   `{"configuration":{"blocking":false},"message":{"kind":"message","message_id":"m","role":"user","parts":[]}}`,
			method: "message/send", version: wire.V03,
			params: `{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"m","role":"user","parts":[]}}`},
		{name: "send with camelCase keys", verb: "POST", path: "/message:send", header: "0.3",
			body:   `{"message":{"kind":"message","messageId":"m","taskId":"t-2","role":"user","parts":[]}}`,
			method: "message/send", version: wire.V03, task: "t-2", blocking: true,
			params: `{"message":{"kind":"message","messageId":"m","taskId":"t-2","role":"user","parts":[]}}`},
		{name: "stream", verb: "POST", path: "/message:stream", header: "0.3", ct: "application/json; charset=utf-8",
			body:   `{"message":{"kind":"message","message_id":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`,
			method: "message/stream", version: wire.V03,
			params: `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`},
		{name: "get", verb: "GET", path: "/tasks/task-1", query: "historyLength=3", header: "0.3",
			method: "tasks/get", version: wire.V03, task: "task-1", params: `{"id":"task-1","historyLength":3}`},
		{name: "get, escaped id", verb: "GET", path: "/tasks/a%2Fb%3Acancel", header: "0.3",
			method: "tasks/get", version: wire.V03, task: "a/b:cancel", params: `{"id":"a/b:cancel"}`},
		{name: "cancel without a body", verb: "POST", path: "/tasks/task-1:cancel", header: "0.3",
			method: "tasks/cancel", version: wire.V03, task: "task-1", params: `{"id":"task-1"}`},
		{name: "cancel with null", verb: "POST", path: "/tasks/task-1:cancel", header: "0.3", ct: "application/json", body: `null`,
			method: "tasks/cancel", version: wire.V03, task: "task-1", params: `{"id":"task-1"}`},
		{name: "subscribe, POST", verb: "POST", path: "/tasks/task-1:subscribe", header: "0.3",
			method: "tasks/resubscribe", version: wire.V03, task: "task-1", params: `{"id":"task-1"}`},
		{name: "subscribe, GET", verb: "GET", path: "/tasks/task-1:subscribe", header: "0.3",
			method: "tasks/resubscribe", version: wire.V03, task: "task-1", params: `{"id":"task-1"}`},
		{name: "push set, the bare config", verb: "POST", path: "/tasks/task-1/pushNotificationConfigs", header: "0.3", ct: "application/json",
			body:   `{"id":"cfg-1","url":"https://buyer.example.com/hook","token":"tok","authentication":{"schemes":["Bearer"],"credentials":"c"}}`,
			method: "tasks/pushNotificationConfig/set", version: wire.V03, task: "task-1",
			params: `{"taskId":"task-1","pushNotificationConfig":{"id":"cfg-1","url":"https://buyer.example.com/hook","token":"tok","authentication":{"schemes":["Bearer"],"credentials":"c"}}}`},
		{name: "push get", verb: "GET", path: "/tasks/task-1/pushNotificationConfigs/cfg-1", header: "0.3",
			method: "tasks/pushNotificationConfig/get", version: wire.V03, task: "task-1", params: `{"id":"task-1","pushNotificationConfigId":"cfg-1"}`},
		{name: "push list", verb: "GET", path: "/tasks/task-1/pushNotificationConfigs", header: "0.3",
			method: "tasks/pushNotificationConfig/list", version: wire.V03, task: "task-1", params: `{"id":"task-1"}`},
		{name: "push delete", verb: "DELETE", path: "/tasks/task-1/pushNotificationConfigs/cfg-1", header: "0.3",
			method: "tasks/pushNotificationConfig/delete", version: wire.V03, task: "task-1", params: `{"id":"task-1","pushNotificationConfigId":"cfg-1"}`},
		{name: "extended card", verb: "GET", path: "/extendedAgentCard", header: "0.3",
			method: "agent/getAuthenticatedExtendedCard", version: wire.V03},

		{name: "list tasks has no 0.3 method", verb: "GET", path: "/tasks", header: "0.3",
			version: wire.V03, code: wire.CodeUnsupportedOperation, status: 400},
		{name: "the /v1 card path is no dialect path", verb: "GET", path: "/card", header: "0.3",
			version: wire.V10, code: wire.CodeMethodNotFound, status: 404},
		{name: "a tenant is 1.0 only", verb: "GET", path: "/acme/tasks/task-1", header: "0.3",
			method: "GetTask", version: wire.V10, code: wire.CodeInvalidRequest, status: 400},
		{name: "a 1.0 message said to be 0.3", verb: "POST", path: "/message:send", ct: "application/a2a+json", header: "0.3",
			body:   `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`,
			method: "SendMessage", version: wire.V10, code: wire.CodeInvalidRequest, status: 400},
		{name: "keys that collide once read", verb: "POST", path: "/message:send", header: "0.3",
			body:   `{"message":{"kind":"message","message_id":"m","role":"user","parts":[],"task_id":"a","taskId":"b"}}`,
			method: "message/send", version: wire.V03, code: wire.CodeInvalidParams, status: 400},
		{name: "keys a parser folds", verb: "POST", path: "/message:send", header: "0.3",
			body:   `{"message":{"kind":"message","message_id":"m","role":"user","parts":[],"task_id":"a","TASKID":"b"}}`,
			method: "message/send", version: wire.V03, code: wire.CodeInvalidParams, status: 400},
		{name: "a body that is not an object", verb: "POST", path: "/message:send", header: "0.3", body: `[1]`,
			method: "message/send", version: wire.V03, code: wire.CodeInvalidRequest, status: 400},
		{name: "a body that is not JSON", verb: "POST", path: "/message:send", header: "0.3", body: `{"message":`,
			method: "message/send", version: wire.V03, code: wire.CodeParseError, status: 400},
		{name: "a body of another type", verb: "POST", path: "/message:send", header: "0.3", ct: "text/plain", body: `{}`,
			method: "message/send", version: wire.V03, code: wire.CodeContentTypeNotSupported, status: 400},
		{name: "a send without a message", verb: "POST", path: "/message:send", header: "0.3", ct: "application/json", body: `{}`,
			method: "message/send", version: wire.V03, code: wire.CodeInvalidParams, status: 400},
		{name: "no such verb", verb: "DELETE", path: "/tasks/task-1", header: "0.3",
			version: wire.V10, code: wire.CodeMethodNotFound, status: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r, werr := wire.ParseREST(tc.verb, tc.path, q, tc.ct, body, tc.header)
			if r == nil {
				t.Fatal("nil Request")
			}
			if r.Binding != wire.BindingREST || r.Version != tc.version || r.Name != tc.method {
				t.Errorf("binding %v, version %s, method %q; want %s %q (err %v)", r.Binding, r.Version, r.Name, tc.version, tc.method, werr)
			}
			if tc.code != 0 {
				if werr == nil || werr.Code != tc.code {
					t.Fatalf("error %v, want code %d", werr, tc.code)
				}
				if status, _ := wire.SDK03Error(werr); status != tc.status {
					t.Errorf("HTTP %d, want %d", status, tc.status)
				}
				return
			}
			if werr != nil {
				t.Fatal(werr)
			}
			if r.TaskID() != tc.task || r.Blocking() != tc.blocking || r.ParentTaskID() != tc.parent {
				t.Errorf("task %q blocking %v parent %q; want %q %v %q", r.TaskID(), r.Blocking(), r.ParentTaskID(), tc.task, tc.blocking, tc.parent)
			}
			if tc.params != "" || r.Params != nil {
				equalJSON(t, r.Params, []byte(tc.params))
			}
			checkSynthesized(t, r)
		})
	}
}

// ---- buyer side, out ----

// snakeKeys reports the keys of a JSON value with an upper-case ASCII
// letter.
func snakeKeys(t *testing.T, b []byte) {
	t.Helper()
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.ToLower(k) != k {
					t.Errorf("key %q is not snake_case in %s", k, b)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	walk(v)
}

func TestSDK03ResultsAndEvents(t *testing.T) {
	for _, tc := range resultPairs {
		t.Run(tc.name+"/"+tc.method.String(), func(t *testing.T) {
			result := golden(t, tc.name, wire.V03)
			status, body := wire.SDK03Result(tc.method, result)
			if status != http.StatusOK {
				t.Errorf("HTTP %d", status)
			}
			if tc.method == wire.MethodPushDelete {
				if len(body) != 0 {
					t.Errorf("a delete answers %s, want an empty body", body)
				}
			} else {
				if bytes.ContainsAny(body, "\r\n") {
					t.Errorf("not one line: %s", body)
				}
				snakeKeys(t, body)
			}
			// The meter reading the same answer from a dialect agent gets
			// the result back.
			back, werr := wire.FromSDK03Response(tc.method, status, "application/json", body)
			if werr != nil {
				t.Fatalf("FromSDK03Response: %v", werr)
			}
			equalJSON(t, back, result)
			if !tc.method.Streaming() {
				return
			}
			data := wire.SDK03Event(tc.method, result)
			if bytes.ContainsAny(data, "\r\n") || bytes.Contains(data, []byte(`"jsonrpc"`)) {
				t.Errorf("event data is not one line of the bare object: %s", data)
			}
			snakeKeys(t, data)
			var sse bytes.Buffer
			if err := wire.WriteEvent(&sse, data); err != nil {
				t.Fatal(err)
			}
			ev, err := wire.NewSSEReader(&sse).Next()
			if err != nil {
				t.Fatal(err)
			}
			back, werr = wire.FromSDK03Event(tc.method, ev.Data)
			if werr != nil {
				t.Fatalf("FromSDK03Event: %v", werr)
			}
			equalJSON(t, back, result)
			if o1, o2 := wire.Observe(wire.V03, tc.method, back), wire.Observe(wire.V03, tc.method, result); !reflect.DeepEqual(o1, o2) {
				t.Errorf("observations differ: %+v vs %+v", o1, o2)
			}
		})
	}
}

func TestSDK03ResultShapes(t *testing.T) {
	tests := []struct {
		name   string
		m      wire.Method
		result string
		want   string
	}{
		{"a send's task is the bare task with its kind", wire.MethodSend,
			`{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"completed"},"artifacts":[{"artifactId":"a-1","parts":[{"kind":"text","text":"x"}]}]}`,
			`{"kind":"task","id":"t-1","context_id":"c-1","status":{"state":"completed"},"artifacts":[{"artifact_id":"a-1","parts":[{"kind":"text","text":"x"}]}]}`},
		{"a status update keeps final", wire.MethodStream,
			`{"kind":"status-update","taskId":"t-1","contextId":"c-1","status":{"state":"completed"},"final":true}`,
			`{"kind":"status-update","task_id":"t-1","context_id":"c-1","status":{"state":"completed"},"final":true}`},
		{"metadata keys too", wire.MethodGetTask,
			`{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"working"},"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":3}}}`,
			`{"kind":"task","id":"t-1","context_id":"c-1","status":{"state":"working"},"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"input_tokens":3}}}`},
		{"push config", wire.MethodPushGet,
			`{"taskId":"t-1","pushNotificationConfig":{"id":"c","url":"u"}}`,
			`{"task_id":"t-1","push_notification_config":{"id":"c","url":"u"}}`},
		{"push list, a bare array", wire.MethodPushList, `[]`, `[]`},
		{"the card", wire.MethodExtendedCard,
			`{"name":"A","protocolVersion":"0.3.0","preferredTransport":"HTTP+JSON","defaultInputModes":["text/plain"]}`,
			`{"name":"A","protocol_version":"0.3.0","preferred_transport":"HTTP+JSON","default_input_modes":["text/plain"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, body := wire.SDK03Result(tc.m, json.RawMessage(tc.result))
			equalJSON(t, body, []byte(tc.want))
			back, werr := wire.FromSDK03Response(tc.m, 200, "application/json", body)
			if werr != nil {
				t.Fatal(werr)
			}
			equalJSON(t, back, []byte(tc.result))
		})
	}
}

// ---- errors ----

func TestSDK03Errors(t *testing.T) {
	for _, tc := range restErrorCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			if e == nil {
				e = wire.InternalError("")
			}
			status, body := wire.SDK03Error(tc.e)
			var gs googleStatus
			if err := json.Unmarshal(body, &gs); err != nil {
				t.Fatalf("not a google.rpc.Status: %v: %s", err, body)
			}
			if gs.Code != nil {
				t.Errorf("a JSON-RPC code at the top level: %s", body)
			}
			if gs.Error.Code != status || gs.Error.Message != e.Message {
				t.Errorf("status body %+v for HTTP %d", gs.Error, status)
			}
			if row, ok := restStatusTable[e.Code]; ok && status != row.status {
				t.Errorf("HTTP %d, the table says %d", status, row.status)
			}
			// What the dialect's client reads: an ErrorInfo of the A2A domain
			// for every A2A error.
			if e.Code <= -32000 && e.Code >= -32099 && e.Code > -32040 || e.Code < -32099 {
				found := false
				for _, d := range gs.Error.Details {
					found = found || d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Domain == "a2a-protocol.org"
				}
				if !found {
					t.Errorf("no ErrorInfo of a2a-protocol.org: %s", body)
				}
			}
			res, back := wire.FromSDK03Response(wire.MethodGetTask, status, "application/problem+json", body)
			if res != nil || back == nil || back.Code != e.Code || back.Message != e.Message {
				t.Errorf("read back as %s, %+v", res, back)
			}
			ev, err := wire.NewSSEReader(bytes.NewReader(wire.SDK03ErrorEvent(tc.e))).Next()
			if err != nil {
				t.Fatal(err)
			}
			if _, back := wire.FromSDK03Event(wire.MethodStream, ev.Data); back == nil || back.Code != e.Code {
				t.Errorf("error event read back as %+v", back)
			}
		})
	}
}

// TestFromSDK03ResponseErrors reads errors as the SDK's server writes them
// (rest.ToRESTError: its own status table, application/problem+json).
func TestFromSDK03ResponseErrors(t *testing.T) {
	info := func(reason string) string {
		return `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + reason + `","domain":"a2a-protocol.org","metadata":{"timestamp":"2026-05-01T10:00:00Z"}}`
	}
	tests := []struct {
		name   string
		m      wire.Method
		status int
		body   string
		code   int
	}{
		{"task not found", wire.MethodGetTask, 404, `{"error":{"code":404,"status":"NOT_FOUND","message":"task not found","details":[` + info("TASK_NOT_FOUND") + `]}}`, -32001},
		{"not cancelable", wire.MethodCancelTask, 400, `{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"task cannot be canceled","details":[` + info("TASK_NOT_CANCELABLE") + `]}}`, -32002},
		{"method not found is 501 there", wire.MethodExtendedCard, 501, `{"error":{"code":501,"status":"UNIMPLEMENTED","message":"method not found","details":[` + info("METHOD_NOT_FOUND") + `]}}`, -32601},
		{"parse error", wire.MethodSend, 400, `{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"parse error","details":[` + info("PARSE_ERROR") + `]}}`, -32700},
		{"server error: the status decides", wire.MethodSend, 500, `{"error":{"code":500,"status":"INTERNAL","message":"server error","details":[` + info("SERVER_ERROR") + `]}}`, -32603},
		{"its refusal of the meter is not the buyer's", wire.MethodSend, 403, `{"error":{"code":403,"status":"PERMISSION_DENIED","message":"permission denied","details":[` + info("UNAUTHORIZED") + `]}}`, -32603},
		{"a route it lacks", wire.MethodGetTask, 404, "404 page not found\n", -32001},
		{"an error in a 200", wire.MethodSend, 200, `{"error":{"code":404,"status":"NOT_FOUND","message":"task not found","details":[` + info("TASK_NOT_FOUND") + `]}}`, -32001},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, e := wire.FromSDK03Response(tc.m, tc.status, "application/problem+json", []byte(tc.body))
			if res != nil || e == nil || e.Code != tc.code {
				t.Errorf("%s, %+v; want code %d", res, e, tc.code)
			}
		})
	}
}

func TestFromSDK03Answers(t *testing.T) {
	tests := []struct {
		name  string
		m     wire.Method
		ct    string
		body  string
		want  string // the result, or
		code  int    // the error
		event bool   // read as a stream event
	}{
		{name: "send: task", m: wire.MethodSend, body: `{"kind":"task","id":"t","context_id":"c","status":{"state":"submitted"}}`,
			want: `{"kind":"task","id":"t","contextId":"c","status":{"state":"submitted"}}`},
		{name: "send: message", m: wire.MethodSend, body: `{"kind":"message","message_id":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`,
			want: `{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`},
		{name: "send: a task without its kind", m: wire.MethodSend, body: `{"id":"t","context_id":"c","status":{"state":"submitted"}}`,
			want: `{"id":"t","contextId":"c","status":{"state":"submitted"}}`},
		{name: "send: neither", m: wire.MethodSend, body: `{"foo":1}`, code: wire.CodeInvalidAgentResponse},
		{name: "send: a stream", m: wire.MethodSend, ct: "text/event-stream", body: `data: {}`, code: wire.CodeInvalidAgentResponse},
		{name: "send: not JSON", m: wire.MethodSend, body: `<html>`, code: wire.CodeInvalidAgentResponse},
		{name: "send: empty", m: wire.MethodSend, body: ``, code: wire.CodeInvalidAgentResponse},
		{name: "get: keys collide once read", m: wire.MethodGetTask, body: `{"kind":"task","id":"t","context_id":"c","contextId":"d","status":{"state":"working"}}`, code: wire.CodeInvalidAgentResponse},
		{name: "push list", m: wire.MethodPushList, body: `[{"task_id":"t","push_notification_config":{"id":"c","url":"u"}}]`,
			want: `[{"taskId":"t","pushNotificationConfig":{"id":"c","url":"u"}}]`},
		{name: "push list: not an array", m: wire.MethodPushList, body: `{"configs":[]}`, code: wire.CodeInvalidAgentResponse},
		{name: "push delete: empty", m: wire.MethodPushDelete, body: ``, want: `null`},
		{name: "a JSON-RPC envelope", m: wire.MethodGetTask, body: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","context_id":"c","status":{"state":"working"}}}`,
			want: `{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}`},

		{name: "event: status update", m: wire.MethodStream, event: true,
			body: `{"kind":"status-update","task_id":"t","context_id":"c","status":{"state":"working","timestamp":"2026-05-01T10:00:00Z"},"final":false}`,
			want: `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working","timestamp":"2026-05-01T10:00:00Z"},"final":false}`},
		{name: "event: artifact update", m: wire.MethodSubscribe, event: true,
			body: `{"kind":"artifact-update","task_id":"t","context_id":"c","artifact":{"artifact_id":"a","parts":[{"kind":"text","text":" beta"}]},"append":true,"last_chunk":false}`,
			want: `{"kind":"artifact-update","taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"kind":"text","text":" beta"}]},"append":true,"lastChunk":false}`},
		{name: "event: an error", m: wire.MethodSubscribe, event: true,
			body: `{"error":{"code":404,"status":"NOT_FOUND","message":"task not found","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`,
			code: wire.CodeTaskNotFound},
		{name: "event: unknown", m: wire.MethodStream, event: true, body: `{"foo":1}`, code: wire.CodeInvalidAgentResponse},
		{name: "event: not JSON", m: wire.MethodStream, event: true, body: `{`, code: wire.CodeInvalidAgentResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var res json.RawMessage
			var e *wire.Error
			if tc.event {
				res, e = wire.FromSDK03Event(tc.m, []byte(tc.body))
			} else {
				ct := tc.ct
				if ct == "" {
					ct = "application/json"
				}
				res, e = wire.FromSDK03Response(tc.m, 200, ct, []byte(tc.body))
			}
			if tc.code != 0 {
				if res != nil || e == nil || e.Code != tc.code {
					t.Errorf("%s, %+v; want code %d", res, e, tc.code)
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

// ---- agent side, out ----

func TestSDK03Upstream(t *testing.T) {
	const base = "https://agent.example.com/a2a/"
	want := map[string]struct{ method, path string }{
		"send_request":          {"POST", "/message:send"},
		"stream_request":        {"POST", "/message:stream"},
		"get_request":           {"GET", "/tasks/task-1"},
		"cancel_request":        {"POST", "/tasks/task-1:cancel"},
		"subscribe_request":     {"POST", "/tasks/task-1:subscribe"},
		"push_set_request":      {"POST", "/tasks/task-1/pushNotificationConfigs"},
		"push_get_request":      {"GET", "/tasks/task-1/pushNotificationConfigs/cfg-1"},
		"push_list_request":     {"GET", "/tasks/task-1/pushNotificationConfigs"},
		"push_delete_request":   {"DELETE", "/tasks/task-1/pushNotificationConfigs/cfg-1"},
		"extended_card_request": {"GET", "/extendedAgentCard"},
	}
	for _, name := range requestPairs {
		for _, from := range []wire.Version{wire.V03, wire.V10} {
			t.Run(name+"/"+string(from), func(t *testing.T) {
				r, werr := wire.ParseRequest(golden(t, name, from), string(from))
				if werr != nil {
					t.Fatal(werr)
				}
				method, rawURL, body, err := wire.SDK03Upstream(r, base)
				if err != nil {
					t.Fatal(err)
				}
				u, err := url.Parse(rawURL)
				if err != nil {
					t.Fatal(err)
				}
				path, _ := strings.CutPrefix(u.EscapedPath(), "/a2a")
				if w := want[name]; method != w.method || path != w.path {
					t.Errorf("%s %s, want %s %s", method, path, w.method, w.path)
				}
				if body != nil {
					snakeKeys(t, body)
				}
				if (r.Method == wire.MethodSend || r.Method == wire.MethodStream || r.Method == wire.MethodPushSet) != (body != nil) {
					t.Errorf("%s %s with body %s", method, path, body)
				}
				if r.Method == wire.MethodSend && !bytes.Contains(body, []byte(`"blocking":`)) {
					t.Errorf("a send that does not state blocking: %s", body)
				}
				// A dialect server (played by ParseREST) reads the same call.
				ct := ""
				if body != nil {
					ct = "application/json"
				}
				seen, werr := wire.ParseREST(method, path, u.Query(), ct, body, "0.3")
				if werr != nil {
					t.Fatalf("the agent cannot read %s %s %s: %v", method, rawURL, body, werr)
				}
				if seen.Method != r.Method || seen.TaskID() != r.TaskID() || seen.Blocking() != r.Blocking() ||
					!reflect.DeepEqual(seen.MessageTexts(), r.MessageTexts()) || seen.ParentTaskID() != r.ParentTaskID() ||
					partsOf(seen) != partsOf(r) || seen.ContextID() != r.ContextID() {
					t.Errorf("the agent reads %v %q blocking %v, not %v %q blocking %v", seen.Method, seen.TaskID(), seen.Blocking(), r.Method, r.TaskID(), r.Blocking())
				}
			})
		}
	}
	r, _ := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`), "1.0")
	if _, _, _, err := wire.SDK03Upstream(r, base); err == nil {
		t.Error("ListTasks: no error")
	} else if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeUnsupportedOperation {
		t.Errorf("ListTasks: %v", err)
	}
	// Ids with awkward characters survive the path; a verb is never read
	// from an id.
	r, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"a/b:cancel"}}`), "")
	if _, u, _, err := wire.SDK03Upstream(r, base); err != nil || !strings.HasSuffix(u, "/tasks/a%2Fb%3Acancel:cancel") {
		t.Errorf("%s %v", u, err)
	}
	// A 1.0 send asking to return at once is not blocking in 0.3.
	r, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"tenant":"x","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":true}}}`), "1.0")
	_, _, body, err := wire.SDK03Upstream(r, base)
	if err != nil {
		t.Fatal(err)
	}
	equalJSON(t, body, []byte(`{"message":{"kind":"message","message_id":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"configuration":{"blocking":false}}`))
}

// ---- telling the dialects apart ----

func TestDialectProbes(t *testing.T) {
	spec, sdk := wire.DialectProbeURLs("https://agent.example.com/a2a/", "p:1")
	if spec != "https://agent.example.com/a2a/v1/tasks/p%3A1" || sdk != "https://agent.example.com/a2a/tasks/p%3A1" {
		t.Errorf("probe URLs %s %s", spec, sdk)
	}
	sdkNotFound := `{"error":{"code":404,"status":"NOT_FOUND","message":"task not found","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"p"}}]}}`
	tests := []struct {
		name          string
		status        int
		body          string
		misses, isSDK bool
	}{
		{"Go's ServeMux", 404, "404 page not found\n", true, false},
		{"Go's ServeMux, another verb", 405, "Method Not Allowed\n", true, false},
		{"FastAPI", 404, `{"detail":"Not Found"}`, true, false},
		{"express", 404, "<!DOCTYPE html><pre>Cannot GET /v1/tasks/p</pre>", true, false},
		{"empty", 404, "", true, false},
		{"the dialect's task not found", 404, sdkNotFound, false, true},
		{"a2a-python's task not found", 404, `{"message":"Task not found"}`, false, false},
		{"a2a-js's task not found", 404, `{"code":-32001,"message":"Task not found"}`, false, false},
		{"a foreign domain", 404, `{"error":{"code":404,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"example.com"}]}}`, false, false},
		{"a google.rpc.Status without details", 404, `{"error":{"code":404,"message":"x"}}`, false, false},
		{"guarded", 401, `{"detail":"Unauthorized"}`, false, false},
		{"a task", 200, `{"kind":"task","id":"p"}`, false, true},
		{"a server error", 500, "oops", false, false},
	}
	for _, tc := range tests {
		if got := wire.ProbeMissesRoute(tc.status, []byte(tc.body)); got != tc.misses {
			t.Errorf("%s: ProbeMissesRoute = %v", tc.name, got)
		}
		if got := wire.ProbeAnswersSDK03(tc.status, []byte(tc.body)); got != tc.isSDK {
			t.Errorf("%s: ProbeAnswersSDK03 = %v", tc.name, got)
		}
	}
}

// FuzzFromSDK03 feeds arbitrary answers of dialect agents (and of the
// meter's own spec rendering) to the readers: they never panic, a result
// is one line of JSON the proxy can relay, observe and render in either
// dialect, and an error always renders.
func FuzzFromSDK03(f *testing.F) {
	for _, s := range []string{
		`{"kind":"task","id":"t","context_id":"c","status":{"state":"working"}}`,
		`{"kind":"status-update","task_id":"t","status":{"state":"completed"},"final":true}`,
		`{"kind":"artifact-update","artifact":{"artifact_id":"a","parts":[{"kind":"text","text":"x"}]},"last_chunk":true}`,
		`[{"task_id":"t","push_notification_config":{"id":"c"}}]`,
		`{"error":{"code":404,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`,
		`{"a_b":1,"aB":2}`, `{"_":{"__":[{"A_":1}]}}`, `[]`, `null`, `"x"`, ``, `{`,
	} {
		f.Add(200, s, uint8(0))
		f.Add(404, s, uint8(5))
	}
	f.Fuzz(func(t *testing.T, status int, body string, sel uint8) {
		m := wire.Method(int(sel)%11 + 1)
		check := func(res json.RawMessage, e *wire.Error) {
			if e != nil {
				if res != nil {
					t.Fatal("both a result and an error")
				}
				if _, out := wire.SDK03Error(e); !json.Valid(out) {
					t.Fatalf("error does not render: %s", out)
				}
				return
			}
			if !json.Valid(res) || bytes.ContainsAny(res, "\r\n") {
				t.Fatalf("result is not one line of JSON: %q", res)
			}
			wire.Observe(wire.V03, m, res)
			if _, out := wire.SDK03Result(m, res); len(out) > 0 && !json.Valid(out) {
				t.Fatalf("SDK03Result is not JSON: %s", out)
			}
			if ev := wire.SDK03Event(m, res); !json.Valid(ev) {
				t.Fatalf("SDK03Event is not JSON: %s", ev)
			}
		}
		check(wire.FromSDK03Response(m, status, "application/json", []byte(body)))
		check(wire.FromSDK03Event(m, []byte(body)))
	})
}
