package a2aproxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// observed accumulates what a call's answers said about the task: ids,
// state, the agent's own usage report, and the text the estimate falls
// back to.
type observed struct {
	taskID    string
	contextID string
	state     string
	terminal  bool
	bound     bool
	reported  *wire.Reported
	artifacts map[string]string // artifact id → text so far (honouring append)
	agentText map[string]bool   // agent message texts, each counted once
	order     []string
}

func (o *observed) add(ob wire.Observation) {
	if ob.TaskID != "" {
		if ob.TaskID != o.taskID {
			o.bound = false
		}
		o.taskID = ob.TaskID
	}
	if ob.ContextID != "" {
		o.contextID = ob.ContextID
	}
	if ob.State != "" {
		o.state = ob.State
		o.terminal = ob.Terminal
	}
	if r := ob.Usage; r != nil {
		if o.reported == nil {
			o.reported = &wire.Reported{}
		}
		o.reported.InputTokens = max(o.reported.InputTokens, r.InputTokens)
		o.reported.OutputTokens = max(o.reported.OutputTokens, r.OutputTokens)
		o.reported.ComputeMs = max(o.reported.ComputeMs, r.ComputeMs)
		if r.Model != "" {
			o.reported.Model = r.Model
		}
	}
	if o.artifacts == nil {
		o.artifacts = map[string]string{}
		o.agentText = map[string]bool{}
	}
	for _, a := range ob.Artifacts {
		if _, ok := o.artifacts[a.ArtifactID]; !ok {
			o.order = append(o.order, a.ArtifactID)
		}
		if a.Append {
			o.artifacts[a.ArtifactID] += a.Text
		} else {
			o.artifacts[a.ArtifactID] = a.Text
		}
	}
	for _, t := range ob.AgentTexts {
		o.agentText[t] = true
	}
}

// outputEstimate is the estimated output tokens of the task so far: its
// artifacts (with appended chunks joined) and the agent's messages.
func (o *observed) outputEstimate() int64 {
	var n int64
	for _, id := range o.order {
		n += wire.EstimateTokens(o.artifacts[id])
	}
	for t := range o.agentText {
		n += wire.EstimateTokens(t)
	}
	return n
}

// finish meters a call: it records the usage row (durably, in the spool,
// before the buyer's response completes) with what the call observed and
// the frozen plan's prices, and, when this call bound its task, the
// binding. No database is touched: the shipper settles the row (the
// ledger bills the task's increase, Project) before it stores it.
func (p *Proxy) finish(ctx context.Context, cl *call, latency time.Duration) {
	u := metering.Usage{
		ID:              agentmarket.NewID("use"),
		Time:            p.Clock.Now().Truncate(time.Millisecond),
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
	}
	if cl.plan != nil {
		u.Currency = cl.plan.Currency
	}
	// Cost allocation: the contract's tags, under the key's own.
	u.Tags = cl.contract.Tags.Merge(cl.actor.KeyTags)
	if cl.req != nil {
		u.Method = cl.req.Name
		if cl.label != "" {
			u.Method = cl.label
		}
		u.ProtocolVersion = string(cl.req.Version)
		u.ParentTaskID = cl.req.ParentTaskID()
		if u.TaskID == "" {
			u.TaskID = cl.req.TaskID()
		}
	}
	if cl.errCode == 0 && cl.req != nil && !cl.replayed {
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
		cum, add = p.bounded(ctx, &u, cum, add)
		key := u.TaskID
		if key == "" {
			key = "call:" + u.ID // a bare message answer: billed on its own
		}
		u.Pending = &metering.PendingBill{Key: key, Cum: cum, Add: add}
		if cl.plan != nil {
			u.Pending.Rates = rates(*cl.plan)
		}
	}
	if cl.binds != nil && cl.errCode == 0 {
		u.Binds = cl.binds
	}
	if cl.sent != nil {
		u.Sent = p.sentEnded(cl, &u)
	}
	u.Lost = cl.lost
	// The life events this call records itself (a pause, a resume, a
	// cancel with who and why) go first: once the row is in the spool the
	// shipper may record the task's end, which would close a pause before
	// its resume is written.
	p.trackLife(ctx, cl)
	if err := p.Recorder.Record(ctx, u); err != nil {
		// The answer goes to the buyer (the agent did the work), but the
		// meter takes no more calls until it can record again.
		p.recordFailed.Store(time.Now().UnixNano())
		p.Logger.ErrorContext(ctx, "usage not recorded; the meter refuses calls until it can record again", "trace_id", u.TraceID, "task_id", u.TaskID, "err", err)
	}
	if p.Metrics != nil {
		p.Metrics.observe(cl, latency)
	}
	var seen metering.Counters // what the call observed, billed when settled
	if pb := u.Pending; pb != nil {
		seen = metering.Counters{InputTokens: agentmarket.AddSat(pb.Cum.InputTokens, pb.Add.InputTokens),
			OutputTokens: agentmarket.AddSat(pb.Cum.OutputTokens, pb.Add.OutputTokens), ComputeMs: agentmarket.AddSat(pb.Cum.ComputeMs, pb.Add.ComputeMs)}
	}
	// Typed attributes: the line is written on every call, and LogAttrs
	// spares slog boxing each value.
	p.Logger.LogAttrs(ctx, slog.LevelInfo, "a2a call", slog.String("trace_id", u.TraceID), slog.String("task_id", u.TaskID),
		slog.String("listing", u.ListingID), slog.String("org", u.BuyerOrgID), slog.String("method", u.Method),
		slog.String("state", u.State), slog.Int("error_code", u.ErrorCode), slog.Int64("latency_ms", u.LatencyMs),
		slog.Int64("observed_input_tokens", seen.InputTokens), slog.Int64("observed_output_tokens", seen.OutputTokens),
		slog.Bool("estimated", u.Estimated))
}

// bounded clamps what a call reports and adds to agentmarket.MaxQuantity
// a counter (metering.Counters.Clamp), so that no row, ledger counter or
// rated cost can overflow. A report past the bound is an agent's bug or a
// hostile seller's: it counts as the bound and is flagged, with a warning
// naming the listing and the task and in
// agentmarket_meter_usage_clamped_total{listing}.
func (p *Proxy) bounded(ctx context.Context, u *metering.Usage, cum, add metering.Counters) (metering.Counters, metering.Counters) {
	c, cumClamped := cum.Clamp()
	a, addClamped := add.Clamp()
	if cumClamped || addClamped {
		p.Logger.WarnContext(ctx, "usage past the bound counted as the bound", "trace_id", u.TraceID, "task_id", u.TaskID,
			"listing", u.ListingID, "seller", u.SellerOrgID, "reported", cum, "added", add, "bound", agentmarket.MaxQuantity)
		p.Metrics.usageClamped(u.ListingID)
	}
	return c, a
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
