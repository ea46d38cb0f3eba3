package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
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
// The 0.3 HTTP+JSON of the official Go SDK, a dialect of its own, is in
// rest_sdk03.go, with the same pipeline on both sides.

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

const (
	a2aDomain         = "a2a-protocol.org"
	marketplaceDomain = "agentmarket.dev"
	errorInfoType     = "type.googleapis.com/google.rpc.ErrorInfo"
	valueType         = "type.googleapis.com/google.protobuf.Value"
)

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

// restUnambiguous refuses params (and a send's message) two of whose keys
// a ProtoJSON parser could take for the same field: it accepts the json
// name and the proto name (taskId, task_id) and some fold case, so
// {"taskId":"a","task_id":"b"} could name either task to the agent.
func restUnambiguous(m Method, params []byte) *Error {
	var buf [12]member
	ms, _ := splitObject(params, buf[:0])
	if k, dup := looseCollision(ms); dup {
		return InvalidParams(fmt.Sprintf("%s appears twice (keys are compared ignoring case and underscores)", k))
	}
	if m != MethodSend && m != MethodStream {
		return nil
	}
	for _, p := range ms {
		if p.is("message") {
			var mbuf [12]member
			mm, _ := splitObject(p.val, mbuf[:0])
			if k, dup := looseCollision(mm); dup {
				return InvalidParams(fmt.Sprintf("message.%s appears twice (keys are compared ignoring case and underscores)", k))
			}
		}
	}
	return nil
}

// camelMember renames the proto field names (task_id) among the members of
// o's object member name to their JSON names (taskId), as ProtoJSON reads
// them, so that what the meter reads (the task a message names, the send
// configuration) is what the agent will read. A key whose JSON name is
// also present is left for looseCollision to refuse.
func camelMember(o *object, name string) {
	v, ok := o.get(name)
	if !ok || firstByte(v) != '{' || bytes.IndexByte(v, '_') < 0 {
		return
	}
	var buf [12]member
	ms, _ := splitObject(v, buf[:0])
	if !slices.ContainsFunc(ms, func(m member) bool { return bytes.IndexByte(m.key, '_') >= 0 }) {
		return // the underscores are in values
	}
	names := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		names[m.name()] = struct{}{}
	}
	in := &object{ms: slices.Clone(ms)}
	changed := false
	for i, m := range in.ms {
		key := m.name()
		if strings.IndexByte(key, '_') < 0 {
			continue
		}
		camel := lowerCamel(key)
		if _, has := names[camel]; has || camel == key {
			continue
		}
		in.ms[i] = member{key: []byte(camel), val: m.val}
		changed = true
	}
	if changed {
		o.set(name, in.bytes())
	}
}

// lowerCamel is the JSON name protoc gives a proto field name.
func lowerCamel(s string) string {
	var b strings.Builder
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// A query parameter a REST route reads: its JSON name, its proto name and
// its type (s string, i int32, b bool, e task state).
type queryParam struct {
	name, alias string
	typ         byte
}

var (
	queryGetTask = []queryParam{{"historyLength", "history_length", 'i'}}
	queryList    = []queryParam{
		{"contextId", "context_id", 's'},
		{"status", "status", 'e'},
		{"pageSize", "page_size", 'i'},
		{"pageToken", "page_token", 's'},
		{"historyLength", "history_length", 'i'},
		{"statusTimestampAfter", "status_timestamp_after", 's'},
		{"includeArtifacts", "include_artifacts", 'b'},
	}
	queryPushList = []queryParam{{"pageSize", "page_size", 'i'}, {"pageToken", "page_token", 's'}}
)

// readQuery sets the query parameters ps on o, typed.
func readQuery(q url.Values, ps []queryParam, o *object) *Error {
	for _, p := range ps {
		vals := q[p.name]
		if p.alias != p.name {
			vals = append(slices.Clip(vals), q[p.alias]...)
		}
		var s string
		for _, v := range vals {
			if v == "" {
				continue
			}
			if s != "" && v != s {
				return InvalidParams(fmt.Sprintf("query parameter %s is given twice with different values", p.name))
			}
			s = v
		}
		if s == "" {
			continue
		}
		switch p.typ {
		case 's':
			o.set(p.name, quote(s))
		case 'i':
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return InvalidParams(fmt.Sprintf("query parameter %s must be an integer", p.name))
			}
			o.set(p.name, strconv.AppendInt(nil, n, 10))
		case 'b':
			switch s {
			case "true":
				o.set(p.name, jsonTrue)
			case "false":
				o.set(p.name, jsonFalse)
			default:
				return InvalidParams(fmt.Sprintf("query parameter %s must be true or false", p.name))
			}
		case 'e':
			if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(states) {
				s = states[n].v10
			}
			o.set(p.name, quote(stateTo10(normalize03State(s))))
		}
	}
	return nil
}

// restParams10 builds the 1.0 JSON-RPC params of a REST call: the tenant
// and path ids first, then the body's other members, then the query's.
func restParams10(m Method, tenant, task, config string, q url.Values, body []member) ([]byte, *Error) {
	o := &object{}
	if tenant != "" {
		o.set("tenant", quote(tenant))
	}
	var path []string
	o.ms = slices.Grow(o.ms, len(body)+4)
	switch m {
	case MethodGetTask, MethodCancelTask, MethodSubscribe:
		o.set("id", quote(task))
		path = []string{"id"}
	case MethodPushSet, MethodPushList:
		o.set("taskId", quote(task))
		path = []string{"taskid"}
	case MethodPushGet, MethodPushDelete:
		o.set("taskId", quote(task))
		o.set("id", quote(config))
		path = []string{"taskid", "id"}
	}
	if tenant != "" {
		path = append(path, "tenant")
	}
	switch m {
	case MethodSend, MethodStream, MethodCancelTask, MethodPushSet:
		for _, b := range body {
			if slices.ContainsFunc(path, func(p string) bool { return looseEqual(b, member{key: []byte(p)}) }) {
				continue // the path's value wins, as in google.api.http
			}
			o.ms = append(o.ms, b)
		}
		if m == MethodSend || m == MethodStream {
			camelMember(o, "message")
			camelMember(o, "configuration")
		}
	}
	var err *Error
	switch m {
	case MethodGetTask:
		err = readQuery(q, queryGetTask, o)
	case MethodListTasks:
		err = readQuery(q, queryList, o)
	case MethodPushList:
		err = readQuery(q, queryPushList, o)
	}
	if err != nil {
		return nil, err
	}
	return o.bytes(), nil
}

// restParams03 builds the 0.3 JSON-RPC params of a /v1 REST call from the
// path, the query and the body (0.3 ProtoJSON, or already JSON-RPC
// shaped).
func restParams03(m Method, task, config string, q url.Values, body []member) ([]byte, *Error) {
	o := &object{}
	switch m {
	case MethodSend, MethodStream:
		return sendParamsFromProto03(m, &object{ms: body})
	case MethodGetTask:
		o.set("id", quote(task))
		if err := readQuery(q, queryGetTask, o); err != nil {
			return nil, err
		}
	case MethodCancelTask, MethodSubscribe:
		// The proto body is {name: "tasks/{id}"}: the path says it. A
		// JSON-RPC shaped body may carry TaskIdParams metadata.
		o.set("id", quote(task))
		for _, b := range body {
			if b.is("metadata") {
				o.set("metadata", b.val)
			}
		}
	case MethodPushSet:
		cfg, err := pushConfigFromBody03(body)
		if err != nil {
			return nil, err
		}
		o.set("taskId", quote(task))
		o.set("pushNotificationConfig", cfg)
	case MethodPushGet, MethodPushDelete:
		o.set("id", quote(task))
		o.set("pushNotificationConfigId", quote(config))
	case MethodPushList:
		o.set("id", quote(task))
	case MethodExtendedCard:
		return nil, nil
	}
	return o.bytes(), nil
}

// sendParamsFromProto03 turns a 0.3 SendMessageRequest body into
// MessageSendParams.
func sendParamsFromProto03(m Method, o *object) ([]byte, *Error) {
	if _, ok := o.get("request"); ok { // the proto field name of message
		if _, dup := o.get("message"); dup {
			return nil, InvalidParams(`"message" and "request" (its proto name) are both given`)
		}
		o.rename("request", "message")
	}
	camelMember(o, "message")
	camelMember(o, "configuration")
	if v, ok := o.get("message"); ok && firstByte(v) == '{' {
		o.set("message", rest03Message(v, toRPC03))
	}
	cfg, hasCfg := o.get("configuration")
	if hasCfg && firstByte(cfg) == '{' {
		cfg = rest03SendConfig(cfg, toRPC03)
	}
	if m == MethodSend && (!hasCfg || isNull(cfg)) {
		cfg, hasCfg = []byte("{}"), true
	}
	if m == MethodSend && firstByte(cfg) == '{' {
		// A proto3 bool: absent is false, and the reference servers read
		// an absent blocking as non-blocking.
		if co, ok := parseObject(cfg); ok {
			if _, ok := co.get("blocking"); !ok {
				co.set("blocking", jsonFalse)
				cfg = co.bytes()
			}
		}
	}
	if hasCfg {
		o.set("configuration", cfg)
	}
	return o.bytes(), nil
}

// pushConfigFromBody03 finds the PushNotificationConfig in a 0.3 push
// config body, whichever shape the client chose: the
// CreateTaskPushNotificationConfigRequest the reference SDKs send
// ({parent, configId, config: {name, pushNotificationConfig}}), the
// TaskPushNotificationConfig of the proto's body mapping ({name,
// pushNotificationConfig}), the JSON-RPC one ({taskId,
// pushNotificationConfig}) or the bare config ({url, id, token,
// authentication}). The task is the path's.
func pushConfigFromBody03(body []member) ([]byte, *Error) {
	top := &object{ms: body}
	cfg := top
	configID := ""
	if v, ok := top.get("config"); ok {
		c, ok := parseObject(v)
		if !ok {
			return nil, InvalidParams("config must be an object")
		}
		cfg = c
		if id, ok := top.get("configId"); ok {
			configID, _ = unquote(id)
		}
	}
	if configID == "" {
		if name, ok := cfg.get("name"); ok {
			s, _ := unquote(name)
			_, configID = parsePushConfigName(s)
		}
	}
	inner, ok := cfg.get("pushNotificationConfig")
	if !ok {
		if _, hasURL := cfg.get("url"); !hasURL {
			return nil, InvalidParams("the body must carry a pushNotificationConfig")
		}
		c := &object{ms: slices.Clone(cfg.ms)} // the bare config: without its task
		for _, k := range []string{"name", "taskId", "parent", "configId"} {
			c.del(k)
		}
		inner = c.bytes()
	}
	io, ok := parseObject(inner)
	if !ok {
		return nil, InvalidParams("pushNotificationConfig must be an object")
	}
	if _, has := io.get("id"); !has && configID != "" {
		io.set("id", quote(configID))
		inner = io.bytes()
	}
	return inner, nil
}

// parsePushConfigName reads "tasks/{task}/pushNotificationConfigs/{config}".
func parsePushConfigName(s string) (task, config string) {
	rest, ok := strings.CutPrefix(s, "tasks/")
	if !ok {
		return "", ""
	}
	task, config, _ = strings.Cut(rest, "/pushNotificationConfigs/")
	if strings.Contains(task, "/") {
		return "", ""
	}
	return task, config
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
		out = rest03Task(result, toProto03)
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

// RESTError is the REST answer to a failed call in version v: the HTTP
// status and the body. A nil e is an internal error.
//
// The body is a google.rpc.Status
// ({"error":{"code":<http>,"status":<google.rpc.Code>,"message",
// "details":[ErrorInfo{reason,domain,metadata}, ...]}}); error data that
// is already a list of typed details is carried as the details, other
// data as a google.protobuf.Value detail. 0.3 defined no REST error body;
// its SDKs read the bare JSON-RPC error ({code,message,data}, a2a-js) or
// only the status (a2a-python), so a 0.3 body carries both: the
// google.rpc.Status under "error" and the JSON-RPC code, message and data
// at the top level.
//
//	code    HTTP status  google.rpc.Code     ErrorInfo.reason                    domain
//	-32700  400          INVALID_ARGUMENT    JSON_PARSE                          a2a-protocol.org
//	-32600  400          INVALID_ARGUMENT    INVALID_REQUEST                     a2a-protocol.org
//	-32601  404          NOT_FOUND           METHOD_NOT_FOUND                    a2a-protocol.org
//	-32602  400          INVALID_ARGUMENT    INVALID_PARAMS                      a2a-protocol.org
//	-32603  500          INTERNAL            INTERNAL_ERROR                      a2a-protocol.org
//	-32001  404          NOT_FOUND           TASK_NOT_FOUND                      a2a-protocol.org
//	-32002  400          FAILED_PRECONDITION TASK_NOT_CANCELABLE                 a2a-protocol.org
//	-32003  400          FAILED_PRECONDITION PUSH_NOTIFICATION_NOT_SUPPORTED     a2a-protocol.org
//	-32004  400          FAILED_PRECONDITION UNSUPPORTED_OPERATION               a2a-protocol.org
//	-32005  400          INVALID_ARGUMENT    CONTENT_TYPE_NOT_SUPPORTED          a2a-protocol.org
//	-32006  500          INTERNAL            INVALID_AGENT_RESPONSE              a2a-protocol.org
//	-32007  400          FAILED_PRECONDITION EXTENDED_AGENT_CARD_NOT_CONFIGURED  a2a-protocol.org
//	-32008  400          FAILED_PRECONDITION EXTENSION_SUPPORT_REQUIRED          a2a-protocol.org
//	-32009  400          FAILED_PRECONDITION VERSION_NOT_SUPPORTED               a2a-protocol.org
//	-32040  401          UNAUTHENTICATED     UNAUTHENTICATED                     agentmarket.dev
//	-32041  403          PERMISSION_DENIED   NOT_ENTITLED                        agentmarket.dev
//	-32042  402          RESOURCE_EXHAUSTED  BUDGET_EXHAUSTED                    agentmarket.dev
//	-32043  404          NOT_FOUND           LISTING_UNAVAILABLE                 agentmarket.dev
//	-32044  503          UNAVAILABLE         BUDGET_UNCHECKED                    agentmarket.dev
//	-32050  502          UNAVAILABLE         UPSTREAM_UNREACHABLE                agentmarket.dev
//	-32051  504          DEADLINE_EXCEEDED   UPSTREAM_TIMEOUT                    agentmarket.dev
//	-32052  502          RESOURCE_EXHAUSTED  RESULT_TOO_LARGE                    agentmarket.dev
//	-32053  413          RESOURCE_EXHAUSTED  REQUEST_TOO_LARGE                   agentmarket.dev
//	-32054  504          DEADLINE_EXCEEDED   STREAM_IDLE                         agentmarket.dev
//	-32055  502          FAILED_PRECONDITION UPSTREAM_REFUSED                    agentmarket.dev
//	-32056  502          INTERNAL            AGENT_TASK_CONFLICT                 agentmarket.dev
//	-32057  503          UNAVAILABLE         METER_UNAVAILABLE                   agentmarket.dev
//	-32058  503          UNAVAILABLE         METER_BUSY                          agentmarket.dev
//	-32059  409          ALREADY_EXISTS      MESSAGE_ID_REUSED                   agentmarket.dev
//	other   500          UNKNOWN             UNKNOWN_ERROR, metadata {"code"}    agentmarket.dev
//
// The A2A rows are §5.4's. A spent budget is 402, not 429: 429 invites
// automatic retries, and a monthly budget does not come back in seconds.
func RESTError(v Version, e *Error) (status int, body []byte) {
	if e == nil {
		e = InternalError("")
	}
	info := restErrorOf(e.Code)
	data := errorDataJSON(e.Data)
	b := make([]byte, 0, 256+2*len(e.Message)+2*len(data))
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(info.http), 10)
	b = append(b, `,"status":"`...)
	b = append(b, info.status...)
	b = append(b, `","message":`...)
	msg := quote(e.Message)
	b = append(b, msg...)
	b = append(b, `,"details":`...)
	b = appendDetails(b, e.Code, info, data)
	b = append(b, '}')
	if v == V03 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
		b = append(b, `,"message":`...)
		b = append(b, msg...)
		if data != nil {
			b = append(b, `,"data":`...)
			b = append(b, data...)
		}
	}
	return info.http, compact(append(b, '}'))
}

// RESTErrorEvent is an SSE event ("event: error" and the RESTError body as
// data, with its blank line) reporting an error in the middle of a REST
// stream, as the reference SDKs send and read it.
func RESTErrorEvent(v Version, e *Error) []byte {
	_, body := RESTError(v, e)
	b := make([]byte, 0, len(body)+24)
	b = append(b, "event: error\ndata: "...)
	b = append(b, body...)
	return append(b, "\n\n"...)
}

// restErr is one row of the REST error table.
type restErr struct {
	code   int
	http   int
	status string // google.rpc.Code
	reason string // google.rpc.ErrorInfo reason
	domain string
}

var restErrors = [...]restErr{
	{CodeParseError, 400, "INVALID_ARGUMENT", "JSON_PARSE", a2aDomain},
	{CodeInvalidRequest, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", a2aDomain},
	{CodeMethodNotFound, 404, "NOT_FOUND", "METHOD_NOT_FOUND", a2aDomain},
	{CodeInvalidParams, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", a2aDomain},
	{CodeInternalError, 500, "INTERNAL", "INTERNAL_ERROR", a2aDomain},
	{CodeTaskNotFound, 404, "NOT_FOUND", "TASK_NOT_FOUND", a2aDomain},
	{CodeTaskNotCancelable, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", a2aDomain},
	{CodePushNotificationNotSupported, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED", a2aDomain},
	{CodeUnsupportedOperation, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION", a2aDomain},
	{CodeContentTypeNotSupported, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED", a2aDomain},
	{CodeInvalidAgentResponse, 500, "INTERNAL", "INVALID_AGENT_RESPONSE", a2aDomain},
	{CodeExtendedCardNotConfigured, 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED", a2aDomain},
	{CodeExtensionSupportRequired, 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED", a2aDomain},
	{CodeVersionNotSupported, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", a2aDomain},
	{CodeUnauthorized, 401, "UNAUTHENTICATED", "UNAUTHENTICATED", marketplaceDomain},
	{CodeNotEntitled, 403, "PERMISSION_DENIED", "NOT_ENTITLED", marketplaceDomain},
	{CodeBudgetExhausted, 402, "RESOURCE_EXHAUSTED", "BUDGET_EXHAUSTED", marketplaceDomain},
	{CodeListingUnavailable, 404, "NOT_FOUND", "LISTING_UNAVAILABLE", marketplaceDomain},
	{CodeBudgetUnchecked, 503, "UNAVAILABLE", "BUDGET_UNCHECKED", marketplaceDomain},
	{CodeUpstreamUnreachable, 502, "UNAVAILABLE", "UPSTREAM_UNREACHABLE", marketplaceDomain},
	{CodeUpstreamTimeout, 504, "DEADLINE_EXCEEDED", "UPSTREAM_TIMEOUT", marketplaceDomain},
	{CodeResultTooLarge, 502, "RESOURCE_EXHAUSTED", "RESULT_TOO_LARGE", marketplaceDomain},
	{CodeRequestTooLarge, 413, "RESOURCE_EXHAUSTED", "REQUEST_TOO_LARGE", marketplaceDomain},
	{CodeStreamIdle, 504, "DEADLINE_EXCEEDED", "STREAM_IDLE", marketplaceDomain},
	{CodeUpstreamRefused, 502, "FAILED_PRECONDITION", "UPSTREAM_REFUSED", marketplaceDomain},
	{CodeAgentTaskConflict, 502, "INTERNAL", "AGENT_TASK_CONFLICT", marketplaceDomain},
	{CodeMeterUnavailable, 503, "UNAVAILABLE", "METER_UNAVAILABLE", marketplaceDomain},
	{CodeMeterBusy, 503, "UNAVAILABLE", "METER_BUSY", marketplaceDomain},
	{CodeMessageIDReused, 409, "ALREADY_EXISTS", "MESSAGE_ID_REUSED", marketplaceDomain},
}

// unknownReason is the reason of codes outside the table; the code goes
// in the ErrorInfo metadata so it can be read back.
const unknownReason = "UNKNOWN_ERROR"

func restErrorOf(code int) restErr {
	for _, e := range restErrors {
		if e.code == code {
			return e
		}
	}
	return restErr{code, 500, "UNKNOWN", unknownReason, marketplaceDomain}
}

// errorDataJSON is an error's data as JSON, nil when there is none.
func errorDataJSON(d any) []byte {
	var b []byte
	switch x := d.(type) {
	case nil:
		return nil
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = marshalNoEscape(d); err != nil {
			return nil
		}
	}
	b = bytes.TrimSpace(b)
	if isNull(b) || !validJSON(b) {
		return nil
	}
	return compact(b)
}

// typedDetails returns the elements of data when it is an array of typed
// detail objects (each with a string "@type"), as 1.0 error data is.
func typedDetails(data []byte) ([][]byte, bool) {
	els, ok := splitArray(data, nil)
	if !ok {
		return nil, false
	}
	for _, el := range els {
		var buf [6]member
		ms, ok := splitObject(el, buf[:0])
		if !ok {
			return nil, false
		}
		typed := false
		for _, m := range ms {
			if m.is("@type") {
				_, typed = unquote(m.val)
			}
		}
		if !typed {
			return nil, false
		}
	}
	return els, true
}

// detailString is a string member of a detail object.
func detailString(d []byte, name string) string {
	var buf [6]member
	ms, _ := splitObject(d, buf[:0])
	var s string
	for _, m := range ms {
		if m.is(name) {
			s, _ = unquote(m.val)
		}
	}
	return s
}

// appendDetails appends the details array: the error's own typed details,
// after an ErrorInfo of the table's reason unless they carry one already;
// data of any other kind as a google.protobuf.Value.
func appendDetails(b []byte, code int, info restErr, data []byte) []byte {
	els, typed := typedDetails(data)
	hasInfo := false
	for _, el := range els {
		if detailString(el, "@type") == errorInfoType && detailString(el, "reason") == info.reason {
			hasInfo = true
		}
	}
	b = append(b, '[')
	n := 0
	if !hasInfo {
		b = append(b, `{"@type":"`+errorInfoType+`","reason":"`...)
		b = append(b, info.reason...)
		b = append(b, `","domain":"`...)
		b = append(b, info.domain...)
		b = append(b, '"')
		if info.reason == unknownReason {
			b = append(b, `,"metadata":{"code":"`...)
			b = strconv.AppendInt(b, int64(code), 10)
			b = append(b, `"}`...)
		}
		b = append(b, '}')
		n++
	}
	if typed {
		for _, el := range els {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, el...)
			n++
		}
	} else if data != nil {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"@type":"`+valueType+`","value":`...)
		b = append(b, data...)
		b = append(b, '}')
	}
	return append(b, ']')
}

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
	params := []byte(r.Params)
	if r.Version != v {
		if MethodName(r.Method, v) == "" {
			return "", "", nil, UnsupportedOperation(fmt.Sprintf("%s has no A2A %s equivalent", r.Name, v))
		}
		if params != nil {
			params = translateParams(r.Method, v, params)
		}
	}
	prefix := strings.TrimRight(baseURL, "/")
	if v == V03 {
		prefix += "/v1"
	} else if tenant != "" {
		prefix += "/" + escapeSegment(tenant)
	}
	str := func(name string) string {
		var buf [12]member
		ms, _ := splitObject(params, buf[:0])
		var s string
		for _, m := range ms {
			if m.is(name) {
				s, _ = unquote(m.val)
			}
		}
		return s
	}
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
		path := "/message:send"
		if r.Method == MethodStream {
			path = "/message:stream"
		}
		if v == V03 {
			return http.MethodPost, prefix + path, sendParamsToProto03(r, params), nil
		}
		return http.MethodPost, prefix + path, without(params, "tenant"), nil
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
// SendMessageRequest ProtoJSON, stating blocking (see the top of the
// file).
func sendParamsToProto03(r *Request, params []byte) []byte {
	o, ok := parseObject(params)
	if !ok {
		o = &object{}
	}
	o.del("tenant")
	if v, ok := o.get("message"); ok {
		o.set("message", rest03Message(v, toProto03))
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
	config := detailString(inner, "id")
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
	data = bytes.TrimSpace(data)
	if len(data) == 0 || !validJSON(data) {
		return nil, InvalidAgentResponse("the agent sent a stream event that is not JSON")
	}
	result, e := unenvelope(m, http.StatusOK, data)
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
		if detailString(d, "@type") != errorInfoType {
			continue
		}
		if c, ok := codeForReason(detailString(d, "reason"), detailString(d, "domain"), d); ok {
			e.Code = c
			break
		}
	}
	if len(els) > 0 {
		e.Data = json.RawMessage(compact(details))
	}
	return e
}

// codeForReason is the JSON-RPC code of an ErrorInfo reason.
func codeForReason(reason, domain string, info []byte) (int, bool) {
	switch domain {
	case "", a2aDomain:
		switch reason {
		case "PARSE_ERROR", "JSON_PARSE_ERROR":
			return CodeParseError, true
		case "AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED": // 0.3's name
			return CodeExtendedCardNotConfigured, true
		}
	case marketplaceDomain:
		if reason == unknownReason {
			var buf [6]member
			ms, _ := splitObject(info, buf[:0])
			for _, m := range ms {
				if m.is("metadata") {
					if n, err := strconv.Atoi(detailString(m.val, "code")); err == nil {
						return n, true
					}
				}
			}
			return 0, false
		}
	default:
		return 0, false
	}
	for _, e := range restErrors {
		if e.reason == reason && (e.domain == domain || (domain == "" && e.domain == a2aDomain)) {
			return e.code, true
		}
	}
	return 0, false
}

// codeForStatus is the JSON-RPC code of an HTTP error status that says no
// more.
func codeForStatus(m Method, status int) int {
	switch status {
	case http.StatusNotFound:
		if m.TaskScoped() {
			return CodeTaskNotFound
		}
		return CodeMethodNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotFound
	case http.StatusConflict:
		return CodeTaskNotCancelable
	case http.StatusUnsupportedMediaType:
		return CodeContentTypeNotSupported
	case http.StatusUnprocessableEntity:
		return CodeInvalidParams
	case http.StatusNotImplemented:
		return CodeUnsupportedOperation
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return CodeInternalError
	}
	if status >= 400 && status < 500 {
		return CodeInvalidRequest
	}
	return CodeInternalError
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
		out = rest03Task(b, toRPC03)
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

// The 0.3 shapes: the JSON-RPC binding's (the JSON schema: "kind" marks,
// role "user", parts, states "working") and the REST binding's (the
// ProtoJSON of the 0.3 proto). dir03 says which way a conversion goes.
// Like translate.go, only what differs is rewritten; other members are
// copied through in place.
type dir03 bool

const (
	toProto03 dir03 = true  // JSON-RPC shapes → ProtoJSON (REST)
	toRPC03   dir03 = false // ProtoJSON (REST) → JSON-RPC shapes
)

// normalize03State spells a state of any version the 0.3 JSON-RPC way,
// the 0.3 proto's TASK_STATE_CANCELLED included.
func normalize03State(s string) string {
	if s == "TASK_STATE_CANCELLED" || s == "cancelled" {
		return "canceled"
	}
	return NormalizeState(s)
}

// mark03 sets or removes an object's kind.
func mark03(o *object, kind string, d dir03) {
	if d == toProto03 {
		o.del("kind")
	} else if _, ok := o.get("kind"); !ok {
		o.set("kind", quoteASCII(kind))
	}
}

// quoteASCII quotes a string known to need no escaping (kinds, enum
// names) without encoding/json.
func quoteASCII(s string) []byte {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// parseObject8 is parseObject with room for the members of a typical A2A
// object, so that splitting it does not grow the slice.
func parseObject8(b []byte) (*object, bool) {
	ms, ok := splitObject(b, make([]member, 0, 8))
	if !ok {
		return nil, false
	}
	return &object{ms: ms}, true
}

func rest03Task(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	mark03(o, "task", d)
	if v, ok := o.get("status"); ok {
		o.set("status", rest03Status(v, d))
	}
	o.mapItems("artifacts", func(a []byte) []byte { return rest03Artifact(a, d) })
	o.mapItems("history", func(m []byte) []byte { return rest03Message(m, d) })
	return o.bytes()
}

func rest03Status(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	if v, ok := o.get("state"); ok {
		o.set("state", rest03State(v, d))
	}
	if v, ok := o.get("message"); ok && !isNull(v) {
		o.set("message", rest03Message(v, d))
	}
	return o.bytes()
}

func rest03State(v []byte, d dir03) []byte {
	s, ok := unquote(v)
	if !ok {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 || n >= len(states) {
			return v
		}
		s = states[n].v10
	}
	s = normalize03State(s)
	if d == toProto03 {
		if s == "canceled" {
			s = "TASK_STATE_CANCELLED"
		} else {
			s = stateTo10(s)
		}
	}
	for _, st := range states {
		if s == st.v03 || s == st.v10 {
			return quoteASCII(s) // a known state needs no escaping
		}
	}
	if s == "TASK_STATE_CANCELLED" {
		return quoteASCII(s)
	}
	return quote(s)
}

func rest03Message(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	mark03(o, "message", d)
	if v, ok := o.get("role"); ok {
		if d == toProto03 {
			o.set("role", translateRole(v, V10))
		} else {
			o.set("role", translateRole(v, V03))
		}
	}
	each := func(p []byte) []byte { return rest03Part(p, d) }
	if d == toProto03 {
		o.del("referenceTaskIds") // not in the 0.3 proto, whose parsers refuse unknown fields
		if v, ok := o.get("parts"); ok {
			o.rename("parts", "content")
			o.set("content", mapArray(v, each))
		}
	} else if v, ok := o.get("content"); ok {
		o.rename("content", "parts")
		o.set("parts", mapArray(v, each))
	} else if v, ok := o.get("parts"); ok {
		o.set("parts", mapArray(v, each))
	}
	return o.bytes()
}

func rest03Artifact(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	o.mapItems("parts", func(p []byte) []byte { return rest03Part(p, d) })
	return o.bytes()
}

// 0.3 JSON-RPC file members and their 0.3 proto names.
var fileMembers03 = [...]struct{ rpc, proto string }{
	{"bytes", "fileWithBytes"},
	{"uri", "fileWithUri"},
}

// rest03Part converts a part: JSON-RPC {kind:text,text} | {kind:file,
// file:{bytes|uri,mimeType,name}} | {kind:data, data} ↔ proto {text} |
// {file:{fileWithBytes|fileWithUri,mimeType,name}} | {data:{data}}.
// metadata stays on the part. A part that already has a kind is taken as
// JSON-RPC shaped.
func rest03Part(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	renameFile := func(from func(int) string, to func(int) string) {
		v, ok := o.get("file")
		if !ok {
			return
		}
		fo, ok := parseObject8(v)
		if !ok {
			return
		}
		for i := range fileMembers03 {
			if _, has := fo.get(from(i)); has {
				fo.rename(from(i), to(i))
			}
		}
		o.set("file", fo.bytes())
	}
	rpcName := func(i int) string { return fileMembers03[i].rpc }
	protoName := func(i int) string { return fileMembers03[i].proto }
	_, hasText := o.get("text")
	_, hasFile := o.get("file")
	data, hasData := o.get("data")
	if d == toProto03 {
		kind, _ := o.del("kind")
		k, _ := unquote(kind)
		switch {
		case k == "text" || (k == "" && hasText):
		case k == "file" || (k == "" && hasFile):
			renameFile(rpcName, protoName)
		case k == "data" || (k == "" && hasData):
			if hasData {
				o.set("data", wrap("data", data))
			}
		}
		return o.bytes()
	}
	if _, marked := o.get("kind"); marked {
		return b
	}
	switch {
	case hasText:
		o.set("kind", quoteASCII("text"))
	case hasFile:
		renameFile(protoName, rpcName)
		o.set("kind", quoteASCII("file"))
	case hasData:
		if do, ok := parseObject8(data); ok {
			if inner, ok := do.get("data"); ok { // DataPart {data: Struct}
				o.set("data", inner)
			}
		}
		o.set("kind", quoteASCII("data"))
	}
	return o.bytes()
}

func rest03StatusEvent(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	mark03(o, "status-update", d)
	if v, ok := o.get("status"); ok {
		o.set("status", rest03Status(v, d))
	}
	if _, ok := o.get("final"); !ok && d == toRPC03 {
		o.set("final", jsonFalse) // a proto3 bool: absent is false
	}
	return o.bytes()
}

func rest03ArtifactEvent(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	mark03(o, "artifact-update", d)
	if v, ok := o.get("artifact"); ok {
		o.set("artifact", rest03Artifact(v, d))
	}
	return o.bytes()
}

// rest03SendConfig converts a send configuration: JSON-RPC
// pushNotificationConfig ↔ proto pushNotification.
func rest03SendConfig(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	from, to := "pushNotificationConfig", "pushNotification"
	if d == toRPC03 {
		from, to = to, from
	}
	if _, ok := o.get(from); ok {
		o.rename(from, to)
	}
	return o.bytes()
}

// rest03PushConfig converts a TaskPushNotificationConfig: JSON-RPC
// {taskId, pushNotificationConfig} ↔ proto {name:
// "tasks/{t}/pushNotificationConfigs/{c}", pushNotificationConfig}.
func rest03PushConfig(b []byte, d dir03) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	inner, _ := o.get("pushNotificationConfig")
	if d == toProto03 {
		tv, ok := o.get("taskId")
		if !ok {
			return b
		}
		task, _ := unquote(tv)
		config := detailString(inner, "id")
		if config == "" {
			config = task
		}
		out := &object{}
		out.set("name", quote("tasks/"+task+"/pushNotificationConfigs/"+config))
		for _, m := range o.ms {
			if !m.is("taskId") {
				out.put(m)
			}
		}
		return out.bytes()
	}
	nv, ok := o.get("name")
	if !ok {
		return b
	}
	name, _ := unquote(nv)
	task, config := parsePushConfigName(name)
	out := &object{}
	if _, has := o.get("taskId"); !has {
		out.set("taskId", quote(task))
	}
	for _, m := range o.ms {
		if !m.is("name") {
			out.put(m)
		}
	}
	if io, ok := parseObject8(inner); ok && config != "" {
		if _, has := io.get("id"); !has {
			io.set("id", quote(config))
			out.set("pushNotificationConfig", io.bytes())
		}
	}
	return out.bytes()
}

// pushList03 converts a push config list: JSON-RPC array ↔ proto
// {configs: [...]}. Either shape is read.
func pushList03(b []byte, d dir03) []byte {
	each := func(c []byte) []byte { return rest03PushConfig(c, d) }
	list := b
	if firstByte(b) == '{' {
		o, _ := parseObject8(b)
		configs, ok := o.get("configs")
		if !ok || isNull(configs) {
			configs = []byte("[]")
		}
		if d == toProto03 {
			o.set("configs", mapArray(configs, each))
			return o.bytes()
		}
		list = configs
	}
	if firstByte(list) != '[' {
		return b
	}
	if d == toProto03 {
		return wrap("configs", mapArray(list, each))
	}
	return mapArray(list, each)
}

// event03ToProto wraps a 0.3 JSON-RPC send result or stream event in the
// proto's StreamResponse (SendMessageResponse) member. Anything else is
// returned as is.
func event03ToProto(m Method, b []byte) []byte {
	switch kind03(b) {
	case "task":
		return wrap("task", rest03Task(b, toProto03))
	case "message":
		return wrap("message", rest03Message(b, toProto03))
	case "status-update":
		if m.Streaming() {
			return wrap("statusUpdate", rest03StatusEvent(b, toProto03))
		}
	case "artifact-update":
		if m.Streaming() {
			return wrap("artifactUpdate", rest03ArtifactEvent(b, toProto03))
		}
	}
	return b
}

// event03FromProto unwraps a 0.3 StreamResponse into the 0.3 JSON-RPC
// object; an object already marked with its kind is taken as it is.
func event03FromProto(m Method, b []byte) ([]byte, *Error) {
	var buf [4]member
	ms, ok := splitObject(b, buf[:0])
	if !ok {
		return nil, InvalidAgentResponse("the agent's stream event is not an object")
	}
	for _, mem := range ms {
		switch {
		case mem.is("task"):
			return rest03Task(mem.val, toRPC03), nil
		case mem.is("message"), mem.is("msg"):
			return rest03Message(mem.val, toRPC03), nil
		case mem.is("statusUpdate") && m.Streaming():
			return rest03StatusEvent(mem.val, toRPC03), nil
		case mem.is("artifactUpdate") && m.Streaming():
			return rest03ArtifactEvent(mem.val, toRPC03), nil
		}
	}
	for _, mem := range ms {
		if mem.is("kind") {
			return b, nil
		}
	}
	return nil, InvalidAgentResponse("the agent's stream event has none of task, message, statusUpdate, artifactUpdate")
}

// sendResult03FromProto unwraps a 0.3 SendMessageResponse.
func sendResult03FromProto(b []byte) ([]byte, *Error) {
	if firstByte(b) != '{' {
		return nil, InvalidAgentResponse("the agent's send result is not an object")
	}
	var buf [4]member
	ms, _ := splitObject(b, buf[:0])
	for _, mem := range ms {
		switch {
		case mem.is("task"):
			return rest03Task(mem.val, toRPC03), nil
		case mem.is("message"), mem.is("msg"):
			return rest03Message(mem.val, toRPC03), nil
		}
	}
	switch kind03(b) {
	case "task":
		return rest03Task(b, toRPC03), nil
	case "message":
		return rest03Message(b, toRPC03), nil
	}
	return nil, InvalidAgentResponse("the agent's send result is neither a task nor a message")
}
