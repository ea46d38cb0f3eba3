package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// protoView is what an agent whose JSON-RPC layer parses A2A 1.0 params as
// ProtoJSON (protojson into the specification's generated types, unknown
// fields ignored) reads from the bytes; ok is false when it refuses them.
func protoView(m wire.Method, body []byte) (view, bool) {
	var env struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &env) != nil {
		return view{}, false
	}
	out := view{Method: env.Method}
	if len(env.Params) == 0 || string(env.Params) == "null" {
		env.Params = json.RawMessage("{}")
	}
	dec := func(p proto.Message) bool {
		return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(env.Params, p) == nil
	}
	switch m {
	case wire.MethodSend, wire.MethodStream:
		var p a2apb.SendMessageRequest
		if !dec(&p) || p.GetMessage() == nil {
			return out, false
		}
		msg := p.GetMessage()
		out.TaskID, out.ContextID, out.MessageID, out.RefTasks = msg.GetTaskId(), msg.GetContextId(), msg.GetMessageId(), msg.GetReferenceTaskIds()
		for _, md := range []map[string]any{p.GetMetadata().AsMap(), msg.GetMetadata().AsMap()} {
			if s, _ := md[wire.ParentTaskKey].(string); s != "" && out.Parent == "" {
				out.Parent = s
			}
		}
		for _, part := range msg.GetParts() {
			if _, isText := part.GetContent().(*a2apb.Part_Text); isText && part.GetText() != "" {
				out.Texts = append(out.Texts, part.GetText())
			}
		}
	case wire.MethodGetTask:
		return pbTask(out, dec, &a2apb.GetTaskRequest{}, (*a2apb.GetTaskRequest).GetId)
	case wire.MethodCancelTask:
		return pbTask(out, dec, &a2apb.CancelTaskRequest{}, (*a2apb.CancelTaskRequest).GetId)
	case wire.MethodSubscribe:
		return pbTask(out, dec, &a2apb.SubscribeToTaskRequest{}, (*a2apb.SubscribeToTaskRequest).GetId)
	case wire.MethodPushSet:
		return pbTask(out, dec, &a2apb.TaskPushNotificationConfig{}, (*a2apb.TaskPushNotificationConfig).GetTaskId)
	case wire.MethodPushGet:
		return pbTask(out, dec, &a2apb.GetTaskPushNotificationConfigRequest{}, (*a2apb.GetTaskPushNotificationConfigRequest).GetTaskId)
	case wire.MethodPushList:
		return pbTask(out, dec, &a2apb.ListTaskPushNotificationConfigsRequest{}, (*a2apb.ListTaskPushNotificationConfigsRequest).GetTaskId)
	case wire.MethodPushDelete:
		return pbTask(out, dec, &a2apb.DeleteTaskPushNotificationConfigRequest{}, (*a2apb.DeleteTaskPushNotificationConfigRequest).GetTaskId)
	default:
		return out, false
	}
	return out, true
}

// pbTask decodes params into p and reads the task id it names.
func pbTask[T proto.Message](out view, dec func(proto.Message) bool, p T, id func(T) string) (view, bool) {
	ok := dec(p)
	out.TaskID = id(p)
	return out, ok
}

// TestProtoNamesAreRenamed: a proto name in JSON-RPC params is read as its
// JSON name and forwarded under it, on both versions; a field under both
// names is still refused; user data (metadata, data parts, texts) keeps its
// keys.
func TestProtoNamesAreRenamed(t *testing.T) {
	for _, c := range []struct {
		name, header, body   string
		task, msgID          string
		refs                 []string
		forwarded, untouched []string // substrings the forwarded body must / must still contain
		absent               []string // substrings it must no longer contain
	}{
		{name: "1.0 send, message.task_id", header: "1.0",
			body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"message_id":"m1","role":"ROLE_USER","parts":[{"text":"see task_id","media_type":"text/plain"}],"task_id":"t1","context_id":"c1","reference_task_ids":["t0"],"metadata":{"my_key":1}},"configuration":{"return_immediately":true,"accepted_output_modes":["text/plain"]}}}`,
			task: "t1", msgID: "m1", refs: []string{"t0"},
			forwarded: []string{`"messageId":"m1"`, `"taskId":"t1"`, `"contextId":"c1"`, `"referenceTaskIds":["t0"]`, `"mediaType":"text/plain"`, `"returnImmediately":true`, `"acceptedOutputModes"`},
			untouched: []string{`"text":"see task_id"`, `"metadata":{"my_key":1}`},
			absent:    []string{`"task_id"`, `"message_id"`, `"return_immediately"`}},
		{name: "0.3 send, message.task_id and a file part", header: "",
			body: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","message_id":"m2","role":"user","parts":[{"kind":"file","file":{"bytes":"aGk=","mime_type":"text/plain"}},{"kind":"data","data":{"snake_key":true}}],"task_id":"t2"}}}`,
			task: "t2", msgID: "m2",
			forwarded: []string{`"messageId":"m2"`, `"taskId":"t2"`, `"mimeType":"text/plain"`},
			untouched: []string{`"data":{"snake_key":true}`}},
		{name: "1.0 push config create", header: "1.0",
			body:      `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"task_id":"t3","url":"https://example.com/hook"}}`,
			task:      "t3",
			forwarded: []string{`"taskId":"t3"`}},
		{name: "0.3 push config get by config id", header: "",
			body:      `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"id":"t4","push_notification_config_id":"c4"}}`,
			task:      "t4",
			forwarded: []string{`"pushNotificationConfigId":"c4"`}},
		{name: "0.3 push config set", header: "",
			body:      `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"task_id":"t5","push_notification_config":{"url":"https://example.com/hook"}}}`,
			task:      "t5",
			forwarded: []string{`"taskId":"t5"`, `"pushNotificationConfig":{"url"`}},
		{name: "1.0 list tasks", header: "1.0",
			body:      `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"page_size":5,"context_id":"c6","history_length":2}}`,
			forwarded: []string{`"pageSize":5`, `"contextId":"c6"`, `"historyLength":2`}},
		{name: "1.0 get task, escaped underscore", header: "1.0",
			body:      `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t7","history\u005flength":1}}`,
			task:      "t7",
			forwarded: []string{`"historyLength":1`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, werr := wire.ParseRequest([]byte(c.body), c.header)
			if werr != nil {
				t.Fatalf("refused: %v", werr)
			}
			if req.TaskID() != c.task || req.MessageID() != c.msgID || strings.Join(req.ReferenceTaskIDs(), ",") != strings.Join(c.refs, ",") {
				t.Errorf("read task %q message %q refs %v", req.TaskID(), req.MessageID(), req.ReferenceTaskIDs())
			}
			if !json.Valid(req.Raw) {
				t.Fatalf("forwarded body is not JSON: %s", req.Raw)
			}
			fwd := string(req.Raw)
			for _, want := range append(c.forwarded, c.untouched...) {
				if !strings.Contains(fwd, want) {
					t.Errorf("forwarded body lacks %s:\n%s", want, fwd)
				}
			}
			for _, gone := range c.absent {
				if strings.Contains(fwd, gone) {
					t.Errorf("forwarded body still has %s:\n%s", gone, fwd)
				}
			}
			if string(req.Params) != string(mustParams(t, req.Raw)) {
				t.Errorf("Params %s is not the forwarded body's params", req.Params)
			}
		})
	}
	// Untouched when there is nothing to rename: the very bytes.
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a_b"}]}}}`
	if req, werr := wire.ParseRequest([]byte(body), "1.0"); werr != nil || string(req.Raw) != body {
		t.Errorf("%v: forwarded %s", werr, req.Raw)
	}
	// Both names, or a spelling no parser takes as the proto name: refused.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"taskId":"a","task_id":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"task_id":"b","taskId":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"task_id":"a","TaskId":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"a","task_id":"b","id":"c"}}`,
	} {
		if _, werr := wire.ParseRequest([]byte(body), "1.0"); werr == nil || werr.Code != wire.CodeInvalidParams {
			t.Errorf("%s: %v, want -32602", body, werr)
		}
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"Task_Id":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"task__id":"a"}}}`,
	} {
		if _, werr := wire.ParseRequest([]byte(body), "1.0"); werr == nil || werr.Code != wire.CodeInvalidRequest {
			t.Errorf("%s: %v, want -32600", body, werr)
		}
	}
}

func mustParams(t *testing.T, body []byte) json.RawMessage {
	t.Helper()
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	return env.Params
}
