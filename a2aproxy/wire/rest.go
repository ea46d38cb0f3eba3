package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The HTTP+JSON (REST) binding (specification 1.0.1 §11, 0.3 §3.2.3 and
// §7), on both sides of the meter, through the one JSON-RPC pipeline:
// ParseREST turns a REST call into the Request a JSON-RPC client would
// have sent (Raw is that JSON-RPC request), RESTResult, RESTEvent and
// RESTError render the JSON-RPC answer as the REST answer, and
// RESTUpstream, FromRESTResponse and FromRESTEvent do the same toward an
// agent that offers only HTTP+JSON. With TranslateRequest and
// TranslateResult (between versions) every pairing of binding and version
// goes through the same Request and results.
//
// The rules are in the docs of ParseREST (paths, versions, bodies),
// RESTError (the status table) and FromRESTResponse (reading agents' errors).
// The binding is cut along those seams:
//
//   - rest.go: the routes and ParseREST (paths, versions), and the
//     buyer's successful answers (RESTResult, RESTEvent);
//   - rest_params.go: a call's path ids, query and body as the JSON-RPC
//     params;
//   - keys.go: the proto key names ProtoJSON parsers also take (camelMember,
//     restUnambiguous), beside the reading rule they serve;
//   - rest_status.go: the status table (RESTError), read backwards for
//     agents' errors (codeForReason, codeForStatus);
//   - rest_agent.go: the agent side (RESTUpstream, FromRESTResponse,
//     FromRESTEvent);
//   - rest_proto03.go: the 0.3 ProtoJSON shapes and their conversion from
//     and to the 0.3 JSON-RPC shapes (walked by shapes.go, as translate.go's
//     are);
//   - rest_sdk03.go: the 0.3 HTTP+JSON of the official Go SDK, a dialect
//     of its own, with the same pipeline on both sides.

// Binding is the protocol binding a request came in on.
type Binding uint8

const (
	BindingJSONRPC Binding = iota // JSON-RPC 2.0 (the zero value)
	BindingREST                   // HTTP+JSON
)

// String is the binding's name as agent cards spell it.
func (b Binding) String() string {
	if b == BindingREST {
		return "HTTP+JSON"
	}
	return "JSONRPC"
}

// Media types of the HTTP+JSON binding.
const (
	ContentTypeA2A  = "application/a2a+json" // 1.0 §11.1, §14.1
	ContentTypeJSON = "application/json"     // 0.3 §3.2.3
)

// RESTContentType is the Content-Type of REST bodies in version v, for
// requests to an agent and answers to a buyer: application/a2a+json in
// 1.0 (§11.1 SHOULD), application/json in 0.3 (MUST).
func RESTContentType(v Version) string {
	if v == V03 {
		return ContentTypeJSON
	}
	return ContentTypeA2A
}

// restRoute is the operation a REST path names.
type restRoute struct {
	method Method
	task   string // the task id in the path, still escaped
	config string // the push config id in the path, still escaped
	tenant string // still escaped
}

// restOps are the operations of one path, by HTTP method.
type restOps struct{ get, post, del Method }

func (o restOps) forVerb(verb string) Method {
	switch verb {
	case http.MethodGet:
		return o.get
	case http.MethodPost:
		return o.post
	case http.MethodDelete:
		return o.del
	}
	return 0
}

func (o restOps) allowed() string {
	var s []string
	if o.get != 0 {
		s = append(s, http.MethodGet)
	}
	if o.post != 0 {
		s = append(s, http.MethodPost)
	}
	if o.del != 0 {
		s = append(s, http.MethodDelete)
	}
	return strings.Join(s, ", ")
}

// restPath finds the operations of a path (segments after /v1 and the
// tenant).
func restPath(v Version, segs []string) (ops restOps, task, config string, ok bool) {
	switch len(segs) {
	case 1:
		switch segs[0] {
		case "message:send":
			return restOps{post: MethodSend}, "", "", true
		case "message:stream":
			return restOps{post: MethodStream}, "", "", true
		case "tasks":
			return restOps{get: MethodListTasks}, "", "", true
		case "extendedAgentCard":
			return restOps{get: MethodExtendedCard}, "", "", v == V10
		case "card":
			return restOps{get: MethodExtendedCard}, "", "", v == V03
		}
	case 2:
		if segs[0] != "tasks" {
			return
		}
		id, verb := splitVerb(segs[1])
		if id == "" {
			return
		}
		switch verb {
		case "":
			return restOps{get: MethodGetTask}, id, "", true
		case "cancel":
			return restOps{post: MethodCancelTask}, id, "", true
		case "subscribe": // POST in the text of §11.3.2, GET in the proto: both
			return restOps{get: MethodSubscribe, post: MethodSubscribe}, id, "", true
		}
	case 3, 4:
		if segs[0] != "tasks" || segs[2] != "pushNotificationConfigs" || segs[1] == "" {
			return
		}
		if len(segs) == 3 {
			return restOps{get: MethodPushList, post: MethodPushSet}, segs[1], "", true
		}
		return restOps{get: MethodPushGet, del: MethodPushDelete}, segs[1], segs[3], true
	}
	return
}

// splitVerb splits a custom verb the task routes know off a raw path
// segment.
func splitVerb(seg string) (id, verb string) {
	i := strings.LastIndexByte(seg, ':')
	if i < 0 {
		return seg, ""
	}
	switch v := seg[i+1:]; v {
	case "cancel", "subscribe":
		return seg[:i], v
	}
	return seg, ""
}

// splitRESTPath splits an escaped path into its segments; empty segments
// (but for one trailing slash) make it unknown.
func splitRESTPath(p string) ([]string, bool) {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return nil, false
	}
	segs := strings.Split(p, "/")
	if len(segs) > 6 {
		return nil, false
	}
	for _, s := range segs {
		if s == "" {
			return nil, false
		}
	}
	return segs, true
}

// matchREST finds the route of verb and path in version v. When the path
// exists but not for verb, allowed lists the verbs it takes.
func matchREST(v Version, verb string, segs []string) (rt restRoute, allowed string, found bool) {
	try := func(segs []string, tenant string) bool {
		ops, task, config, ok := restPath(v, segs)
		if !ok {
			return false
		}
		if m := ops.forVerb(verb); m != 0 {
			rt = restRoute{method: m, task: task, config: config, tenant: tenant}
			return true
		}
		if allowed == "" {
			allowed = ops.allowed()
		}
		return false
	}
	if try(segs, "") {
		return rt, "", true
	}
	if v == V10 && len(segs) > 1 && try(segs[1:], segs[0]) {
		return rt, "", true
	}
	return restRoute{}, allowed, false
}

// ParseREST turns an HTTP+JSON call into the Request a JSON-RPC client
// would have sent for it. httpMethod is the HTTP verb; path is what
// follows /a2a/{listing}, escaped as received ("/message:send",
// "/v1/tasks/abc", "/acme/tasks/abc:cancel"); query is the URL's query;
// contentType and body are the request's; versionHeader is the A2A-Version
// header (when empty, query's A2A-Version is used).
//
// # Paths
//
// The path is split on "/" first and its segments unescaped after, so a
// task id may
// carry "/" as %2F. A custom verb (":cancel", ":subscribe") is taken from
// the raw last segment only when it is a verb the route knows, so an id
// may contain ":" (escape it as %3A when it ends in a verb name).
//
//	A2A 1.0 (google.api.http of a2a.proto; each also under /{tenant})
//	  POST   /message:send                          SendMessage
//	  POST   /message:stream                        SendStreamingMessage (SSE)
//	  GET    /tasks/{id}                            GetTask       ?historyLength
//	  GET    /tasks                                 ListTasks     ?contextId&status&pageSize&pageToken
//	                                                              &historyLength&statusTimestampAfter&includeArtifacts
//	  POST   /tasks/{id}:cancel                     CancelTask
//	  GET    /tasks/{id}:subscribe (POST accepted)  SubscribeToTask (SSE)
//	  POST   /tasks/{taskId}/pushNotificationConfigs        CreateTaskPushNotificationConfig
//	  GET    /tasks/{taskId}/pushNotificationConfigs/{id}   GetTaskPushNotificationConfig
//	  GET    /tasks/{taskId}/pushNotificationConfigs        ListTaskPushNotificationConfigs ?pageSize&pageToken
//	  DELETE /tasks/{taskId}/pushNotificationConfigs/{id}   DeleteTaskPushNotificationConfig
//	  GET    /extendedAgentCard                     GetExtendedAgentCard
//	A2A 0.3: the same under /v1, without tenants, with GET /v1/card for
//	  agent/getAuthenticatedExtendedCard; GET /v1/tasks has no 0.3
//	  JSON-RPC method and is refused (UnsupportedOperation).
//
// The route without a tenant is tried first, then the first segment as
// the tenant; the first route matching both path and HTTP method wins
// (GET /tasks/tasks is GetTask of task "tasks"). A tenant named "v1" is
// not reachable: /v1 means 0.3. Query parameters take their camelCase
// names or the proto field names (history_length); unknown ones are
// ignored, and a parameter given twice with different values is refused.
//
// # Versions
//
// The /v1 prefix means 0.3; a path without it is a 1.0 path. The
// A2A-Version header (or the A2A-Version query parameter when the header
// is empty) must agree, with the §3.6.2 rule that a missing or empty
// version means 0.3: so /v1 with 1.0 is an invalid request (-32600),
// exactly as a JSON-RPC method name that disagrees with the header is. An
// unknown version is VersionNotSupported (-32009).
//
// A 1.0 path whose version is missing and whose body is a 1.0 message
// (role ROLE_…) is read as 1.0: only a 1.0 client sends that. Otherwise a
// 1.0 path whose version is 0.3 (or missing) is the 0.3 HTTP+JSON of the
// official Go SDK (a2a-go's a2acompat/a2av0, see rest_sdk03.go): the 1.0
// paths without tenants, bodies in the 0.3 JSON-RPC shapes with snake_case
// keys. It is read into the same 0.3 Request (Version 0.3, Binding
// BindingREST), and answered with SDK03Result, SDK03Event and SDK03Error.
// Two such calls remain invalid requests, as version disagreements: a
// path with a tenant (1.0 only), and a send whose message has a 1.0 role
// (ROLE_USER) under an A2A-Version that says 0.3.
//
// # Bodies
//
// A 1.0 REST body is the ProtoJSON of the request message, which is the
// JSON-RPC params: path fields (id, taskId, tenant) are set over it. A 0.3
// REST body is the ProtoJSON of the 0.3 gRPC proto, which the reference
// SDKs (a2a-python, a2a-js) send and parse, not the 0.3 JSON-RPC shapes:
// role ROLE_USER, message parts under "content", parts {text},
// {file:{fileWithUri|fileWithBytes,mimeType,name}}, {data:{data:{...}}},
// states TASK_STATE_* (CANCELLED with two Ls), no "kind", push configs
// {name:"tasks/{t}/pushNotificationConfigs/{c}",pushNotificationConfig},
// push config lists {configs:[...]}, send configuration
// "pushNotification". 0.3 bodies are converted to and from the 0.3
// JSON-RPC shapes here; JSON-RPC shapes are also accepted on input. 0.3
// proto has no referenceTaskIds, which is dropped on the way to a 0.3
// REST peer, and its "blocking" is a proto3 bool: absent means false, so
// a 0.3 REST send without it is non-blocking (as the reference servers
// read it) and a send to a 0.3 REST agent always states it.
// In a send's message and configuration, proto field names (task_id) are
// renamed to their JSON names (taskId), as ProtoJSON parsers read both:
// the meter must read the task the agent will act on.
//
// Content types accepted for request bodies: application/a2a+json and
// application/json (parameters such as charset ignored, or none at all);
// anything else is ContentTypeNotSupported (-32005).
//
// # Result
//
// The result has Binding BindingREST, the Method and Version the path and
// header name, Tenant, and Params as that method's JSON-RPC params in that
// version (path ids, query parameters and body merged); Raw is the
// equivalent JSON-RPC request with a fresh id, which has been through
// ParseRequest, so everything ParseRequest reads (TaskID, Blocking, ...)
// is set and forwarding Raw to a JSON-RPC agent is forwarding this call.
//
// # Errors
//
// -32601 MethodNotFound (HTTP 404) for a path that is no A2A
// operation or not for this HTTP method; -32009 for an unknown version;
// -32600 for a version header that disagrees with the path, or a body that
// is not an object; -32004 for GET /v1/tasks (0.3 has no tasks/list);
// -32005 for a body whose Content-Type is neither application/a2a+json nor
// application/json; -32700 for a body that is not JSON; -32602 for bad
// query parameters, bodies whose keys collide (ignoring case and "_", as
// ProtoJSON parsers read both json and proto names), or anything
// ParseRequest refuses in the params.
//
// The returned Request is never nil: on error it carries at least Binding
// and the Version to answer in (0.3 under /v1, else 1.0), and Method,
// Name and Tenant once known, so the error can be answered with RESTError
// in the caller's dialect.
func ParseREST(httpMethod, path string, query url.Values, contentType string, body []byte, versionHeader string) (*Request, *Error) {
	verb := strings.ToUpper(strings.TrimSpace(httpMethod))
	r := &Request{Binding: BindingREST, Version: V10}
	segs, ok := splitRESTPath(path)
	if ok && segs[0] == "v1" {
		r.Version, segs = V03, segs[1:]
		ok = len(segs) > 0
	}
	if !ok {
		return r, MethodNotFound(fmt.Sprintf("%s %s is not an A2A operation", verb, path))
	}
	rt, allowed, found := matchREST(r.Version, verb, segs)
	if !found {
		if allowed != "" {
			return r, MethodNotFound(fmt.Sprintf("%s %s is not an A2A operation: this path takes %s", verb, path, allowed))
		}
		return r, MethodNotFound(fmt.Sprintf("%s %s is not an A2A operation", verb, path))
	}
	r.Method = rt.method
	r.Name = MethodName(rt.method, r.Version)
	tenant, task, config, perr := unescapeRoute(rt)
	if perr != nil {
		return r, perr
	}
	r.Tenant = tenant

	header := strings.TrimSpace(versionHeader)
	if header == "" {
		header = strings.TrimSpace(query.Get("A2A-Version"))
	}
	hv, verr := ParseVersion(header)
	if verr != nil {
		return r, verr
	}
	switch {
	case r.Version == V03 && hv != V03:
		return r, InvalidRequest(fmt.Sprintf("%s is an A2A 0.3 HTTP+JSON path (/v1/...) but A2A-Version is %s; A2A 1.0 paths have no /v1 prefix", path, header))
	case r.Version == V10 && hv != V10:
		if rt.tenant == "" {
			r2, err := parseSDK03(r, verb, path, rt, task, config, query, contentType, body)
			if err == errSDK03Is10 && header == "" {
				// No header, and a 1.0 message: the body decides (§3.6).
				return ParseREST(httpMethod, path, query, contentType, body, string(V10))
			}
			return r2, err
		}
		if header == "" {
			return r, InvalidRequest(fmt.Sprintf("%s is an A2A 1.0 HTTP+JSON path, but the request names no A2A-Version, which means 0.3 (whose paths start with /v1); send A2A-Version: 1.0", path))
		}
		return r, InvalidRequest(fmt.Sprintf("%s is an A2A 1.0 HTTP+JSON path but A2A-Version is %s; A2A 0.3 paths start with /v1", path, header))
	}
	if r.Version == V03 && r.Method == MethodListTasks {
		return r, UnsupportedOperation("GET /v1/tasks (tasks/list) has no A2A 0.3 JSON-RPC equivalent; list tasks with A2A 1.0: GET /tasks and A2A-Version: 1.0")
	}

	var bodyMembers []member
	if trimmed := bytes.TrimSpace(body); bytes.Equal(trimmed, []byte("null")) {
		body = nil // clients send null for calls without a body (cancel, subscribe)
	}
	if verb == http.MethodPost && len(bytes.TrimSpace(body)) > 0 {
		if !restContentTypeOK(contentType) {
			return r, ContentTypeNotSupported(fmt.Sprintf("Content-Type %q is not supported: send %s or %s", contentType, ContentTypeA2A, ContentTypeJSON))
		}
		if !validJSON(body) {
			return r, ParseError("")
		}
		var bok bool
		if bodyMembers, bok = splitObject(body, nil); !bok {
			return r, InvalidRequest("the request body must be a JSON object")
		}
	}
	var params []byte
	var err *Error
	if r.Version == V03 {
		params, err = restParams03(rt.method, task, config, query, bodyMembers)
	} else {
		params, err = restParams10(rt.method, tenant, task, config, query, bodyMembers)
	}
	if err != nil {
		return r, err
	}
	if err := restUnambiguous(rt.method, params); err != nil {
		return r, err
	}
	raw := synthesize(rt.method, r.Version, params)
	parsed, err := ParseRequest(raw, string(r.Version))
	if err != nil {
		return r, err
	}
	parsed.Binding, parsed.Tenant = BindingREST, tenant
	return parsed, nil
}

func unescapeRoute(rt restRoute) (tenant, task, config string, err *Error) {
	var e error
	if tenant, e = url.PathUnescape(rt.tenant); e != nil {
		return "", "", "", InvalidRequest("the tenant in the path is not properly escaped")
	}
	if task, e = url.PathUnescape(rt.task); e != nil {
		return "", "", "", InvalidRequest("the task id in the path is not properly escaped")
	}
	if config, e = url.PathUnescape(rt.config); e != nil {
		return "", "", "", InvalidRequest("the push notification config id in the path is not properly escaped")
	}
	return tenant, task, config, nil
}

// restContentTypeOK accepts the two JSON media types of the binding, and a
// missing Content-Type.
func restContentTypeOK(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	return mt == "" || strings.EqualFold(mt, ContentTypeA2A) || strings.EqualFold(mt, ContentTypeJSON)
}

// synthesize is the JSON-RPC request for params, with a fresh id.
func synthesize(m Method, v Version, params []byte) []byte {
	b := make([]byte, 0, 80+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":"rest-`...)
	b = strconv.AppendUint(b, rand.Uint64(), 16)
	b = append(b, `","method":`...)
	b = strconv.AppendQuote(b, MethodName(m, v))
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return compact(append(b, '}'))
}

// RESTResult is the REST answer to a successful call of m in version v:
// the HTTP status (200) and the body, from result, the JSON-RPC result in
// that version. In 1.0 the REST body is the JSON-RPC result (a
// SendMessageResponse, Task, ListTasksResponse, TaskPushNotificationConfig,
// ListTaskPushNotificationConfigsResponse, AgentCard; an Empty {} for a
// delete). In 0.3 the result is rendered as 0.3 ProtoJSON: a send's Task or
// Message in its {task}/{message} wrapper, Tasks and push configs
// reshaped, the push config array as {configs}, null as {}; the agent card
// as it is. A result of an unexpected shape is passed through.
func RESTResult(v Version, m Method, result json.RawMessage) (status int, body []byte) {
	result = bytes.TrimSpace(result)
	if m == MethodPushDelete || len(result) == 0 {
		return http.StatusOK, []byte("{}") // google.protobuf.Empty
	}
	if v != V03 {
		return http.StatusOK, compact(result)
	}
	var out []byte
	switch m {
	case MethodSend, MethodStream, MethodSubscribe:
		out = event03ToProto(m, result)
	case MethodGetTask, MethodCancelTask:
		out = shapesProto03.task(result)
	case MethodPushSet, MethodPushGet:
		out = rest03PushConfig(result, toProto03)
	case MethodPushList:
		out = pushList03(result, toProto03)
	default:
		out = result
	}
	return http.StatusOK, compact(out)
}

// RESTEvent is the SSE data of one event of a REST stream (message:stream,
// tasks/{id}:subscribe) in version v, from result, the JSON-RPC result of
// that event: the StreamResponse object ({task}, {message},
// {statusUpdate}, {artifactUpdate}), not a JSON-RPC envelope; 0.3 in its
// ProtoJSON shapes. It is a single line.
func RESTEvent(v Version, m Method, result json.RawMessage) []byte {
	result = bytes.TrimSpace(result)
	if v != V03 {
		return compact(result)
	}
	return compact(event03ToProto(m, result))
}
