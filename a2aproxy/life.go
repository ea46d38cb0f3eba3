package a2aproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// The life of long tasks: the meter records each pause (input-required,
// auth-required) and resume, who canceled a task and why, and cancels at
// the agent the tasks whose longest pause or end-to-end budget ran out
// (RunTaskSweeper). Canceling a task through the meter cancels the tasks
// delegated from it (they named it in metadata under wire.ParentTaskKey),
// under the same trace id.

func interrupted(state string) bool { return state == "input-required" || state == "auth-required" }

// trackLife records what a metered call tells of its task's life. It runs
// after the call's usage is recorded. Writes happen only when something
// may need them: a pause, a resume, a cancel, or the end of a task that
// has a deadline or could have been paused before.
func (p *Proxy) trackLife(ctx context.Context, cl *call) {
	if p.Tasks == nil || cl.errCode != 0 || cl.req == nil || cl.obs.taskID == "" || cl.replayed {
		return
	}
	ev := func(kind contracts.TaskEventKind) contracts.TaskEvent {
		return contracts.TaskEvent{ID: agentmarket.NewID("tev"), ListingID: cl.target.ListingID, TaskID: cl.obs.taskID,
			Kind: kind, State: cl.obs.state, At: p.Clock.Now(), TraceID: cl.trace.traceID}
	}
	// Logged, not returned: trackLife runs in finish, with the agent's
	// answer on its way to the buyer. What recovers each event (or not)
	// is said where it is written. NotFound: a task neither in the store
	// nor held by this meter, whose life is not the meter's to record.
	warn := func(what string, err error) {
		if err != nil && !isNotFound(err) {
			p.Logger.ErrorContext(ctx, "task life not recorded: "+what, "trace_id", cl.trace.traceID, "task_id", cl.obs.taskID, "err", err)
		}
	}
	// The task may be bound in this meter's memory and not projected yet:
	// a life event finding no task in the database stores the binding the
	// meter holds, then is written again.
	stored := func(write func() (bool, error)) (bool, error) {
		return p.storedLife(ctx, ownerKey{cl.target.ListingID, cl.obs.taskID}, write)
	}
	// A pause or a resume goes after an earlier write of its task that
	// waits for the sweeper (writeLater), so a resume is never written
	// before its pause; one the store refuses waits for the sweeper in turn.
	inOrder := func(what string, write func(ctx context.Context) (bool, error)) (bool, error) {
		task := ownerKey{cl.target.ListingID, cl.obs.taskID}
		later := func(ctx context.Context) error {
			_, err := p.storedLife(ctx, task, func() (bool, error) { return write(ctx) })
			if isNotFound(err) {
				return nil
			}
			return err
		}
		if p.later.holds(task) {
			p.later.add(what, task, 0, later)
			return false, nil
		}
		changed, err := stored(func() (bool, error) { return write(ctx) })
		if err != nil && !isNotFound(err) {
			p.later.add(what, task, 0, later)
		}
		return changed, err
	}
	m := cl.req.Method
	continuing := cl.req.TaskID() != ""
	if (m == wire.MethodSend || m == wire.MethodStream) && continuing {
		// A message to an existing task: the buyer's answer to a pause.
		e := ev(contracts.TaskResumed)
		e.Actor = keyActor(cl.actor)
		_, err := inOrder("task resume", func(ctx context.Context) (bool, error) { return p.Tasks.TaskResumed(ctx, e) })
		// Retried by the task sweeper (writeLater), in order with the
		// pause it closes.
		warn("resume", err)
	}
	switch {
	case m == wire.MethodCancelTask:
		e := ev(contracts.TaskCanceled)
		e.Actor, e.Reason = cl.cancelBy, cl.cancelWhy
		if e.Actor == "" {
			e.Actor = keyActor(cl.actor)
			if e.Reason = cl.req.MetadataString(wire.CancelReasonKey); e.Reason == "" {
				e.Reason = "canceled by the buyer"
			}
		}
		ended, err := stored(func() (bool, error) { return p.Tasks.TaskEnded(ctx, e) })
		// Partly recovered: Project records the task's end from this
		// call's usage row (without who canceled and why: those are only in
		// the line below), and the delegated tasks are canceled all the
		// same (unrecorded says the cancel's record failed, not that the
		// task had ended before).
		warn("cancel", err)
		unrecorded := err != nil && !isNotFound(err)
		p.Logger.InfoContext(ctx, "task canceled", "trace_id", cl.trace.traceID, "listing", cl.target.ListingID,
			"task_id", cl.obs.taskID, "canceled_by", e.Actor, "reason", e.Reason, "first", ended)
		// The tasks delegated from this one go too: their cancels are
		// recorded now (durable), and tried at once in the background; the
		// sweeper retries what fails. The meter's own cancels (a sweep, a
		// cascade) go on down the tree themselves.
		if (ended || unrecorded) && cl.cancelBy == "" {
			p.requestChildCancels(ctx, cl.target.ListingID, cl.obs.taskID, cl.trace)
			p.goCascade(cl.target.ListingID, cl.obs.taskID, cl.trace)
		}
	case interrupted(cl.obs.state):
		at := p.Clock.Now().Add(cl.lim.MaxPause)
		e := ev(contracts.TaskPaused)
		_, err := inOrder("task pause", func(ctx context.Context) (bool, error) { return p.Tasks.TaskPaused(ctx, e, &at) })
		// Retried by the task sweeper (writeLater): until then the longest
		// pause is not enforced on this task.
		warn("pause", err)
	case cl.obs.terminal && (continuing || cl.tracked || cl.label != ""):
		_, err := stored(func() (bool, error) { return p.Tasks.TaskEnded(ctx, ev(contracts.TaskEnded)) })
		// Recovered: Project records the end from this call's usage row.
		warn("end", err)
	}
}

// storedLife writes a task life event; when the store has no task, the
// binding this meter holds in memory (not projected yet) is stored, and the
// event written again.
func (p *Proxy) storedLife(ctx context.Context, task ownerKey, write func() (bool, error)) (bool, error) {
	changed, err := write()
	if isNotFound(err) && p.storeHeldBinding(ctx, task.listing, task.task) {
		changed, err = write()
	}
	return changed, err
}

// storeHeldBinding writes the binding this meter holds in memory for a
// task to the database at once (the projection would, a moment later),
// and reports whether there was one to write.
func (p *Proxy) storeHeldBinding(ctx context.Context, listingID, taskID string) bool {
	b := p.owners.Peek(listingID, taskID)
	if b == nil {
		return false
	}
	if _, err := p.bindOwner(ctx, *b); err != nil {
		// Reported as no binding held: the caller's write then stays
		// NotFound and its event is handled as for a task not bound (see
		// the caller). The binding itself reaches the store with its usage
		// row (Project).
		p.Logger.WarnContext(ctx, "task binding not stored", "task_id", taskID, "err", err)
		return false
	}
	return true
}

func keyActor(a agentmarket.Actor) string {
	if a.KeyID == "" {
		return "org:" + a.OrgID
	}
	return "key:" + a.KeyID
}

// goCascade cancels, in the background, the tasks delegated from a task.
func (p *Proxy) goCascade(listingID, taskID string, trace traceContext) {
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		ctx, cancel := context.WithTimeout(p.Base, 2*p.Limits.RequestTimeout)
		defer cancel()
		p.cascade(ctx, listingID, taskID, trace, 0)
	}()
}

// cascade cancels the children of a task, and theirs, under the parent's
// trace id (a new span each), so the trace shows the chain. Each child's
// cancel is requested (recorded) before it is tried: one that fails, or a
// meter that stops midway, leaves it to the sweeper.
func (p *Proxy) cascade(ctx context.Context, listingID, taskID string, trace traceContext, depth int) {
	if depth > 16 {
		return // a loop of parents, or an absurd tree: stop
	}
	for _, ch := range p.requestChildCancels(ctx, listingID, taskID, trace) {
		span := traceContext{traceID: trace.traceID, spanID: randomHex(8), flags: trace.flags}
		if err := p.cancelAtAgent(ctx, ch, contracts.CanceledByCascade, cascadeReason(taskID), span); err != nil {
			// Sweep retries it once its retryAt passes: requestChildCancels
			// recorded the request (unless that failed too: see there).
			p.Logger.WarnContext(ctx, "delegated task not canceled yet; the sweeper retries", "trace_id", trace.traceID,
				"task_id", ch.TaskID, "parent_task_id", taskID, "err", err)
			continue
		}
		p.Metrics.taskCanceled("cascade")
		p.cascade(ctx, ch.ListingID, ch.TaskID, span, depth+1)
	}
}

func cascadeReason(parentTaskID string) string {
	return fmt.Sprintf("its parent task %s was canceled", parentTaskID)
}

// requestChildCancels records a cancel request for each open child of a
// task and returns them. A child that named its parent by id before the
// meter had bound it is a child only of the parent's owner or of its
// listing's seller.
func (p *Proxy) requestChildCancels(ctx context.Context, listingID, taskID string, trace traceContext) []contracts.TaskBinding {
	children, err := p.Tasks.ChildTasks(ctx, listingID, taskID)
	if err != nil {
		// Not returned: the cancel of the parent stands either way. A
		// buyer's cancel looks again in its background cascade
		// (goCascade), and the task sweeper until the store answers
		// (writeLater): the cancels it then requests, Sweep carries out.
		p.later.add("delegated tasks' cancels", ownerKey{}, maxLaterAttempts, func(ctx context.Context) error {
			if _, err := p.Tasks.ChildTasks(ctx, listingID, taskID); err != nil {
				return err
			}
			p.requestChildCancels(ctx, listingID, taskID, trace)
			return nil
		})
		p.Logger.ErrorContext(ctx, "delegated tasks not found; the task sweeper retries", "trace_id", trace.traceID, "task_id", taskID, "err", err)
		return nil
	}
	var parent *contracts.TaskBinding
	kept := children[:0]
	for _, ch := range children {
		if ch.ParentListingID == "" {
			if parent == nil {
				if parent, err = p.owners.Known(ctx, listingID, taskID); err != nil {
					return nil
				}
			}
			if ch.OrgID != parent.OrgID && ch.OrgID != p.sellerOf(ctx, listingID) {
				continue
			}
		}
		// Due for the sweeper only once the attempt made right away has
		// had its time: the two must not cancel the same task together.
		retryAt := p.Clock.Now().Add(2*p.Limits.RequestTimeout + time.Second)
		request := func(ctx context.Context) error {
			err := p.Tasks.RequestCancel(ctx, ch.ListingID, ch.TaskID, contracts.CanceledByCascade, cascadeReason(taskID), trace.traceID, retryAt)
			if isNotFound(err) {
				return nil
			}
			return err
		}
		if err := request(ctx); err != nil {
			// Kept all the same: cascade tries the cancel at once (and a
			// buyer's cancel requests it again from goCascade); the task
			// sweeper records the request once the store answers
			// (writeLater), and Sweep carries it out unless the child
			// ended meanwhile.
			p.later.add("delegated task's cancel request", ownerKey{}, maxLaterAttempts, request)
			p.Logger.ErrorContext(ctx, "cancel of a delegated task not recorded; the task sweeper retries", "trace_id", trace.traceID, "task_id", ch.TaskID, "err", err)
		}
		kept = append(kept, ch)
	}
	return kept
}

// cancelAtAgent cancels a bound task at its agent on the meter's own
// initiative, meters the call, and records who and why. A task the agent
// can no longer cancel (it ended) is recorded as ended.
func (p *Proxy) cancelAtAgent(ctx context.Context, b contracts.TaskBinding, by, why string, trace traceContext) error {
	body, err := wire.TaskRequest(wire.V10, wire.MethodCancelTask, b.TaskID, map[string]string{wire.CancelReasonKey: why})
	if err != nil {
		return err
	}
	cl, err := p.backgroundCall(ctx, b, trace, body)
	if err != nil {
		return err
	}
	cl.cancelBy, cl.cancelWhy = by, why
	result, agentErr, err := p.callAgent(ctx, cl, cl.req)
	switch {
	case err != nil:
		cl.errCode = toRPC(err).Code
	case agentErr != nil:
		cl.errCode = agentErr.Code
	default:
		cl.obs.add(wire.Observe(cl.upVersion, wire.MethodCancelTask, result))
	}
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	if agentErr != nil && agentErr.Code == wire.CodeTaskNotFound {
		// The agent no longer knows the task: lost, nothing left to cancel.
		_ = p.taskLost(ctx, contracts.TaskEvent{ID: agentmarket.NewID("tev"), ListingID: b.ListingID, TaskID: b.TaskID,
			Kind: contracts.TaskLost, At: p.Clock.Now(), Actor: by, Reason: lostReason(cl.req.Name) + "; the meter was canceling it: " + why, TraceID: trace.traceID})
		return nil
	}
	if agentErr != nil && agentErr.Code == wire.CodeTaskNotCancelable {
		// Already over at the agent: nothing left to cancel or sweep.
		_, _ = p.Tasks.TaskEnded(ctx, contracts.TaskEvent{ID: agentmarket.NewID("tev"), ListingID: b.ListingID, TaskID: b.TaskID,
			Kind: contracts.TaskEnded, At: p.Clock.Now(), Actor: by, Reason: why + "; the agent said: " + agentErr.Message, TraceID: trace.traceID})
		return nil
	}
	if err != nil {
		return err
	}
	if agentErr != nil {
		return fmt.Errorf("the agent refused the cancel: %d %s", agentErr.Code, agentErr.Message)
	}
	return nil
}

// backgroundCall is a call the meter makes on its own for a bound task:
// attributed to the task's owner, under its contract and plan, to the
// agent's preferred interface. body is a 1.0 JSON-RPC request.
func (p *Proxy) backgroundCall(ctx context.Context, b contracts.TaskBinding, trace traceContext, body []byte) (*call, error) {
	t, err := p.resolve(ctx, b.ListingID)
	if err != nil {
		return nil, err
	}
	cl := &call{start: p.Clock.Now(), trace: trace, actor: agentmarket.Actor{OrgID: b.OrgID}, target: t}
	if p.tracing != nil {
		p.traceBackground(cl)
	}
	cl.lim = p.Limits.with(t.Limits)
	ct, err := p.openContract(ctx, b.OrgID, b.ListingID)
	if err != nil {
		// The contract is over, but its task still runs: meter it under
		// the contract it ran under, unpriced.
		ct = &contracts.Contract{ID: b.ContractID, BuyerOrgID: b.OrgID, ListingID: b.ListingID, SellerOrgID: t.SellerOrgID}
	} else {
		cl.lim = cl.lim.withBudgets(ct.Budgets)
		if plan, err := p.plan(ctx, b.ListingID, ct.PlanVersion); err == nil {
			cl.plan = plan
		}
	}
	cl.contract = ct
	req, werr := wire.ParseRequest(body, "1.0")
	if werr != nil {
		cl.endSpan(werr.Code)
		return nil, werr
	}
	cl.req, cl.id, cl.bytesIn = req, req.ID, len(body)
	if err := chooseInterface(cl); err != nil {
		cl.endSpan(toRPC(err).Code)
		return nil, err
	}
	cl.obs.taskID, cl.obs.contextID, cl.obs.bound = b.TaskID, b.ContextID, true
	return cl, nil
}

// callAgent sends r (a request of the buyer's version; translated here to
// the agent's) and reads the agent's answer as a JSON-RPC result or error,
// whatever the agent's binding.
func (p *Proxy) callAgent(ctx context.Context, cl *call, r *wire.Request) (json.RawMessage, *wire.Error, error) {
	if r.Version != cl.upVersion {
		body, err := wire.TranslateRequest(r, cl.upVersion)
		if err != nil {
			return nil, nil, err
		}
		header := ""
		if cl.upVersion == wire.V10 {
			header = "1.0"
		}
		tr, werr := wire.ParseRequest(body, header)
		if werr != nil {
			return nil, nil, werr
		}
		r = tr
	}
	ctx, cancel := context.WithTimeout(ctx, cl.lim.RequestTimeout)
	defer cancel()
	ar, err := p.upstreamRequest(ctx, cl, r, "application/json")
	if err != nil {
		return nil, nil, err
	}
	rep, err := p.roundTrip(ctx, cl, ar, cl.lim.MaxResultBytes, cl.lim.RequestTimeout)
	if err != nil {
		return nil, nil, upstreamErr(ctx, err, cl.lim.RequestTimeout)
	}
	defer rep.release()
	cl.bytesOut += len(rep.body)
	result, agentErr, err := agentAnswer(cl, r.Method, rep.status, rep.contentType, bytes.Clone(rep.body))
	return result, agentErr, err
}

// RunTaskSweeper cancels, every interval until ctx ends, the tasks whose
// longest pause or end-to-end budget ran out, and marks the tasks this
// meter watches that stalled (SweepStalls). Several meters may sweep the
// same database: each due task is leased to one of them.
func (p *Proxy) RunTaskSweeper(ctx context.Context, interval time.Duration) {
	if p.Tasks == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.writeLater(ctx)
		p.Sweep(ctx)
		p.SweepStalls(ctx)
		if now := p.Clock.Now(); now.Sub(pruned) >= time.Hour {
			pruned = now
			p.pruneSent(ctx, now)
			if n, err := p.Tasks.PruneEvents(ctx, now.Add(-p.Limits.EventRetention)); err != nil && ctx.Err() == nil {
				// The next prune, an hour on, takes them: old events only
				// take room meanwhile.
				p.Logger.WarnContext(ctx, "old task events not pruned", "err", err)
			} else if n > 0 {
				p.Logger.InfoContext(ctx, "old task events pruned", "events", n)
			}
		}
	}
}

// maxSweepAttempts bounds how often the sweeper tries to cancel one task.
const maxSweepAttempts = 20

// Sweep cancels the tasks due now; it returns how many it canceled.
func (p *Proxy) Sweep(ctx context.Context) int {
	// A lease long enough for the whole batch, each cancel waiting up to
	// the request timeout: no other meter takes these tasks meanwhile.
	const batch = 10
	now := p.Clock.Now()
	due, err := p.Tasks.DueTasks(ctx, now, now.Add(time.Minute+batch*2*p.Limits.RequestTimeout), batch)
	if err != nil {
		// Nothing was leased: the next tick of RunTaskSweeper reads the
		// due tasks again.
		p.Logger.ErrorContext(ctx, "task sweep failed", "err", err)
		return 0
	}
	n := 0
	for _, d := range due {
		if d.Attempts > maxSweepAttempts {
			// An agent that cannot be reached, or a listing gone: stop
			// trying, and say so.
			_, _ = p.Tasks.TaskEnded(ctx, contracts.TaskEvent{ID: agentmarket.NewID("tev"), ListingID: d.ListingID, TaskID: d.TaskID,
				Kind: contracts.TaskEnded, At: p.Clock.Now(), Actor: contracts.CanceledByMeter,
				Reason: fmt.Sprintf("the meter gave up canceling the task (%s) after %d attempts: its agent did not answer", d.Why, maxSweepAttempts)})
			continue
		}
		if d.Why == "pause" && !p.stillPaused(ctx, d.TaskBinding) {
			continue
		}
		if d.Why == "requested" {
			trace := traceContext{traceID: d.CancelTraceID, spanID: randomHex(8), flags: "01"}
			if !isHex(trace.traceID, 32) {
				trace = parseTraceparent("")
			}
			if err := p.cancelAtAgent(ctx, d.TaskBinding, d.CancelActor, d.CancelReason, trace); err != nil {
				// DueTasks leased it and counted the attempt: it is due again
				// when the lease ends, up to maxSweepAttempts.
				p.Logger.WarnContext(ctx, "requested cancel failed; retried after its lease", "trace_id", trace.traceID,
					"listing", d.ListingID, "task_id", d.TaskID, "attempt", d.Attempts, "err", err)
				continue
			}
			n++
			p.Metrics.taskCanceled(d.CancelActor)
			p.cascade(ctx, d.ListingID, d.TaskID, trace, 0)
			continue
		}
		var why string
		if d.Why == "pause" && d.PausedSince != nil {
			why = fmt.Sprintf("the task waited for input since %s, longer than the longest pause allowed", d.PausedSince.UTC().Format(time.RFC3339))
		} else if d.DeadlineAt != nil {
			why = fmt.Sprintf("the task's end-to-end time budget ran out at %s", d.DeadlineAt.UTC().Format(time.RFC3339))
		} else {
			why = "the task's time ran out"
		}
		trace := parseTraceparent("")
		if err := p.cancelAtAgent(ctx, d.TaskBinding, contracts.CanceledByMeter, why, trace); err != nil {
			// DueTasks leased it and counted the attempt: it is due again
			// when the lease ends, up to maxSweepAttempts.
			p.Logger.ErrorContext(ctx, "overdue task not canceled; retried after its lease", "trace_id", trace.traceID,
				"listing", d.ListingID, "task_id", d.TaskID, "err", err)
			continue
		}
		n++
		p.Metrics.taskCanceled(d.Why)
		p.cascade(ctx, d.ListingID, d.TaskID, trace, 0)
	}
	return n
}

// deadline is when a new task's end-to-end budget runs out, also bounded
// by its parent's; nil when none applies.
func (p *Proxy) deadline(cl *call, parent *contracts.TaskBinding) *time.Time {
	var d *time.Time
	if cl.lim.TaskTimeout > 0 {
		at := p.Clock.Now().Add(cl.lim.TaskTimeout)
		d = &at
	}
	if parent != nil && parent.DeadlineAt != nil && (d == nil || parent.DeadlineAt.Before(*d)) {
		at := *parent.DeadlineAt
		d = &at
	}
	return d
}

// parentOf finds the task a request names as its parent, when the meter
// carried it and it may be this caller's parent: a task the caller's org
// owns, or a task on a listing the caller's org sells (an agent
// delegating part of its buyer's task). Task ids are the agents' choice,
// so a task of the same id elsewhere, owned by someone else, is never
// taken for the parent.
func (p *Proxy) parentOf(ctx context.Context, cl *call) *contracts.TaskBinding {
	if p.Tasks == nil || cl.req == nil || cl.req.ParentTaskID() == "" {
		return nil
	}
	// This meter's own bindings first (a parent it bound a moment ago may
	// not be in the database yet), then the database, cached, misses too:
	// an orchestrator names the same parent on many calls. A parent not
	// bound yet is recorded unresolved (by id alone) and matched when it is
	// canceled (cascade).
	id, org := cl.req.ParentTaskID(), cl.actor.OrgID
	pick := func(found []*contracts.TaskBinding) *contracts.TaskBinding {
		for _, f := range found {
			if f.OrgID == org {
				return f
			}
		}
		for _, f := range found {
			if p.sellerOf(ctx, f.ListingID) == org {
				return f
			}
		}
		return nil
	}
	if b := pick(p.owners.ByTask(id)); b != nil {
		return b
	}
	b, err := p.parents.get(org+"|"+id, func() (*contracts.TaskBinding, error) {
		found, err := p.Tasks.FindTasks(ctx, id, 20)
		if err != nil {
			return nil, err
		}
		ptrs := make([]*contracts.TaskBinding, len(found))
		for i := range found {
			ptrs[i] = &found[i]
		}
		if b := pick(ptrs); b != nil {
			return b, nil
		}
		return nil, agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no parent task %q of yours", id)
	}, isNotFound)
	if err != nil {
		if !isNotFound(err) {
			// Not returned: the call goes on with its parent unresolved (by
			// id, bindTask), which a cancel of the parent still reaches
			// (requestChildCancels); only the parent's deadline does not
			// bound the child's.
			p.Logger.WarnContext(ctx, "parent task not looked up", "trace_id", cl.trace.traceID, "parent_task_id", id, "err", err)
		}
		return nil
	}
	return b
}

// sellerOf is the org selling a listing ("" when unknown).
func (p *Proxy) sellerOf(ctx context.Context, listingID string) string {
	t, err := p.resolve(ctx, listingID)
	if err != nil {
		return ""
	}
	return t.SellerOrgID
}

// stillPaused asks the agent where a task the meter saw paused is now: an
// agent may go on by itself (auth-required settled out of band), and the
// meter saw nothing of it. A task no longer paused gets its resume (or
// its end) recorded and is not canceled. When the agent cannot say, the
// task is taken as still paused.
func (p *Proxy) stillPaused(ctx context.Context, b contracts.TaskBinding) bool {
	body, err := wire.TaskRequest(wire.V10, wire.MethodGetTask, b.TaskID, nil)
	if err != nil {
		return true
	}
	cl, err := p.backgroundCall(ctx, b, parseTraceparent(""), body)
	if err != nil {
		return true
	}
	cl.label = "sweep"
	defer cl.endSpan(0) // the paths that meter no GetTask (finish ends it otherwise)
	result, agentErr, err := p.callAgent(ctx, cl, cl.req)
	event := func(kind contracts.TaskEventKind, reason string) contracts.TaskEvent {
		return contracts.TaskEvent{ID: agentmarket.NewID("tev"), ListingID: b.ListingID, TaskID: b.TaskID, Kind: kind,
			State: cl.obs.state, At: p.Clock.Now(), Reason: reason, TraceID: cl.trace.traceID}
	}
	switch {
	case err != nil:
		cl.errCode = toRPC(err).Code
		return true
	case agentErr != nil:
		cl.errCode = agentErr.Code
		if agentErr.Code == wire.CodeTaskNotFound {
			_, _ = p.Tasks.TaskEnded(ctx, event(contracts.TaskEnded, "the agent no longer knows the task"))
			return false
		}
		return true
	}
	cl.obs.add(wire.Observe(cl.upVersion, wire.MethodGetTask, result))
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start)) // what the agent reports is billed
	if interrupted(cl.obs.state) || cl.obs.state == "" {
		return true
	}
	if _, err := p.Tasks.TaskResumed(ctx, event(contracts.TaskResumed, "the agent went on by itself")); err != nil && !isNotFound(err) {
		// The pause stays open and leased: when the lease ends Sweep asks
		// the agent again and records the resume then.
		p.Logger.ErrorContext(ctx, "resume not recorded", "task_id", b.TaskID, "err", err)
	}
	return false
}
