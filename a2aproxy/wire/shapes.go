package wire

// A Task holds its status, messages and artifacts, a status holds a
// message, messages and artifacts hold parts, and the stream events hold
// a status or an artifact. Every conversion of these shapes walks them
// alike: between versions (translate.go) and between the 0.3 JSON-RPC
// and ProtoJSON shapes (rest_proto03.go). A shapes table says what one
// conversion does to the members that differ; its methods are the one
// walk. Only what the table rewrites changes; every other member is
// copied through in place.

// shapes is one conversion of the A2A object shapes.
type shapes struct {
	mark  func(o *object, kind string) // sets or removes the 0.3 "kind"
	role  Version                      // whose spelling of a message's role
	state func(v []byte) []byte
	part  func(b []byte) []byte
	// content rewrites a message's parts, with part for each; nil maps
	// "parts".
	content func(o *object, part func([]byte) []byte)
	// status rewrites what else a task status needs; nil: nothing.
	status func(o *object)
	// final sets a status update's "final" from its converted status (nil
	// when it has none).
	final func(o *object, status []byte)
	// msg reads "msg" as "message" when unwrapping an event, as the 0.3
	// proto names a SendMessageResponse's message.
	msg bool
}

func (s *shapes) task(b []byte) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	s.mark(o, "task")
	if v, ok := o.get("status"); ok {
		o.set("status", s.taskStatus(v))
	}
	o.mapItems("artifacts", s.artifact)
	o.mapItems("history", s.message)
	return o.bytes()
}

func (s *shapes) taskStatus(b []byte) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	if v, ok := o.get("state"); ok {
		o.set("state", s.state(v))
	}
	if v, ok := o.get("message"); ok && !isNull(v) {
		o.set("message", s.message(v))
	}
	if s.status != nil {
		s.status(o)
	}
	return o.bytes()
}

func (s *shapes) message(b []byte) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	s.mark(o, "message")
	if v, ok := o.get("role"); ok {
		o.set("role", translateRole(v, s.role))
	}
	if s.content != nil {
		s.content(o, s.part)
	} else {
		o.mapItems("parts", s.part)
	}
	return o.bytes()
}

func (s *shapes) artifact(b []byte) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	o.mapItems("parts", s.part)
	return o.bytes()
}

func (s *shapes) statusEvent(b []byte) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	s.mark(o, "status-update")
	var status []byte
	if v, ok := o.get("status"); ok {
		status = s.taskStatus(v)
		o.set("status", status)
	}
	s.final(o, status)
	return o.bytes()
}

func (s *shapes) artifactEvent(b []byte) []byte {
	o, ok := parseObject8(b)
	if !ok {
		return b
	}
	s.mark(o, "artifact-update")
	if v, ok := o.get("artifact"); ok {
		o.set("artifact", s.artifact(v))
	}
	return o.bytes()
}

// wrapEvent converts a 0.3 send result or stream event (a Task, a Message,
// or for streaming methods an update, known by kind03) and wraps it in the
// member that names its type; ok is false for anything else.
func (s *shapes) wrapEvent(m Method, b []byte) (_ []byte, ok bool) {
	switch kind03(b) {
	case "task":
		return wrap("task", s.task(b)), true
	case "message":
		return wrap("message", s.message(b)), true
	case "status-update":
		if m.Streaming() {
			return wrap("statusUpdate", s.statusEvent(b)), true
		}
	case "artifact-update":
		if m.Streaming() {
			return wrap("artifactUpdate", s.artifactEvent(b)), true
		}
	}
	return nil, false
}

// unwrapEvent converts the object inside a wrapped send result or stream
// event, given as the wrapper's members; ok is false when none of them
// is one (updates count for streaming methods only).
func (s *shapes) unwrapEvent(m Method, ms []member) (_ []byte, ok bool) {
	for _, mem := range ms {
		switch {
		case mem.is("task"):
			return s.task(mem.val), true
		case mem.is("message"), s.msg && mem.is("msg"):
			return s.message(mem.val), true
		case mem.is("statusUpdate") && m.Streaming():
			return s.statusEvent(mem.val), true
		case mem.is("artifactUpdate") && m.Streaming():
			return s.artifactEvent(mem.val), true
		}
	}
	return nil, false
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
