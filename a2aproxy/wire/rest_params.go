package wire

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A REST call's path ids, query parameters and body become the JSON-RPC
// params of its method (ParseREST's "Bodies"): 1.0 bodies are already
// those params, 0.3 bodies are ProtoJSON and are converted.

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
		o.set("message", shapesRPC03.message(v))
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
