package wire_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want wire.Version
		code int
	}{
		{"", wire.V03, 0},
		{"  ", wire.V03, 0},
		{"0.3", wire.V03, 0},
		{"0.3.0", wire.V03, 0},
		{"1.0", wire.V10, 0},
		{" 1.0.1 ", wire.V10, 0},
		{"1.0.0", wire.V10, 0},
		{"0.5", "", -32009},
		{"1.1", "", -32009},
		{"2.0", "", -32009},
		{"1", "", -32009},
		{"v1.0", "", -32009},
		{"1.0.x", "", -32009},
		{"1.0, 0.3", "", -32009},
	}
	for _, tc := range tests {
		got, err := wire.ParseVersion(tc.in)
		if tc.code != 0 {
			if err == nil || err.Code != tc.code {
				t.Errorf("ParseVersion(%q) err = %v, want code %d", tc.in, err, tc.code)
			} else if !strings.Contains(err.Message, "0.3, 1.0") {
				t.Errorf("ParseVersion(%q) message %q does not name the supported versions", tc.in, err.Message)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestMethods(t *testing.T) {
	tests := []struct {
		m                   wire.Method
		v03, v10            string
		streaming, taskOnly bool
	}{
		{wire.MethodSend, "message/send", "SendMessage", false, false},
		{wire.MethodStream, "message/stream", "SendStreamingMessage", true, false},
		{wire.MethodGetTask, "tasks/get", "GetTask", false, true},
		{wire.MethodListTasks, "", "ListTasks", false, false},
		{wire.MethodCancelTask, "tasks/cancel", "CancelTask", false, true},
		{wire.MethodSubscribe, "tasks/resubscribe", "SubscribeToTask", true, true},
		{wire.MethodPushSet, "tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig", false, true},
		{wire.MethodPushGet, "tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig", false, true},
		{wire.MethodPushList, "tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs", false, true},
		{wire.MethodPushDelete, "tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig", false, true},
		{wire.MethodExtendedCard, "agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard", false, false},
	}
	for _, tc := range tests {
		if got := wire.MethodName(tc.m, wire.V03); got != tc.v03 {
			t.Errorf("MethodName(%v, 0.3) = %q, want %q", tc.m, got, tc.v03)
		}
		if got := wire.MethodName(tc.m, wire.V10); got != tc.v10 {
			t.Errorf("MethodName(%v, 1.0) = %q, want %q", tc.m, got, tc.v10)
		}
		if tc.m.Streaming() != tc.streaming || tc.m.TaskScoped() != tc.taskOnly {
			t.Errorf("%v: Streaming %v TaskScoped %v", tc.m, tc.m.Streaming(), tc.m.TaskScoped())
		}
		for v, name := range map[wire.Version]string{wire.V03: tc.v03, wire.V10: tc.v10} {
			if name == "" {
				continue
			}
			m, mv, ok := wire.LookupMethod(name)
			if !ok || m != tc.m || mv != v {
				t.Errorf("LookupMethod(%q) = %v, %v, %v", name, m, mv, ok)
			}
		}
	}
	for _, name := range []string{"", "tasks/list", "sendMessage", "message/Send"} {
		if _, _, ok := wire.LookupMethod(name); ok {
			t.Errorf("LookupMethod(%q) found a method", name)
		}
	}
	if wire.MethodName(wire.Method(0), wire.V10) != "" || wire.Method(0).String() != "unknown" {
		t.Error("the zero Method is a method")
	}
}

func TestParseRequestErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header string
		code   int
		id     string // the id the error answer may echo; "" = none
		msg    string // a part of the message
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, "", -32700, "", ""},
		{"empty", ``, "", -32700, "", ""},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}} x`, "", -32700, "", ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tasks/get"}]`, "", -32600, "", "batch"},
		{"scalar", `"hello"`, "", -32600, "", ""},
		{"notification", `{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"t"}}`, "", -32600, "", "notification"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tasks/get","params":{"id":"t"}}`, "", -32600, "", "notification"},
		// Without an id, the method and params are judged first, as the
		// official SDKs do: -32601 and -32602 before -32600.
		{"notification of an unknown method", `{"jsonrpc":"2.0","method":"tasks/list","params":{}}`, "", -32601, "", "tasks/list"},
		{"notification of an unknown 1.0 method", `{"jsonrpc":"2.0","method":"Frobnicate","params":{}}`, "1.0", -32601, "", ""},
		{"notification with params an array", `{"jsonrpc":"2.0","method":"tasks/get","params":["t"]}`, "", -32602, "", ""},
		{"notification of a send without message", `{"jsonrpc":"2.0","method":"SendMessage","params":{}}`, "1.0", -32602, "", "message"},
		{"notification of a get without task id", `{"jsonrpc":"2.0","id":null,"method":"tasks/get","params":{}}`, "", -32602, "", "params.id"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"tasks/get","params":{"id":"t"}}`, "", -32600, "", ""},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"tasks/get","params":{"id":"t"}}`, "", -32600, "", ""},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"tasks/get","params":{"id":"t"}}`, "", -32600, "1", "jsonrpc"},
		{"jsonrpc missing", `{"id":1,"method":"tasks/get","params":{"id":"t"}}`, "", -32600, "1", "jsonrpc"},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"tasks/get","params":{"id":"t"}}`, "", -32600, "1", "jsonrpc"},
		{"method missing", `{"jsonrpc":"2.0","id":"a","params":{}}`, "", -32600, `"a"`, "method"},
		{"method number", `{"jsonrpc":"2.0","id":"a","method":5}`, "", -32600, `"a"`, "method"},
		{"unknown version", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`, "0.5", -32009, "1", "0.3, 1.0"},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`, "", -32601, "1", "tasks/list"},
		{"unknown 1.0 method", `{"jsonrpc":"2.0","id":1,"method":"Frobnicate"}`, "1.0", -32601, "1", ""},
		{"1.0 method, 0.3 header", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`, "0.3", -32600, "1", "A2A-Version"},
		{"0.3 method, 1.0 header", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`, "1.0", -32600, "1", "A2A-Version"},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":["t"]}`, "", -32602, "1", ""},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":"t"}`, "", -32600, "1", "params"},
		{"send without params", `{"jsonrpc":"2.0","id":1,"method":"message/send"}`, "", -32602, "1", "message"},
		{"send without message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"configuration":{}}}`, "1.0", -32602, "1", "message"},
		{"send null message", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":null}}`, "", -32602, "1", "message"},
		{"send message string", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":"hi"}}`, "", -32602, "1", "message"},
		{"send taskId number", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"taskId":5,"parts":[]}}}`, "", -32602, "1", "message.taskId must be a string"},
		{"send text number", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[{"kind":"text","text":1}]}}}`, "", -32602, "1", "text"},
		{"send blocking string", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"parts":[]},"configuration":{"blocking":"no"}}}`, "", -32602, "1", "boolean"},
		{"get without id", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}`, "", -32602, "1", "params.id"},
		{"get empty id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":""}}`, "1.0", -32602, "1", "params.id"},
		{"get without params", `{"jsonrpc":"2.0","id":1,"method":"GetTask"}`, "1.0", -32602, "1", "params.id"},
		{"cancel id number", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":7}}`, "", -32602, "1", "id"},
		{"subscribe without id", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"taskId":"t"}}`, "1.0", -32602, "1", "params.id"},
		{"0.3 push set without taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"pushNotificationConfig":{"url":"x"}}}`, "", -32602, "1", "taskId"},
		{"0.3 push get without task id", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"pushNotificationConfigId":"c"}}`, "", -32602, "1", "params.id"},
		{"1.0 push get with the task in id", `{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"id":"c"}}`, "1.0", -32602, "1", "taskId"},
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","method":"tasks/cancel","params":{"id":"t"}}`, "", -32600, "", "method"},
		{"method in another case", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","METHOD":"tasks/cancel","params":{"id":"t"}}`, "", -32600, "", "METHOD"},
		{"duplicate params", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a"},"params":{"id":"b"}}`, "", -32600, "", "params"},
		{"task id twice", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a","id":"b"}}`, "", -32602, "1", "params.id"},
		{"task id in another case", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","Id":"b"}}`, "1.0", -32602, "1", "params.Id"},
		{"message taskId folded with a long s", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"taskId":"a","taſkId":"b","parts":[]}}}`, "", -32602, "1", "params.message"},
		{"message taskId escaped", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"taskId":"a","taskId":"b","parts":[]}}}`, "", -32602, "1", "params.message.taskId"},
		{"message twice", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[]},"MESSAGE":{"taskId":"b"}}}`, "1.0", -32602, "1", "params.MESSAGE"},
		{"1.0 push list without taskId", `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{}}`, "1.0", -32602, "1", "taskId"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := wire.ParseRequest([]byte(tc.body), tc.header)
			if err == nil {
				t.Fatalf("ParseRequest accepted %s", tc.body)
			}
			if err.Code != tc.code {
				t.Errorf("code = %d (%s), want %d", err.Code, err.Message, tc.code)
			}
			if !strings.Contains(err.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", err.Message, tc.msg)
			}
			var gotID string
			if req != nil {
				gotID = string(req.ID)
			}
			if gotID != tc.id {
				t.Errorf("request id = %q, want %q", gotID, tc.id)
			}
		})
	}
}

func TestParseRequest(t *testing.T) {
	type want struct {
		method      wire.Method
		version     wire.Version
		id          string
		taskID      string
		contextID   string
		parent      string
		blocking    bool
		texts       []string
		parts       wire.PartStats
		paramsIsNil bool
	}
	tests := []struct {
		name   string
		body   string
		header string
		want   want
	}{
		{
			name: "0.3 send, all part kinds", body: string(goldenBody("send_request", wire.V03)), header: "",
			want: want{method: wire.MethodSend, version: wire.V03, id: `"req-1"`, taskID: "task-1", contextID: "ctx-1", parent: "parent-7",
				blocking: false, texts: []string{"Summarise the attached report."},
				parts: wire.PartStats{Text: 1, File: 2, Data: 1, TextBytes: 30, FileBytes: 12, DataBytes: 34}},
		},
		{
			name: "1.0 send, all part kinds", body: string(goldenBody("send_request", wire.V10)), header: "1.0",
			want: want{method: wire.MethodSend, version: wire.V10, id: `"req-1"`, taskID: "task-1", contextID: "ctx-1", parent: "parent-7",
				blocking: false, texts: []string{"Summarise the attached report."},
				parts: wire.PartStats{Text: 1, File: 2, Data: 1, TextBytes: 30, FileBytes: 12, DataBytes: 34}},
		},
		{
			name:   "0.3 send blocks by default",
			body:   `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"text","text":"a"},{"kind":"text","text":""},{"kind":"text","text":"b"}]}}}`,
			header: "0.3",
			want:   want{method: wire.MethodSend, version: wire.V03, id: "3", blocking: true, texts: []string{"a", "b"}, parts: wire.PartStats{Text: 3, TextBytes: 2}},
		},
		{
			name:   "0.3 send blocking true",
			body:   `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"parts":[]},"configuration":{"blocking":true}}}`,
			header: "0.3.0",
			want:   want{method: wire.MethodSend, version: wire.V03, id: "3", blocking: true},
		},
		{
			name:   "1.0 send waits by default",
			body:   `{"jsonrpc":"2.0","id":-1.5,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"text":"héllo"}]},"configuration":{"returnImmediately":false}}}`,
			header: "1.0.1",
			want:   want{method: wire.MethodSend, version: wire.V10, id: "-1.5", blocking: true, texts: []string{"héllo"}, parts: wire.PartStats{Text: 1, TextBytes: 6}},
		},
		{
			name:   "stream is never blocking; parent from params.metadata wins",
			body:   `{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":{"parts":[],"metadata":{"agentmarket/parentTaskId":"inner"}},"metadata":{"agentmarket/parentTaskId":"outer"}}}`,
			header: "1.0",
			want:   want{method: wire.MethodStream, version: wire.V10, id: `"s"`, parent: "outer"},
		},
		{
			name: "a parent that is not a string is ignored",
			body: `{"jsonrpc":"2.0","id":"s","method":"message/stream","params":{"message":{"parts":[],"metadata":{"agentmarket/parentTaskId":7}}}}`,
			want: want{method: wire.MethodStream, version: wire.V03, id: `"s"`},
		},
		{
			name: "0.3 get", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task-9","historyLength":1}}`,
			want: want{method: wire.MethodGetTask, version: wire.V03, id: "1", taskID: "task-9"},
		},
		{
			name: "0.3 resubscribe", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"task-9"}}`,
			want: want{method: wire.MethodSubscribe, version: wire.V03, id: "1", taskID: "task-9"},
		},
		{
			name: "1.0 cancel", body: `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"task-9"}}`, header: "1.0",
			want: want{method: wire.MethodCancelTask, version: wire.V10, id: "1", taskID: "task-9"},
		},
		{
			name: "0.3 push set names the task taskId", body: string(goldenBody("push_set_request", wire.V03)),
			want: want{method: wire.MethodPushSet, version: wire.V03, id: `"p-1"`, taskID: "task-1"},
		},
		{
			name: "0.3 push get names the task id", body: string(goldenBody("push_get_request", wire.V03)),
			want: want{method: wire.MethodPushGet, version: wire.V03, id: `"p-2"`, taskID: "task-1"},
		},
		{
			name: "1.0 push get names the task taskId", body: string(goldenBody("push_get_request", wire.V10)), header: "1.0",
			want: want{method: wire.MethodPushGet, version: wire.V10, id: `"p-2"`, taskID: "task-1"},
		},
		{
			name: "1.0 push delete", body: string(goldenBody("push_delete_request", wire.V10)), header: "1.0",
			want: want{method: wire.MethodPushDelete, version: wire.V10, id: `"p-4"`, taskID: "task-1"},
		},
		{
			name: "0.3 push list", body: string(goldenBody("push_list_request", wire.V03)),
			want: want{method: wire.MethodPushList, version: wire.V03, id: `"p-3"`, taskID: "task-1"},
		},
		{
			name: "1.0 list tasks needs no params", body: `{"jsonrpc":"2.0","id":1,"method":"ListTasks"}`, header: "1.0",
			want: want{method: wire.MethodListTasks, version: wire.V10, id: "1", paramsIsNil: true},
		},
		{
			name: "0.3 extended card with null params", body: `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard","params":null}`,
			want: want{method: wire.MethodExtendedCard, version: wire.V03, id: "1", paramsIsNil: true},
		},
		{
			name: "unknown members and odd spacing are fine",
			body: " {\n\"x\": [1, {\"y\": \"}\"}], \"params\" : { \"id\" : \"t\\\"1\" } , \"method\":\"tasks/cancel\", \"id\":\"q\\\"\", \"jsonrpc\":\"2.0\" } ",
			want: want{method: wire.MethodCancelTask, version: wire.V03, id: `"q\""`, taskID: `t"1`},
		},
		{
			name: "escaped keys", body: `{"json\u0072pc":"2.0","\u0069d":1,"method":"tasks/get","params":{"id":"t"}}`,
			want: want{method: wire.MethodGetTask, version: wire.V03, id: "1", taskID: "t"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := wire.ParseRequest([]byte(tc.body), tc.header)
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			got := want{
				method: req.Method, version: req.Version, id: string(req.ID), taskID: req.TaskID(), contextID: req.ContextID(),
				parent: req.ParentTaskID(), blocking: req.Blocking(), texts: req.MessageTexts(), parts: req.MessageParts(),
				paramsIsNil: req.Params == nil,
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if req.Name != wire.MethodName(req.Method, req.Version) {
				t.Errorf("Name = %q", req.Name)
			}
			if string(req.Raw) != tc.body {
				t.Error("Raw is not the body")
			}
		})
	}
}

// goldenBody reads a golden file while a test table is built.
func goldenBody(name string, v wire.Version) []byte {
	suffix := map[wire.Version]string{wire.V03: ".v03.json", wire.V10: ".v10.json"}[v]
	b, err := os.ReadFile(filepath.Join("testdata", "translate", name+suffix))
	if err != nil {
		panic(err)
	}
	return b
}

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		name string
		id   json.RawMessage
		err  *wire.Error
		want string
	}{
		{"string id", json.RawMessage(`"a"`), wire.InvalidParams("params.id is required"),
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"params.id is required"}}`},
		{"number id", json.RawMessage(`7`), wire.MethodNotFound(""),
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}`},
		{"no id", nil, wire.ParseError(""),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Invalid JSON payload"}}`},
		{"bad id", json.RawMessage(`{}`), wire.InternalError(""),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`},
		{"raw data kept", json.RawMessage(`1`), &wire.Error{Code: -32050, Message: "a <b>", Data: json.RawMessage(`{"x":[1]}`)},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32050,"message":"a <b>","data":{"x":[1]}}}`},
		{"data that cannot marshal is dropped", json.RawMessage(`1`), &wire.Error{Code: -32603, Message: "m", Data: func() {}},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`},
		{"task not found names the task in data", json.RawMessage(`1`), wire.TaskNotFound("t-1"),
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"t-1"}}]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := wire.ErrorResponse(tc.id, tc.err)
			equalJSON(t, got, []byte(tc.want))
			resp, err := wire.ParseResponse(got)
			if err != nil {
				t.Fatalf("ParseResponse of our own answer: %v", err)
			}
			if resp.Error == nil || resp.Error.Code != tc.err.Code || resp.Error.Message != tc.err.Message {
				t.Errorf("round trip: %+v", resp.Error)
			}
		})
	}
}

func TestErrorConstructors(t *testing.T) {
	tests := []struct {
		err  *wire.Error
		code int
	}{
		{wire.ParseError(""), -32700},
		{wire.InvalidRequest(""), -32600},
		{wire.MethodNotFound(""), -32601},
		{wire.InvalidParams(""), -32602},
		{wire.InternalError(""), -32603},
		{wire.TaskNotFound(""), -32001},
		{wire.TaskNotCancelable("t"), -32002},
		{wire.PushNotificationNotSupported(""), -32003},
		{wire.UnsupportedOperation(""), -32004},
		{wire.ContentTypeNotSupported(""), -32005},
		{wire.InvalidAgentResponse(""), -32006},
		{wire.ExtendedCardNotConfigured(""), -32007},
		{wire.ExtensionSupportRequired(""), -32008},
		{wire.VersionNotSupported("9.9"), -32009},
	}
	for _, tc := range tests {
		if tc.err.Code != tc.code || tc.err.Message == "" {
			t.Errorf("constructor for %d gave %+v", tc.code, tc.err)
		}
	}
	if got := wire.UnsupportedOperation("custom").Message; got != "custom" {
		t.Errorf("message = %q", got)
	}
	var err error = wire.TaskNotFound("x")
	if err.Error() != "a2a error -32001: Task not found" {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		id      string
		result  string
		errCode int
		errData string
		bad     bool
	}{
		{name: "result", body: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t"}}`, id: "1", result: `{"kind":"task","id":"t"}`},
		{name: "null result", body: `{"jsonrpc":"2.0","id":"x","result":null}`, id: `"x"`, result: `null`},
		{name: "error", body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Task not found","data":[{"@type":"t"}]}}`, id: "null", errCode: -32001, errData: `[{"@type":"t"}]`},
		{name: "error with null data", body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x","data":null}}`, id: "1", errCode: -32603},
		{name: "not JSON", body: `{"jsonrpc":"2.0"`, bad: true},
		{name: "array", body: `[]`, bad: true},
		{name: "wrong jsonrpc", body: `{"jsonrpc":"1.0","id":1,"result":{}}`, bad: true},
		{name: "no id", body: `{"jsonrpc":"2.0","result":{}}`, bad: true},
		{name: "object id", body: `{"jsonrpc":"2.0","id":{},"result":{}}`, bad: true},
		{name: "both", body: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, bad: true},
		{name: "neither", body: `{"jsonrpc":"2.0","id":1}`, bad: true},
		{name: "error without code", body: `{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}`, bad: true},
		{name: "error with a fractional code", body: `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`, bad: true},
		{name: "error without message", body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603}}`, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := wire.ParseResponse([]byte(tc.body))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted %s", tc.body)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.ID) != tc.id || string(resp.Result) != tc.result {
				t.Errorf("id %s result %s", resp.ID, resp.Result)
			}
			if tc.errCode == 0 {
				if resp.Error != nil {
					t.Errorf("error = %+v", resp.Error)
				}
				return
			}
			if resp.Error == nil || resp.Error.Code != tc.errCode {
				t.Fatalf("error = %+v, want code %d", resp.Error, tc.errCode)
			}
			var gotData string
			if d, ok := resp.Error.Data.(json.RawMessage); ok {
				gotData = string(d)
			}
			if gotData != tc.errData {
				t.Errorf("data = %q, want %q", gotData, tc.errData)
			}
		})
	}
}

func TestResultResponseAndGetTaskRequest(t *testing.T) {
	equalJSON(t, wire.ResultResponse(json.RawMessage(`"q"`), json.RawMessage(`{"a":1}`)), []byte(`{"jsonrpc":"2.0","id":"q","result":{"a":1}}`))
	equalJSON(t, wire.ResultResponse(json.RawMessage(`1`), nil), []byte(`{"jsonrpc":"2.0","id":1,"result":null}`))
	for _, v := range []wire.Version{wire.V03, wire.V10} {
		b, err := wire.GetTaskRequest(v, `task "1"`)
		if err != nil {
			t.Fatal(err)
		}
		req, werr := wire.ParseRequest(b, string(v))
		if werr != nil || req.Method != wire.MethodGetTask || req.TaskID() != `task "1"` {
			t.Errorf("GetTaskRequest(%s) = %s (%v)", v, b, werr)
		}
	}
	if _, err := wire.GetTaskRequest("2.0", "t"); err == nil {
		t.Error("GetTaskRequest accepted an unknown version")
	}
}

// TestInlinePushEverySpelling: a push config inside a send's
// configuration is found and taken off the request in every spelling an
// agent's decoder might accept, and two of them are refused.
func TestInlinePushEverySpelling(t *testing.T) {
	for _, tc := range []struct{ version, key string }{
		{"1.0", "taskPushNotificationConfig"}, {"1.0", "TaskPushNotificationConfig"}, {"1.0", "task_push_notification_config"},
		{"1.0", "pushNotificationConfig"}, {"", "pushNotificationConfig"}, {"", "taskPushNotificationConfig"},
		{"", "PUSHNOTIFICATIONCONFIG"}, {"", "puſhNotificationConfig"}, {"", "pushNotification"}, {"", "Push_Notification_Config"},
	} {
		method, msg := "message/send", `{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}`
		if tc.version == "1.0" {
			method, msg = "SendMessage", `{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}`
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":` + msg +
			`,"configuration":{"blocking":true,"` + tc.key + `":{"url":"https://hooks.example.com/x"}}}}`
		r, werr := wire.ParseRequest([]byte(body), tc.version)
		if werr != nil {
			t.Fatalf("%s: %v", tc.key, werr)
		}
		out, cfg := wire.InlinePush(r)
		if cfg == nil || strings.Contains(string(out), "hooks.example.com") || !strings.Contains(string(out), `"blocking":true`) {
			t.Errorf("%s %q: config %s, request left %s", tc.version, tc.key, cfg, out)
		}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[]},` +
		`"configuration":{"pushNotificationConfig":{"url":"https://a.example.com"},"pushnotificationconfig":{"url":"https://b.example.com"}}}}`
	if _, werr := wire.ParseRequest([]byte(body), ""); werr == nil || werr.Code != wire.CodeInvalidParams {
		t.Errorf("two push configs: %v, want InvalidParams", werr)
	}
}

// TestVersionFromMethodName: without an A2A-Version header the method name
// decides the version (0.3 and 1.0 names never overlap), as agents that
// take 1.0 methods without the header do; a header that contradicts the
// method is still refused.
func TestVersionFromMethodName(t *testing.T) {
	for _, c := range []struct {
		body, header string
		want         wire.Version
		code         int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`, "", wire.V10, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`, "", wire.V10, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`, "", wire.V03, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`, "0.3", "", wire.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`, "1.0", "", wire.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"Frobnicate","params":{}}`, "", "", wire.CodeMethodNotFound},
	} {
		r, werr := wire.ParseRequest([]byte(c.body), c.header)
		switch {
		case c.code != 0 && (werr == nil || werr.Code != c.code):
			t.Errorf("%s with %q: %v, want code %d", c.body, c.header, werr, c.code)
		case c.code == 0 && (werr != nil || r.Version != c.want):
			t.Errorf("%s with %q: %v, version %v, want %s", c.body, c.header, werr, r, c.want)
		}
	}
}
