package wire

import (
	"strconv"
)

// The 0.3 shapes: the JSON-RPC binding's (the JSON schema: "kind" marks,
// role "user", parts, states "working") and the REST binding's (the
// ProtoJSON of the 0.3 proto). dir03 says which way a conversion goes.
// Like translate.go, only what differs is rewritten (the walk is
// shapes.go's); other members are copied through in place.
type dir03 bool

const (
	toProto03 dir03 = true  // JSON-RPC shapes → ProtoJSON (REST)
	toRPC03   dir03 = false // ProtoJSON (REST) → JSON-RPC shapes
)

// The conversions each way, as shapes tables.
var (
	shapesProto03 = &shapes{
		mark:    func(o *object, _ string) { o.del("kind") },
		role:    V10, // ROLE_USER, as the 0.3 proto spells it too
		state:   func(v []byte) []byte { return rest03State(v, toProto03) },
		part:    func(b []byte) []byte { return rest03Part(b, toProto03) },
		content: contentToProto03,
		final:   func(*object, []byte) {},
	}
	shapesRPC03 = &shapes{
		mark: func(o *object, kind string) {
			if _, ok := o.get("kind"); !ok {
				o.set("kind", quoteASCII(kind))
			}
		},
		role:    V03,
		state:   func(v []byte) []byte { return rest03State(v, toRPC03) },
		part:    func(b []byte) []byte { return rest03Part(b, toRPC03) },
		content: contentFromProto03,
		final: func(o *object, _ []byte) {
			if _, ok := o.get("final"); !ok {
				o.set("final", jsonFalse) // a proto3 bool: absent is false
			}
		},
		msg: true,
	}
)

// contentToProto03 renames a message's parts to the proto's "content" and
// drops referenceTaskIds, which the 0.3 proto lacks and whose parsers
// refuse unknown fields.
func contentToProto03(o *object, part func([]byte) []byte) {
	o.del("referenceTaskIds")
	if v, ok := o.get("parts"); ok {
		o.rename("parts", "content")
		o.set("content", mapArray(v, part))
	}
}

// contentFromProto03 renames the proto's "content" back to "parts";
// JSON-RPC shaped parts are read too.
func contentFromProto03(o *object, part func([]byte) []byte) {
	if v, ok := o.get("content"); ok {
		o.rename("content", "parts")
		o.set("parts", mapArray(v, part))
	} else {
		o.mapItems("parts", part)
	}
}

// normalize03State spells a state of any version the 0.3 JSON-RPC way,
// the 0.3 proto's TASK_STATE_CANCELLED included.
func normalize03State(s string) string {
	if s == "TASK_STATE_CANCELLED" || s == "cancelled" {
		return "canceled"
	}
	return NormalizeState(s)
}

// quoteASCII quotes a string known to need no escaping (kinds, enum
// names) without encoding/json.
func quoteASCII(s string) []byte {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
		config := stringMember(inner, "id")
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
	if out, ok := shapesProto03.wrapEvent(m, b); ok {
		return out
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
	if out, ok := shapesRPC03.unwrapEvent(m, ms); ok {
		return out, nil
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
	if out, ok := shapesRPC03.unwrapEvent(MethodSend, ms); ok { // no updates
		return out, nil
	}
	switch kind03(b) {
	case "task":
		return shapesRPC03.task(b), nil
	case "message":
		return shapesRPC03.message(b), nil
	}
	return nil, InvalidAgentResponse("the agent's send result is neither a task nor a message")
}
