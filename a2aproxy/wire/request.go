package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParentTaskKey is the metadata key (in params.metadata or
// params.message.metadata of a send) under which a caller names the task
// on whose behalf it calls, so usage can be attributed up a chain of
// agents.
const ParentTaskKey = "agentmarket/parentTaskId"

// Request is a parsed A2A JSON-RPC request. ID, Params and Raw alias the
// parsed body.
type Request struct {
	ID      json.RawMessage // a string or a number, as sent
	Method  Method
	Name    string  // the method name as sent
	Version Version // from the A2A-Version header, which agrees with Name
	Params  json.RawMessage
	Raw     []byte // the whole body

	// Binding is how the caller sent the request: JSON-RPC (the zero
	// value, ParseRequest) or HTTP+JSON (ParseREST, which synthesizes Raw
	// as the equivalent JSON-RPC request).
	Binding Binding
	// Tenant is the /{tenant} path segment of an A2A 1.0 HTTP+JSON call
	// ("" otherwise); ParseREST also puts it in Params as "tenant".
	Tenant string

	taskID, contextID, parentTaskID string
	messageID                       string
	message                         []byte // params.message of a send, as sent
	refTaskIDs                      []string
	texts                           []string
	parts                           PartStats
	blocking                        bool
	inlinePush                      bool // configuration carries a push config
}

// PartStats sums the parts of a request's message by type.
type PartStats struct {
	Text, File, Data int // number of parts of each type
	TextBytes        int64
	// FileBytes is the approximate decoded size of inline file content
	// (0.3 file.bytes, 1.0 raw: base64, so 3/4 of its length); a file
	// given by URL counts 0.
	FileBytes int64
	DataBytes int64 // the length of the data parts' JSON, as sent
}

// TaskID is the existing task the request names: params.id or
// params.taskId for task operations (whichever the method's version uses),
// params.message.taskId for a send. "" when there is none.
func (r *Request) TaskID() string { return r.taskID }

// ReferenceTaskIDs are the tasks a send's message references
// (params.message.referenceTaskIds), as sent.
func (r *Request) ReferenceTaskIDs() []string { return r.refTaskIDs }

// MessageID is params.message.messageId of a send, else "".
func (r *Request) MessageID() string { return r.messageID }

// ContextID is params.message.contextId of a send, else "".
func (r *Request) ContextID() string { return r.contextID }

// MessageTexts are the texts of the text parts of a send's message, in
// order.
func (r *Request) MessageTexts() []string { return r.texts }

// MessageParts counts the parts of a send's message.
func (r *Request) MessageParts() PartStats { return r.parts }

// ParentTaskID is the value of ParentTaskKey in params.metadata, or else
// in params.message.metadata, of a send; "" when absent or not a string.
func (r *Request) ParentTaskID() string { return r.parentTaskID }

// Blocking reports whether a message/send (SendMessage) waits for the task
// to reach a terminal or interrupted state before answering: 1.0 waits
// unless configuration.returnImmediately is true; 0.3 waits unless
// configuration.blocking is false (the 0.3 schema gives no default; the
// reference SDKs default to blocking, as 1.0 does). False for every other
// method.
func (r *Request) Blocking() bool { return r.blocking }

// ParseRequest validates a JSON-RPC 2.0 request and the A2A method it
// calls. versionHeader is the A2A-Version header (or query parameter).
//
// Errors, in the order checked: -32700 for a body that is not JSON; -32600
// for an envelope that is not a single request object with jsonrpc "2.0",
// a string or number id (notifications are refused: every A2A method
// answers), and a string method; -32009 for an unknown version; -32601 for
// an unknown method; -32600 when the method belongs to the other version
// than the header; -32602 for params that are not an object or lack what
// the method requires (message for a send, the task id for task
// operations).
//
// When the error comes after the id was read, the returned Request is not
// nil and carries at least ID (nil when the request has none), so the
// error answer can echo it; its other fields may be incomplete.
func ParseRequest(body []byte, versionHeader string) (*Request, *Error) {
	if !validJSON(body) {
		return nil, ParseError("")
	}
	var buf [8]member
	ms, ok := splitObject(body, buf[:0])
	if !ok {
		if firstByte(body) == '[' {
			return nil, InvalidRequest("batch requests are not supported")
		}
		return nil, InvalidRequest("the request must be a JSON object")
	}
	if err := readable(ms, "", envelopeFields); err != nil {
		return nil, err
	}
	var rpcVersion, id, method, params []byte
	for _, m := range ms {
		switch {
		case m.is("jsonrpc"):
			rpcVersion = m.val
		case m.is("id"):
			id = m.val
		case m.is("method"):
			method = m.val
		case m.is("params"):
			params = m.val
		}
	}
	// A request without an id is refused (A2A methods are not
	// notifications), but only once its method and params are judged: an
	// unknown method is -32601 and bad params -32602 first, as the
	// official SDKs answer them.
	noID := isNull(id)
	if !noID && !validID(id) {
		return nil, InvalidRequest(`"id" must be a string or a number`)
	}
	if noID {
		id = nil
	}
	r := &Request{ID: id, Raw: body}
	if s, ok := unquote(rpcVersion); !ok || s != "2.0" {
		return r, InvalidRequest(`"jsonrpc" must be "2.0"`)
	}
	name, ok := unquote(method)
	if !ok {
		return r, InvalidRequest(`"method" must be a string`)
	}
	r.Name = name
	m, mv, ok := LookupMethod(name)
	if strings.TrimSpace(versionHeader) == "" && ok {
		// No A2A-Version: the method name decides, as 0.3 and 1.0 method
		// names never overlap (an agent that takes SendMessage without the
		// header must take it through the meter too).
		versionHeader = string(mv)
	}
	v, verr := ParseVersion(versionHeader)
	if verr != nil {
		return r, verr
	}
	r.Version = v
	if !ok {
		return r, MethodNotFound(fmt.Sprintf("method %q not found", name))
	}
	if mv != v {
		return r, InvalidRequest(fmt.Sprintf("method %q is A2A %s but the request's A2A-Version is %s", name, mv, v))
	}
	r.Method = m
	if isNull(params) {
		params = nil
	}
	switch firstByte(params) {
	case 0, '{':
	case '[':
		return r, InvalidParams("params must be an object")
	default:
		return r, InvalidRequest(`"params" must be an object`)
	}
	if np, renamed := camelParams(m, v, params); renamed {
		env := &object{ms: slices.Clone(ms)} // ms stays on the stack
		env.set("params", np)
		params, r.Raw = np, env.bytes()
	}
	r.Params = params
	if err := r.readParams(); err != nil {
		return r, err
	}
	if noID {
		return r, InvalidRequest(`"id" is required: A2A methods are not notifications`)
	}
	return r, nil
}

func (r *Request) readParams() *Error {
	switch r.Method {
	case MethodSend, MethodStream:
		return r.readSend()
	case MethodGetTask, MethodCancelTask, MethodSubscribe:
		return r.readTaskID("id")
	case MethodPushSet:
		return r.readTaskID("taskId")
	case MethodPushGet, MethodPushList, MethodPushDelete:
		if r.Version == V03 {
			return r.readTaskID("id") // 0.3 names the task "id" here, 1.0 the config
		}
		return r.readTaskID("taskId")
	}
	if r.Method == MethodListTasks {
		// The meter pages over the caller's own tasks with these (see
		// a2aproxy's listTasks): no lookalike may reach the agent instead.
		var buf [8]member
		ms, _ := splitObject(r.Params, buf[:0])
		return readable(ms, "params", listFields)
	}
	return nil // GetExtendedAgentCard needs nothing
}

func (r *Request) readTaskID(field string) *Error {
	var buf [8]member
	ms, _ := splitObject(r.Params, buf[:0])
	if err := readable(ms, "params", taskParamFields[field]); err != nil {
		return err
	}
	var v []byte
	for _, m := range ms {
		if m.is(field) {
			v = m.val
		}
	}
	id, err := paramString(v, "params."+field)
	if err != nil {
		return err
	}
	if id == "" {
		return InvalidParams(fmt.Sprintf("params.%s (the task id) is required", field))
	}
	r.taskID = id
	return nil
}

func (r *Request) readSend() *Error {
	var pbuf [8]member
	ps, _ := splitObject(r.Params, pbuf[:0])
	if err := readable(ps, "params", sendFields); err != nil {
		return err
	}
	var msg, cfg, meta []byte
	for _, m := range ps {
		switch {
		case m.is("message"):
			msg = m.val
		case m.is("configuration"):
			cfg = m.val
		case m.is("metadata"):
			meta = m.val
		}
	}
	if isNull(msg) {
		return InvalidParams("params.message is required")
	}
	if firstByte(msg) != '{' {
		return InvalidParams("params.message must be an object")
	}
	r.message = msg
	var mbuf [12]member
	mm, _ := splitObject(msg, mbuf[:0])
	if err := readable(mm, "params.message", messageFields); err != nil {
		return err
	}
	var parts, mmeta []byte
	var err *Error
	for _, m := range mm {
		switch {
		case m.is("taskId"):
			r.taskID, err = paramString(m.val, "params.message.taskId")
		case m.is("contextId"):
			r.contextID, err = paramString(m.val, "params.message.contextId")
		case m.is("messageId"):
			r.messageID, err = paramString(m.val, "params.message.messageId")
		case m.is("parts"):
			parts = m.val
		case m.is("metadata"):
			mmeta = m.val
		case m.is("referenceTaskIds"):
			r.refTaskIDs, err = paramStrings(m.val, "params.message.referenceTaskIds", MaxReferenceTasks)
		}
		if err != nil {
			return err
		}
	}
	if err := r.readParts(parts); err != nil {
		return err
	}
	r.parentTaskID = stringMember(meta, ParentTaskKey)
	if r.parentTaskID == "" {
		r.parentTaskID = stringMember(mmeta, ParentTaskKey)
	}
	blocking, immediate, push, err := readSendConfig(cfg)
	if err != nil {
		return err
	}
	r.inlinePush = push
	if r.Method == MethodSend {
		if r.Version == V03 {
			r.blocking = blocking != "false"
		} else {
			r.blocking = immediate != "true"
		}
	}
	return nil
}

// readParts reads the parts of a send's message: 0.3 {kind, text | file |
// data}, 1.0 {text | raw | url | data}, as each version's parsers read
// them (0.3 by kind, 1.0 by which member is present: 1.0 has no kind). Of
// file and data content only the size is taken, so large inline files
// cost no copy.
func (r *Request) readParts(parts []byte) *Error {
	if isNull(parts) {
		return nil
	}
	var abuf [8][]byte
	els, ok := splitArray(parts, abuf[:0])
	if !ok {
		return InvalidParams("params.message.parts must be an array")
	}
	fields := part10Fields
	if r.Version == V03 {
		fields = part03Fields
	}
	for i, el := range els {
		var buf [6]member
		ms, ok := splitObject(el, buf[:0])
		if !ok {
			return InvalidParams(fmt.Sprintf("params.message.parts[%d] must be an object", i))
		}
		if err := readableAt(ms, "params.message.parts", i, "", fields); err != nil {
			return err
		}
		var kind, text, file, raw, url, data []byte
		for _, m := range ms {
			switch {
			case m.is("kind"):
				kind = m.val
			case m.is("text"):
				text = m.val
			case m.is("file"):
				file = m.val
			case m.is("raw"):
				raw = m.val
			case m.is("url"):
				url = m.val
			case m.is("data"):
				data = m.val
			}
		}
		if r.Version != V03 {
			kind, file = nil, nil
		} else {
			raw, url = nil, nil
		}
		k, _ := unquote(kind)
		switch {
		case text != nil && (k == "" || k == "text"):
			t, ok := unquote(text)
			if !ok {
				return InvalidParams(fmt.Sprintf("params.message.parts[%d].text must be a string", i))
			}
			r.parts.Text++
			r.parts.TextBytes += int64(len(t))
			if t != "" {
				r.texts = append(r.texts, t)
			}
		case file != nil && (k == "" || k == "file"):
			r.parts.File++
			var fbuf [4]member
			fs, _ := splitObject(file, fbuf[:0])
			if err := readableAt(fs, "params.message.parts", i, ".file", file03Fields); err != nil {
				return err
			}
			for _, m := range fs {
				if m.is("bytes") {
					r.parts.FileBytes += base64Size(m.val)
				}
			}
		case raw != nil || url != nil:
			r.parts.File++
			r.parts.FileBytes += base64Size(raw)
		case data != nil && (k == "" || k == "data"):
			r.parts.Data++
			r.parts.DataBytes += int64(len(data))
		}
	}
	return nil
}

// readSendConfig returns the literal values of configuration.blocking
// (0.3) and configuration.returnImmediately (1.0): "true", "false" or "".
func readSendConfig(cfg []byte) (blocking, immediate string, push bool, err *Error) {
	if isNull(cfg) {
		return "", "", false, nil
	}
	var buf [6]member
	ms, ok := splitObject(cfg, buf[:0])
	if !ok {
		return "", "", false, InvalidParams("params.configuration must be an object")
	}
	if err := readable(ms, "params.configuration", configFields); err != nil {
		return "", "", false, err
	}
	for _, m := range ms {
		switch {
		case m.is("blocking"):
			blocking, err = paramBool(m.val, "params.configuration.blocking")
		case m.is("returnImmediately"):
			immediate, err = paramBool(m.val, "params.configuration.returnImmediately")
		case isPushConfigKey(m.name()):
			if isNull(m.val) {
				continue
			}
			if push {
				return "", "", false, InvalidParams("params.configuration carries more than one push notification config")
			}
			push = true
		}
		if err != nil {
			return "", "", false, err
		}
	}
	return blocking, immediate, push, nil
}

// paramString reads an optional string member of params.
func paramString(v []byte, field string) (string, *Error) {
	if isNull(v) {
		return "", nil
	}
	s, ok := unquote(v)
	if !ok {
		return "", InvalidParams(field + " must be a string")
	}
	return s, nil
}

// MaxReferenceTasks is the most tasks a message may reference: the meter
// checks that each is the caller's.
const MaxReferenceTasks = 64

// paramStrings reads an optional array of at most max strings of params.
func paramStrings(v []byte, field string, max int) ([]string, *Error) {
	if isNull(v) {
		return nil, nil
	}
	var buf [4][]byte
	els, ok := splitArray(v, buf[:0])
	if !ok {
		return nil, InvalidParams(field + " must be an array of strings")
	}
	if len(els) > max {
		return nil, InvalidParams(fmt.Sprintf("%s holds %d ids; at most %d are accepted", field, len(els), max))
	}
	out := make([]string, 0, len(els))
	for i, el := range els {
		s, ok := unquote(el)
		if !ok {
			return nil, InvalidParams(fmt.Sprintf("%s[%d] must be a string", field, i))
		}
		out = append(out, s)
	}
	return out, nil
}

// paramBool reads an optional boolean member of params, as its literal.
func paramBool(v []byte, field string) (string, *Error) {
	switch string(v) {
	case "true":
		return "true", nil
	case "false":
		return "false", nil
	case "null":
		return "", nil
	}
	return "", InvalidParams(field + " must be a boolean")
}

// base64Size estimates the decoded length of the base64 text in a JSON
// string.
func base64Size(v []byte) int64 {
	if len(v) <= 2 || v[0] != '"' {
		return 0
	}
	return int64(len(v)-2) * 3 / 4
}

// EstimateTokens estimates the tokens of a text when the agent reports
// none: one token per four characters (Unicode code points), rounded up,
// so any non-empty text counts at least 1. It is the common rule of thumb
// for English with BPE tokenizers; it is deterministic, so the same text
// is always billed the same.
func EstimateTokens(text string) int64 {
	n := utf8.RuneCountInString(text)
	return int64((n + 3) / 4)
}

// GetTaskRequest is a GetTask (tasks/get) request body for taskID, as the
// proxy sends to settle a task whose caller went away.
func GetTaskRequest(v Version, taskID string) ([]byte, error) {
	name := MethodName(MethodGetTask, v)
	if name == "" {
		return nil, fmt.Errorf("wire: unknown A2A version %q", v)
	}
	b := make([]byte, 0, 80+len(taskID))
	b = append(b, `{"jsonrpc":"2.0","id":"agentmarket-settle","method":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"params":{"id":`...)
	b = append(b, quote(taskID)...)
	return append(b, "}}"...), nil
}

// CancelReasonKey is the metadata key under which a caller of CancelTask
// (tasks/cancel) may say why; the meter records it, and sets it on the
// cancels it sends itself.
const CancelReasonKey = "agentmarket/cancelReason"

// MetadataString is the string under key in params.metadata; "" when
// absent or not a string.
func (r *Request) MetadataString(key string) string {
	var buf [8]member
	ps, _ := splitObject(r.Params, buf[:0])
	for _, m := range ps {
		if m.is("metadata") {
			return stringMember(m.val, key)
		}
	}
	return ""
}

// TaskRequest is a JSON-RPC request body of a task-scoped method m (get
// or cancel) for taskID in version v, with string metadata when given, as
// the meter sends on its own (settling, canceling).
func TaskRequest(v Version, m Method, taskID string, metadata map[string]string) ([]byte, error) {
	name := MethodName(m, v)
	if name == "" || !m.TaskScoped() {
		return nil, fmt.Errorf("wire: no %s request in A2A %q", m, v)
	}
	params := map[string]any{"id": taskID}
	if len(metadata) > 0 {
		params["metadata"] = metadata
	}
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "agentmarket-" + m.String(), "method": name, "params": params})
}

// InlinePush splits off the push config a send carries in its
// configuration (0.3 pushNotificationConfig, 1.0
// taskPushNotificationConfig): body is the JSON-RPC request without it,
// cfg the config as sent. cfg is nil, and body r.Raw, when there is none.
func InlinePush(r *Request) (body []byte, cfg json.RawMessage) {
	if !r.inlinePush {
		return r.Raw, nil
	}
	top, ok := parseObject(r.Raw)
	if !ok {
		return r.Raw, nil
	}
	pv, _ := top.get("params")
	params, ok := parseObject(pv)
	if !ok {
		return r.Raw, nil
	}
	cv, _ := params.get("configuration")
	conf, ok := parseObject(cv)
	if !ok {
		return r.Raw, nil
	}
	// Every spelling an agent's decoder might take for a push config goes
	// (its own version's and the other's, any case, snake_case): the
	// agent must never see the buyer's webhook.
	var v []byte
	kept := conf.ms[:0:0]
	for _, m := range conf.ms {
		if isPushConfigKey(m.name()) {
			if !isNull(m.val) {
				v = m.val
			}
			continue
		}
		kept = append(kept, m)
	}
	conf.ms = kept
	if v == nil {
		return r.Raw, nil
	}
	params.set("configuration", conf.bytes())
	top.set("params", params.bytes())
	return top.bytes(), json.RawMessage(v)
}

// isPushConfigKey reports whether a configuration member names a push
// config in any spelling a decoder may accept: pushNotificationConfig
// (0.3), taskPushNotificationConfig (1.0), pushNotification (the 0.3
// proto), in any case (Unicode simple folding, as Go's encoding/json
// matches keys: "ſ" is "s"), with or without underscores or dashes
// (protojson takes snake_case).
func isPushConfigKey(name string) bool {
	if len(name) > 120 {
		return false
	}
	stripped := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, name)
	for _, k := range [...]string{"pushNotificationConfig", "taskPushNotificationConfig", "pushNotification"} {
		if strings.EqualFold(stripped, k) {
			return true
		}
	}
	return false
}
