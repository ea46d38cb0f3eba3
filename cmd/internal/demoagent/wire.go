package demoagent

import (
	"encoding/json"
	"strings"
)

// Wire shapes. 0.3 marks every object with "kind" and names states and roles
// in lower case; 1.0 has no "kind", wraps send and stream results in a member
// that names their type, and spells enums the ProtoJSON way.

const timeFormat = "2006-01-02T15:04:05.000Z"

type usageMetadata map[string]Usage

func metadata(u *Usage) usageMetadata {
	if u == nil {
		return nil
	}
	return usageMetadata{UsageExtensionURI: *u}
}

// ---- A2A 0.3 ----

type part03 struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type message03 struct {
	Kind      string   `json:"kind"`
	MessageID string   `json:"messageId"`
	Role      string   `json:"role"`
	Parts     []part03 `json:"parts"`
	TaskID    string   `json:"taskId,omitempty"`
	ContextID string   `json:"contextId,omitempty"`
}

type status03 struct {
	State     string     `json:"state"`
	Message   *message03 `json:"message,omitempty"`
	Timestamp string     `json:"timestamp"`
}

type artifact03 struct {
	ArtifactID string   `json:"artifactId"`
	Name       string   `json:"name,omitempty"`
	Parts      []part03 `json:"parts"`
}

type task03 struct {
	Kind      string        `json:"kind"`
	ID        string        `json:"id"`
	ContextID string        `json:"contextId"`
	Status    status03      `json:"status"`
	Artifacts []artifact03  `json:"artifacts,omitzero"`
	History   []message03   `json:"history,omitzero"`
	Metadata  usageMetadata `json:"metadata,omitempty"`
}

type statusUpdate03 struct {
	Kind      string        `json:"kind"`
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    status03      `json:"status"`
	Final     bool          `json:"final"`
	Metadata  usageMetadata `json:"metadata,omitempty"`
}

type artifactUpdate03 struct {
	Kind      string        `json:"kind"`
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Artifact  artifact03    `json:"artifact"`
	Append    bool          `json:"append"`
	LastChunk bool          `json:"lastChunk"`
	Metadata  usageMetadata `json:"metadata,omitempty"`
}

func parts03(texts []string) []part03 {
	out := make([]part03, len(texts))
	for i, s := range texts {
		out[i] = part03{Kind: "text", Text: s}
	}
	return out
}

func encMessage03(m message) message03 {
	return message03{Kind: "message", MessageID: m.id, Role: m.role, Parts: parts03([]string{m.text}), TaskID: m.taskID, ContextID: m.contextID}
}

func encStatus03(s status) status03 {
	out := status03{State: string(s.state), Timestamp: s.at.Format(timeFormat)}
	if s.msg != nil {
		m := encMessage03(*s.msg)
		out.Message = &m
	}
	return out
}

func encArtifact03(a artifact) artifact03 {
	return artifact03{ArtifactID: a.id, Name: a.name, Parts: parts03(a.parts)}
}

func encTask03(v taskView, withArtifacts bool) task03 {
	out := task03{Kind: "task", ID: v.id, ContextID: v.contextID, Status: encStatus03(v.status), Metadata: metadata(v.usage)}
	if withArtifacts && v.artifacts != nil {
		out.Artifacts = make([]artifact03, 0, len(v.artifacts))
		for _, a := range v.artifacts {
			out.Artifacts = append(out.Artifacts, encArtifact03(a))
		}
	}
	if v.history != nil {
		out.History = make([]message03, 0, len(v.history))
		for _, m := range v.history {
			out.History = append(out.History, encMessage03(m))
		}
	}
	return out
}

// ---- A2A 1.0 ----

type part10 struct {
	Text string `json:"text"`
}

type message10 struct {
	MessageID string   `json:"messageId"`
	ContextID string   `json:"contextId,omitempty"`
	TaskID    string   `json:"taskId,omitempty"`
	Role      string   `json:"role"`
	Parts     []part10 `json:"parts"`
}

type status10 struct {
	State     string     `json:"state"`
	Message   *message10 `json:"message,omitempty"`
	Timestamp string     `json:"timestamp"`
}

type artifact10 struct {
	ArtifactID string   `json:"artifactId"`
	Name       string   `json:"name,omitempty"`
	Parts      []part10 `json:"parts"`
}

type task10 struct {
	ID        string        `json:"id"`
	ContextID string        `json:"contextId"`
	Status    status10      `json:"status"`
	Artifacts []artifact10  `json:"artifacts,omitzero"`
	History   []message10   `json:"history,omitzero"`
	Metadata  usageMetadata `json:"metadata,omitempty"`
}

type statusUpdate10 struct {
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    status10      `json:"status"`
	Metadata  usageMetadata `json:"metadata,omitempty"`
}

type artifactUpdate10 struct {
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Artifact  artifact10    `json:"artifact"`
	Append    bool          `json:"append"`
	LastChunk bool          `json:"lastChunk"`
	Metadata  usageMetadata `json:"metadata,omitempty"`
}

// response10 is SendMessageResponse and StreamResponse: one member set.
type response10 struct {
	Task           *task10           `json:"task,omitempty"`
	StatusUpdate   *statusUpdate10   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *artifactUpdate10 `json:"artifactUpdate,omitempty"`
}

// state10 spells a state as the 1.0 TaskState enum: TASK_STATE_INPUT_REQUIRED.
func state10(s State) string {
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

func parseState10(s string) (State, bool) {
	for _, st := range []State{StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateCanceled} {
		if state10(st) == s {
			return st, true
		}
	}
	switch s {
	case "TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED":
		return State(strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s, "TASK_STATE_"), "_", "-"))), true
	}
	return "", false
}

func role10(r string) string { return "ROLE_" + strings.ToUpper(r) }

func parts10(texts []string) []part10 {
	out := make([]part10, len(texts))
	for i, s := range texts {
		out[i] = part10{Text: s}
	}
	return out
}

func encMessage10(m message) message10 {
	return message10{MessageID: m.id, ContextID: m.contextID, TaskID: m.taskID, Role: role10(m.role), Parts: parts10([]string{m.text})}
}

func encStatus10(s status) status10 {
	out := status10{State: state10(s.state), Timestamp: s.at.Format(timeFormat)}
	if s.msg != nil {
		m := encMessage10(*s.msg)
		out.Message = &m
	}
	return out
}

func encArtifact10(a artifact) artifact10 {
	return artifact10{ArtifactID: a.id, Name: a.name, Parts: parts10(a.parts)}
}

func encTask10(v taskView, withArtifacts bool) task10 {
	out := task10{ID: v.id, ContextID: v.contextID, Status: encStatus10(v.status), Metadata: metadata(v.usage)}
	if withArtifacts && v.artifacts != nil {
		out.Artifacts = make([]artifact10, 0, len(v.artifacts))
		for _, a := range v.artifacts {
			out.Artifacts = append(out.Artifacts, encArtifact10(a))
		}
	}
	if v.history != nil {
		out.History = make([]message10, 0, len(v.history))
		for _, m := range v.history {
			out.History = append(out.History, encMessage10(m))
		}
	}
	return out
}

// ---- results, per version ----

// encTask renders a task as GetTask, CancelTask and ListTasks return it: bare
// in both versions.
func encTask(ver string, v taskView, withArtifacts bool) any {
	if ver == "0.3" {
		return encTask03(v, withArtifacts)
	}
	return encTask10(v, withArtifacts)
}

// encSendResult renders a task as message/send and SendMessage return it:
// bare in 0.3, as {"task": …} in 1.0.
func encSendResult(ver string, v taskView) any {
	if ver == "0.3" {
		return encTask03(v, true)
	}
	t := encTask10(v, true)
	return response10{Task: &t}
}

// encEvent renders a log event as a stream result.
func encEvent(ver string, t *taskIDs, e event) any {
	switch e.kind {
	case evTask:
		return encSendResult(ver, e.task)
	case evStatus:
		if ver == "0.3" {
			return statusUpdate03{Kind: "status-update", TaskID: t.id, ContextID: t.contextID, Status: encStatus03(e.status), Final: e.closes(), Metadata: metadata(e.usage)}
		}
		return response10{StatusUpdate: &statusUpdate10{TaskID: t.id, ContextID: t.contextID, Status: encStatus10(e.status), Metadata: metadata(e.usage)}}
	default:
		if ver == "0.3" {
			return artifactUpdate03{Kind: "artifact-update", TaskID: t.id, ContextID: t.contextID, Artifact: encArtifact03(e.artifact), Append: e.append, LastChunk: e.lastChunk, Metadata: metadata(e.usage)}
		}
		return response10{ArtifactUpdate: &artifactUpdate10{TaskID: t.id, ContextID: t.contextID, Artifact: encArtifact10(e.artifact), Append: e.append, LastChunk: e.lastChunk, Metadata: metadata(e.usage)}}
	}
}

type taskIDs struct{ id, contextID string }

// ---- requests ----

type sendParams03 struct {
	Message *struct {
		Kind      string `json:"kind"`
		MessageID string `json:"messageId"`
		Role      string `json:"role"`
		Parts     []struct {
			Kind string  `json:"kind"`
			Text *string `json:"text"`
		} `json:"parts"`
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	} `json:"message"`
	Configuration *struct {
		Blocking            *bool    `json:"blocking"`
		HistoryLength       *int     `json:"historyLength"`
		AcceptedOutputModes []string `json:"acceptedOutputModes"`
	} `json:"configuration"`
}

type sendParams10 struct {
	Message *struct {
		MessageID string `json:"messageId"`
		Role      string `json:"role"`
		Parts     []struct {
			Text *string         `json:"text"`
			Raw  *string         `json:"raw"`
			URL  *string         `json:"url"`
			Data json.RawMessage `json:"data"`
		} `json:"parts"`
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	} `json:"message"`
	Configuration *struct {
		ReturnImmediately   bool     `json:"returnImmediately"`
		HistoryLength       *int     `json:"historyLength"`
		AcceptedOutputModes []string `json:"acceptedOutputModes"`
	} `json:"configuration"`
}

// decodeSend reads message/send or SendMessage params. Agents here take text
// only; any other part is ContentTypeNotSupported.
func decodeSend(ver string, raw json.RawMessage) (sendInput, *rpcError) {
	in := sendInput{historyLength: -1}
	var texts []string
	var accepted []string
	if ver == "0.3" {
		var p sendParams03
		if err := unmarshalParams(raw, &p); err != nil {
			return in, err
		}
		m := p.Message
		if m == nil {
			return in, errInvalidParams("message", "message is required")
		}
		if m.Kind != "message" {
			return in, errInvalidParams("message.kind", `message.kind must be "message", not %q`, m.Kind)
		}
		if m.Role != "user" {
			return in, errInvalidParams("message.role", `message.role must be "user", not %q`, m.Role)
		}
		for i, pt := range m.Parts {
			switch {
			case pt.Kind == "text" && pt.Text != nil:
				texts = append(texts, *pt.Text)
			case pt.Kind == "file" || pt.Kind == "data":
				return in, errContentType("message.parts[%d] is a %s part; this agent reads text/plain only", i, pt.Kind)
			default:
				return in, errInvalidParams("message.parts", "message.parts[%d] must be a text part with kind \"text\"", i)
			}
		}
		in.messageID, in.taskID, in.contextID = m.MessageID, m.TaskID, m.ContextID
		if c := p.Configuration; c != nil {
			in.returnImmediately = c.Blocking != nil && !*c.Blocking
			if c.HistoryLength != nil {
				in.historyLength = max(0, *c.HistoryLength)
			}
			accepted = c.AcceptedOutputModes
		}
	} else {
		var p sendParams10
		if err := unmarshalParams(raw, &p); err != nil {
			return in, err
		}
		m := p.Message
		if m == nil {
			return in, errInvalidParams("message", "message is required")
		}
		if m.Role != "ROLE_USER" {
			return in, errInvalidParams("message.role", `message.role must be "ROLE_USER", not %q`, m.Role)
		}
		for i, pt := range m.Parts {
			set := 0
			for _, ok := range []bool{pt.Text != nil, pt.Raw != nil, pt.URL != nil, pt.Data != nil} {
				if ok {
					set++
				}
			}
			switch {
			case set != 1:
				return in, errInvalidParams("message.parts", "message.parts[%d] must set exactly one of text, raw, url, data", i)
			case pt.Text == nil:
				return in, errContentType("message.parts[%d] is not text; this agent reads text/plain only", i)
			}
			texts = append(texts, *pt.Text)
		}
		in.messageID, in.taskID, in.contextID = m.MessageID, m.TaskID, m.ContextID
		if c := p.Configuration; c != nil {
			in.returnImmediately = c.ReturnImmediately
			if c.HistoryLength != nil {
				in.historyLength = max(0, *c.HistoryLength)
			}
			accepted = c.AcceptedOutputModes
		}
	}
	if in.messageID == "" {
		return in, errInvalidParams("message.messageId", "message.messageId is required")
	}
	in.text = strings.Join(texts, "\n")
	if len(strings.Fields(in.text)) == 0 {
		return in, errInvalidParams("message.parts", "message.parts must hold some text")
	}
	if len(accepted) > 0 && !acceptsText(accepted) {
		return in, errContentType("acceptedOutputModes %v excludes text/plain, the only output of this agent", accepted)
	}
	return in, nil
}

func acceptsText(modes []string) bool {
	for _, m := range modes {
		m = strings.ToLower(strings.TrimSpace(m))
		if m == "text/plain" || m == "text/*" || m == "*/*" {
			return true
		}
	}
	return false
}

type idParams struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength"`
}

func decodeID(raw json.RawMessage) (idParams, *rpcError) {
	var p idParams
	if err := unmarshalParams(raw, &p); err != nil {
		return p, err
	}
	if p.ID == "" {
		return p, errInvalidParams("id", "id is required")
	}
	return p, nil
}

func unmarshalParams(raw json.RawMessage, v any) *rpcError {
	if len(raw) == 0 || string(raw) == "null" {
		return errInvalidParams("params", "params are required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errInvalidParams("params", "params do not match the method: %v", err)
	}
	return nil
}
