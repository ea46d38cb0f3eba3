package wire

import (
	"strconv"
)

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
