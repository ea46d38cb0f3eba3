package a2aproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// pushWorkers bounds the deliveries one meter has in flight.
const pushWorkers = 32

// Claimed deliveries wait in the meter's queue (pushqueue) for a slot and
// for their destination's caps: at most pushWaiting in all, claimed at
// most pushClaimBatch at a time (so that a destination whose queue is full
// is skipped before it takes much more than its share).
const (
	pushWaiting    = 4 * pushWorkers
	pushClaimBatch = 16
)

// RunPushDelivery delivers the outbox until ctx ends: due deliveries are
// claimed (one per config at a time, so each webhook gets its task's
// updates in order) into the meter's queue, which starts them as workers
// free up, round robin over the buyer orgs with work and their
// destinations, within each destination's concurrency and rate caps and
// its Retry-After (pushqueue). Failed attempts are retried with
// exponential backoff and full jitter, up to MaxAttempts. A slow or
// flooded webhook holds its destination's cap of workers, not the others.
func (p *Proxy) RunPushDelivery(ctx context.Context) {
	if p.Push == nil {
		return
	}
	p.Push.init()
	q := pushqueue.New[waitingDelivery](pushqueue.Options{Clock: p.Clock, Caps: p.Push.capsOf})
	slots := make(chan struct{}, pushWorkers)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		// What waits in the queue goes back to the outbox at once, for
		// whichever meter runs next (rather than when its lease ends).
		for _, w := range q.Drain() {
			p.holdDelivery(ctx, w.d, p.Clock.Now(), "interrupted: the meter stopped before the attempt")
		}
	}()
	var pruned time.Time
	for {
		if now := p.Clock.Now(); now.Sub(pruned) >= time.Hour {
			pruned = now
			if n, err := p.Push.Store.PruneDeliveries(ctx, now.Add(-p.Push.Retention)); err != nil && ctx.Err() == nil {
				// The next prune, an hour on, takes them: settled deliveries
				// only take room meanwhile.
				p.Logger.WarnContext(ctx, "old push deliveries not pruned", "err", err)
			} else if n > 0 {
				p.Logger.InfoContext(ctx, "old push deliveries pruned", "deliveries", n)
			}
		}
		more := false
		if room := pushWaiting - q.Waiting(); room > 0 {
			limit := min(room, pushClaimBatch)
			now := p.Clock.Now()
			ds, err := p.Push.Store.ClaimDeliveries(ctx, now, now.Add(p.Push.Timeout+30*time.Second), limit, q.Skip())
			if err != nil && ctx.Err() == nil {
				// Nothing was leased: the loop reads the outbox again after
				// Poll (or a kick).
				p.Logger.ErrorContext(ctx, "push outbox not read", "err", err)
			}
			for _, d := range ds {
				w := waitingDelivery{d: d, dest: d.Destination}
				if w.dest == "" {
					w.dest = p.destinationOf(ctx, d)
				}
				if until := q.Add(d.OrgID, w.dest, w); !until.IsZero() {
					p.holdDelivery(ctx, d, until, heldMessage(until))
				}
			}
			more = len(ds) == limit
		}
		var wake time.Time
		for len(slots) < pushWorkers {
			w, dest, ok, at := q.Next()
			if !ok {
				wake = at
				break
			}
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() {
					<-slots
					wg.Done()
					p.Push.kick() // a slot is free, and the config's next may be due
				}()
				out := p.deliver(ctx, w.d)
				released, until := q.Done(dest, out)
				if len(released) > 0 {
					p.Metrics.pushHeld("retry_after", len(released))
				}
				for _, r := range released {
					p.holdDelivery(ctx, r.d, until, heldMessage(until))
				}
			}()
		}
		if more && ctx.Err() == nil {
			continue // there may be more due
		}
		wait := p.Push.Poll
		if !wake.IsZero() {
			wait = min(wait, max(wake.Sub(p.Clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Push.wake:
		case <-time.After(wait):
		}
	}
}

// waitingDelivery is a claimed delivery in the meter's queue.
type waitingDelivery struct {
	d    contracts.Delivery
	dest string
}

// destinationOf is the destination of a delivery enqueued before
// deliveries named theirs: its config's.
func (p *Proxy) destinationOf(ctx context.Context, d contracts.Delivery) string {
	cfg, err := p.Push.Store.PushConfig(ctx, d.ListingID, d.TaskID, d.ConfigID)
	if err != nil {
		return "" // deliver finds out why
	}
	return contracts.Destination(cfg.URL)
}

func heldMessage(until time.Time) string {
	return "held: the webhook asked the meter to wait (Retry-After) until " + until.UTC().Format(time.RFC3339)
}

// holdDelivery gives a claimed delivery back to the outbox, due at next,
// without counting an attempt.
func (p *Proxy) holdDelivery(ctx context.Context, d contracts.Delivery, next time.Time, msg string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.Push.Store.DeliveryAttempted(wctx, d.ID, contracts.DeliveryPending, d.Attempts, next, 0, msg, p.Clock.Now()); err != nil {
		// Its lease ends soon: then any meter claims it again.
		p.Logger.WarnContext(ctx, "held push delivery not given back", "delivery_id", d.ID, "err", err)
	}
}

// deliver makes one attempt of d and records it; it returns what the
// attempt says of the destination.
func (p *Proxy) deliver(ctx context.Context, d contracts.Delivery) (out pushqueue.Outcome) {
	attempts := d.Attempts + 1
	record := func(status contracts.DeliveryStatus, next time.Time, httpStatus int, msg string) {
		// Recorded even when the meter is stopping: a delivery that went
		// out must not go out again, and one that did not must not stay
		// leased to a meter that is gone (its lease would hold it back).
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.Push.Store.DeliveryAttempted(wctx, d.ID, status, attempts, next, httpStatus, msg, p.Clock.Now()); err != nil {
			// The delivery stays pending and leased: when its lease ends
			// (ClaimDeliveries) it is tried again, under the same delivery
			// id, so a webhook that took it gets it twice and may drop the
			// repeat by X-AgentMarket-Delivery-Id.
			p.Logger.ErrorContext(ctx, "push delivery not recorded", "delivery_id", d.ID, "err", err)
		}
		level, outcome := p.Logger.InfoContext, string(status)
		if status != contracts.DeliveryDelivered {
			level = p.Logger.WarnContext
		}
		if status == contracts.DeliveryPending {
			outcome = "retry"
		}
		p.Metrics.pushAttempt(outcome)
		level(ctx, "push delivery", "delivery_id", d.ID, "task_id", d.TaskID, "status", status, "attempt", attempts, "http_status", httpStatus, "error", msg)
	}
	cfg, err := p.Push.Store.PushConfig(ctx, d.ListingID, d.TaskID, d.ConfigID)
	if err != nil {
		if isNotFound(err) {
			record(contracts.DeliveryFailed, time.Time{}, 0, "the push notification config was deleted")
		}
		return out
	}
	bc, err := p.buyerConfig(cfg)
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the config's secrets cannot be opened")
		return out
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(d.Body))
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the webhook url is not valid")
		return out
	}
	contentType := "application/json"
	if cfg.Version == string(wire.V10) {
		contentType = wire.ContentTypeA2A
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "AgentMarket-Meter/1")
	req.Header.Set("X-AgentMarket-Delivery-Id", d.ID)
	req.Header.Set("X-AgentMarket-Delivery-Attempt", strconv.Itoa(attempts))
	if d.Covers > 0 {
		// Signed too (pushsign.ParamCovers): the earlier status updates of
		// the config this delivery stands for.
		req.Header.Set("X-AgentMarket-Covers", strconv.Itoa(d.Covers))
	}
	if bc.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", bc.Token)
		req.Header.Set("A2A-Notification-Token", bc.Token)
	}
	if a := bc.Authentication; a != nil && a.Scheme != "" {
		req.Header.Set("Authorization", strings.TrimSpace(a.Scheme+" "+a.Credentials))
	}
	if p.Push.Signer != nil {
		// Each attempt is signed anew (a fresh iat), over the bytes sent:
		// the body in the buyer's version, as stored; for the URL it goes
		// to now.
		sig, err := p.Push.Signer.SignDelivery(ctx, d, cfg.URL)
		if err != nil && ctx.Err() != nil {
			attempts = d.Attempts
			record(contracts.DeliveryPending, p.Clock.Now(), 0, "interrupted: the meter stopped during the attempt")
			return out
		}
		if err != nil {
			// Never sent unsigned: a buyer may refuse what is not signed.
			p.retry(d, attempts, 0, "not signed: "+err.Error(), record, 0)
			return out
		}
		req.Header.Set(SignatureHeader, sig)
	}
	res, err := p.Push.client.Do(req)
	if err != nil && ctx.Err() != nil {
		// The meter stopped during the attempt: it does not count, and the
		// delivery is due again at once, for whichever meter runs next.
		attempts = d.Attempts
		record(contracts.DeliveryPending, p.Clock.Now(), 0, "interrupted: the meter stopped during the attempt")
		return out
	}
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
			record(contracts.DeliveryFailed, time.Time{}, 0, "refused: "+ae.Message) // the guard: no retry helps
			return out
		}
		// The URL may carry a secret (chat webhooks do): keep it out of
		// the recorded error and the logs.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		p.retry(d, attempts, 0, err.Error(), record, 0)
		return out
	}
	res.Body.Close()
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		record(contracts.DeliveryDelivered, time.Time{}, res.StatusCode, "")
		p.Metrics.pushCoalesced(d.Covers)
		return pushqueue.Outcome{OK: true}
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		out.RetryAfter = min(retryAfter(res.Header.Get("Retry-After"), p.Clock.Now()), p.Push.RetryMax)
	}
	p.retry(d, attempts, res.StatusCode, "the webhook answered "+res.Status, record, out.RetryAfter)
	return out
}

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): seconds, or an
// HTTP date; 0 when absent, invalid or past.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		return time.Duration(max(0, min(n, 1<<31))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// retry records a failed attempt: retried after the backoff, or after
// the webhook's Retry-After when that is later; failed after the last.
func (p *Proxy) retry(d contracts.Delivery, attempts, status int, msg string, record func(contracts.DeliveryStatus, time.Time, int, string), after time.Duration) {
	if attempts >= p.Push.MaxAttempts {
		record(contracts.DeliveryFailed, time.Time{}, status, fmt.Sprintf("%s (gave up after %d attempts)", msg, attempts))
		return
	}
	record(contracts.DeliveryPending, p.Clock.Now().Add(max(p.Push.backoff(attempts), after)), status, msg)
}

// backoff is the delay before attempt n+1: RetryBase·2^(n-1), at most
// RetryMax, with full jitter over its upper half (so retries of many
// deliveries spread out, and none comes sooner than half the delay).
func (ps *Push) backoff(n int) time.Duration {
	d := ps.RetryBase << min(n-1, 30)
	if d <= 0 || d > ps.RetryMax {
		d = ps.RetryMax
	}
	return d/2 + rand.N(d/2+1)
}
