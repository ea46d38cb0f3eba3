package wire_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// view is what the meter decides on in a request: the method, the tasks
// and context it names, the parent it claims, the texts it estimates
// usage from.
type view struct {
	Method    string
	TaskID    string
	ContextID string
	MessageID string
	RefTasks  []string
	Parent    string
	Texts     []string
}

func meterView(r *wire.Request) view {
	return view{Method: r.Name, TaskID: r.TaskID(), ContextID: r.ContextID(), MessageID: r.MessageID(), RefTasks: r.ReferenceTaskIDs(),
		Parent: r.ParentTaskID(), Texts: r.MessageTexts()}
}

// sdkView is what an agent built on the official a2a-go SDK reads from the
// same bytes: encoding/json into the SDK's own types (1.0, and the 0.3
// types its 0.3 server decodes into). ok is false when the SDK refuses the
// request (then the agent does not act on it either).
func sdkView(m wire.Method, v wire.Version, body []byte) (view, bool) {
	var env struct { // the SDK's jsonrpc.ServerRequest
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
		ID      any             `json:"id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return view{}, false
	}
	out := view{Method: env.Method}
	if len(env.Params) == 0 {
		env.Params = json.RawMessage("null")
	}
	dec := func(p any) bool { return json.Unmarshal(env.Params, p) == nil }
	parent := func(metas ...map[string]any) string {
		for _, md := range metas {
			if s, _ := md[wire.ParentTaskKey].(string); s != "" {
				return s
			}
		}
		return ""
	}
	if v == wire.V10 {
		switch m {
		case wire.MethodSend, wire.MethodStream:
			var p a2a.SendMessageRequest
			if !dec(&p) || p.Message == nil {
				return out, false
			}
			msg := p.Message
			out.TaskID, out.ContextID, out.Parent = string(msg.TaskID), msg.ContextID, parent(p.Metadata, msg.Metadata)
			out.MessageID = msg.ID
			for _, t := range msg.ReferenceTasks {
				out.RefTasks = append(out.RefTasks, string(t))
			}
			for _, part := range msg.Parts {
				if t, ok := part.Content.(a2a.Text); ok && t != "" {
					out.Texts = append(out.Texts, string(t))
				}
			}
		case wire.MethodGetTask:
			return taskOf(out, env.Params, func(p *a2a.GetTaskRequest) a2a.TaskID { return p.ID })
		case wire.MethodCancelTask:
			return taskOf(out, env.Params, func(p *a2a.CancelTaskRequest) a2a.TaskID { return p.ID })
		case wire.MethodSubscribe:
			return taskOf(out, env.Params, func(p *a2a.SubscribeToTaskRequest) a2a.TaskID { return p.ID })
		case wire.MethodPushSet:
			return taskOf(out, env.Params, func(p *a2a.PushConfig) a2a.TaskID { return p.TaskID })
		case wire.MethodPushGet:
			return taskOf(out, env.Params, func(p *a2a.GetTaskPushConfigRequest) a2a.TaskID { return p.TaskID })
		case wire.MethodPushList:
			return taskOf(out, env.Params, func(p *a2a.ListTaskPushConfigRequest) a2a.TaskID { return p.TaskID })
		case wire.MethodPushDelete:
			return taskOf(out, env.Params, func(p *a2a.DeleteTaskPushConfigRequest) a2a.TaskID { return p.TaskID })
		default:
			return out, false // nothing the meter decides on
		}
		return out, true
	}
	switch m {
	case wire.MethodSend, wire.MethodStream:
		var p a2alegacy.MessageSendParams
		if !dec(&p) || p.Message == nil {
			return out, false
		}
		msg := p.Message
		out.TaskID, out.ContextID, out.Parent = string(msg.TaskID), msg.ContextID, parent(p.Metadata, msg.Metadata)
		out.MessageID = msg.ID
		for _, t := range msg.ReferenceTasks {
			out.RefTasks = append(out.RefTasks, string(t))
		}
		for _, part := range msg.Parts {
			if t, ok := part.(a2alegacy.TextPart); ok && t.Text != "" {
				out.Texts = append(out.Texts, t.Text)
			}
		}
	case wire.MethodGetTask:
		return taskOf(out, env.Params, func(p *a2alegacy.TaskQueryParams) a2alegacy.TaskID { return p.ID })
	case wire.MethodCancelTask, wire.MethodSubscribe:
		return taskOf(out, env.Params, func(p *a2alegacy.TaskIDParams) a2alegacy.TaskID { return p.ID })
	case wire.MethodPushSet:
		return taskOf(out, env.Params, func(p *a2alegacy.TaskPushConfig) a2alegacy.TaskID { return p.TaskID })
	case wire.MethodPushGet:
		return taskOf(out, env.Params, func(p *a2alegacy.GetTaskPushConfigParams) a2alegacy.TaskID { return p.TaskID })
	case wire.MethodPushList:
		return taskOf(out, env.Params, func(p *a2alegacy.ListTaskPushConfigParams) a2alegacy.TaskID { return p.TaskID })
	case wire.MethodPushDelete:
		return taskOf(out, env.Params, func(p *a2alegacy.DeleteTaskPushConfigParams) a2alegacy.TaskID { return p.TaskID })
	default:
		return out, false
	}
	return out, true
}

// taskOf decodes params into the SDK's type T and reads the task id it
// names; ok is false when the SDK refuses the params.
func taskOf[T any, ID ~string](out view, params json.RawMessage, id func(*T) ID) (view, bool) {
	var p T
	ok := json.Unmarshal(params, &p) == nil
	out.TaskID = string(id(&p))
	return out, ok
}

// readingSeeds are requests that name another task than the meter would
// see if it read keys exactly, as an attacker spells them: in another
// case, with the Unicode letters encoding/json folds to ASCII (ſ U+017F,
// K U+212A), in proto snake_case, duplicated.
func readingSeeds() [][2]string {
	const victim = "task-of-org-a"
	var seeds [][2]string
	add := func(header, body string) { seeds = append(seeds, [2]string{body, header}) }
	spellings := []string{"taskId", "TaskId", "taskid", "TASKID", "taskID", "taſkId", "tas\u212aId", "task_id", "task-id", "tas\\u006bId"}
	for _, k := range spellings {
		msg03 := `{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"show me"}],"` + k + `":"` + victim + `"}`
		msg10 := `{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"show me"}],"` + k + `":"` + victim + `"}`
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":`+msg03+`}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":`+msg03+`}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":`+msg10+`}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":`+msg10+`}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"`+k+`":"`+victim+`","url":"https://example.com/hook"}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"`+k+`":"`+victim+`"}}`)
	}
	for _, k := range []string{"id", "ID", "Id", "_id", "\u0130d", "\u0131d"} {
		add("", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"`+k+`":"`+victim+`"}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"`+k+`":"`+victim+`"}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"`+k+`":"`+victim+`"}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"`+k+`":"`+victim+`"}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"`+k+`":"`+victim+`"}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"mine","`+k+`":"`+victim+`"}}`)
	}
	for _, k := range []string{"referenceTaskIds", "ReferenceTaskIds", "referencetaskids", "reference_task_ids", "refereNceTaskIds"} {
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"`+k+`":["`+victim+`"]}}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"`+k+`":["`+victim+`"]}}}`)
	}
	// The messageId decides which earlier send a message repeats.
	for _, k := range []string{"messageId", "MessageId", "messageID", "message_id", "me\u017f\u017fageId"} {
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"mine","role":"ROLE_USER","parts":[{"text":"x"}],"`+k+`":"m-of-another-send"}}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","parts":[{"kind":"text","text":"x"}],"`+k+`":"m-of-another-send"}}}`)
	}
	for _, k := range []string{"contextId", "ContextId", "contextID", "conte\u017ftId"} {
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"`+k+`":"ctx-of-org-a"}}}`)
	}
	for _, k := range []string{"metadata", "Metadata", "METADATA", "meta_data"} {
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"`+k+`":{"`+wire.ParentTaskKey+`":"`+victim+`"}}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"`+k+`":{"`+wire.ParentTaskKey+`":"`+victim+`"}}}}`)
	}
	for _, k := range []string{"text", "Text", "TEXT", "te\u0078t"} {
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"`+k+`":"a long text the agent reads"}]}}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"data","`+k+`":"a long text the agent reads"}]}}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","`+k+`":"a long text the agent reads"}]}}}`)
		add("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"Kind":"text","`+k+`":"a long text the agent reads"}]}}}`)
	}
	for _, k := range []string{"method", "Method", "METHOD", "meth\u006fd"} {
		add("1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","`+k+`":"GetTask","params":{"id":"`+victim+`"}}`)
		add("1.0", `{"jsonrpc":"2.0","id":1,"`+k+`":"GetTask","params":{"id":"`+victim+`"}}`)
	}
	for _, k := range []string{"params", "Params", "PARAMS"} {
		add("", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"mine"},"`+k+`":{"id":"`+victim+`"}}`)
	}
	return seeds
}

// FuzzReadingRule is the differential test of the reading rule: for any
// request, the ids the meter extracts (and decides task ownership on)
// equal the ids the official SDK's types decode from the same bytes, or
// the meter refuses the request.
//
// Under plain `go test` it runs its seeds and the committed corpus
// (testdata/fuzz/FuzzReadingRule); scripts/test.sh also fuzzes it for a
// bounded time.
func FuzzReadingRule(f *testing.F) {
	for _, s := range readingSeeds() {
		f.Add([]byte(s[0]), s[1])
	}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		req, werr := wire.ParseRequest(body, header)
		if werr != nil {
			return
		}
		// The agent reads the bytes the meter forwards (proto names
		// renamed), with the SDK's types or a ProtoJSON parser.
		got := normalize(meterView(req))
		if sdk, ok := sdkView(req.Method, req.Version, req.Raw); ok && !reflect.DeepEqual(got, normalize(sdk)) {
			t.Fatalf("the meter reads %+v, the SDK reads %+v\nbody: %s\nforwarded: %s", got, sdk, body, req.Raw)
		}
		if req.Version != wire.V10 {
			return
		}
		pj, ok := protoView(req.Method, req.Raw)
		if ok && !reflect.DeepEqual(got, normalize(pj)) {
			t.Fatalf("the meter reads %+v, a ProtoJSON parser reads %+v\nbody: %s\nforwarded: %s", got, pj, body, req.Raw)
		}
		// Renaming changes nothing a ProtoJSON agent reads.
		if orig, ok2 := protoView(req.Method, body); ok && ok2 && !reflect.DeepEqual(normalize(orig), normalize(pj)) {
			t.Fatalf("a ProtoJSON parser reads %+v from the body, %+v from what is forwarded\nbody: %s\nforwarded: %s", orig, pj, body, req.Raw)
		}
	})
}

func normalize(v view) view {
	if len(v.RefTasks) == 0 {
		v.RefTasks = nil
	}
	if len(v.Texts) == 0 {
		v.Texts = nil
	}
	return v
}

// TestReadingRuleRefusesLookalikes: every seed that spells a field the
// meter reads in any way but exactly is refused as an invalid request
// (-32600), naming the key, or as a collision (-32602); the exact
// spellings are read as the SDK reads them.
func TestReadingRuleRefusesLookalikes(t *testing.T) {
	exact := 0
	for _, s := range readingSeeds() {
		body, header := s[0], s[1]
		req, werr := wire.ParseRequest([]byte(body), header)
		if werr == nil {
			exact++
			sdk, ok := sdkView(req.Method, req.Version, req.Raw)
			if ok && !reflect.DeepEqual(normalize(meterView(req)), normalize(sdk)) {
				t.Errorf("accepted, but the meter reads %+v and the SDK %+v\n%s", meterView(req), sdk, body)
			}
			continue
		}
		if werr.Code != wire.CodeInvalidRequest && werr.Code != wire.CodeInvalidParams {
			t.Errorf("code %d (%s), want -32600 or -32602\n%s", werr.Code, werr.Message, body)
		}
		if werr.Code == wire.CodeInvalidRequest && !strings.Contains(werr.Message, "is refused: agents may read it as") &&
			!strings.Contains(werr.Message, "appears twice") {
			t.Errorf("message %q does not name the key\n%s", werr.Message, body)
		}
	}
	if exact == 0 {
		t.Fatal("no seed was accepted: the exact spellings must be")
	}
}

func TestReadingRuleErrorNamesTheKey(t *testing.T) {
	for _, c := range []struct{ body, header, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[],"TaskId":"t"}}}`, "",
			`params.message.TaskId is refused: agents may read it as "taskId"`},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"ta\u017fkId":"t"}}}`, "1.0",
			`params.message."ta\u017fkId" is refused: agents may read it as "taskId"`},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"t"}}`, "1.0",
			`params.ID is refused: agents may read it as "id"`},
		{`{"jsonrpc":"2.0","id":1,"Method":"GetTask","params":{"id":"t"}}`, "1.0",
			`member Method is refused: agents may read it as "method"`},
	} {
		_, werr := wire.ParseRequest([]byte(c.body), c.header)
		if werr == nil || werr.Code != wire.CodeInvalidRequest || !strings.Contains(werr.Message, c.want) {
			t.Errorf("%s\ngot %v, want -32600 containing %q", c.body, werr, c.want)
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
