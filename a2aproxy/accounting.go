package a2aproxy

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// accounting is the meter's accounting step: from what a call observed to
// its usage row in the spool, in four steps a reader can follow in order —
// observe (the row's ids, state, bytes and latency: usage), bill (the task's
// counters, reported or estimated, bounded: bill), rate (the frozen plan's
// prices ride with the pending bill, applied once when the shipper settles
// the row), record (the row made durable before the buyer's answer
// completes: record). It touches no database.
type accounting struct {
	recorder Recorder
	clock    agentmarket.Clock
	logger   *slog.Logger
	metrics  *Metrics
	// bills, when set, decides each row's bill as it is recorded
	// (billbook.go, sharedbills.go); else rows are spooled pending, billed
	// when settled.
	bills billDecider
	// failedAt is when a row last failed to be recorded (Unix ns, 0:
	// never), for err.
	failedAt atomic.Int64
}

// recordRetry is how long after a usage row could not be recorded the
// meter refuses calls before it tries again.
const recordRetry = time.Second

// usage is the call's usage row, observed and billed (usage and bill), not
// yet recorded.
func (a *accounting) usage(ctx context.Context, cl *call, latency time.Duration) metering.Usage {
	u := metering.Usage{
		ID:              cl.rowID,
		Time:            a.clock.Now().Truncate(time.Millisecond),
		TraceID:         cl.trace.traceID,
		TaskID:          cl.obs.taskID,
		ContextID:       cl.obs.contextID,
		ListingID:       cl.target.ListingID,
		SellerOrgID:     cl.target.SellerOrgID,
		BuyerOrgID:      cl.actor.OrgID,
		APIKeyID:        cl.actor.KeyID,
		ContractID:      cl.contract.ID,
		ProtocolVersion: string(wire.V03),
		State:           cl.obs.state,
		ErrorCode:       cl.errCode,
		BytesIn:         int64(cl.bytesIn),
		BytesOut:        int64(cl.bytesOut),
		LatencyMs:       latency.Milliseconds(),
		CardHash:        cl.target.CardHash,
		Lost:            cl.lost,
	}
	if u.ID == "" {
		// Time-ordered: the usage stores append to their key's index
		// instead of writing at random places in it (BenchmarkInsert).
		u.ID = agentmarket.NewSortableID("use")
	}
	if cl.plan != nil {
		u.Currency = cl.plan.Currency
	}
	// Cost allocation: the contract's tags, under the key's own.
	u.Tags = cl.contract.Tags.Merge(cl.actor.KeyTags)
	if cl.fallbackFor != "" {
		u.Tags = u.Tags.Merge(fallbackTags(cl.fallbackFor))
	}
	if cl.req != nil {
		u.Method = cl.req.Name
		if cl.label != "" {
			u.Method = cl.label
		} else if cl.reusedID {
			u.Method = "reused-id:" + cl.req.Name
		}
		u.ProtocolVersion = string(cl.req.Version)
		u.ParentTaskID = cl.req.ParentTaskID()
		if u.TaskID == "" {
			u.TaskID = cl.req.TaskID()
		}
	}
	if cl.errCode == 0 && cl.req != nil && !cl.replayed {
		u.Pending = a.bill(ctx, cl, &u, latency)
	}
	if cl.binds != nil && cl.errCode == 0 {
		u.Binds = cl.binds
	}
	return u
}

// bill is what the call bills its task: the agent's cumulative report, or
// else the meter's estimate (the task's output so far, the message's input
// and the time the agent worked, added), bounded, at the plan's rates. The
// shipper bills the increase over what the task was billed before, once.
func (a *accounting) bill(ctx context.Context, cl *call, u *metering.Usage, latency time.Duration) *metering.PendingBill {
	var cum, add metering.Counters
	if r := cl.obs.reported; r != nil {
		cum = metering.Counters{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, ComputeMs: r.ComputeMs}
		u.Model = r.Model
	} else {
		u.Estimated = true
		cum.OutputTokens = cl.obs.outputEstimate()
		if m := cl.req.Method; m == wire.MethodSend || m == wire.MethodStream {
			for _, t := range cl.req.MessageTexts() {
				add.InputTokens += wire.EstimateTokens(t)
			}
			// No report: compute is the time the meter saw the agent work.
			add.ComputeMs = latency.Milliseconds()
		}
	}
	cum, add = a.bounded(ctx, u, cum, add)
	cl.seen = metering.Counters{}.Raise(cum, add) // what the call observed, for the log
	key := u.TaskID
	if key == "" {
		key = "call:" + u.ID // a bare message answer: billed on its own
	}
	pb := &metering.PendingBill{Key: key, Cum: cum, Add: add}
	if cl.plan != nil {
		pb.Rates = rates(*cl.plan)
	}
	if a.bills != nil && a.decide(ctx, cl, u, pb) {
		return nil
	}
	return pb
}

// decide bills pb on the call path, from the bill book: u gets its final
// counters, task count and cost, and (for a task) the task's total after
// it. It reports false when the book cannot decide (the task's stored
// bill could not be read, or the task's earlier rows went pending): the
// row is then spooled pending, and billed when settled, like every later
// row of the task until those are (billBook.deferred).
func (a *accounting) decide(ctx context.Context, cl *call, u *metering.Usage, pb *metering.PendingBill) bool {
	var delta metering.Counters
	first := true
	if u.TaskID == "" {
		delta = metering.Counters{}.Raise(pb.Cum, pb.Add) // billed on its own, once: its row id is its key
	} else {
		d, total, f, err := a.bills.bill(ctx, u.ListingID, u.TaskID, cl.fresh, pb.Cum, pb.Add, u.Time)
		if errors.Is(err, errUnbilled) {
			a.logger.WarnContext(ctx, "call not billed: the shared bills did not answer for its task", "trace_id", u.TraceID, "listing", u.ListingID,
				"task_id", u.TaskID, "err", err)
			a.metrics.unbilled(u.ListingID)
			u.InputTokens, u.OutputTokens, u.ComputeMs, u.Tasks, u.CostMicros = 0, 0, 0, 0, 0
			return true
		}
		if err != nil {
			if !errors.Is(err, errDeferred) {
				a.logger.WarnContext(ctx, "the task's bills are left to the shipper until it has billed them: its stored bill could not be read",
					"trace_id", u.TraceID, "listing", u.ListingID, "task_id", u.TaskID, "err", err)
			}
			return false
		}
		delta, first = d, f
		u.Billed = &total
	}
	u.InputTokens, u.OutputTokens, u.ComputeMs = delta.InputTokens, delta.OutputTokens, delta.ComputeMs
	if first && u.TaskID != "" {
		u.Tasks = 1
	}
	u.CostMicros = metering.Price(pb.Rates, delta, u.Tasks)
	return true
}

// bounded clamps what a call reports and adds to agentmarket.MaxQuantity
// a counter (metering.Counters.Clamp), so that no row, ledger counter or
// rated cost can overflow. A report past the bound is an agent's bug or a
// hostile seller's: it counts as the bound and is flagged, with a warning
// naming the listing and the task and in
// agentmarket_meter_usage_clamped_total{listing}.
func (a *accounting) bounded(ctx context.Context, u *metering.Usage, cum, add metering.Counters) (metering.Counters, metering.Counters) {
	c, cumClamped := cum.Clamp()
	ad, addClamped := add.Clamp()
	if cumClamped || addClamped {
		// Counted as the bound and flagged: the call was answered, and the
		// warning and the metric are how a seller's bad report is seen.
		a.logger.WarnContext(ctx, "usage past the bound counted as the bound", "trace_id", u.TraceID, "task_id", u.TaskID,
			"listing", u.ListingID, "seller", u.SellerOrgID, "reported", cum, "added", add, "bound", agentmarket.MaxQuantity)
		a.metrics.usageClamped(u.ListingID)
	}
	return c, ad
}

// record makes the row durable in the spool. When it cannot, the meter
// refuses calls (err) for recordRetry, or for as long as the recorder
// says it is failed.
func (a *accounting) record(ctx context.Context, cl *call, u metering.Usage, latency time.Duration) error {
	err := a.recorder.Record(ctx, u)
	if err != nil {
		a.failedAt.Store(a.clock.Now().UnixNano())
		if u.Billed != nil {
			a.bills.done(u.ListingID, u.TaskID, *u.Billed) // no projection will come for it
		}
	}
	if a.metrics != nil {
		a.metrics.observe(cl, latency)
	}
	seen := cl.seen
	// A call that failed is logged at info; one that succeeded at debug:
	// its usage row records it whole (trace and task ids, listing, org,
	// method, state, latency, tokens), and the line cost ~4 µs of a
	// call's CPU. Typed attributes: LogAttrs spares slog boxing each value.
	level := slog.LevelDebug
	if u.ErrorCode != 0 || err != nil {
		// A failed call; or a row the spool did not take, whose line is
		// then the only record of its usage.
		level = slog.LevelInfo
	}
	if !a.logger.Enabled(ctx, level) {
		return err
	}
	a.logger.LogAttrs(ctx, level, "a2a call", slog.String("trace_id", u.TraceID), slog.String("task_id", u.TaskID),
		slog.String("listing", u.ListingID), slog.String("org", u.BuyerOrgID), slog.String("method", u.Method),
		slog.String("state", u.State), slog.Int("error_code", u.ErrorCode), slog.Int64("latency_ms", u.LatencyMs),
		slog.Int64("observed_input_tokens", seen.InputTokens), slog.Int64("observed_output_tokens", seen.OutputTokens),
		slog.Bool("estimated", u.Estimated))
	return err
}

// err is why the meter cannot record usage now, nil when it can: the
// recorder's own error (a spool whose fsync failed stays failed), or a row
// that could not be recorded within the last recordRetry (a full disk).
func (a *accounting) err() error {
	if err := a.recorder.Err(); err != nil {
		return err
	}
	if at := a.failedAt.Load(); at != 0 && a.clock.Now().Sub(time.Unix(0, at)) < recordRetry {
		return errors.New("the last usage row could not be recorded")
	}
	return nil
}

// Rate is the list price of some usage under a plan, in micro-units,
// rounded half up once (metering.Price).
func Rate(p listings.Plan, d metering.Counters, tasks int64) int64 {
	return metering.Price(rates(p), d, tasks)
}

// rates are a plan's usage prices.
func rates(p listings.Plan) metering.Rates {
	return metering.Rates{InputTokensPerMillion: p.InputTokensPerMillionMicros, OutputTokensPerMillion: p.OutputTokensPerMillionMicros,
		ComputePerHour: p.ComputePerHourMicros, PerTask: p.PerTaskMicros}
}

// finish meters a call: the accounting step makes its usage row (with, for
// a send, how the send ended: idem.go), the task's life events the call
// carries are recorded (life.go), and the row goes to the spool, durably,
// before the buyer's response completes. The shipper settles the row (the
// ledger bills the task's increase, Project) before it stores it.
func (p *Proxy) finish(ctx context.Context, cl *call, latency time.Duration) {
	u := p.acct.usage(ctx, cl, latency)
	if cl.hold.n > 0 {
		p.book.settle(cl, settledCost(cl, &u))
	}
	if cl.rate != nil {
		p.rates.done(cl, &u) // ratelimit.go
	}
	if cl.credit.on {
		p.credits.settle(cl, settledCost(cl, &u))
	}
	if cl.sent != nil {
		u.Sent = p.sentEnded(cl, &u)
	}
	// The life events this call records itself (a pause, a resume, a
	// cancel with who and why) go first: once the row is in the spool the
	// shipper may record the task's end, which would close a pause before
	// its resume is written.
	p.trackLife(ctx, cl)
	if err := p.acct.record(ctx, cl, u, latency); err != nil {
		// Not returned: the agent did the work and its answer is on its way
		// to the buyer; withholding it would not undo the work. What the
		// meter owes is to take no more calls it cannot bill: it refuses
		// them (RecordingErr, /readyz) until it can record again. This row
		// is lost: nothing records it again, so its usage is never billed
		// and what it carries for Project (a binding held only in memory,
		// how a send ended) never comes from the spool; the "a2a call" line
		// record wrote is its only trace.
		p.Logger.ErrorContext(ctx, "usage not recorded; the meter refuses calls until it can record again", "trace_id", u.TraceID, "task_id", u.TaskID, "err", err)
	}
	if cl.span != nil {
		cl.span.end(cl, &u, cl.errCode)
	}
}
