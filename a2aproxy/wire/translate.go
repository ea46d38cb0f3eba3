package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Translation between 0.3 and 1.0, for a caller speaking one version to an
// agent offering only the other. Only what differs is rewritten: method
// names, the 0.3 "kind" markers and the 1.0 wrappers, enum spellings,
// part shapes, the send configuration, push configs and the ids that
// change names. Every other member is copied through unchanged and in
// place. Members one version defines and the other cannot carry are
// dropped (1.0 tenant and list paging, 0.3 metadata of task queries,
// mediaType and filename of non-file parts, all but the first 0.3 auth
// scheme).

// TranslateRequest renders r as a JSON-RPC request body in version to. A
// request already in that version is returned as it came (r.Raw). A method
// the target version lacks (ListTasks in 0.3) is an UnsupportedOperation
// *Error.
func TranslateRequest(r *Request, to Version) ([]byte, error) {
	if r == nil || !r.Method.valid() {
		return nil, errors.New("wire: TranslateRequest needs a request from ParseRequest")
	}
	if !to.valid() {
		return nil, fmt.Errorf("wire: unknown A2A version %q", to)
	}
	if r.Version == to {
		return r.Raw, nil
	}
	params, e := paramsIn(r, to)
	if e != nil {
		return nil, e
	}
	name := MethodName(r.Method, to)
	b := make([]byte, 0, 64+len(r.ID)+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, r.ID...)
	b = append(b, `,"method":`...)
	b = strconv.AppendQuote(b, name)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return compact(append(b, '}')), nil
}

// compact removes the line breaks copied values may carry, so a
// translation always fits on one SSE data line.
func compact(b []byte) []byte {
	if bytes.IndexAny(b, "\r\n") < 0 {
		return b
	}
	var buf bytes.Buffer
	buf.Grow(len(b))
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// paramsIn is r's params in version v: translated when r is of the
// other version, an UnsupportedOperation *Error when v lacks its method.
func paramsIn(r *Request, v Version) ([]byte, *Error) {
	params := []byte(r.Params)
	if r.Version == v {
		return params, nil
	}
	if MethodName(r.Method, v) == "" {
		return nil, UnsupportedOperation(fmt.Sprintf("%s has no A2A %s equivalent", r.Name, v))
	}
	if params != nil {
		params = translateParams(r.Method, v, params)
	}
	return params, nil
}

func translateParams(m Method, to Version, p []byte) []byte {
	if m == MethodPushSet {
		return translatePushConfig(p, to)
	}
	o, ok := parseObject(p)
	if !ok {
		return p
	}
	switch m {
	case MethodSend, MethodStream:
		if v, ok := o.get("message"); ok {
			o.set("message", shapesTo(to).message(v))
		}
		if v, ok := o.get("configuration"); ok {
			o.set("configuration", translateSendConfig(v, to))
		}
	case MethodGetTask, MethodSubscribe:
		if to == V10 {
			o.del("metadata")
		}
	case MethodPushGet, MethodPushDelete:
		// 0.3 {id: task, pushNotificationConfigId: config}; 1.0 {taskId, id: config}.
		if to == V10 {
			o.rename("id", "taskId")
			o.rename("pushNotificationConfigId", "id")
			o.del("metadata")
		} else {
			o.rename("id", "pushNotificationConfigId")
			o.rename("taskId", "id")
		}
	case MethodPushList:
		if to == V10 {
			o.rename("id", "taskId")
			o.del("metadata")
		} else {
			o.rename("taskId", "id")
			o.del("pageSize")
			o.del("pageToken")
		}
	}
	if to == V03 {
		o.del("tenant")
	}
	return o.bytes()
}

func translateSendConfig(b []byte, to Version) []byte {
	o, ok := parseObject(b)
	if !ok {
		return b
	}
	from, into := "blocking", "returnImmediately" // the same flag, negated
	fromPush, intoPush := "pushNotificationConfig", "taskPushNotificationConfig"
	if to == V03 {
		from, into = into, from
		fromPush, intoPush = intoPush, fromPush
	}
	if v, ok := o.get(from); ok {
		o.rename(from, into)
		o.set(into, negate(v))
	}
	if v, ok := o.get(fromPush); ok {
		o.rename(fromPush, intoPush)
		o.set(intoPush, translatePushNotificationConfig(v, to))
	}
	return o.bytes()
}

func negate(v []byte) []byte {
	switch string(v) {
	case "true":
		return jsonFalse
	case "false":
		return jsonTrue
	}
	return v
}

// translatePushNotificationConfig translates the push config of a send's
// configuration: 0.3 PushNotificationConfig {url, id, token,
// authentication} ↔ 1.0 TaskPushNotificationConfig without a task.
func translatePushNotificationConfig(b []byte, to Version) []byte {
	o, ok := parseObject(b)
	if !ok {
		return b
	}
	if to == V03 {
		o.del("taskId")
		o.del("tenant")
	}
	if v, ok := o.get("authentication"); ok {
		o.set("authentication", translateAuth(v, to))
	}
	return o.bytes()
}

// translatePushConfig translates a TaskPushNotificationConfig: 0.3 nests
// the config ({taskId, pushNotificationConfig: {url, id, token,
// authentication}}), 1.0 is flat ({taskId, id, url, token,
// authentication}).
func translatePushConfig(b []byte, to Version) []byte {
	o, ok := parseObject(b)
	if !ok {
		return b
	}
	if to == V10 {
		nested, _ := o.del("pushNotificationConfig")
		if inner, ok := parseObject(nested); ok {
			for _, m := range inner.ms {
				o.put(m)
			}
		}
		if v, ok := o.get("authentication"); ok {
			o.set("authentication", translateAuth(v, to))
		}
		return o.bytes()
	}
	out := &object{}
	inner := &object{}
	for _, m := range o.ms {
		switch {
		case m.is("taskId"):
			out.put(m)
		case m.is("tenant"):
		case m.is("authentication"):
			inner.set("authentication", translateAuth(m.val, to))
		default:
			inner.put(m)
		}
	}
	out.set("pushNotificationConfig", inner.bytes())
	return out.bytes()
}

// translateAuth translates push authentication: 0.3 {schemes: [...],
// credentials} ↔ 1.0 {scheme, credentials}. 1.0 takes one scheme: the
// first.
func translateAuth(b []byte, to Version) []byte {
	o, ok := parseObject(b)
	if !ok {
		return b
	}
	if to == V10 {
		if v, ok := o.get("schemes"); ok {
			els, _ := splitArray(v, nil)
			if len(els) > 0 {
				o.rename("schemes", "scheme")
				o.set("scheme", els[0])
			} else {
				o.del("schemes")
			}
		}
	} else if v, ok := o.get("scheme"); ok {
		o.rename("scheme", "schemes")
		o.set("schemes", append(append([]byte{'['}, v...), ']'))
	}
	return o.bytes()
}

// TranslateResult translates the result of method m (a unary result or one
// stream event's result) from one version to the other. Task, Message,
// status and artifact updates, the 1.0 wrappers and push configs are
// translated; a 1.0 status update that reaches a terminal or interrupted
// state gets final=true in 0.3, since 1.0 ends the stream there without a
// flag. The agent card of GetExtendedAgentCard is not translated here
// (UnsupportedOperation). A result of an unexpected shape is an
// InvalidAgentResponse *Error.
func TranslateResult(from, to Version, m Method, result json.RawMessage) (json.RawMessage, error) {
	if !from.valid() || !to.valid() {
		return nil, fmt.Errorf("wire: cannot translate from A2A %q to %q", from, to)
	}
	if from == to {
		return result, nil
	}
	if !validJSON(result) {
		return nil, InvalidAgentResponse("the agent's result is not JSON")
	}
	out, err := translateResult(to, m, result)
	if err != nil {
		return nil, err
	}
	return compact(out), nil
}

func translateResult(to Version, m Method, result json.RawMessage) (json.RawMessage, error) {
	switch m {
	case MethodSend, MethodStream, MethodSubscribe:
		if to == V10 {
			return event03To10(m, result)
		}
		return event10To03(m, result)
	case MethodGetTask, MethodCancelTask:
		if firstByte(result) != '{' {
			return nil, InvalidAgentResponse("the agent's task is not an object")
		}
		return shapesTo(to).task(result), nil
	case MethodPushSet, MethodPushGet:
		if firstByte(result) != '{' {
			return nil, InvalidAgentResponse("the agent's push config is not an object")
		}
		return translatePushConfig(result, to), nil
	case MethodPushList:
		return translatePushList(result, to)
	case MethodPushDelete:
		if to == V10 {
			return json.RawMessage("{}"), nil // google.protobuf.Empty
		}
		return json.RawMessage("null"), nil
	case MethodExtendedCard:
		return nil, UnsupportedOperation("agent cards are not translated between A2A versions here")
	}
	return nil, UnsupportedOperation(fmt.Sprintf("%s results have no A2A %s equivalent", m, to))
}

// event03To10 wraps a 0.3 send result or stream event in the 1.0 member
// that names its type.
func event03To10(m Method, b []byte) (json.RawMessage, error) {
	if out, ok := shapes10.wrapEvent(m, b); ok {
		return out, nil
	}
	return nil, InvalidAgentResponse(fmt.Sprintf("the agent's %s result is neither a task nor a message nor an update", MethodName(m, V03)))
}

// event10To03 unwraps a 1.0 send result or stream event into the 0.3
// object, marked with its kind.
func event10To03(m Method, b []byte) (json.RawMessage, error) {
	var buf [4]member
	ms, _ := splitObject(b, buf[:0])
	if out, ok := shapes03.unwrapEvent(m, ms); ok {
		return out, nil
	}
	if kind03(b) == "task" { // a bare Task where a wrapper belongs: read it kindly
		return shapes03.task(b), nil
	}
	return nil, InvalidAgentResponse(fmt.Sprintf("the agent's %s result has none of task, message, statusUpdate, artifactUpdate", MethodName(m, V10)))
}

// kind03 is the type of a 0.3 object: its "kind", or, when it has none,
// what its members say.
func kind03(b []byte) string {
	var buf [12]member
	ms, ok := splitObject(b, buf[:0])
	if !ok {
		return ""
	}
	var has struct{ id, taskID, status, artifact, parts bool }
	for _, m := range ms {
		switch {
		case m.is("kind"):
			if k, ok := unquote(m.val); ok {
				return k
			}
		case m.is("id"):
			has.id = true
		case m.is("taskId"):
			has.taskID = true
		case m.is("status"):
			has.status = true
		case m.is("artifact"):
			has.artifact = true
		case m.is("parts"):
			has.parts = true
		}
	}
	switch {
	case has.artifact:
		return "artifact-update"
	case has.status && has.id:
		return "task"
	case has.status && has.taskID:
		return "status-update"
	case has.parts:
		return "message"
	}
	return ""
}

// setKind marks a 0.3 object with its kind, or removes the mark for 1.0.
func setKind(o *object, kind string, to Version) {
	if to == V10 {
		o.del("kind")
	} else {
		o.set("kind", quote(kind))
	}
}

// The translations into each version, as shapes tables.
var (
	shapes10 = &shapes{
		mark:  func(o *object, kind string) { setKind(o, kind, V10) },
		role:  V10,
		state: func(v []byte) []byte { return translateState(v, V10) },
		part:  func(b []byte) []byte { return translatePart(b, V10) },
		status: func(o *object) {
			if v, ok := o.get("timestamp"); ok {
				o.set("timestamp", timestamp10(v))
			}
		},
		final: func(o *object, _ []byte) { o.del("final") },
	}
	shapes03 = &shapes{
		mark:  func(o *object, kind string) { setKind(o, kind, V03) },
		role:  V03,
		state: func(v []byte) []byte { return translateState(v, V03) },
		part:  func(b []byte) []byte { return translatePart(b, V03) },
		final: final03,
	}
)

// shapesTo is the translation into version to.
func shapesTo(to Version) *shapes {
	if to == V10 {
		return shapes10
	}
	return shapes03
}

// final03 is a 0.3 status update's final flag: true when its state is
// terminal or interrupted, where 1.0 ends the stream without a flag.
func final03(o *object, status []byte) {
	var state string
	if so, ok := parseObject(status); ok {
		sv, _ := so.get("state")
		s, _ := unquote(sv)
		state = NormalizeState(s)
	}
	o.set("final", jsonBool(terminal(state) || interrupted(state)))
}

func translateState(v []byte, to Version) []byte {
	s, ok := unquote(v)
	if !ok {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 || n >= len(states) {
			return v
		}
		s = states[n].v03
	}
	if to == V10 {
		return quote(stateTo10(s))
	}
	return quote(NormalizeState(s))
}

func translateRole(v []byte, to Version) []byte {
	s, ok := unquote(v)
	if !ok {
		switch string(v) {
		case "1":
			s = "user"
		case "2":
			s = "agent"
		default:
			return v
		}
	}
	switch s {
	case "user", "ROLE_USER":
		s = "user"
	case "agent", "ROLE_AGENT":
		s = "agent"
	default:
		return v
	}
	if to == V10 {
		if s == "user" {
			return quote("ROLE_USER")
		}
		return quote("ROLE_AGENT")
	}
	return quote(s)
}

// timestamp10 makes a 0.3 timestamp acceptable to 1.0, whose ProtoJSON
// Timestamp needs a zone: 0.3 servers often send local-looking times
// without one ("2025-04-02T16:59:25.331844"), which are UTC by §5.6.1.
func timestamp10(v []byte) []byte {
	s, ok := unquote(v)
	if !ok {
		return v
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return v
	}
	if _, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return quote(s + "Z")
	}
	return v
}

// 0.3 file members and the 1.0 part members they become.
var fileMembers = [...]struct{ v03, v10 string }{
	{"bytes", "raw"},
	{"uri", "url"},
	{"mimeType", "mediaType"},
	{"name", "filename"},
}

// translatePart translates a part: 0.3 {kind: text|file|data, text |
// file: {bytes|uri, mimeType, name} | data} ↔ 1.0 flat {text | raw | url |
// data, mediaType, filename}. metadata and unknown members stay on the
// part.
func translatePart(b []byte, to Version) []byte {
	o, ok := parseObject(b)
	if !ok {
		return b
	}
	if to == V10 {
		kind, _ := o.del("kind")
		_, isFile := o.get("file")
		if k, _ := unquote(kind); k == "file" || (k == "" && isFile) {
			file, _ := o.del("file")
			if fo, ok := parseObject(file); ok {
				for _, m := range fo.ms {
					for _, fm := range fileMembers {
						if m.is(fm.v03) {
							m = member{key: []byte(fm.v10), val: m.val}
							break
						}
					}
					o.put(m)
				}
			}
		}
		return o.bytes()
	}
	_, hasText := o.get("text")
	_, hasRaw := o.get("raw")
	_, hasURL := o.get("url")
	_, hasData := o.get("data")
	switch {
	case hasText || hasData:
		kind := "text"
		if !hasText {
			kind = "data"
		}
		o.del("mediaType")
		o.del("filename")
		o.set("kind", quote(kind))
	case hasRaw || hasURL:
		file := &object{}
		for _, fm := range fileMembers {
			if v, ok := o.del(fm.v10); ok {
				file.set(fm.v03, v)
			}
		}
		o.set("kind", quote("file"))
		o.set("file", file.bytes())
	}
	return o.bytes()
}

// translatePushList translates the push configs of a task: a 0.3 array ↔
// 1.0 {configs: [...], nextPageToken}.
func translatePushList(b []byte, to Version) (json.RawMessage, error) {
	each := func(c []byte) []byte { return translatePushConfig(c, to) }
	if to == V10 {
		if firstByte(b) != '[' {
			return nil, InvalidAgentResponse("the agent's push config list is not an array")
		}
		return wrap("configs", mapArray(b, each)), nil
	}
	o, ok := parseObject(b)
	if !ok {
		return nil, InvalidAgentResponse("the agent's push config list is not an object")
	}
	configs, ok := o.get("configs")
	if !ok || isNull(configs) {
		return json.RawMessage("[]"), nil
	}
	return mapArray(configs, each), nil
}

// TranslateError translates an error from one version's peer for the
// other. 1.0 only adds codes, so only errors going to 0.3 can change:
// ExtensionSupportRequired (-32008) and VersionNotSupported (-32009),
// which 0.3 does not know, become InvalidRequest (-32600: both say the
// request cannot be served as sent), message and data kept.
func TranslateError(from, to Version, e *Error) *Error {
	if e == nil || from == to || to != V03 {
		return e
	}
	switch e.Code {
	case CodeExtensionSupportRequired, CodeVersionNotSupported:
		return &Error{Code: CodeInvalidRequest, Message: e.Message, Data: e.Data}
	}
	return e
}
