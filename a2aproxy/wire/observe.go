package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// UsageExtensionURI is the AgentMarket usage extension. An agent that
// declares it in capabilities.extensions reports cumulative per-task usage
// in any metadata map of a Task, Message, Artifact or event, under this key:
//
//	{"inputTokens": 120, "outputTokens": 512, "computeMs": 830, "model": "m-1"}
const UsageExtensionURI = "https://agentmarket.dev/a2a/extensions/usage/v1"

// Reported is one usage report of the usage extension: counters cumulative
// for the task so far.
type Reported struct {
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	ComputeMs    int64  `json:"computeMs"`
	Model        string `json:"model,omitempty"`
}

// Kind is the type of object a result or stream event carries.
type Kind int

const (
	KindOther Kind = iota
	KindTask
	KindMessage
	KindStatusUpdate
	KindArtifactUpdate
)

func (k Kind) String() string {
	switch k {
	case KindTask:
		return "task"
	case KindMessage:
		return "message"
	case KindStatusUpdate:
		return "statusUpdate"
	case KindArtifactUpdate:
		return "artifactUpdate"
	}
	return "other"
}

// ArtifactChunk is the text of an artifact, or of one chunk of it.
type ArtifactChunk struct {
	ArtifactID string
	Text       string // the artifact's text parts, concatenated
	Append     bool   // the text continues what was sent before for this artifact
	LastChunk  bool
}

// Observation is what metering and routing learn from one result or
// stream event.
type Observation struct {
	Kind      Kind
	TaskID    string
	ContextID string
	// State is the task state in 0.3 spelling ("working", "input-required",
	// ...), whatever the version; "" when the object carries none.
	State       string
	Terminal    bool // completed, failed, canceled, rejected
	Interrupted bool // input-required, auth-required
	// Final is the 0.3 status-update "final" flag. 1.0 has none: its server
	// ends the stream at a terminal or interrupted state.
	Final bool
	// Usage is the usage-extension report with the largest counters among
	// every metadata map in the object (task, status message, artifacts,
	// history, message, event); nil when there is none.
	Usage *Reported
	// Artifacts are the artifact texts the object carries: every artifact
	// of a Task (Append false, LastChunk true), or the chunk of an
	// artifact update.
	Artifacts []ArtifactChunk
	// AgentTexts are the text parts of the agent's messages: the status
	// message, a Message result, and history entries with role agent.
	AgentTexts []string
}

// Observe reads the result of a send, get or cancel response, or of one
// stream event, in version v. Send results, stream events and the bare
// Task of get and cancel are recognised in both versions: 0.3 objects by
// their "kind", 1.0 ones by their wrapper member (task, message,
// statusUpdate, artifactUpdate), a bare Task by its id and status. Other
// methods and unrecognised results give KindOther; members of unexpected
// types are skipped.
//
// v is the version the agent speaks; both versions' shapes are recognised
// whatever it says, as agents do not always keep to their card. result
// must be JSON, as ParseResponse returns it (having checked it); on
// anything else the observation is meaningless, but Observe stays safe.
// Keys match exactly.
func Observe(v Version, m Method, result json.RawMessage) Observation {
	var o Observation
	switch m {
	case MethodSend, MethodStream, MethodSubscribe, MethodGetTask, MethodCancelTask:
	default:
		return o
	}
	var buf [16]member
	top, ok := splitObject(result, buf[:0])
	if !ok {
		return o
	}
	var inner [16]member
	obj, k := unwrap(top, inner[:0])
	o.Kind = k
	var f fields
	f.read(obj)
	switch k {
	case KindTask:
		o.TaskID, o.ContextID = f.id, f.contextID
		o.status(f.status)
		forEach(f.artifacts, func(a []byte) { o.artifact(a, false, true) })
		forEach(f.history, func(h []byte) { o.message(h, false) })
	case KindMessage:
		o.TaskID, o.ContextID = f.taskID, f.contextID
		if f.role != "user" {
			o.agentTexts(f.parts)
		}
	case KindStatusUpdate:
		o.TaskID, o.ContextID = f.taskID, f.contextID
		o.Final = f.final
		o.status(f.status)
	case KindArtifactUpdate:
		o.TaskID, o.ContextID = f.taskID, f.contextID
		o.artifact(f.artifact, f.append, f.lastChunk)
	default:
		return o
	}
	o.usage(f.metadata)
	return o
}

// fields are the members of a Task, Message or update event that Observe
// reads: names shared by several shapes mean the same in each.
type fields struct {
	kind, id, taskID, contextID, role string
	parts, status, artifacts, history []byte
	artifact, metadata                []byte
	append, lastChunk, final          bool
}

func (f *fields) read(ms []member) {
	for _, m := range ms {
		switch {
		case m.is("kind"):
			f.kind = kind(m.val)
		case m.is("id"):
			f.id, _ = unquote(m.val)
		case m.is("taskId"):
			f.taskID, _ = unquote(m.val)
		case m.is("contextId"):
			f.contextID, _ = unquote(m.val)
		case m.is("role"):
			f.role = role(m.val)
		case m.is("parts"):
			f.parts = m.val
		case m.is("status"):
			f.status = m.val
		case m.is("artifacts"):
			f.artifacts = m.val
		case m.is("history"):
			f.history = m.val
		case m.is("artifact"):
			f.artifact = m.val
		case m.is("metadata"):
			f.metadata = m.val
		case m.is("append"):
			f.append = string(m.val) == "true"
		case m.is("lastChunk"):
			f.lastChunk = string(m.val) == "true"
		case m.is("final"):
			f.final = string(m.val) == "true"
		}
	}
}

// unwrap finds the object a result carries and its kind: inside a 1.0
// wrapper, marked by a 0.3 kind, or told by its members.
func unwrap(top []member, inner []member) ([]member, Kind) {
	for _, m := range top {
		var k Kind
		switch {
		case m.is("task"):
			k = KindTask
		case m.is("message"):
			k = KindMessage
		case m.is("statusUpdate"):
			k = KindStatusUpdate
		case m.is("artifactUpdate"):
			k = KindArtifactUpdate
		default:
			continue
		}
		if ms, ok := splitObject(m.val, inner); ok {
			return ms, k
		}
	}
	var f fields
	f.read(top)
	switch f.kind {
	case "task":
		return top, KindTask
	case "message":
		return top, KindMessage
	case "status-update":
		return top, KindStatusUpdate
	case "artifact-update":
		return top, KindArtifactUpdate
	}
	// No marker: a 1.0 bare Task (get, cancel) or a 0.3 object without its
	// kind.
	switch {
	case f.artifact != nil:
		return top, KindArtifactUpdate
	case f.status != nil && f.id != "":
		return top, KindTask
	case f.status != nil && f.taskID != "":
		return top, KindStatusUpdate
	case f.parts != nil:
		return top, KindMessage
	}
	return top, KindOther
}

func forEach(arr []byte, fn func([]byte)) {
	var buf [16][]byte
	els, _ := splitArray(arr, buf[:0])
	for _, el := range els {
		fn(el)
	}
}

func (o *Observation) status(b []byte) {
	var buf [4]member
	ms, ok := splitObject(b, buf[:0])
	if !ok {
		return
	}
	for _, m := range ms {
		switch {
		case m.is("state"):
			o.State = state(m.val)
			o.Terminal, o.Interrupted = terminal(o.State), interrupted(o.State)
		case m.is("message"):
			o.message(m.val, true)
		}
	}
}

// message reads a status or history message: its text counts as the
// agent's unless its role is user (a status message is the agent's even
// without a role).
func (o *Observation) message(b []byte, status bool) {
	var buf [10]member
	ms, ok := splitObject(b, buf[:0])
	if !ok {
		return
	}
	var f fields
	f.read(ms)
	if f.role == "agent" || (status && f.role != "user") {
		o.agentTexts(f.parts)
	}
	o.usage(f.metadata)
}

func (o *Observation) artifact(b []byte, appendChunk, last bool) {
	var buf [8]member
	ms, ok := splitObject(b, buf[:0])
	if !ok {
		return
	}
	var id string
	var parts, meta []byte
	for _, m := range ms {
		switch {
		case m.is("artifactId"):
			id, _ = unquote(m.val)
		case m.is("parts"):
			parts = m.val
		case m.is("metadata"):
			meta = m.val
		}
	}
	o.Artifacts = append(o.Artifacts, ArtifactChunk{ArtifactID: id, Text: joinText(parts), Append: appendChunk, LastChunk: last})
	o.usage(meta)
}

func (o *Observation) agentTexts(parts []byte) {
	forEach(parts, func(p []byte) {
		if t := partText(p); t != "" {
			o.AgentTexts = append(o.AgentTexts, t)
		}
	})
}

// partText is the text of a text part, 0.3 {kind:"text",text} or 1.0
// {text}.
func partText(p []byte) string {
	var buf [4]member
	ms, _ := splitObject(p, buf[:0])
	var t string
	for _, m := range ms {
		if m.is("text") {
			t, _ = unquote(m.val)
		}
	}
	return t
}

// joinText concatenates the texts of an artifact's parts.
func joinText(parts []byte) string {
	var out string
	var b []byte
	n := 0
	forEach(parts, func(p []byte) {
		t := partText(p)
		if t == "" {
			return
		}
		switch n++; n {
		case 1:
			out = t
		case 2:
			b = append(append(b, out...), t...)
		default:
			b = append(b, t...)
		}
	})
	if n > 1 {
		return string(b)
	}
	return out
}

// usage keeps the report with the largest counters: they are cumulative,
// so the largest is the latest.
func (o *Observation) usage(meta []byte) {
	var buf [8]member
	ms, _ := splitObject(meta, buf[:0])
	var rep []byte
	for _, m := range ms {
		if m.is(UsageExtensionURI) {
			rep = m.val
		}
	}
	if rep == nil {
		return
	}
	var ubuf [6]member
	us, ok := splitObject(rep, ubuf[:0])
	if !ok {
		return
	}
	var r Reported
	for _, m := range us {
		switch {
		case m.is("inputTokens"):
			r.InputTokens = counter(m.val)
		case m.is("outputTokens"):
			r.OutputTokens = counter(m.val)
		case m.is("computeMs"):
			r.ComputeMs = counter(m.val)
		case m.is("model"):
			r.Model, _ = unquote(m.val)
		}
	}
	if o.Usage == nil {
		o.Usage = &r
		return
	}
	cur := o.Usage
	// Counters are non-negative: their sum as uint64 cannot wrap.
	a, b := uint64(r.InputTokens)+uint64(r.OutputTokens), uint64(cur.InputTokens)+uint64(cur.OutputTokens)
	if a > b || (a == b && r.ComputeMs > cur.ComputeMs) {
		if r.Model == "" {
			r.Model = cur.Model
		}
		*cur = r
	} else if cur.Model == "" {
		cur.Model = r.Model
	}
}

// counter reads a usage counter leniently: an integer, a number (truncated)
// or a numeric string; anything else, and negatives, count 0. A number past
// the int64 range reads as math.MaxInt64, not 0: the meter clamps reports
// to its bound (metering.Counters.Clamp) and flags them, so a huge report
// is never silently free, nor wrapped.
func counter(v []byte) int64 {
	s := string(v)
	if str, ok := unquote(v); ok {
		s = str
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return max(n, 0)
	}
	if errors.Is(err, strconv.ErrRange) {
		return max(n, 0) // ParseInt's bound of the sign it read
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), !(f > 0):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(f)
}

// state reads a task state of either version, or a 1.0 ProtoJSON enum
// number, in 0.3 spelling.
func state(v []byte) string {
	if in, ok := plainString(v); ok {
		for _, st := range states { // compared in place: known states cost no allocation
			if string(in) == st.v03 || string(in) == st.v10 {
				return st.v03
			}
		}
	}
	if s, ok := unquote(v); ok {
		return s
	}
	if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 && n < len(states) {
		return states[n].v03
	}
	return ""
}

// kind reads a 0.3 kind marker; only the four kinds of results matter.
func kind(v []byte) string {
	in, _ := plainString(v)
	for _, k := range [...]string{"task", "message", "status-update", "artifact-update"} {
		if string(in) == k {
			return k
		}
	}
	return ""
}

// role reads a message role of either version (or its enum number) as
// "user" or "agent"; other values are returned as they are.
func role(v []byte) string {
	if in, ok := plainString(v); ok {
		switch string(in) {
		case "user", "ROLE_USER":
			return "user"
		case "agent", "ROLE_AGENT":
			return "agent"
		}
	}
	switch string(v) {
	case "1":
		return "user"
	case "2":
		return "agent"
	}
	s, _ := unquote(v)
	return s
}

// plainString returns the content of a JSON string without escapes.
func plainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// states lists the task states by their 1.0 enum number.
var states = [...]struct{ v03, v10 string }{
	{"unknown", "TASK_STATE_UNSPECIFIED"},
	{"submitted", "TASK_STATE_SUBMITTED"},
	{"working", "TASK_STATE_WORKING"},
	{"completed", "TASK_STATE_COMPLETED"},
	{"failed", "TASK_STATE_FAILED"},
	{"canceled", "TASK_STATE_CANCELED"},
	{"input-required", "TASK_STATE_INPUT_REQUIRED"},
	{"rejected", "TASK_STATE_REJECTED"},
	{"auth-required", "TASK_STATE_AUTH_REQUIRED"},
}

// NormalizeState spells a task state of either version the 0.3 way
// ("TASK_STATE_INPUT_REQUIRED" → "input-required"). Unknown values are
// returned unchanged.
func NormalizeState(s string) string {
	for _, st := range states {
		if s == st.v03 || s == st.v10 {
			return st.v03
		}
	}
	return s
}

// stateTo10 spells a state the 1.0 way; unknown values are unchanged.
func stateTo10(s string) string {
	for _, st := range states {
		if s == st.v03 || s == st.v10 {
			return st.v10
		}
	}
	return s
}

// Terminal reports whether a state (0.3 spelling, as Observation.State
// has it) is final: completed, failed, canceled, rejected.
func Terminal(s string) bool { return terminal(s) }

func terminal(s string) bool {
	switch s {
	case "completed", "failed", "canceled", "rejected":
		return true
	}
	return false
}

func interrupted(s string) bool {
	return s == "input-required" || s == "auth-required"
}
