package demoagent

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// send serves message/send and SendMessage. Blocking (the default in both
// versions) waits for a terminal or interrupted state; 0.3 blocking=false and
// 1.0 returnImmediately=true wait only for the task to be working.
func (a *Agent) send(c *call) {
	in, err := decodeSend(a.cfg.Version, c.params)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	t, start, err := a.accept(in, c.r.Header)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	done := event.closes
	if in.returnImmediately {
		done = func(e event) bool { return e.kind == evStatus }
	}
	if !a.waitFor(c.r.Context(), t, start, done) {
		return // the client is gone; the task goes on without it
	}
	a.mu.Lock()
	v := a.view(t, in.historyLength)
	a.mu.Unlock()
	a.reply(c, encSendResult(a.cfg.Version, v))
}

// streamSend serves message/stream and SendStreamingMessage: the Task first,
// then every event of the run until a terminal or interrupted state.
func (a *Agent) streamSend(c *call) {
	if a.cfg.NoStreaming {
		a.fail(c.w, c.id, errUnsupported("streaming is not supported by this agent"))
		return
	}
	in, err := decodeSend(a.cfg.Version, c.params)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	t, start, err := a.accept(in, c.r.Header)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	a.pump(c.r.Context(), startSSE(c.w, c.id), t, start)
}

// pump writes t's events from index from on, until one closes the stream.
func (a *Agent) pump(ctx context.Context, s *sse, t *task, from int) {
	ids := &taskIDs{id: t.id, contextID: t.contextID}
	for {
		evs := a.next(ctx, t, from)
		if evs == nil {
			return
		}
		for _, e := range evs {
			if s.send(encEvent(a.cfg.Version, ids, e)) != nil || e.closes() {
				return
			}
		}
		from += len(evs)
	}
}

// subscribe serves tasks/resubscribe and SubscribeToTask: the task as it is
// now, then the rest of its events. A task already interrupted ends the
// stream at once. A terminal task is UnsupportedOperation in 1.0 (§3.1.6);
// 0.3 leaves it open, so a 0.3 client that lost its stream just before the
// end gets the task and its final status.
func (a *Agent) subscribe(c *call) {
	if a.cfg.NoStreaming {
		a.fail(c.w, c.id, errUnsupported("streaming is not supported by this agent"))
		return
	}
	p, err := decodeID(c.params)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	a.mu.Lock()
	t := a.tasks[p.ID]
	if t == nil {
		a.mu.Unlock()
		a.fail(c.w, c.id, errTaskNotFound(p.ID))
		return
	}
	st := t.status.state
	if st.Terminal() && a.cfg.Version == "1.0" {
		a.mu.Unlock()
		a.fail(c.w, c.id, errUnsupported("task %s is %s: a task in a terminal state has no updates to subscribe to", t.id, st))
		return
	}
	snap := a.view(t, -1)
	current := a.statusEvent(t)
	from := len(t.events)
	a.mu.Unlock()

	s := startSSE(c.w, c.id)
	if s.send(encSendResult(a.cfg.Version, snap)) != nil {
		return
	}
	if st.Terminal() || st.interrupted() {
		if a.cfg.Version == "0.3" {
			_ = s.send(encEvent(a.cfg.Version, &taskIDs{id: t.id, contextID: t.contextID}, current))
		}
		return
	}
	a.pump(c.r.Context(), s, t, from)
}

// get serves tasks/get and GetTask; both return the bare Task.
func (a *Agent) get(c *call) {
	p, err := decodeID(c.params)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	historyLength := -1
	if p.HistoryLength != nil {
		historyLength = max(0, *p.HistoryLength)
	}
	a.mu.Lock()
	t := a.tasks[p.ID]
	var v taskView
	if t != nil {
		v = a.view(t, historyLength)
	}
	a.mu.Unlock()
	if t == nil {
		a.fail(c.w, c.id, errTaskNotFound(p.ID))
		return
	}
	a.reply(c, encTask(a.cfg.Version, v, true))
}

// cancelTask serves tasks/cancel and CancelTask; both return the bare Task.
func (a *Agent) cancelTask(c *call) {
	p, err := decodeID(c.params)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	v, err := a.cancel(p.ID)
	if err != nil {
		a.fail(c.w, c.id, err)
		return
	}
	a.reply(c, encTask(a.cfg.Version, v, true))
}

type listParams struct {
	ContextID            string `json:"contextId"`
	Status               string `json:"status"`
	PageSize             *int   `json:"pageSize"`
	PageToken            string `json:"pageToken"`
	HistoryLength        *int   `json:"historyLength"`
	StatusTimestampAfter string `json:"statusTimestampAfter"`
	IncludeArtifacts     bool   `json:"includeArtifacts"`
}

type listResult struct {
	Tasks         []task10 `json:"tasks"`
	NextPageToken string   `json:"nextPageToken"`
	PageSize      int      `json:"pageSize"`
	TotalSize     int      `json:"totalSize"`
}

// list serves ListTasks (1.0 only): newest status first, pages of at most
// 100, the page token an opaque offset.
func (a *Agent) list(c *call) {
	var p listParams
	if len(c.params) > 0 && string(c.params) != "null" {
		if err := json.Unmarshal(c.params, &p); err != nil {
			a.fail(c.w, c.id, errInvalidParams("params", "params do not match ListTasksRequest: %v", err))
			return
		}
	}
	pageSize := 50
	if p.PageSize != nil {
		if *p.PageSize < 1 || *p.PageSize > 100 {
			a.fail(c.w, c.id, errInvalidParams("pageSize", "pageSize must be between 1 and 100, not %d", *p.PageSize))
			return
		}
		pageSize = *p.PageSize
	}
	offset := 0
	if p.PageToken != "" {
		n, err := strconv.Atoi(p.PageToken)
		if err != nil || n < 0 {
			a.fail(c.w, c.id, errInvalidParams("pageToken", "pageToken %q was not issued by this agent", p.PageToken))
			return
		}
		offset = n
	}
	var state State
	if p.Status != "" && p.Status != "TASK_STATE_UNSPECIFIED" {
		st, ok := parseState10(p.Status)
		if !ok {
			a.fail(c.w, c.id, errInvalidParams("status", "status %q is not a TaskState", p.Status))
			return
		}
		state = st
	}
	var after time.Time
	if p.StatusTimestampAfter != "" {
		ts, err := time.Parse(time.RFC3339Nano, p.StatusTimestampAfter)
		if err != nil {
			a.fail(c.w, c.id, errInvalidParams("statusTimestampAfter", "statusTimestampAfter must be an ISO 8601 time: %v", err))
			return
		}
		after = ts
	}
	historyLength := -1
	if p.HistoryLength != nil {
		historyLength = max(0, *p.HistoryLength)
	}

	a.mu.Lock()
	var match []*task
	for _, t := range a.order {
		if (p.ContextID == "" || t.contextID == p.ContextID) &&
			(state == "" || t.status.state == state) &&
			(after.IsZero() || !t.status.at.Before(after)) {
			match = append(match, t)
		}
	}
	slices.SortStableFunc(match, func(x, y *task) int {
		if c := y.status.at.Compare(x.status.at); c != 0 {
			return c
		}
		return cmp.Compare(y.seq, x.seq)
	})
	res := listResult{Tasks: []task10{}, PageSize: pageSize, TotalSize: len(match)}
	for _, t := range match[min(offset, len(match)):min(offset+pageSize, len(match))] {
		tv := encTask10(a.view(t, historyLength), p.IncludeArtifacts)
		if p.IncludeArtifacts && tv.Artifacts == nil {
			tv.Artifacts = []artifact10{}
		}
		res.Tasks = append(res.Tasks, tv)
	}
	a.mu.Unlock()
	if offset+pageSize < len(match) {
		res.NextPageToken = strconv.Itoa(offset + pageSize)
	}
	a.reply(c, res)
}
