package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// Defaults of the Reporter.
const (
	// DefaultReportWindow is how much usage one report covers.
	DefaultReportWindow = time.Hour
	// DefaultSettleDelay is how long after a window ends its usage is taken
	// to have reached the usage store (the meters' spools ship in seconds).
	DefaultSettleDelay = 2 * time.Minute
	// DefaultReportEvery is how often Run reports.
	DefaultReportEvery = time.Minute
)

// Reporter reports each open subscription's usage to the provider, per
// metered line kind and closed window, exactly once.
//
// Windows are aligned on the UTC day (hourly by default), so they never
// straddle a billing period; a window is closed when now ≥ its end +
// SettleDelay. What a window reports is the usage of the whole period so
// far, [period start, window end) (from the end of the contract's free
// trial, when that is later: Subscription.UsageFrom), minus what the
// period's reports have
// already carried (the watermark): usage that reaches the usage store late
// (a meter that was cut off, say) goes out with the next window instead of
// being lost, and the quantities are the usage itself, in full, since the
// provider's prices hold the allowance. Windows that closed while the
// reporter was not running are reported together, as one window.
//
// Exactly once: the report is recorded in the Store's outbox (pending,
// with its quantity and idempotency key UsageReportKey) before the
// provider is called, and marked sent, adding its quantity to the
// watermark, in one transaction after. Every run first sends the pending
// reports again, exactly as recorded (same quantity, same key), so a crash
// between the provider's answer and the marking sends the same key again:
// the provider counts it once (Stripe keeps keys 24 hours) and so does the
// watermark. A report the provider refuses for good (Invalid, NotFound,
// Conflict) is marked failed: its quantity goes out with the next window.
// A window without usage is not sent; it only moves the watermark.
//
// A usage report of the last window of a month must reach the provider
// before it finalizes that month's invoice (Stripe: about an hour after
// the period ends); usage later than that is listed by Reconcile.
type Reporter struct {
	Store    Store
	Provider Provider
	Usage    metering.Store
	Clock    agentmarket.Clock
	// Window is how much usage one report covers; it must divide a day
	// and be a whole number of minutes. Zero is DefaultReportWindow.
	Window time.Duration
	// SettleDelay is how long after a window ends it is reported. Zero is
	// DefaultSettleDelay; negative is none.
	SettleDelay time.Duration
	// Logger receives refused reports and Run's errors; nil is
	// slog.Default().
	Logger *slog.Logger
}

// Validate reports every broken rule.
func (r *Reporter) Validate() error {
	var fe agentmarket.Fields
	if w := r.Window; w != 0 && (w < time.Minute || w%time.Minute != 0 || (24*time.Hour)%w != 0) {
		fe.Add("report_window", "divides_day", "the report window must be a whole number of minutes that divides a day (1m, 5m, 15m, 1h, …), not %s", w)
	}
	if r.Store == nil {
		fe.Add("store", "required", "the billing store is required")
	}
	if r.Provider == nil {
		fe.Add("provider", "required", "the payment provider is required")
	}
	if r.Usage == nil {
		fe.Add("usage", "required", "the usage store is required")
	}
	if r.Clock == nil {
		fe.Add("clock", "required", "the clock is required")
	}
	return fe.Err("invalid_reporter", "the usage reporter is not configured")
}

func (r *Reporter) window() time.Duration {
	if r.Window > 0 {
		return r.Window
	}
	return DefaultReportWindow
}

func (r *Reporter) settleDelay() time.Duration {
	switch {
	case r.SettleDelay > 0:
		return r.SettleDelay
	case r.SettleDelay < 0:
		return 0
	}
	return DefaultSettleDelay
}

func (r *Reporter) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// ClosedThrough is the end of the last window closed at now: windows
// ending at or before it are reported.
func (r *Reporter) ClosedThrough(now time.Time) time.Time {
	return now.UTC().Add(-r.settleDelay()).Truncate(r.window())
}

// Run reports every interval (DefaultReportEvery when every ≤ 0) until
// ctx ends. Errors of a run are logged and the next run retries.
func (r *Reporter) Run(ctx context.Context, every time.Duration) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if every <= 0 {
		every = DefaultReportEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.logger().Warn("usage report failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce sends the pending reports again, then reports every open
// subscription's closed windows, and returns how many reports the
// provider accepted. It goes on with the other contracts when one fails
// and returns their errors joined, but stops at once when the provider is
// unavailable.
func (r *Reporter) RunOnce(ctx context.Context) (int, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	now := r.Clock.Now().UTC()
	sent, err := r.resend(ctx, "", now)
	if err != nil {
		return sent, err
	}
	subs, err := r.Store.OpenSubscriptions(ctx)
	if err != nil {
		return sent, err
	}
	through := r.ClosedThrough(now)
	var errs []error
	for i := range subs {
		n, err := r.report(ctx, &subs[i], through, now)
		sent += n
		if err != nil {
			if agentmarket.KindOf(err) == agentmarket.Unavailable {
				return sent, err
			}
			errs = append(errs, fmt.Errorf("contract %s: %w", subs[i].ContractID, err))
		}
	}
	return sent, errors.Join(errs...)
}

// flush reports a subscription's usage through any instant (not only a
// window's end): Detach's last report before the cancellation.
func (r *Reporter) flush(ctx context.Context, sub *Subscription, through, now time.Time) (int, error) {
	sent, err := r.resend(ctx, sub.ContractID, now)
	if err != nil {
		return sent, err
	}
	n, err := r.report(ctx, sub, through, now)
	return sent + n, err
}

// resend sends the pending reports again, exactly as recorded.
func (r *Reporter) resend(ctx context.Context, contractID string, now time.Time) (int, error) {
	pending, err := r.Store.PendingReports(ctx, contractID)
	if err != nil {
		return 0, err
	}
	sent := 0
	for i := range pending {
		ok, err := r.send(ctx, &pending[i])
		if ok {
			sent++
		}
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// report reports each metered kind of sub through the given instant.
func (r *Reporter) report(ctx context.Context, sub *Subscription, through, now time.Time) (int, error) {
	sent := 0
	// Usage per [period start, end): one query serves every kind.
	usage := map[Period]Usage{}
	usageOf := func(p Period) (Usage, error) {
		// A trial's usage is free: it is never reported.
		if from := sub.UsageFrom; from.After(p.Start) {
			if !from.Before(p.End) {
				return Usage{}, nil
			}
			p.Start = from
		}
		if u, ok := usage[p]; ok {
			return u, nil
		}
		u, err := usageIn(ctx, r.Usage, sub.ContractID, p)
		if err == nil {
			usage[p] = u
		}
		return u, err
	}
	start := sub.CreatedAt.UTC().Truncate(r.window())
	for _, kind := range MeteredLineKinds {
		item := sub.Refs.MeteredItemIDs[kind]
		if item == "" {
			return sent, agentmarket.Wrap(agentmarket.Internal, "subscription_item_missing",
				fmt.Errorf("subscription %s of contract %s has no %s item", sub.Refs.ID, sub.ContractID, kind), "billing state is incomplete")
		}
		from := start
		if lw, err := r.Store.LatestWatermark(ctx, sub.ContractID, kind); err == nil {
			if lw.Through.After(from) {
				from = lw.Through
			}
		} else if agentmarket.KindOf(err) != agentmarket.NotFound {
			return sent, err
		}
	windows:
		for from.Before(through) {
			p := MonthOf(from)
			end := p.End
			if through.Before(end) {
				end = through
			}
			wm, err := r.Store.Watermark(ctx, sub.ContractID, kind, p.Start)
			if err != nil {
				return sent, err
			}
			if wm.Through.After(from) { // another reporter got further
				from = wm.Through
				continue
			}
			if end.Sub(from) < time.Second {
				break
			}
			used, err := usageOf(Period{Start: p.Start, End: end})
			if err != nil {
				return sent, err
			}
			// Negative only if usage vanished from the store after it was
			// reported; the provider cannot take it back (Reconcile shows
			// it) and later usage makes up for it.
			q := max(0, used.Of(kind)-wm.Reported)
			if q == 0 {
				err = r.Store.SkipWindow(ctx, wm, end)
			} else {
				w := Period{Start: from, End: end}
				rep := &UsageReport{ContractID: sub.ContractID, Kind: kind, Window: w, PeriodStart: p.Start, ItemID: item,
					Quantity: q, IdempotencyKey: UsageReportKey(sub.ContractID, kind, w), Status: ReportPending, CreatedAt: now}
				if err = r.Store.AddReport(ctx, rep, wm); err == nil {
					var ok bool
					ok, err = r.send(ctx, rep)
					if ok {
						sent++
					}
				}
			}
			switch {
			case agentmarket.KindOf(err) == agentmarket.Conflict && agentmarket.CodeOf(err) == "usage_report_conflict":
				break windows // another reporter is at it; the next run goes on
			case err != nil:
				return sent, err
			}
			from = end
		}
	}
	return sent, nil
}

// send sends one recorded report and marks it sent (or failed, when the
// provider refuses it for good). ok is whether the provider accepted it.
func (r *Reporter) send(ctx context.Context, rep *UsageReport) (ok bool, err error) {
	// The report's time is the window's last second: inside the window and
	// its billing period, and in the past.
	at := rep.Window.End.Add(-time.Second)
	if at.Before(rep.Window.Start) {
		at = rep.Window.Start
	}
	if err := r.Provider.ReportUsage(ctx, rep.ItemID, rep.Quantity, at, rep.IdempotencyKey); err != nil {
		switch agentmarket.KindOf(err) {
		case agentmarket.Invalid, agentmarket.NotFound, agentmarket.Conflict:
			r.logger().Error("usage report refused; its quantity goes out with the next window",
				"contract", rep.ContractID, "kind", rep.Kind, "window_start", rep.Window.Start, "window_end", rep.Window.End,
				"quantity", rep.Quantity, "key", rep.IdempotencyKey, "err", err)
			_, merr := r.Store.MarkReportFailed(ctx, rep.Key(), r.Clock.Now().UTC(), err.Error())
			return false, merr
		}
		return false, err
	}
	_, err = r.Store.MarkReportSent(ctx, rep.Key(), r.Clock.Now().UTC())
	return true, err
}
