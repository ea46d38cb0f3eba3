package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// The 0.3 HTTP+JSON of the official Go SDK (github.com/a2aproject/a2a-go/v2,
// package a2acompat/a2av0), on both sides of the meter. It is a dialect of
// its own, spoken by every 0.3 REST client and server built on that SDK, and
// unlike the specification's 0.3 binding (§3.2.3: /v1 paths, the 0.3
// proto's ProtoJSON) in every respect but the HTTP verbs:
//
//   - Paths are the 1.0 paths, without /v1 and without tenants:
//     POST /message:send, POST /message:stream, GET /tasks/{id}
//     (?historyLength), POST /tasks/{id}:cancel, POST /tasks/{id}:subscribe,
//     POST|GET /tasks/{id}/pushNotificationConfigs,
//     GET|DELETE /tasks/{id}/pushNotificationConfigs/{configId},
//     GET /extendedAgentCard (and GET /tasks, which 0.3 JSON-RPC lacks).
//     Its client sends the interface's version as A2A-Version (0.3); its
//     server reads no version.
//   - Bodies, results and stream events are the 0.3 JSON-RPC objects (the
//     params of the method; a Task or Message with its "kind"; the four
//     event kinds, status updates with "final"), with every object key, at
//     every depth, metadata and data parts included, turned to snake_case
//     (messageId → message_id, URLField → url_field) on the way out and
//     back to camelCase (message_id → messageId) on the way in.
//   - A send's configuration.blocking absent means blocking, as in 0.3
//     JSON-RPC. Cancel and subscribe have no body. A push config is created
//     from the bare PushNotificationConfig, and read back as
//     {task_id, push_notification_config}; lists are bare arrays; a delete
//     answers 200 with an empty body.
//   - Errors are a google.rpc.Status ({"error":{code,status,message,
//     details:[ErrorInfo{reason,domain:"a2a-protocol.org"}]}}), with the
//     HTTP status of 1.0 (its client reads only the reason, and only from
//     a body whose Content-Type starts with application/json; its server
//     sends application/problem+json). In a stream an error is an event
//     whose data is that body.
//
// Keys that only differ by case or underscores before conversion can be the
// same key after it ({"task_id","taskId"}): the dialect's peers keep one of
// them at random, so an object whose keys collide once converted is
// refused.

// Dialect is the variant of the HTTP+JSON binding a buyer or an agent
// speaks.
type Dialect uint8

const (
	DialectSpec  Dialect = iota // the specification's (1.0, and 0.3 under /v1)
	DialectSDK03                // a2a-go's 0.3 HTTP+JSON (see the top of rest_sdk03.go)
)

// String names the dialect for logs.
func (d Dialect) String() string {
	if d == DialectSDK03 {
		return "a2a-go-0.3"
	}
	return "spec"
}

// RESTVersionOf tells, before the call is parsed, the version and dialect
// an HTTP+JSON call on path is to be answered in, so that errors found
// before parsing (credentials, listing) are too: /v1 paths are the
// specification's 0.3; other paths are 1.0 when the A2A-Version header (or
// the query's A2A-Version) says 1.0 or a version the meter does not know,
// else (0.3, or none) the SDK dialect. ParseREST decides for good: a call
// it reads in the dialect is the one whose Request has Version 0.3 on a
// path without /v1 (it answers a 1.0 message sent without the header in
// 1.0, as a version disagreement).
func RESTVersionOf(path, versionHeader string, query url.Values) (Version, Dialect) {
	if strings.HasPrefix(path, "/v1/") {
		return V03, DialectSpec
	}
	h := strings.TrimSpace(versionHeader)
	if h == "" {
		h = strings.TrimSpace(query.Get("A2A-Version"))
	}
	if v, err := ParseVersion(h); err == nil && v == V03 {
		return V03, DialectSDK03
	}
	return V10, DialectSpec
}

// ---- keys ----

// sdkSnake is a key as the dialect writes it: every upper-case letter is
// lowered, and "_" put before it when it follows a lower-case letter, or
// an upper-case one and precedes a lower-case one.
func sdkSnake(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || ('A' <= c && c <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i, r := range rs {
		if !unicode.IsUpper(r) {
			b.WriteRune(r)
			continue
		}
		if i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// sdkCamel is a key as the dialect reads it: each "_" is dropped and the
// ASCII letter after it raised (message_id → messageId); a key without "_"
// is left as it is, so camelCase keys are read too.
func sdkCamel(s string) string {
	if strings.IndexByte(s, '_') < 0 {
		return s
	}
	return lowerCamel(s)
}

// rekey renames every object key in the JSON value b, at every depth, with
// key. ok is false when b is not JSON or when two keys of one object are
// the same once renamed. The result is compact when b is.
func rekey(b []byte, key func(string) string) ([]byte, bool) {
	out := make([]byte, 0, len(b)+len(b)/8)
	return rekeyValue(out, b, key)
}

func rekeyValue(dst, b []byte, key func(string) string) ([]byte, bool) {
	switch firstByte(b) {
	case '{':
		var buf [8]member
		ms, ok := splitObject(b, buf[:0])
		if !ok {
			return dst, false
		}
		var names []string
		dst = append(dst, '{')
		for i, m := range ms {
			name := m.name()
			k := key(name)
			if len(ms) > 1 {
				if names == nil {
					names = make([]string, 0, len(ms))
				}
				if !appendUnique(&names, k) {
					return dst, false
				}
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			if k == name {
				dst = append(append(append(dst, '"'), m.key...), '"')
			} else {
				dst = append(dst, quote(k)...)
			}
			dst = append(dst, ':')
			if dst, ok = rekeyValue(dst, m.val, key); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case '[':
		var buf [8][]byte
		els, ok := splitArray(b, buf[:0])
		if !ok {
			return dst, false
		}
		dst = append(dst, '[')
		for i, el := range els {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = rekeyValue(dst, el, key); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case 0:
		return dst, false
	}
	return append(dst, bytes.TrimSpace(b)...), true
}

// appendUnique appends k to names unless it is there already; linear for
// the few keys of A2A objects, a set beyond.
func appendUnique(names *[]string, k string) bool {
	ns := *names
	if len(ns) < 32 {
		for _, n := range ns {
			if n == k {
				return false
			}
		}
		*names = append(ns, k)
		return true
	}
	seen := make(map[string]struct{}, len(ns)+1)
	for _, n := range ns {
		seen[n] = struct{}{}
	}
	if _, dup := seen[k]; dup {
		return false
	}
	*names = append(ns, k)
	return true
}

// toSDK03 is a JSON value with its keys in snake_case; a value that
// cannot be converted (keys colliding once converted) is returned as it
// is.
func toSDK03(b []byte) []byte {
	out, ok := rekey(b, sdkSnake)
	if !ok {
		return compact(b)
	}
	return compact(out)
}

// ---- buyer side, in ----

// parseSDK03 finishes ParseREST for a call on a 1.0 path that names no
// version, or 0.3: the SDK dialect. r has the route's method.
// errSDK03Is10 is parseSDK03's answer to a send whose message is a 1.0
// one (role ROLE_…): a 1.0 client's, which names no version or says 0.3.
var errSDK03Is10 = InvalidRequest("the request carries an A2A 1.0 message (role ROLE_…) but names A2A-Version 0.3; send A2A-Version: 1.0 (A2A 0.3 messages have role \"user\")")

func parseSDK03(r *Request, verb, path string, rt restRoute, task, config string, query url.Values, contentType string, body []byte) (*Request, *Error) {
	r.Version = V03
	r.Name = MethodName(rt.method, V03)
	if r.Method == MethodListTasks {
		return r, UnsupportedOperation("GET /tasks (tasks/list) has no A2A 0.3 JSON-RPC equivalent; list tasks with A2A 1.0: GET /tasks and A2A-Version: 1.0")
	}
	if trimmed := bytes.TrimSpace(body); bytes.Equal(trimmed, []byte("null")) {
		body = nil
	}
	var members []member
	if verb == http.MethodPost && len(bytes.TrimSpace(body)) > 0 {
		if !restContentTypeOK(contentType) {
			return r, ContentTypeNotSupported(fmt.Sprintf("Content-Type %q is not supported: send %s", contentType, ContentTypeJSON))
		}
		if !validJSON(body) {
			return r, ParseError("")
		}
		camel, ok := rekey(body, sdkCamel)
		if !ok {
			return r, InvalidParams("two keys of one object of the body are the same once read as camelCase (as task_id and taskId are)")
		}
		if members, ok = splitObject(camel, nil); !ok {
			return r, InvalidRequest("the request body must be a JSON object")
		}
		if (r.Method == MethodSend || r.Method == MethodStream) && role10(members) {
			// A 1.0 message on a path both versions have: with no
			// A2A-Version header ParseREST reads it as 1.0; with a header
			// that says 0.3 it is a disagreement, refused.
			r.Version, r.Name = V10, MethodName(rt.method, V10)
			return r, errSDK03Is10
		}
	}
	var params []byte
	var err *Error
	if r.Method == MethodSend || r.Method == MethodStream {
		params = (&object{ms: members}).bytes() // MessageSendParams, as they are
	} else if params, err = restParams03(r.Method, task, config, query, members); err != nil {
		return r, err
	}
	if err := restUnambiguous(r.Method, params); err != nil {
		return r, err
	}
	parsed, err := ParseRequest(synthesize(r.Method, V03, params), string(V03))
	if err != nil {
		return r, err
	}
	parsed.Binding = BindingREST
	return parsed, nil
}

// role10 reports whether a send body's message has a 1.0 role.
func role10(body []member) bool {
	for _, m := range body {
		if !m.is("message") {
			continue
		}
		var buf [12]member
		ms, _ := splitObject(m.val, buf[:0])
		for _, mm := range ms {
			if mm.is("role") {
				s, _ := unquote(mm.val)
				return strings.HasPrefix(s, "ROLE_")
			}
		}
	}
	return false
}

// ---- buyer side, out ----

// SDK03Result is the dialect's answer to a successful call of m: the HTTP
// status (200) and the body, from result, the 0.3 JSON-RPC result, with
// its keys in snake_case. A push config delete answers an empty body.
func SDK03Result(m Method, result json.RawMessage) (status int, body []byte) {
	result = bytes.TrimSpace(result)
	if m == MethodPushDelete {
		return http.StatusOK, nil
	}
	if len(result) == 0 || isNull(result) {
		return http.StatusOK, []byte("{}")
	}
	return http.StatusOK, toSDK03(result)
}

// SDK03Event is the SSE data of one event of a dialect stream, from
// result, the 0.3 JSON-RPC result of that event (a Task, Message,
// status-update or artifact-update with its kind), keys in snake_case. It
// is a single line.
func SDK03Event(m Method, result json.RawMessage) []byte {
	return toSDK03(bytes.TrimSpace(result))
}

// SDK03Error is the dialect's answer to a failed call: the HTTP status and
// google.rpc.Status body of RESTError in 1.0 (see its table). A nil e is
// an internal error.
func SDK03Error(e *Error) (status int, body []byte) {
	return RESTError(V10, e)
}

// SDK03ErrorEvent is an error in the middle of a dialect stream: an SSE
// event whose data is the SDK03Error body.
func SDK03ErrorEvent(e *Error) []byte {
	return RESTErrorEvent(V10, e)
}

// ---- agent side ----

// SDK03Upstream is the HTTP request to make to an agent whose 0.3
// HTTP+JSON interface at baseURL speaks the dialect, for r, a request of
// any binding and version (translated to 0.3 when it is 1.0): the HTTP
// method, the URL and the body (nil when the dialect sends none; send it
// with Content-Type application/json). A send states
// configuration.blocking. A method 0.3 lacks (ListTasks) is an
// UnsupportedOperation *Error; params without the ids the path needs are
// an InvalidParams *Error.
func SDK03Upstream(r *Request, baseURL string) (httpMethod, rawURL string, body []byte, err error) {
	if r == nil || !r.Method.valid() {
		return "", "", nil, fmt.Errorf("wire: SDK03Upstream needs a request from ParseRequest or ParseREST")
	}
	params, e := paramsIn(r, V03)
	if e != nil {
		return "", "", nil, e
	}
	prefix := strings.TrimRight(baseURL, "/")
	str := func(name string) string { return stringMember(params, name) }
	taskField := "id"
	if r.Method == MethodPushSet {
		taskField = "taskId"
	}
	task := str(taskField)
	if r.Method.TaskScoped() && task == "" {
		return "", "", nil, InvalidParams(fmt.Sprintf("params.%s (the task id) is required", taskField))
	}
	tasks := prefix + "/tasks/" + escapeSegment(task)
	switch r.Method {
	case MethodSend, MethodStream:
		return http.MethodPost, prefix + sendPath(r.Method), toSDK03(sendBodySDK03(r, params)), nil
	case MethodGetTask:
		return http.MethodGet, tasks + scalarQuery(params, "id"), nil, nil
	case MethodCancelTask:
		return http.MethodPost, tasks + ":cancel", nil, nil
	case MethodSubscribe:
		return http.MethodPost, tasks + ":subscribe", nil, nil
	case MethodPushSet:
		o, _ := parseObject(params)
		var cfg []byte
		if o != nil {
			cfg, _ = o.get("pushNotificationConfig")
		}
		if firstByte(cfg) != '{' {
			return "", "", nil, InvalidParams("params.pushNotificationConfig is required")
		}
		return http.MethodPost, tasks + "/pushNotificationConfigs", toSDK03(cfg), nil
	case MethodPushGet, MethodPushDelete:
		config := str("pushNotificationConfigId")
		if config == "" {
			config = task // the 0.3 SDKs' default config id
		}
		u := tasks + "/pushNotificationConfigs/" + escapeSegment(config)
		if r.Method == MethodPushDelete {
			return http.MethodDelete, u, nil, nil
		}
		return http.MethodGet, u, nil, nil
	case MethodPushList:
		return http.MethodGet, tasks + "/pushNotificationConfigs", nil, nil
	case MethodExtendedCard:
		return http.MethodGet, prefix + "/extendedAgentCard", nil, nil
	}
	return "", "", nil, fmt.Errorf("wire: no route of the a2a-go 0.3 HTTP+JSON for %s", r.Method)
}

// sendBodySDK03 is 0.3 MessageSendParams as the dialect's body: without a
// tenant, and, for message/send, with configuration.blocking stated.
func sendBodySDK03(r *Request, params []byte) []byte {
	o, ok := parseObject(params)
	if !ok {
		o = &object{}
	}
	o.del("tenant")
	if r.Method == MethodSend {
		cfg, _ := o.get("configuration")
		co, ok := parseObject(cfg)
		if !ok {
			co = &object{}
		}
		co.set("blocking", jsonBool(r.Blocking()))
		o.set("configuration", co.bytes())
	}
	return o.bytes()
}

// FromSDK03Response turns a dialect agent's answer to a call of m into
// the 0.3 JSON-RPC result, or the error, as FromRESTResponse does for the
// specification's binding (errors are read the same way). A 2xx body has
// its keys read back to camelCase; an empty one is the result of a delete
// (null); a send's result must be a task or a message. A success body that
// is not JSON, not of the expected shape, or whose keys collide once read
// is an InvalidAgentResponse.
func FromSDK03Response(m Method, status int, contentType string, body []byte) (json.RawMessage, *Error) {
	raw, final, e := restAnswer(m, status, contentType, body, json.RawMessage("null"), true)
	if final != nil || e != nil {
		return final, e
	}
	result, ok := rekey(raw, sdkCamel)
	if !ok {
		return nil, InvalidAgentResponse("two keys of one object of the agent's answer are the same once read as camelCase")
	}
	return sdk03ResultShape(m, result)
}

// sdk03ResultShape checks that a result has the shape of m's.
func sdk03ResultShape(m Method, result []byte) (json.RawMessage, *Error) {
	switch m {
	case MethodSend:
		switch kind03(result) {
		case "task", "message":
		default:
			return nil, InvalidAgentResponse("the agent's send result is neither a task nor a message")
		}
	case MethodStream, MethodSubscribe:
		switch kind03(result) {
		case "task", "message", "status-update", "artifact-update":
		default:
			return nil, InvalidAgentResponse("the agent's stream event is none of task, message, status-update, artifact-update")
		}
	case MethodPushList:
		if firstByte(result) != '[' {
			return nil, InvalidAgentResponse("the agent's push config list is not an array")
		}
	case MethodPushDelete:
	default:
		if firstByte(result) != '{' {
			return nil, InvalidAgentResponse("the agent's answer is not a JSON object")
		}
	}
	return compact(result), nil
}

// FromSDK03Event turns the data of one SSE event of a dialect agent's
// stream into the 0.3 JSON-RPC result of that event, or the error the
// event reports (a google.rpc.Status, or a bare JSON-RPC error).
func FromSDK03Event(m Method, data []byte) (json.RawMessage, *Error) {
	raw, e := restEventPayload(m, data)
	if e != nil {
		return nil, e
	}
	result, ok := rekey(raw, sdkCamel)
	if !ok {
		return nil, InvalidAgentResponse("two keys of one object of the agent's stream event are the same once read as camelCase")
	}
	if !m.Streaming() {
		m = MethodStream
	}
	return sdk03ResultShape(m, result)
}

// ---- telling the dialects apart ----

// A 0.3 agent card says an interface speaks HTTP+JSON, not which: a
// specification server routes /v1/..., a dialect server routes the 1.0
// paths. Two GETs of a task that does not exist tell them apart without
// side effects: DialectProbeURLs gives them, the /v1 one first. The
// interface speaks the dialect only when the /v1 one misses its route
// (ProbeMissesRoute) and the other is answered in the dialect
// (ProbeAnswersSDK03); in every other case it is taken to be the
// specification's, which the card claims. A server that offers both (1.0
// at the root, 0.3 under /v1, as the specification allows) is found to be
// the specification's, since its /v1 route exists.

// DialectProbeURLs are the URLs of the two probes of an interface at
// baseURL, for a task id no agent has.
func DialectProbeURLs(baseURL, taskID string) (spec, sdk string) {
	prefix := strings.TrimRight(baseURL, "/")
	id := escapeSegment(taskID)
	return prefix + "/v1/tasks/" + id, prefix + "/tasks/" + id
}

// ProbeMissesRoute reports whether the answer to the /v1 probe says the
// path does not exist: a 404 or 405 without an A2A error body (a task not
// found is an A2A error; a router's "404 page not found" or
// {"detail":"Not Found"} is not).
func ProbeMissesRoute(status int, body []byte) bool {
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		return false
	}
	body = bytes.TrimSpace(body)
	if !validJSON(body) {
		return true
	}
	var buf [8]member
	ms, ok := splitObject(body, buf[:0])
	if !ok {
		return true
	}
	if isErrorBody(ms) {
		return false
	}
	// a2a-python's {"message": "..."}
	return !(len(ms) == 1 && ms[0].is("message") && firstByte(ms[0].val) == '"')
}

// ProbeAnswersSDK03 reports whether the answer to the probe of the 1.0
// path is the dialect's: a JSON object of a 2xx, or a google.rpc.Status
// whose ErrorInfo is of the a2a-protocol.org domain.
func ProbeAnswersSDK03(status int, body []byte) bool {
	body = bytes.TrimSpace(body)
	if !validJSON(body) || firstByte(body) != '{' {
		return false
	}
	if status >= 200 && status <= 299 {
		return true
	}
	var buf [8]member
	ms, _ := splitObject(body, buf[:0])
	for _, m := range ms {
		if !m.is("error") || firstByte(m.val) != '{' {
			continue
		}
		var dbuf [6]member
		es, _ := splitObject(m.val, dbuf[:0])
		for _, e := range es {
			if !e.is("details") {
				continue
			}
			els, _ := splitArray(e.val, nil)
			for _, d := range els {
				if stringMember(d, "@type") == errorInfoType && stringMember(d, "domain") == a2aDomain {
					return true
				}
			}
		}
	}
	return false
}
