package a2aproxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// Stalled tasks: a task that shows no progress (no status change, artifact
// or message) for longer than its listing's stall_after is marked stalled.
// Progress is what this meter relays or sees of the task: answers to
// sends and GetTask, stream events, push notifications. It is kept in this
// meter's memory (no write on the call path); the task sweeper marks the
// tasks whose last progress is too old, and records the progress that
// clears a stall. A meter watches the tasks it saw: one restarted, or
// another meter relaying the task's progress, is not known to it (a task
// whose progress another meter relays may be marked stalled there).

// maxWatched bounds the tasks one meter watches; past it new tasks are
// not watched (a task is forgotten when it ends).
const maxWatched = 200_000

// StalledKey names the metadata a stall notification carries: the 0.3
// spelling of the task's status update, with
// metadata["agentmarket/stalled"] = {"since": …, "lastProgressAt": …,
// "stallAfterMs": …}.
const StalledKey = "agentmarket/stalled"

type watchKey struct{ listingID, taskID string }

type progress struct {
	orgID, contextID string
	state            string
	size             int // artifact and message bytes of the last full task seen
	last             time.Time
	after            time.Duration
	stalledAt        time.Time // zero while not stalled
	resumed          bool      // progress after a stall, not recorded yet
	paused           bool      // waiting for the buyer: a pause, not a stall
}

type progressWatch struct {
	mu    sync.Mutex
	tasks map[watchKey]*progress
}

// noteProgress records what a call observed of its task. It runs on the
// call path: memory only.
func (p *Proxy) noteProgress(cl *call, ob wire.Observation) {
	if cl.obs.taskID == "" || (ob.TaskID != "" && ob.TaskID != cl.obs.taskID) || cl.lim.StallAfter <= 0 {
		return
	}
	k := watchKey{cl.target.ListingID, cl.obs.taskID}
	w := &p.stalls
	w.mu.Lock()
	defer w.mu.Unlock()
	pr := w.tasks[k]
	if ob.Terminal || (ob.State == "" && cl.obs.terminal) {
		delete(w.tasks, k)
		return
	}
	now := p.Clock.Now()
	if pr == nil {
		if w.tasks == nil {
			w.tasks = map[watchKey]*progress{}
		}
		if len(w.tasks) >= maxWatched {
			return
		}
		pr = &progress{orgID: cl.actor.OrgID, contextID: cl.obs.contextID, last: now, state: ob.State}
		w.tasks[k] = pr
	}
	pr.after = cl.lim.StallAfter
	moved := false
	if ob.State != "" && ob.State != pr.state {
		pr.state, moved = ob.State, true
	}
	switch ob.Kind {
	case wire.KindArtifactUpdate, wire.KindMessage:
		moved = true
	case wire.KindStatusUpdate:
		moved = moved || len(ob.AgentTexts) > 0
	case wire.KindTask:
		// A full task: progress if it holds more than the last one seen.
		n := 0
		for _, a := range ob.Artifacts {
			n += len(a.Text)
		}
		for _, t := range ob.AgentTexts {
			n += len(t)
		}
		if n > pr.size {
			pr.size, moved = n, true
		}
	}
	if ob.State != "" {
		pr.paused = interrupted(ob.State)
	}
	if moved {
		pr.last = now
		if !pr.stalledAt.IsZero() {
			pr.stalledAt, pr.resumed = time.Time{}, true
		}
	}
}

// unrecorded puts back a stall or a resume whose record failed, so the
// next sweep writes it: a stall marked at `at` is unmarked (still due), a
// resume is due again. A task that moved on or ended since is left as it
// is: its newer state is what the next sweep records.
func (w *progressWatch) unrecorded(d stallChange, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pr := w.tasks[d.watchKey]
	switch {
	case pr == nil:
	case d.stalled && pr.stalledAt.Equal(at):
		pr.stalledAt = time.Time{}
	case !d.stalled && pr.stalledAt.IsZero():
		pr.resumed = true
	}
}

// forgetProgress stops watching a task (it ended).
func (p *Proxy) forgetProgress(listingID, taskID string) {
	p.stalls.mu.Lock()
	delete(p.stalls.tasks, watchKey{listingID, taskID})
	p.stalls.mu.Unlock()
}

type stallChange struct {
	watchKey
	progress
	stalled bool // else: progressed after a stall
}

// SweepStalls marks stalled the watched tasks whose last progress is
// older than their stall_after, and records the progress that cleared a
// stall; it returns how many it marked stalled.
func (p *Proxy) SweepStalls(ctx context.Context) int {
	if p.Tasks == nil {
		return 0
	}
	now := p.Clock.Now()
	var due []stallChange
	w := &p.stalls
	w.mu.Lock()
	for k, pr := range w.tasks {
		switch {
		case pr.resumed:
			pr.resumed = false
			due = append(due, stallChange{watchKey: k, progress: *pr})
		case pr.stalledAt.IsZero() && !pr.paused && now.Sub(pr.last) > pr.after:
			pr.stalledAt = now
			due = append(due, stallChange{watchKey: k, progress: *pr, stalled: true})
		}
	}
	w.mu.Unlock()
	n := 0
	for _, d := range due {
		e := contracts.TaskEvent{ID: agentmarket.NewID("tev"), ListingID: d.listingID, TaskID: d.taskID, State: d.state, At: now, Actor: contracts.CanceledByMeter}
		write := func() (bool, error) { return p.Tasks.TaskProgressed(ctx, e) }
		if d.stalled {
			e.Kind = contracts.TaskStalled
			e.Reason = fmt.Sprintf("no progress (status change, artifact or message) since %s, longer than %s", d.last.UTC().Format(time.RFC3339), d.after)
			write = func() (bool, error) { return p.Tasks.TaskStalled(ctx, e) }
		} else {
			e.Kind = contracts.TaskProgressed
		}
		changed, err := write()
		if isNotFound(err) && p.storeHeldBinding(ctx, d.listingID, d.taskID) {
			changed, err = write()
		}
		if err != nil {
			if !isNotFound(err) {
				// The next sweep tries again: the change is put back as
				// not recorded (unless the task moved on meanwhile).
				w.unrecorded(d, now)
				p.Logger.ErrorContext(ctx, "task stall not recorded; the next sweep retries", "listing", d.listingID, "task_id", d.taskID, "err", err)
			}
			continue
		}
		if !d.stalled || !changed {
			continue
		}
		n++
		p.Metrics.taskStalled(d.listingID)
		p.Logger.WarnContext(ctx, "task stalled", "listing", d.listingID, "task_id", d.taskID, "state", d.state,
			"last_progress_at", d.last, "stall_after", d.after)
		p.notifyStalled(ctx, d, now)
	}
	return n
}

// notifyStalled sends a stall to each of the buyer's push configs of the
// task, through the delivery outbox: a status update with the task's last
// seen state, its metadata naming the stall (StalledKey), in the version
// the config was set in.
func (p *Proxy) notifyStalled(ctx context.Context, d stallChange, now time.Time) {
	if p.Push == nil || p.Push.Store == nil {
		return
	}
	cfgs, err := p.Push.Store.PushConfigs(ctx, d.listingID, d.taskID)
	if err != nil || len(cfgs) == 0 {
		return
	}
	state := d.state
	if state == "" {
		state = "working"
	}
	body, err := json.Marshal(map[string]any{"kind": "status-update", "taskId": d.taskID, "contextId": d.contextID, "final": false,
		"status": map[string]any{"state": state, "timestamp": now.UTC().Format(time.RFC3339Nano)},
		"metadata": map[string]any{StalledKey: map[string]any{"since": now.UTC().Format(time.RFC3339Nano),
			"lastProgressAt": d.last.UTC().Format(time.RFC3339Nano), "stallAfterMs": d.after.Milliseconds()}}})
	if err != nil {
		return
	}
	for _, cfg := range cfgs {
		out := json.RawMessage(body)
		if v := wire.Version(cfg.Version); v != wire.V03 {
			if out, err = wire.TranslateResult(wire.V03, v, wire.MethodStream, body); err != nil {
				// The meter's own event failing to translate is a bug in
				// it: this config's notification is lost, the others go.
				p.Logger.ErrorContext(ctx, "stall notification not translated", "task_id", d.taskID, "err", err)
				continue
			}
		}
		sum := sha256.Sum256([]byte(cfg.CallbackID + "\x00stalled\x00" + now.UTC().Format(time.RFC3339Nano)))
		dl := contracts.Delivery{ID: "dlv_" + hex.EncodeToString(sum[:16]), ListingID: cfg.ListingID, TaskID: cfg.TaskID, ConfigID: cfg.ConfigID,
			OrgID: cfg.OrgID, Body: out, Status: contracts.DeliveryPending, NextAttemptAt: now, CreatedAt: now}
		enqueue := func(ctx context.Context) error { _, err := p.Push.Store.Enqueue(ctx, dl); return err }
		if err := enqueue(ctx); err != nil {
			// The stall is recorded (TaskStalled), so no sweep notifies it
			// again: the delivery itself is enqueued later (writeLater),
			// under the same id.
			p.later.add("stall notification", ownerKey{}, maxLaterAttempts, enqueue)
			p.Logger.ErrorContext(ctx, "stall notification not stored; the task sweeper retries", "task_id", d.taskID, "err", err)
		}
	}
	p.Push.kick()
}
