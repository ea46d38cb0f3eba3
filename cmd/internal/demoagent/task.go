package demoagent

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The task model is version-neutral; wire.go renders it in 0.3 or 1.0.

type message struct {
	id        string
	role      string // "user" or "agent"
	text      string
	taskID    string
	contextID string
}

type artifact struct {
	id    string
	name  string
	parts []string // text parts
}

type status struct {
	state State
	msg   *message
	at    time.Time
}

type eventKind int

const (
	evTask     eventKind = iota + 1 // a Task snapshot: the first event of every run
	evStatus                        // TaskStatusUpdateEvent
	evArtifact                      // TaskArtifactUpdateEvent
)

// event is one entry of a task's log. Streams replay the log from the event
// their run began with, so every stream of a task sees the same events in
// the same order however the goroutines are scheduled.
type event struct {
	kind      eventKind
	task      taskView // evTask
	status    status   // evStatus
	artifact  artifact // evArtifact: the chunk, one part
	append    bool
	lastChunk bool
	usage     *Usage // nil when usage is not reported
}

// closes reports whether a stream ends after e: at a terminal or an
// interrupted state.
func (e event) closes() bool {
	return e.kind == evStatus && (e.status.state.Terminal() || e.status.state.interrupted())
}

type task struct {
	id, contextID string
	seq           int
	status        status
	states        []State
	history       []message
	artifacts     []artifact
	input         []string // user texts
	outputChunks  []string // artifact chunks produced
	outWords      int64    // words produced: chunks and questions
	reportUsage   bool
	activated     bool
	headers       http.Header

	events  []event
	changed chan struct{} // closed and replaced whenever an event is logged
	stop    chan struct{} // closed by cancel to stop the running run
}

func (t *task) usage(model string) Usage {
	var in int64
	for _, s := range t.input {
		in += int64(len(strings.Fields(s)))
	}
	return Usage{InputTokens: in, OutputTokens: t.outWords, ComputeMs: ComputeMsPerWord * t.outWords, Model: model}
}

// taskView is a deep copy of a task, safe to render without the lock.
type taskView struct {
	id, contextID string
	status        status
	history       []message // nil: omitted
	artifacts     []artifact
	usage         *Usage
}

// view copies t. historyLength < 0 means all history; 0 omits it.
func (a *Agent) view(t *task, historyLength int) taskView {
	v := taskView{id: t.id, contextID: t.contextID, status: t.status}
	if t.status.msg != nil {
		m := *t.status.msg
		v.status.msg = &m
	}
	if historyLength != 0 && len(t.history) > 0 {
		h := t.history
		if historyLength > 0 && len(h) > historyLength {
			h = h[len(h)-historyLength:]
		}
		v.history = append([]message{}, h...)
	}
	for _, ar := range t.artifacts {
		v.artifacts = append(v.artifacts, artifact{id: ar.id, name: ar.name, parts: append([]string(nil), ar.parts...)})
	}
	v.usage = a.reported(t)
	return v
}

func (a *Agent) reported(t *task) *Usage {
	if !t.reportUsage {
		return nil
	}
	u := t.usage(a.cfg.Model)
	return &u
}

// logEvent appends e to t's log and wakes the streams waiting on it. The
// caller holds a.mu.
func (a *Agent) logEvent(t *task, e event) {
	t.events = append(t.events, e)
	close(t.changed)
	t.changed = make(chan struct{})
}

func (a *Agent) setStatus(t *task, st State, msg *message) {
	t.status = status{state: st, msg: msg, at: a.cfg.Now().UTC()}
	if t.states[len(t.states)-1] != st {
		t.states = append(t.states, st)
	}
}

func (a *Agent) nextID() int {
	a.seq++
	return a.seq
}

// sendInput is a send request, whatever its version.
type sendInput struct {
	messageID, taskID, contextID string
	text                         string
	returnImmediately            bool
	historyLength                int // -1: unset
}

// plan says what a run does; it follows from the text alone.
type plan struct {
	clarify bool
	slow    bool
}

// accept creates a task for in, or resumes the task it names, and starts a
// run. It returns the task and the index in its log of the run's first
// event, a Task snapshot.
func (a *Agent) accept(in sendInput, h http.Header) (*task, int, *rpcError) {
	a.mu.Lock()
	defer a.mu.Unlock()

	var t *task
	var p plan
	if in.taskID != "" {
		t = a.tasks[in.taskID]
		if t == nil {
			return nil, 0, errTaskNotFound(in.taskID)
		}
		if in.contextID != "" && in.contextID != t.contextID {
			return nil, 0, errInvalidParams("message.contextId",
				"contextId %q does not match the context %q of task %s", in.contextID, t.contextID, t.id)
		}
		switch st := t.status.state; {
		case st.Terminal():
			return nil, 0, errUnsupported("task %s is %s: a task in a terminal state accepts no more messages", t.id, st)
		case st != StateInputRequired:
			return nil, 0, errUnsupported("task %s is %s: this agent takes a follow-up only in input-required", t.id, st)
		}
		a.addUserMessage(t, in)
		a.setStatus(t, StateWorking, nil)
		p = plan{slow: hasWord(strings.Join(t.input, "\n"), "slow")}
	} else {
		n := a.nextID()
		t = &task{
			id:        "task-" + a.idPrefix + strconv.Itoa(n),
			contextID: in.contextID,
			seq:       n,
			headers:   h.Clone(),
			changed:   make(chan struct{}),
		}
		if t.contextID == "" {
			t.contextID = "ctx-" + a.idPrefix + strconv.Itoa(n)
		}
		t.activated = activates(a.cfg.Version, h)
		t.reportUsage = a.cfg.ReportUsage && (t.activated || !a.cfg.RequireActivation)
		t.status = status{state: StateSubmitted, at: a.cfg.Now().UTC()}
		t.states = []State{StateSubmitted}
		a.addUserMessage(t, in)
		a.tasks[t.id] = t
		a.order = append(a.order, t)
		p = plan{clarify: hasWord(in.text, "clarify"), slow: hasWord(in.text, "slow")}
	}

	start := len(t.events)
	a.logEvent(t, event{kind: evTask, task: a.view(t, -1), usage: a.reported(t)})
	t.stop = make(chan struct{})
	go a.run(t, p, t.stop)
	return t, start, nil
}

func (a *Agent) addUserMessage(t *task, in sendInput) {
	t.input = append(t.input, in.text)
	t.history = append(t.history, message{id: in.messageID, role: "user", text: in.text, taskID: t.id, contextID: t.contextID})
}

// run produces the events of one run: working, then either a question
// (input-required) or the artifact in chunks and completed. It stops at the
// first event a cancel has made moot.
func (a *Agent) run(t *task, p plan, stop <-chan struct{}) {
	pause := func(d time.Duration) bool {
		if d <= 0 {
			select {
			case <-stop:
				return false
			default:
				return true
			}
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-stop:
			return false
		case <-timer.C:
			return true
		}
	}
	step := a.cfg.StepDelay

	if !pause(step) || !a.emitStatus(t, StateWorking, "") {
		return
	}
	if p.clarify {
		if pause(step) {
			a.emitStatus(t, StateInputRequired, question)
		}
		return
	}
	if p.slow && !pause(a.cfg.SlowDelay) {
		return
	}

	a.mu.Lock()
	words := strings.Fields(strings.Join(t.input, "\n"))
	a.mu.Unlock()
	out := strings.Fields(behaviors[a.cfg.Behavior].produce(words))
	chunks := split(out, a.cfg.Chunks)
	for i, c := range chunks {
		if !pause(step) || !a.emitChunk(t, c, i > 0, i == len(chunks)-1) {
			return
		}
	}
	if pause(step) {
		a.emitStatus(t, StateCompleted, "")
	}
}

// emitStatus moves t to st, with an agent message when text is set. It
// reports false, changing nothing, once t is terminal.
func (a *Agent) emitStatus(t *task, st State, text string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.status.state.Terminal() {
		return false
	}
	var msg *message
	if text != "" {
		m := message{id: t.id + "-msg-" + strconv.Itoa(len(t.history)+1), role: "agent", text: text, taskID: t.id, contextID: t.contextID}
		t.history = append(t.history, m)
		t.outWords += int64(len(strings.Fields(text)))
		msg = &m
	}
	a.setStatus(t, st, msg)
	a.logEvent(t, a.statusEvent(t))
	return true
}

func (a *Agent) statusEvent(t *task) event {
	e := event{kind: evStatus, status: t.status, usage: a.reported(t)}
	if t.status.msg != nil {
		m := *t.status.msg
		e.status.msg = &m
	}
	return e
}

func (a *Agent) emitChunk(t *task, chunk string, appendTo, last bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.status.state.Terminal() {
		return false
	}
	id := "artifact-" + strconv.Itoa(t.seq)
	name := behaviors[a.cfg.Behavior].artifactName
	// Appending adds a part, as the SDKs do with append=true, so the task's
	// artifact ends up with one part per chunk.
	if appendTo && len(t.artifacts) > 0 {
		ar := &t.artifacts[len(t.artifacts)-1]
		ar.parts = append(ar.parts, chunk)
	} else {
		t.artifacts = append(t.artifacts, artifact{id: id, name: name, parts: []string{chunk}})
	}
	t.outputChunks = append(t.outputChunks, chunk)
	t.outWords += int64(len(strings.Fields(chunk)))
	a.logEvent(t, event{
		kind:      evArtifact,
		artifact:  artifact{id: id, name: name, parts: []string{chunk}},
		append:    appendTo,
		lastChunk: last,
		usage:     a.reported(t),
	})
	return true
}

// cancel moves a task that is not terminal to canceled and stops its run.
func (a *Agent) cancel(id string) (taskView, *rpcError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tasks[id]
	if t == nil {
		return taskView{}, errTaskNotFound(id)
	}
	if t.status.state.Terminal() {
		return taskView{}, errNotCancelable(id, t.status.state)
	}
	a.setStatus(t, StateCanceled, nil)
	a.logEvent(t, a.statusEvent(t))
	if t.stop != nil {
		close(t.stop)
		t.stop = nil
	}
	return a.view(t, -1), nil
}

// next returns the events of t from index from on, waiting for one when
// there is none yet. It returns nil when ctx is done first.
func (a *Agent) next(ctx context.Context, t *task, from int) []event {
	for {
		a.mu.Lock()
		if from < len(t.events) {
			evs := append([]event(nil), t.events[from:]...)
			a.mu.Unlock()
			return evs
		}
		changed := t.changed
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// waitFor waits until an event at or after index from satisfies done. It
// reports false when ctx is done first.
func (a *Agent) waitFor(ctx context.Context, t *task, from int, done func(event) bool) bool {
	for {
		evs := a.next(ctx, t, from)
		if evs == nil {
			return false
		}
		for _, e := range evs {
			if done(e) {
				return true
			}
		}
		from += len(evs)
	}
}
