package a2aproxy

import (
	"context"
	"net/http"
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
		OrgID: cl.actor.OrgID, ContractID: cl.contract.ID, ContextID: cl.obs.contextID, CreatedAt: p.Clock.Now(), Endpoint: cl.routed.endpointOf(),
		KeyID: cl.actor.KeyID}
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
	cl.fresh = created
	if !created && !mayRelay(got, cl.actor.OrgID) {
		p.agentTaskConflict(ctx, cl)
		return rpcErr(CodeAgentTaskConflict, http.StatusOK, "the agent answered with a task that is not yours; the meter withheld the answer and marked the listing")
	}
	if created && p.Shared != nil {
		// The other meters' bindings: the first owner of the task on any
		// meter stays, and the others find it there at once.
		owner, err := p.bindShared(ctx, b)
		switch {
		case err != nil:
			// The database path: the binding is durable with the call's
			// usage row, and other meters find it once it is projected.
			p.Metrics.SharedFallback("bind")
			p.Logger.WarnContext(ctx, "task binding not shared with the other meters; they find it in the database", "trace_id", cl.trace.traceID,
				"task_id", b.TaskID, "err", err)
		case owner != cl.actor.OrgID:
			p.owners.Forget(b.ListingID, b.TaskID)
			p.sharedTaskConflict(ctx, cl)
			return rpcErr(CodeAgentTaskConflict, http.StatusOK, "the agent answered with a task that is not yours; the meter withheld the answer and marked the listing")
		}
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
	cl.binds = &metering.Binding{ParentListingID: b.ParentListingID, Stored: p.bindsInDB(cl, &b), Endpoint: b.Endpoint}
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
	if err := p.markReused(ctx, cl.target.ListingID, cl.obs.taskID, now); err != nil {
		// Not returned: the buyer gets the conflict error either way, and
		// this meter relays the task to no one (MarkReused below). Other
		// meters learn it from the store: the task sweeper retries the
		// mark (writeLater) until the store takes it.
		listingID, taskID := cl.target.ListingID, cl.obs.taskID
		p.later.add("reuse mark", ownerKey{}, 0, func(ctx context.Context) error {
			return p.markReused(ctx, listingID, taskID, now)
		})
		p.Logger.ErrorContext(ctx, "reused task not marked; the task sweeper retries", "trace_id", cl.trace.traceID, "task_id", cl.obs.taskID, "err", err)
	}
	p.owners.MarkReused(cl.target.ListingID, cl.obs.taskID, now)
	cl.obs = observed{}
	p.recordIncident(ctx, cl.target.ListingID)
}

// sharedTaskConflict is agentTaskConflict for a task another meter bound
// to another org (found in the shared state): the mark goes to the shared
// state at once, and to the database once the other meter's projection has
// stored the binding (the task sweeper retries it until then).
func (p *Proxy) sharedTaskConflict(ctx context.Context, cl *call) {
	listingID, taskID, now := cl.target.ListingID, cl.obs.taskID, p.Clock.Now()
	if err := p.Shared.MarkTaskReused(ctx, listingID, taskID, now); err != nil {
		p.Logger.WarnContext(ctx, "reused task not marked in the shared state", "trace_id", cl.trace.traceID, "task_id", taskID, "err", err)
	}
	p.later.add("reuse mark", ownerKey{}, maxLaterAttempts, func(ctx context.Context) error {
		return p.Owners.MarkTaskReused(ctx, listingID, taskID, now)
	})
	p.agentTaskConflict(ctx, cl)
}

// markReused records in the store that the agent reused a task id; a task
// bound on this meter and not projected yet is stored first. A task unknown
// to both is no one's to mark.
func (p *Proxy) markReused(ctx context.Context, listingID, taskID string, at time.Time) error {
	err := p.Owners.MarkTaskReused(ctx, listingID, taskID, at)
	if isNotFound(err) && p.storeHeldBinding(ctx, listingID, taskID) {
		err = p.Owners.MarkTaskReused(ctx, listingID, taskID, at)
	}
	if isNotFound(err) {
		return nil
	}
	return err
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
		p.later.add("listing incident", ownerKey{}, maxLaterAttempts, record)
		p.Logger.ErrorContext(ctx, "listing incident not recorded; the task sweeper retries", "listing", listingID, "err", err)
	}
}
