package wire_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// Golden pairs under testdata/translate: <name>.v03.json and
// <name>.v10.json hold the same thing in each version. Each pair is
// translated both ways and compared as JSON values.

var requestPairs = []string{
	"send_request",
	"stream_request",
	"get_request",
	"cancel_request",
	"subscribe_request",
	"push_set_request",
	"push_get_request",
	"push_list_request",
	"push_delete_request",
	"extended_card_request",
}

var resultPairs = []struct {
	name   string
	method wire.Method
}{
	{"task", wire.MethodGetTask},
	{"task", wire.MethodCancelTask},
	{"send_result_task", wire.MethodSend},
	{"send_result_message", wire.MethodSend},
	{"event_task", wire.MethodStream},
	{"event_task", wire.MethodSubscribe},
	{"event_message", wire.MethodStream},
	{"event_status_working", wire.MethodStream},
	{"event_status_completed", wire.MethodSubscribe},
	{"event_status_auth_required", wire.MethodStream},
	{"event_artifact", wire.MethodStream},
	{"push_config", wire.MethodPushSet},
	{"push_config", wire.MethodPushGet},
	{"push_list", wire.MethodPushList},
	{"push_delete", wire.MethodPushDelete},
}

func golden(tb testing.TB, name string, v wire.Version) []byte {
	tb.Helper()
	suffix := map[wire.Version]string{wire.V03: ".v03.json", wire.V10: ".v10.json"}[v]
	b, err := os.ReadFile(filepath.Join("testdata", "translate", name+suffix))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// equalJSON compares two JSON texts as values.
func equalJSON(tb testing.TB, got, want []byte) {
	tb.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		tb.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		tb.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		tb.Errorf("JSON differs\ngot:\n%s\nwant:\n%s", gi, wi)
	}
}

func other(v wire.Version) wire.Version {
	if v == wire.V03 {
		return wire.V10
	}
	return wire.V03
}

func TestTranslateRequestGolden(t *testing.T) {
	for _, name := range requestPairs {
		for _, from := range []wire.Version{wire.V03, wire.V10} {
			to := other(from)
			t.Run(name+"/"+string(from)+"to"+string(to), func(t *testing.T) {
				req, werr := wire.ParseRequest(golden(t, name, from), string(from))
				if werr != nil {
					t.Fatalf("ParseRequest: %v", werr)
				}
				got, err := wire.TranslateRequest(req, to)
				if err != nil {
					t.Fatalf("TranslateRequest: %v", err)
				}
				equalJSON(t, got, golden(t, name, to))

				// The translation must itself be a valid request of the
				// target version naming the same method and task.
				back, werr := wire.ParseRequest(got, string(to))
				if werr != nil {
					t.Fatalf("translated request does not parse: %v\n%s", werr, got)
				}
				if back.Method != req.Method || back.TaskID() != req.TaskID() || back.Blocking() != req.Blocking() ||
					back.ParentTaskID() != req.ParentTaskID() || !reflect.DeepEqual(back.MessageTexts(), req.MessageTexts()) {
					t.Errorf("translated request reads differently: method %v/%v task %q/%q blocking %v/%v",
						back.Method, req.Method, back.TaskID(), req.TaskID(), back.Blocking(), req.Blocking())
				}
			})
		}
	}
}

func TestTranslateResultGolden(t *testing.T) {
	for _, tc := range resultPairs {
		for _, from := range []wire.Version{wire.V03, wire.V10} {
			to := other(from)
			t.Run(tc.name+"/"+tc.method.String()+"/"+string(from)+"to"+string(to), func(t *testing.T) {
				got, err := wire.TranslateResult(from, to, tc.method, golden(t, tc.name, from))
				if err != nil {
					t.Fatalf("TranslateResult: %v", err)
				}
				equalJSON(t, got, golden(t, tc.name, to))
			})
		}
	}
}

// Both versions of every golden result must be observed alike (except the
// 0.3-only final flag).
func TestObserveGoldenPairsAgree(t *testing.T) {
	for _, tc := range resultPairs {
		t.Run(tc.name+"/"+tc.method.String(), func(t *testing.T) {
			o3 := wire.Observe(wire.V03, tc.method, golden(t, tc.name, wire.V03))
			o10 := wire.Observe(wire.V10, tc.method, golden(t, tc.name, wire.V10))
			o3.Final = false
			if !reflect.DeepEqual(o3, o10) {
				t.Errorf("observations differ\n0.3: %+v\n1.0: %+v", o3, o10)
			}
		})
	}
}

func TestTranslateSameVersionIsIdentity(t *testing.T) {
	body := golden(t, "send_request", wire.V03)
	req, werr := wire.ParseRequest(body, "")
	if werr != nil {
		t.Fatal(werr)
	}
	got, err := wire.TranslateRequest(req, wire.V03)
	if err != nil || string(got) != string(body) {
		t.Errorf("TranslateRequest to the same version changed the body: %v", err)
	}
	res := golden(t, "task", wire.V10)
	gotRes, err := wire.TranslateResult(wire.V10, wire.V10, wire.MethodGetTask, res)
	if err != nil || string(gotRes) != string(res) {
		t.Errorf("TranslateResult to the same version changed the result: %v", err)
	}
}

func TestTranslateRequestCases(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header string
		to     wire.Version
		want   string // JSON, or "" when an error is wanted
		code   int
	}{
		{
			name:   "ListTasks has no 0.3 method",
			body:   `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`,
			header: "1.0", to: wire.V03, code: wire.CodeUnsupportedOperation,
		},
		{
			name:   "0.3 blocking true becomes returnImmediately false",
			body:   `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[]},"configuration":{"blocking":true}}}`,
			header: "0.3", to: wire.V10,
			want: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]},"configuration":{"returnImmediately":false}}}`,
		},
		{
			name:   "1.0 tenant is dropped for 0.3",
			body:   `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"tenant":"t-1","id":"task-1"}}`,
			header: "1.0", to: wire.V03,
			want: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task-1"}}`,
		},
		{
			name:   "0.3 query metadata has no place in 1.0 GetTask",
			body:   `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task-1","metadata":{"a":1}}}`,
			header: "", to: wire.V10,
			want: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-1"}}`,
		},
		{
			name:   "1.0 list paging has no place in 0.3",
			body:   `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"task-1","pageSize":10,"pageToken":"x"}}`,
			header: "1.0", to: wire.V03,
			want: `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/list","params":{"id":"task-1"}}`,
		},
		{
			name:   "1.0 non-file parts lose mediaType and filename in 0.3",
			body:   `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi","mediaType":"text/plain"},{"data":[1,2],"filename":"d.json"}]}}}`,
			header: "1.0", to: wire.V03,
			want: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"},{"kind":"data","data":[1,2]}]}}}`,
		},
		{
			name:   "0.3 auth keeps only its first scheme in 1.0",
			body:   `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"t","pushNotificationConfig":{"url":"https://x","authentication":{"schemes":["Bearer","Basic"]}}}}`,
			header: "0.3", to: wire.V10,
			want: `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"https://x","authentication":{"scheme":"Bearer"}}}`,
		},
		{
			name:   "escaped keys and strings survive",
			body:   `{"jsonrpc":"2.0","id":"a\"b","method":"tasks/cancel","params":{"i\u0064":"t\"1","x\\y":"\u00e9"}}`,
			header: "0.3", to: wire.V10,
			want: `{"jsonrpc":"2.0","id":"a\"b","method":"CancelTask","params":{"id":"t\"1","x\\y":"é"}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, werr := wire.ParseRequest([]byte(tc.body), tc.header)
			if werr != nil {
				t.Fatalf("ParseRequest: %v", werr)
			}
			got, err := wire.TranslateRequest(req, tc.to)
			if tc.want == "" {
				var we *wire.Error
				if !errors.As(err, &we) || we.Code != tc.code {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equalJSON(t, got, []byte(tc.want))
		})
	}
}

func TestTranslateResultCases(t *testing.T) {
	tests := []struct {
		name     string
		from, to wire.Version
		method   wire.Method
		in       string
		want     string // JSON, or "" when an error is wanted
		code     int
	}{
		{
			name: "1.0 working status is not final in 0.3", from: wire.V10, to: wire.V03, method: wire.MethodStream,
			in:   `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
			want: `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working"},"final":false}`,
		},
		{
			name: "1.0 failed status is final in 0.3", from: wire.V10, to: wire.V03, method: wire.MethodSubscribe,
			in:   `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED"}}}`,
			want: `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"failed"},"final":true}`,
		},
		{
			name: "1.0 enum numbers are read", from: wire.V10, to: wire.V03, method: wire.MethodGetTask,
			in:   `{"id":"t","status":{"state":6,"message":{"messageId":"m","role":2,"parts":[]}}}`,
			want: `{"id":"t","status":{"state":"input-required","message":{"messageId":"m","role":"agent","parts":[],"kind":"message"}},"kind":"task"}`,
		},
		{
			name: "0.3 zone-less timestamps get Z for 1.0", from: wire.V03, to: wire.V10, method: wire.MethodGetTask,
			in:   `{"kind":"task","id":"t","contextId":"c","status":{"state":"working","timestamp":"2025-04-02T16:59:25.331844"}}`,
			want: `{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"2025-04-02T16:59:25.331844Z"}}`,
		},
		{
			name: "0.3 objects without kind are recognised", from: wire.V03, to: wire.V10, method: wire.MethodStream,
			in:   `{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"x"}]},"append":false,"lastChunk":true}`,
			want: `{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"x"}]},"append":false,"lastChunk":true}}`,
		},
		{
			name: "a 1.0 stream without a wrapper is invalid", from: wire.V10, to: wire.V03, method: wire.MethodStream,
			in: `{"something":"else"}`, code: wire.CodeInvalidAgentResponse,
		},
		{
			name: "a status update is no send result", from: wire.V03, to: wire.V10, method: wire.MethodSend,
			in: `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working"},"final":false}`, code: wire.CodeInvalidAgentResponse,
		},
		{
			name: "cards are not translated", from: wire.V10, to: wire.V03, method: wire.MethodExtendedCard,
			in: `{"name":"x"}`, code: wire.CodeUnsupportedOperation,
		},
		{
			name: "not JSON", from: wire.V10, to: wire.V03, method: wire.MethodGetTask,
			in: `{"id":`, code: wire.CodeInvalidAgentResponse,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wire.TranslateResult(tc.from, tc.to, tc.method, json.RawMessage(tc.in))
			if tc.want == "" {
				var we *wire.Error
				if !errors.As(err, &we) || we.Code != tc.code {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equalJSON(t, got, []byte(tc.want))
		})
	}
}

func TestTranslateError(t *testing.T) {
	data := json.RawMessage(`[{"@type":"x"}]`)
	tests := []struct {
		name     string
		from, to wire.Version
		in       *wire.Error
		want     *wire.Error
	}{
		{"version not supported to 0.3", wire.V10, wire.V03,
			&wire.Error{Code: -32009, Message: "no 2.0", Data: data},
			&wire.Error{Code: -32600, Message: "no 2.0", Data: data}},
		{"extension required to 0.3", wire.V10, wire.V03,
			&wire.Error{Code: -32008, Message: "needs ext"},
			&wire.Error{Code: -32600, Message: "needs ext"}},
		{"A2A codes 0.3 knows pass", wire.V10, wire.V03,
			&wire.Error{Code: -32001, Message: "Task not found"},
			&wire.Error{Code: -32001, Message: "Task not found"}},
		{"marketplace codes pass", wire.V10, wire.V03,
			&wire.Error{Code: -32042, Message: "budget"},
			&wire.Error{Code: -32042, Message: "budget"}},
		{"everything passes to 1.0", wire.V03, wire.V10,
			&wire.Error{Code: -32007, Message: "no card"},
			&wire.Error{Code: -32007, Message: "no card"}},
		{"same version is untouched", wire.V03, wire.V03,
			&wire.Error{Code: -32009, Message: "own code"},
			&wire.Error{Code: -32009, Message: "own code"}},
		{"nil", wire.V10, wire.V03, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := wire.TranslateError(tc.from, tc.to, tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
