package a2aproxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// bindsInDB reports whether a call's new binding goes to the database at
// once rather than through the spool: when the task's life is recorded
// right away (a deadline, a parent named, a pause, an inline push config),
// as those records update the binding's row, or when the call's usage row
// comes late (a stream).
func (p *Proxy) bindsInDB(cl *call, b *contracts.TaskBinding) bool {
	return b.DeadlineAt != nil || b.ParentTaskID != "" || cl.inlinePush != nil || interrupted(cl.obs.state) ||
		// A stream's usage row is written when it ends, maybe hours
		// later: the binding cannot wait for it to be durable.
		cl.req.Method.Streaming()
}

// bindAnswer binds the task an agent's answer names (bindTask), and tells
// the send's hold on its messageId what the agent answered.
func (p *Proxy) bindAnswer(ctx context.Context, cl *call) error {
	if err := p.bindTask(ctx, cl); err != nil {
		return err
	}
	p.sentLearned(cl)
	return nil
}

// bindTask records the buyer's org as the owner of the task the agent
// created, the first time the meter sees it. An answer about a task that
// is already another org's must not reach the caller: the error returned
// then replaces it (and the listing gets an incident); so does one whose
// owner could not be recorded, as its owner is then unknown.
func (p *Proxy) bindTask(ctx context.Context, cl *call) error {
	if cl.obs.taskID == "" {
		return nil
	}
	if cl.obs.bound {
		// A message to a task already bound (checkOwner).
		if cl.inlinePush != nil {
			p.registerInlinePush(cl)
		}
		return nil
	}
	cl.obs.bound = true
	b := contracts.TaskBinding{ListingID: cl.target.ListingID, TaskID: cl.obs.taskID,
		OrgID: cl.actor.OrgID, ContractID: cl.contract.ID, ContextID: cl.obs.contextID, CreatedAt: p.Clock.Now()}
	parent := p.parentOf(ctx, cl)
	if parent != nil {
		b.ParentListingID, b.ParentTaskID = parent.ListingID, parent.TaskID
	} else if cl.req != nil {
		b.ParentTaskID = cl.req.ParentTaskID() // unresolved: matched when a parent of this id is canceled
	}
	b.DeadlineAt = p.deadline(cl, parent)
	// The end of a task with a deadline or a known parent is recorded, so
	// the sweeper and cascades leave it alone once it completed. (A child
	// of an unresolved parent is not: that would cost a write on every
	// call naming a parent the meter never carried; a cascade reaching it
	// after it completed finds it not cancelable and records its end.)
	cl.tracked = b.DeadlineAt != nil || b.ParentListingID != ""
	// Bound in memory first: this meter's own bindings (projected or not)
	// decide at once. In steady state that is all: the usage row (Binds)
	// makes the binding durable and the shipper projects it (Project).
	got, created := p.owners.Bind(b)
	if !created && !mayRelay(got, cl.actor.OrgID) {
		p.agentTaskConflict(ctx, cl)
		return rpcErr(CodeAgentTaskConflict, http.StatusOK, "the agent answered with a task that is not yours; the meter withheld the answer and marked the listing")
	}
	if p.bindsInDB(cl, &b) {
		// The task's life is recorded at once (a deadline, a parent, a
		// pause, a push config) or its row comes late (a stream): its
		// binding goes to the database now, where another meter's may be.
		owner, err := p.bindOwner(ctx, b)
		if err != nil {
			if created {
				p.owners.Forget(b.ListingID, b.TaskID)
			}
			p.Logger.ErrorContext(ctx, "task binding failed", "trace_id", cl.trace.traceID, "task_id", cl.obs.taskID, "err", err)
			cl.obs = observed{}
			return rpcErr(CodeUpstreamUnreachable, http.StatusOK, "the meter could not record who owns the agent's task, so its answer was withheld; try again")
		}
		if owner != cl.actor.OrgID {
			p.agentTaskConflict(ctx, cl)
			return rpcErr(CodeAgentTaskConflict, http.StatusOK, "the agent answered with a task that is not yours; the meter withheld the answer and marked the listing")
		}
	}
	cl.binds = &metering.Binding{ParentListingID: b.ParentListingID, Stored: p.bindsInDB(cl, &b)}
	if b.DeadlineAt != nil {
		cl.binds.DeadlineAt = *b.DeadlineAt
	}
	if cl.inlinePush != nil {
		p.registerInlinePush(cl)
	}
	return nil
}

// agentTaskConflict handles an agent answering one org with a task bound
// to another (an agent that reuses task ids, say after a restart): the
// seller's listing gets an incident, and the call forgets the task so
// nothing of it is billed, recorded or tracked for the caller.
func (p *Proxy) agentTaskConflict(ctx context.Context, cl *call) {
	p.Logger.WarnContext(ctx, "agent answered with another org's task; answer withheld", "trace_id", cl.trace.traceID,
		"listing", cl.target.ListingID, "task_id", cl.obs.taskID, "org", cl.actor.OrgID)
	now := p.Clock.Now()
	err := p.Owners.MarkTaskReused(ctx, cl.target.ListingID, cl.obs.taskID, now)
	if isNotFound(err) && p.storeHeldBinding(ctx, cl.target.ListingID, cl.obs.taskID) {
		// Bound on this meter and not projected yet: stored now.
		err = p.Owners.MarkTaskReused(ctx, cl.target.ListingID, cl.obs.taskID, now)
	}
	if err != nil {
		// Not returned: the buyer gets the conflict error either way, and
		// this meter relays the task to no one (MarkReused below). Other
		// meters learn it from the store: the task sweeper retries the
		// mark (retryReuseMarks) until the store takes it.
		p.reuseRetry.add(ownerKey{cl.target.ListingID, cl.obs.taskID}, now)
		p.Logger.ErrorContext(ctx, "reused task not marked; the task sweeper retries", "trace_id", cl.trace.traceID, "task_id", cl.obs.taskID, "err", err)
	}
	p.owners.MarkReused(cl.target.ListingID, cl.obs.taskID, now)
	cl.obs = observed{}
	p.recordIncident(ctx, cl.target.ListingID)
}

// recordIncident marks a listing whose agent reused a task id.
func (p *Proxy) recordIncident(ctx context.Context, listingID string) {
	if p.Incidents == nil {
		return
	}
	detail := "the agent answered a buyer with a task id that belongs to another buyer organisation (an agent must never reuse task ids, also across restarts); the meter withheld the answer"
	record := func(ctx context.Context) error { return p.Incidents.RecordIncident(ctx, listingID, detail) }
	if err := record(ctx); err != nil {
		// Not returned: the incident is a health mark beside the answer
		// already withheld or the task already marked, and no caller could
		// undo those. The task sweeper records it later (writeLater).
		p.later.add("listing incident", record)
		p.Logger.ErrorContext(ctx, "listing incident not recorded; the task sweeper retries", "listing", listingID, "err", err)
	}
}

// reuseMarks are the reuse marks the store did not take on the call path,
// retried by the task sweeper. Bounded: past maxReuseRetries the oldest
// stay in this meter's memory only (its owner index), and are logged.
type reuseMarks struct {
	mu    sync.Mutex
	marks map[ownerKey]time.Time
}

const maxReuseRetries = 10_000

func (r *reuseMarks) add(k ownerKey, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marks == nil {
		r.marks = map[ownerKey]time.Time{}
	}
	if len(r.marks) < maxReuseRetries {
		r.marks[k] = at
	}
}

func (r *reuseMarks) take() map[ownerKey]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.marks
	r.marks = nil
	return m
}

// retryReuseMarks writes the reuse marks that failed on the call path; the
// ones that fail again wait for the next sweep.
func (p *Proxy) retryReuseMarks(ctx context.Context) {
	for k, at := range p.reuseRetry.take() {
		err := p.Owners.MarkTaskReused(ctx, k.listing, k.task, at)
		if isNotFound(err) && p.storeHeldBinding(ctx, k.listing, k.task) {
			err = p.Owners.MarkTaskReused(ctx, k.listing, k.task, at)
		}
		if err != nil && !isNotFound(err) {
			p.reuseRetry.add(k, at) // the next sweep tries again
			p.Logger.ErrorContext(ctx, "reused task still not marked; the next sweep retries", "listing", k.listing, "task_id", k.task, "err", err)
		}
	}
}

// laterWrites are writes the store refused where nothing else would make
// them again (a listing's incident or lost-task count, a stall
// notification's delivery), retried by the task sweeper until they go
// through, maxLaterAttempts times at most. Each is idempotent or, failing
// that, one the store most likely did not apply when it answered an error.
// Bounded by maxLaterWrites.
type laterWrites struct {
	mu     sync.Mutex
	writes []laterWrite
}

type laterWrite struct {
	what     string
	write    func(ctx context.Context) error
	attempts int
}

const (
	maxLaterWrites   = 10_000
	maxLaterAttempts = 100
)

func (l *laterWrites) add(what string, write func(ctx context.Context) error) {
	l.again(laterWrite{what: what, write: write})
}

func (l *laterWrites) again(w laterWrite) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.writes) < maxLaterWrites {
		l.writes = append(l.writes, w)
	}
}

func (l *laterWrites) take() []laterWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

// writeLater makes the writes the store refused before; those it refuses
// again wait for the next sweep.
func (p *Proxy) writeLater(ctx context.Context) {
	for _, w := range p.later.take() {
		err := w.write(ctx)
		if err == nil {
			continue
		}
		if w.attempts++; w.attempts >= maxLaterAttempts {
			p.Logger.ErrorContext(ctx, w.what+" not recorded; given up", "attempts", w.attempts, "err", err)
			continue
		}
		p.later.again(w)
		p.Logger.ErrorContext(ctx, w.what+" still not recorded; the next sweep retries", "err", err)
	}
}
