package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The agent side of the REST binding: the HTTP request to an agent that
// offers only HTTP+JSON (RESTUpstream), and its answers and stream events
// read back as JSON-RPC results and errors (FromRESTResponse,
// FromRESTEvent).

// RESTUpstream is the HTTP request to make to an agent's HTTP+JSON
// interface of version v (the agent's) for r, a request of any binding
// and version (translated to v when they differ): the HTTP method, the URL
// (baseURL, the interface's url, then /v1 in 0.3 or /{tenant} in 1.0 when
// tenant, the interface's tenant, is set, then the operation's path and
// query) and the body (nil for GET and DELETE). Send it with the
// Content-Type RESTContentType(v). The request's own "tenant" param (the
// buyer's, for the meter) is not sent; 0.3 has no tenants.
//
// Subscribe is sent as GET, as the proto (normative, §1.4) maps it and as
// 0.3 reference servers only accept; cancel as POST with the fields not in
// the path (0.3: {name}); a 0.3 push config as the
// CreateTaskPushNotificationConfigRequest the 0.3 reference server parses;
// a 0.3 push config get or delete without a config id names the task id
// (the 0.3 SDKs' default config id). Scalar params of GET operations
// become query parameters; objects cannot (§11.5) and are dropped. A
// method v lacks (ListTasks in 0.3) is an UnsupportedOperation *Error;
// params without the ids the path needs are an InvalidParams *Error.
func RESTUpstream(r *Request, v Version, baseURL, tenant string) (httpMethod, rawURL string, body []byte, err error) {
	if r == nil || !r.Method.valid() {
		return "", "", nil, fmt.Errorf("wire: RESTUpstream needs a request from ParseRequest or ParseREST")
	}
	if !v.valid() {
		return "", "", nil, fmt.Errorf("wire: unknown A2A version %q", v)
	}
	params, e := paramsIn(r, v)
	if e != nil {
		return "", "", nil, e
	}
	prefix := strings.TrimRight(baseURL, "/")
	if v == V03 {
		prefix += "/v1"
	} else if tenant != "" {
		prefix += "/" + escapeSegment(tenant)
	}
	str := func(name string) string { return stringMember(params, name) }
	need := func(name, what string) (string, *Error) {
		s := str(name)
		if s == "" {
			return "", InvalidParams(fmt.Sprintf("params.%s (%s) is required", name, what))
		}
		return s, nil
	}
	// The task is params.id, but params.taskId for push configs (0.3: for
	// set only, its get, list and delete name the task "id").
	taskField := "id"
	switch r.Method {
	case MethodPushSet:
		taskField = "taskId"
	case MethodPushGet, MethodPushList, MethodPushDelete:
		if v == V10 {
			taskField = "taskId"
		}
	}
	var task string
	if r.Method.TaskScoped() {
		var e *Error
		if task, e = need(taskField, "the task id"); e != nil {
			return "", "", nil, e
		}
	}
	tasks := prefix + "/tasks/" + escapeSegment(task)
	switch r.Method {
	case MethodSend, MethodStream:
		if v == V03 {
			return http.MethodPost, prefix + sendPath(r.Method), sendParamsToProto03(r, params), nil
		}
		return http.MethodPost, prefix + sendPath(r.Method), without(params, "tenant"), nil
	case MethodGetTask:
		return http.MethodGet, tasks + scalarQuery(params, "id", "tenant"), nil, nil
	case MethodListTasks:
		return http.MethodGet, prefix + "/tasks" + scalarQuery(params, "tenant"), nil, nil
	case MethodCancelTask:
		if v == V03 {
			return http.MethodPost, tasks + ":cancel", wrap("name", quote("tasks/"+task)), nil
		}
		return http.MethodPost, tasks + ":cancel", without(params, "id", "tenant"), nil
	case MethodSubscribe:
		// 1.0: POST, as the specification's table says (the official SDK's
		// server routes only POST); 0.3 servers route GET.
		if v == V10 {
			return http.MethodPost, tasks + ":subscribe", []byte("{}"), nil
		}
		return http.MethodGet, tasks + ":subscribe", nil, nil
	case MethodPushSet:
		if v == V03 {
			return http.MethodPost, tasks + "/pushNotificationConfigs", pushSetBody03(task, params), nil
		}
		return http.MethodPost, tasks + "/pushNotificationConfigs", without(params, "taskId", "tenant"), nil
	case MethodPushGet, MethodPushDelete:
		var config string
		if v == V03 {
			if config = str("pushNotificationConfigId"); config == "" {
				config = task
			}
		} else {
			var e *Error
			if config, e = need("id", "the push notification config id"); e != nil {
				return "", "", nil, e
			}
		}
		u := tasks + "/pushNotificationConfigs/" + escapeSegment(config)
		if r.Method == MethodPushDelete {
			return http.MethodDelete, u, nil, nil
		}
		return http.MethodGet, u, nil, nil
	case MethodPushList:
		return http.MethodGet, tasks + "/pushNotificationConfigs" + scalarQuery(params, "id", "taskId", "tenant"), nil, nil
	case MethodExtendedCard:
		if v == V03 {
			return http.MethodGet, prefix + "/card", nil, nil
		}
		return http.MethodGet, prefix + "/extendedAgentCard", nil, nil
	}
	return "", "", nil, fmt.Errorf("wire: no REST route for %s", r.Method)
}

// sendPath is the path of a send (MethodSend, MethodStream), after the
// prefix.
func sendPath(m Method) string {
	if m == MethodStream {
		return "/message:stream"
	}
	return "/message:send"
}

// escapeSegment escapes a path segment, ":" included, so that an id never
// reads as a custom verb.
func escapeSegment(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
}

// without is the params object without the named members ({} when there
// are none).
func without(params []byte, names ...string) []byte {
	o, ok := parseObject(params)
	if !ok {
		return []byte("{}")
	}
	for _, n := range names {
		o.del(n)
	}
	return compact(o.bytes())
}

// scalarQuery renders the scalar members of params (strings, numbers,
// booleans, and arrays of them, repeated) as a query string, "?..." or "".
func scalarQuery(params []byte, skip ...string) string {
	var buf [12]member
	ms, _ := splitObject(params, buf[:0])
	q := url.Values{}
	add := func(k string, v []byte) {
		switch firstByte(v) {
		case '"':
			if s, ok := unquote(v); ok {
				q.Add(k, s)
			}
		case '{', '[', 'n', 0:
		default:
			q.Add(k, string(bytes.TrimSpace(v)))
		}
	}
	for _, m := range ms {
		name := m.name()
		if slices.Contains(skip, name) {
			continue
		}
		if firstByte(m.val) == '[' {
			els, _ := splitArray(m.val, nil)
			for _, el := range els {
				add(name, el)
			}
			continue
		}
		add(name, m.val)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// sendParamsToProto03 renders 0.3 MessageSendParams as the 0.3
// SendMessageRequest ProtoJSON, stating blocking (see ParseREST's
// "Bodies").
func sendParamsToProto03(r *Request, params []byte) []byte {
	o, ok := parseObject(params)
	if !ok {
		o = &object{}
	}
	o.del("tenant")
	if v, ok := o.get("message"); ok {
		o.set("message", shapesProto03.message(v))
	}
	cfg, hasCfg := o.get("configuration")
	if hasCfg && firstByte(cfg) == '{' {
		cfg = rest03SendConfig(cfg, toProto03)
	}
	if r.Method == MethodSend {
		co, ok := parseObject(cfg)
		if !ok {
			co = &object{}
		}
		co.set("blocking", jsonBool(r.Blocking()))
		cfg, hasCfg = co.bytes(), true
	}
	if hasCfg {
		o.set("configuration", cfg)
	}
	return compact(o.bytes())
}

// pushSetBody03 is the CreateTaskPushNotificationConfigRequest for 0.3
// params {taskId, pushNotificationConfig}.
func pushSetBody03(task string, params []byte) []byte {
	o, _ := parseObject(params)
	var inner []byte
	if o != nil {
		inner, _ = o.get("pushNotificationConfig")
	}
	if firstByte(inner) != '{' {
		inner = []byte("{}")
	}
	config := stringMember(inner, "id")
	if config == "" {
		config = task
	}
	c := &object{}
	c.set("name", quote("tasks/"+task+"/pushNotificationConfigs/"+config))
	c.set("pushNotificationConfig", inner)
	out := &object{}
	out.set("parent", quote("tasks/"+task))
	out.set("configId", quote(config))
	out.set("config", c.bytes())
	return compact(out.bytes())
}

// FromRESTResponse turns an agent's answer to a REST call of m in version
// v (the agent's) into what a JSON-RPC agent would have answered: the
// JSON-RPC result in that version, or the error. status, contentType and
// body are the HTTP response's. A 2xx answer is a success (a 204 or empty
// body is the result of a delete: {} in 1.0, null in 0.3); its body is the
// 1.0 result as is, or 0.3 ProtoJSON converted to the 0.3 JSON-RPC shapes
// (a streaming method answered with a single JSON object is read as one
// event). Any other status is an error, read from a google.rpc.Status
// body, a bare JSON-RPC error object, a {"message"} body, or from the
// status alone (below); the error's Data is the
// google.rpc.Status details, as 1.0 JSON-RPC error data. A success body
// that is not JSON, or not of the expected shape, is an
// InvalidAgentResponse.
//
// It reads an agent's error the other way round: a
// JSON-RPC code at the top level ({code,message,data}, 0.3) is taken as
// is; else the ErrorInfo reason (domain a2a-protocol.org, empty, or
// agentmarket.dev for the marketplace's reasons; the 0.3 names
// AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED and PARSE_ERROR too); else
// the HTTP status: 400 and other 4xx -32600, 404 -32001 for task
// operations and -32601 otherwise, 405 -32601, 409 -32002, 415 -32005,
// 422 -32602, 501 -32004, and 401, 403, 429, 5xx and anything else
// -32603 (an agent refusing the marketplace's credentials is not the
// buyer's fault, so never the marketplace's own -32040/-32041).
func FromRESTResponse(v Version, m Method, status int, contentType string, body []byte) (json.RawMessage, *Error) {
	deleted := json.RawMessage("{}")
	if v == V03 {
		deleted = json.RawMessage("null")
	}
	result, final, e := restAnswer(m, status, contentType, body, deleted, false)
	if final != nil || e != nil {
		return final, e
	}
	return restResultFrom(v, m, result)
}

// restAnswer reads the parts every REST agent's answer to m shares: an
// error status, a stream where one answer was expected, an empty body
// (deleted is the result of an empty push-config delete, also of a null
// one when nullDeletes), a body that is not JSON, and the envelope. It
// returns either the payload inside the envelope, or the final result or
// error.
func restAnswer(m Method, status int, contentType string, body []byte, deleted json.RawMessage, nullDeletes bool) (payload []byte, final json.RawMessage, e *Error) {
	body = bytes.TrimSpace(body)
	if status < 200 || status > 299 {
		return nil, nil, restErrorFrom(m, status, body)
	}
	mt, _, _ := strings.Cut(contentType, ";")
	if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
		return nil, nil, InvalidAgentResponse("the agent answered a stream where a single answer was expected")
	}
	if m == MethodPushDelete && (len(body) == 0 || nullDeletes && isNull(body)) {
		return nil, deleted, nil
	}
	if len(body) == 0 {
		return nil, nil, InvalidAgentResponse(fmt.Sprintf("the agent answered HTTP %d with an empty body", status))
	}
	if !validJSON(body) {
		return nil, nil, InvalidAgentResponse(fmt.Sprintf("the agent answered HTTP %d with a body that is not JSON", status))
	}
	payload, e = unenvelope(m, status, body)
	return payload, nil, e
}

// FromRESTEvent turns the data of one SSE event of an agent's REST stream
// (message:stream, tasks/{id}:subscribe) in version v into the result a
// JSON-RPC agent would have sent in that event: the 1.0 StreamResponse as
// is, or the 0.3 one unwrapped into its 0.3 JSON-RPC object. An error
// event (a google.rpc.Status or a bare JSON-RPC error, as sent with "event:
// error") is returned as the *Error.
func FromRESTEvent(v Version, m Method, data []byte) (json.RawMessage, *Error) {
	result, e := restEventPayload(m, data)
	if e != nil {
		return nil, e
	}
	if v != V03 {
		if firstByte(result) != '{' {
			return nil, InvalidAgentResponse("the agent sent a stream event that is not a JSON object")
		}
		return compact(result), nil
	}
	out, err := event03FromProto(m, result)
	if err != nil {
		return nil, err
	}
	return compact(out), nil
}

// restEventPayload reads what every REST agent's stream event shares
// (FromRESTEvent, FromSDK03Event): JSON data, which may be an error
// event or a JSON-RPC envelope.
func restEventPayload(m Method, data []byte) (json.RawMessage, *Error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || !validJSON(data) {
		return nil, InvalidAgentResponse("the agent sent a stream event that is not JSON")
	}
	return unenvelope(m, http.StatusOK, data)
}

// unenvelope reads a JSON success body (or event) that may nevertheless
// carry an error or a JSON-RPC envelope.
func unenvelope(m Method, status int, b []byte) (json.RawMessage, *Error) {
	var buf [8]member
	ms, ok := splitObject(b, buf[:0])
	if !ok {
		return b, nil
	}
	for _, mem := range ms {
		if mem.is("jsonrpc") {
			resp, err := ParseResponse(b)
			if err != nil {
				return nil, InvalidAgentResponse("the agent answered a malformed JSON-RPC response")
			}
			if resp.Error != nil {
				return nil, resp.Error
			}
			return resp.Result, nil
		}
	}
	if isErrorBody(ms) {
		if status < 400 {
			status = http.StatusInternalServerError
		}
		return nil, restErrorFrom(m, status, b)
	}
	return b, nil
}

// isErrorBody recognises an error object among success shapes: a
// google.rpc.Status ({"error":{...}}) or a bare JSON-RPC error ({code,
// message, data} with a negative integer code). No A2A result has these
// members alone.
func isErrorBody(ms []member) bool {
	hasError, hasCode := false, false
	for _, m := range ms {
		switch {
		case m.is("error"):
			hasError = firstByte(m.val) == '{'
		case m.is("code"):
			n, err := strconv.Atoi(string(m.val))
			hasCode = err == nil && n < 0
		case m.is("message"), m.is("data"):
		default:
			return false
		}
	}
	return hasError || hasCode
}

// restErrorFrom reads an agent's REST error.
func restErrorFrom(m Method, status int, body []byte) *Error {
	fallback := func() string {
		text := http.StatusText(status)
		if text == "" {
			return fmt.Sprintf("the agent answered HTTP %d", status)
		}
		return fmt.Sprintf("the agent answered HTTP %d %s", status, text)
	}
	var buf [8]member
	ms, ok := splitObject(body, buf[:0])
	if !ok || !validJSON(body) {
		return &Error{Code: codeForStatus(m, status), Message: fallback()}
	}
	var code, msg, data, status10 []byte
	var errStr string
	for _, mem := range ms {
		switch {
		case mem.is("code"):
			code = mem.val
		case mem.is("message"):
			msg = mem.val
		case mem.is("data"):
			data = mem.val
		case mem.is("error"):
			if firstByte(mem.val) == '{' {
				status10 = mem.val
			} else {
				errStr, _ = unquote(mem.val)
			}
		case mem.is("detail"): // the shape of many web frameworks' errors
			if errStr == "" {
				errStr, _ = unquote(mem.val)
			}
		}
	}
	text, _ := unquote(msg)
	if n, err := strconv.Atoi(string(code)); err == nil && n < 0 {
		// A bare JSON-RPC error: the code is exact.
		e := &Error{Code: n, Message: text}
		if text == "" {
			e.Message = fallback()
		}
		if !isNull(data) {
			e.Data = json.RawMessage(compact(data))
		}
		return e
	}
	if status10 != nil {
		return statusError(m, status, status10, fallback)
	}
	if text == "" {
		text = errStr
	}
	if text == "" {
		text = fallback()
	}
	return &Error{Code: codeForStatus(m, status), Message: text}
}

// statusError reads a google.rpc.Status.
func statusError(m Method, status int, st []byte, fallback func() string) *Error {
	var buf [6]member
	ms, _ := splitObject(st, buf[:0])
	var msg, details []byte
	for _, mem := range ms {
		switch {
		case mem.is("message"):
			msg = mem.val
		case mem.is("details"):
			details = mem.val
		}
	}
	e := &Error{Code: codeForStatus(m, status)}
	e.Message, _ = unquote(msg)
	if e.Message == "" {
		e.Message = fallback()
	}
	els, _ := splitArray(details, nil)
	for _, d := range els {
		if stringMember(d, "@type") != errorInfoType {
			continue
		}
		if c, ok := codeForReason(stringMember(d, "reason"), stringMember(d, "domain"), d); ok {
			e.Code = c
			break
		}
	}
	if len(els) > 0 {
		e.Data = json.RawMessage(compact(details))
	}
	return e
}

// restResultFrom converts a success body to the JSON-RPC result.
func restResultFrom(v Version, m Method, b []byte) (json.RawMessage, *Error) {
	if v != V03 {
		if m == MethodPushDelete && isNull(b) {
			return json.RawMessage("{}"), nil
		}
		if firstByte(b) != '{' {
			return nil, InvalidAgentResponse("the agent's answer is not a JSON object")
		}
		return compact(b), nil
	}
	var out []byte
	switch m {
	case MethodSend:
		r, err := sendResult03FromProto(b)
		if err != nil {
			return nil, err
		}
		out = r
	case MethodStream, MethodSubscribe:
		r, err := event03FromProto(m, b)
		if err != nil {
			return nil, err
		}
		out = r
	case MethodGetTask, MethodCancelTask:
		if firstByte(b) != '{' {
			return nil, InvalidAgentResponse("the agent's task is not an object")
		}
		out = shapesRPC03.task(b)
	case MethodPushSet, MethodPushGet:
		if firstByte(b) != '{' {
			return nil, InvalidAgentResponse("the agent's push config is not an object")
		}
		out = rest03PushConfig(b, toRPC03)
	case MethodPushList:
		switch firstByte(b) {
		case '{', '[':
			out = pushList03(b, toRPC03)
		default:
			return nil, InvalidAgentResponse("the agent's push config list is neither an object nor an array")
		}
	case MethodPushDelete:
		out = []byte("null")
	default:
		out = b
	}
	return compact(out), nil
}
