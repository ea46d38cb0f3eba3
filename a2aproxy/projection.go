package a2aproxy

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// Project applies what spooled usage rows record to the databases that
// are projections of the spool, and settles the rows: the bindings of the
// tasks the rows' calls created (made in memory on the call path) go into
// the task owners' store, then the ledger bills each row's usage
// (metering.Settle). The shipper calls it ahead of storing the rows
// (ShipperOptions.Settle with SettleAhead), so another meter finds a task
// within milliseconds of its creation.
//
// It is idempotent, as the shipper requires: a binding stored already is
// left as it is, and the ledger bills a row once by its id.
//
// A binding another meter stored first for another org (an agent reusing
// a task id across meters) is found here, after this meter relayed its
// answer: the task is marked reused (relayed to no one from then on) and
// the listing gets an incident. Within one meter the index catches it
// before anything is relayed.
func (p *Proxy) Project(ctx context.Context, rows []metering.Usage) error {
	var bs []contracts.TaskBinding
	var sellers []string // of bs[i]'s listing, for the kill switches
	var ends []contracts.TaskEvent
	billed := billedTotals(rows)
	for i := range rows {
		u := &rows[i]
		var ended *contracts.TaskEvent
		// A cancel's end is recorded by the call itself, with who canceled
		// and why (trackLife), before its row is spooled: the projection's
		// record of it then changes nothing (TaskEnded records an end
		// once), and stands in for it when that write failed.
		if u.TaskID != "" && u.ErrorCode == 0 && wire.Terminal(u.State) {
			ended = &contracts.TaskEvent{ListingID: u.ListingID, TaskID: u.TaskID, Kind: contracts.TaskEnded, State: u.State, At: u.Time, TraceID: u.TraceID}
		}
		if u.Binds == nil || u.Binds.Stored {
			// A task bound before (or by this call, in the database at
			// once) that ended with this call.
			if ended != nil && p.Tasks != nil && !p.owners.EndedKnown(u.ListingID, u.TaskID) {
				ends = append(ends, *ended)
			}
			if u.Binds == nil {
				continue
			}
			ended = nil
		}
		b := contracts.TaskBinding{ListingID: u.ListingID, TaskID: u.TaskID, OrgID: u.BuyerOrgID, ContractID: u.ContractID,
			ContextID: u.ContextID, CreatedAt: u.Time, ParentListingID: u.Binds.ParentListingID, ParentTaskID: u.ParentTaskID, Ended: ended,
			Endpoint: u.Binds.Endpoint, KeyID: u.APIKeyID}
		if !u.Binds.DeadlineAt.IsZero() {
			d := u.Binds.DeadlineAt
			b.DeadlineAt = &d
		}
		if tb, ok := billed[ownerKey{u.ListingID, u.TaskID}]; ok {
			// The task's bill goes with its binding (one row per task).
			b.Billed = &tb
			delete(billed, ownerKey{u.ListingID, u.TaskID})
		}
		bs = append(bs, b)
		sellers = append(sellers, u.SellerOrgID)
	}
	if len(bs) > 0 {
		owners, err := p.bindAll(ctx, bs)
		if err != nil {
			return err
		}
		for j, b := range bs {
			switch {
			case owners[j] != b.OrgID:
				if err := p.reusedAcrossMeters(ctx, b); err != nil {
					return err
				}
			case b.Ended != nil:
				// Bound now or before (a replay): its end is recorded either
				// way, or by the meter's own call if it was bound in the
				// database first.
				p.owners.MarkEnded(b.ListingID, b.TaskID)
				p.forgetProgress(b.ListingID, b.TaskID)
			default:
				p.cancelIfSwitched(ctx, b, sellers[j])
			}
		}
	}
	// Every task that ends is recorded as ended (TaskEnded records it
	// once: a replay or a second observation changes nothing).
	for _, e := range ends {
		if _, err := p.Tasks.TaskEnded(ctx, e); err != nil && !isNotFound(err) {
			return err
		}
		p.owners.MarkEnded(e.ListingID, e.TaskID)
		p.forgetProgress(e.ListingID, e.TaskID) // another meter may have seen the end
	}
	// Tasks the agent lost: after the bindings, so a task bound and lost
	// in one batch is found.
	for i := range rows {
		if u := &rows[i]; u.Lost && p.Tasks != nil {
			if err := p.taskLost(ctx, contracts.TaskEvent{ID: lostEventID(u.ID), ListingID: u.ListingID, TaskID: u.TaskID, Kind: contracts.TaskLost,
				At: u.Time, TraceID: u.TraceID, Reason: lostReason(u.Method)}); err != nil {
				return err
			}
		}
	}
	// How each forwarded send ended (idempotent sends): after the
	// bindings, so another meter replaying a send finds its task's owner.
	if recs := sentRecords(rows); len(recs) > 0 && p.Sent != nil {
		if _, err := p.Sent.RecordSent(ctx, recs, p.Clock.Now()); err != nil {
			return err
		}
	}
	// The bills of tasks bound before (or in the database at once): their
	// one row is raised to the batch's last bill.
	if len(billed) > 0 {
		raise := make([]contracts.TaskBill, 0, len(billed))
		for k, tb := range billed {
			raise = append(raise, contracts.TaskBill{ListingID: k.listing, TaskID: k.task, Billed: tb})
		}
		if err := p.raiseBilled(ctx, raise); err != nil {
			return err
		}
	}
	var deferred []int // rows whose bills the bill book left to Settle
	if p.bills != nil {
		for i := range rows {
			if rows[i].Pending != nil && rows[i].TaskID != "" {
				deferred = append(deferred, i)
			}
		}
	}
	if err := metering.Settle(ctx, p.Ledger, rows); err != nil {
		return err
	}
	for _, i := range deferred {
		p.bills.settled(rows[i].ListingID, rows[i].TaskID)
	}
	for i := range rows {
		u := &rows[i]
		if u.Billed != nil && p.bills != nil {
			p.bills.done(u.ListingID, u.TaskID, *u.Billed)
		}
		u.Binds, u.Sent, u.Billed = nil, nil, nil
	}
	return nil
}

// billedTotals is, per task, the last bill the rows decided (the largest
// counters: a task's bill only grows), with when it was first billed.
func billedTotals(rows []metering.Usage) map[ownerKey]contracts.TaskBilled {
	var out map[ownerKey]contracts.TaskBilled
	for i := range rows {
		u := &rows[i]
		if u.Billed == nil || u.TaskID == "" {
			continue
		}
		if out == nil {
			out = make(map[ownerKey]contracts.TaskBilled)
		}
		k := ownerKey{u.ListingID, u.TaskID}
		tb, ok := out[k]
		if !ok || u.Time.Before(tb.At) {
			tb.At = u.Time
		}
		tb.InputTokens = max(tb.InputTokens, u.Billed.InputTokens)
		tb.OutputTokens = max(tb.OutputTokens, u.Billed.OutputTokens)
		tb.ComputeMs = max(tb.ComputeMs, u.Billed.ComputeMs)
		out[k] = tb
	}
	return out
}

// raiseBilled raises tasks' stored bills (contracts.BatchTaskOwners).
func (p *Proxy) raiseBilled(ctx context.Context, bills []contracts.TaskBill) error {
	bo, ok := p.Owners.(contracts.BatchTaskOwners)
	if !ok {
		return fmt.Errorf("the task owners' store keeps no bills (contracts.BatchTaskOwners): the meter cannot bill in memory")
	}
	return bo.RaiseBilled(ctx, bills)
}

// taskLost ends a task its agent no longer knows, recording a TaskLost
// event, and, the first time, counts it on the listing. A task never bound
// in the database is not the meter's to record.
func (p *Proxy) taskLost(ctx context.Context, e contracts.TaskEvent) error {
	ended, err := p.Tasks.TaskEnded(ctx, e)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	p.owners.MarkEnded(e.ListingID, e.TaskID)
	p.forgetProgress(e.ListingID, e.TaskID)
	if !ended {
		return nil // ended before (or recorded lost by a replay of this row)
	}
	p.Logger.WarnContext(ctx, "the agent lost a task: it answered TaskNotFound for a task the meter bound", "trace_id", e.TraceID,
		"listing", e.ListingID, "task_id", e.TaskID)
	p.Metrics.taskLost(e.ListingID)
	if p.Incidents != nil {
		count := func(ctx context.Context) error { return p.Incidents.RecordLostTask(ctx, e.ListingID) }
		if err := count(ctx); err != nil {
			// Not returned: a replay of the row would find the task ended
			// already and count nothing. The task sweeper counts it later
			// (writeLater).
			p.later.add("lost task count", ownerKey{}, maxLaterAttempts, count)
			p.Logger.ErrorContext(ctx, "lost task not counted on its listing; the task sweeper retries", "listing", e.ListingID, "task_id", e.TaskID, "err", err)
		}
	}
	return nil
}

// lostEventID is the id of the TaskLost event a usage row records: the
// same on every replay of the row.
func lostEventID(usageID string) string { return "tev_lost_" + strings.TrimPrefix(usageID, "use_") }

func lostReason(method string) string {
	return fmt.Sprintf("the agent answered %s with TaskNotFound: it no longer knows the task (it may have restarted and lost its tasks)", method)
}

// bindAll stores bindings, in one batch when the store can, and returns
// the owner each task has now.
func (p *Proxy) bindAll(ctx context.Context, bs []contracts.TaskBinding) ([]string, error) {
	if bo, ok := p.Owners.(contracts.BatchTaskOwners); ok {
		owners, errs := bo.BindTasks(ctx, bs)
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return owners, nil
	}
	owners := make([]string, len(bs))
	for i, b := range bs {
		o, err := p.Owners.BindTask(ctx, b)
		if err != nil {
			return nil, err
		}
		owners[i] = o
	}
	return owners, nil
}

// reusedAcrossMeters handles a binding of this meter's that lost to
// another meter's for another org. A mark the store did not take is
// returned: Project fails, and the shipper settles the rows again, which
// finds the conflict again and marks it then.
func (p *Proxy) reusedAcrossMeters(ctx context.Context, b contracts.TaskBinding) error {
	now := p.Clock.Now()
	p.Logger.WarnContext(ctx, "agent gave two orgs the same task id on different meters; the task is relayed to no one from now on",
		"listing", b.ListingID, "task_id", b.TaskID, "org", b.OrgID)
	err := p.Owners.MarkTaskReused(ctx, b.ListingID, b.TaskID, now)
	// Marked in memory whatever the store says: this meter relays the task
	// to no one while the shipper retries.
	p.owners.MarkReused(b.ListingID, b.TaskID, now)
	if err != nil {
		return fmt.Errorf("marking task %s of listing %s reused: %w", b.TaskID, b.ListingID, err)
	}
	p.recordIncident(ctx, b.ListingID)
	return nil
}

// Stored counts the tokens and cost of rows the usage store took, in the
// meter's metrics (ShipperOptions.Stored): once settled, a row's usage is
// known.
func (p *Proxy) Stored(rows []metering.Usage) {
	if p.Metrics == nil {
		return
	}
	for i := range rows {
		p.Metrics.tokens(rows[i])
	}
}

// cancelIfSwitched requests the cancel of an open task bound now when a
// kill switch on concerns it: a task whose call was admitted before the
// switch, projected after the switch's rounds of cancels (a backlog, or a
// spool replayed after a crash), is canceled all the same. One atomic load
// while no switch is on.
func (p *Proxy) cancelIfSwitched(ctx context.Context, b contracts.TaskBinding, seller string) {
	if p.Switches == nil || p.Tasks == nil {
		return
	}
	set := p.Switches.set.Load()
	if set == nil {
		return
	}
	sw := set.match(b.ListingID, seller, b.OrgID, b.KeyID, b.TaskID)
	if sw == nil {
		return
	}
	if err := p.Tasks.RequestCancel(ctx, b.ListingID, b.TaskID, contracts.CanceledByKillSwitch, sw.CancelReason(), "", p.Clock.Now()); err != nil {
		p.Logger.WarnContext(ctx, "a task a kill switch concerns, bound after its cancels, is not canceled yet; the switch's next round retries",
			"task_id", b.TaskID, "kill_switch", sw.ID, "err", err)
	}
}
