package a2aproxy

import (
	"bytes"
	"context"
	"encoding/json"
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
	// pushOrgWaiting is the most one org may have waiting: past it the
	// outbox is claimed for the others (an org's flood spread over many
	// destinations would otherwise fill the queue, oldest first).
	pushOrgWaiting = pushWaiting / 4
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
	q := pushqueue.New(pushqueue.Options[waitingDelivery]{Clock: p.Clock, Caps: p.Push.capsOf, PauseAfter: p.Push.PauseAfter, PauseFor: p.Push.PauseFor,
		Gate: p.Push.Gate, Meters: p.Push.Meters, Key: func(w waitingDelivery) string { return w.d.ID }, Lease: p.Push.Timeout + 30*time.Second})
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
	// soonest is when the first delivery held for its config's rate is
	// due again: the outbox is read then, not a Poll later.
	var soonest time.Time
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
			// Long enough to wait in the queue a few attempts' time, and
			// still be sent within its lease (see the worker).
			lease := now.Add(3*p.Push.Timeout + 30*time.Second)
			ds, err := p.Push.Store.ClaimDeliveries(ctx, now, lease, limit,
				contracts.ClaimSkip{Destinations: q.Skip(), Orgs: q.Crowding(pushOrgWaiting), OrgDestinations: q.OwnFull()})
			if err != nil && ctx.Err() == nil {
				// Nothing was leased: the loop reads the outbox again after
				// Poll (or a kick).
				p.Logger.ErrorContext(ctx, "push outbox not read", "err", err)
			}
			for _, d := range ds {
				w := waitingDelivery{d: d, dest: d.Destination, leaseUntil: lease}
				if w.dest == "" {
					w.dest = p.destinationOf(ctx, d)
				}
				until, reason := q.AddUnder(d.OrgID, w.dest, p.Push.within(ctx, p.Logger, d, w.dest, now), w)
				if until.IsZero() {
					continue
				}
				why := "held: deliveries to " + w.dest + " wait until " + until.UTC().Format(time.RFC3339)
				switch {
				case reason == pushqueue.ReasonConfigRate:
					why = releaseMessage(pushqueue.Release[waitingDelivery]{Reason: reason, Until: until})
					p.Metrics.pushHeld(reason, 1)
					soonest = earliest(soonest, until)
				case q.Paused(w.dest):
					why = releaseMessage(pushqueue.Release[waitingDelivery]{Reason: pushqueue.ReasonPaused, Until: until})
				}
				p.holdDelivery(ctx, d, until, why)
			}
			more = len(ds) == limit
		}
		var wake time.Time
		for len(slots) < pushWorkers {
			w, dest, ok, at := q.Next(ctx)
			for _, r := range q.Released() {
				p.Metrics.pushHeld(r.Reason, len(r.Items))
				if r.Reason == pushqueue.ReasonConfigRate {
					soonest = earliest(soonest, r.Until)
				}
				for _, x := range r.Items {
					p.holdDelivery(ctx, x.d, r.Until, releaseMessage(r))
				}
			}
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
				var out pushqueue.Outcome
				var last string
				if p.Clock.Now().Add(p.Push.Timeout).After(w.leaseUntil) {
					// It waited so long that its lease may end during the
					// attempt, and another meter claim it then: not sent
					// here; when the lease ends, whichever meter claims it
					// sends it.
					out.Unjudged = true
					p.Logger.WarnContext(ctx, "push delivery waited past its lease in the queue; left to the next claim", "delivery_id", w.d.ID)
				} else {
					out, last = p.deliverTraced(ctx, w.d)
				}
				r := q.Done(ctx, w, dest, w.d.OrgID, out)
				if r.Paused {
					p.destinationPaused(ctx, dest, r, last)
				}
				if len(r.Items) > 0 {
					p.Metrics.pushHeld(r.Reason, len(r.Items))
				}
				for _, x := range r.Items {
					p.holdDelivery(ctx, x.d, r.Until, releaseMessage(r))
				}
			}()
		}
		p.Metrics.pushQueue(q.Waiting(), q.OwnWaiting(), len(slots))
		if more && ctx.Err() == nil {
			continue // there may be more due
		}
		if !soonest.IsZero() && !soonest.After(p.Clock.Now()) {
			soonest = time.Time{} // this pass read the outbox for it
		}
		wake = earliest(wake, soonest)
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

// waitingDelivery is a claimed delivery in the meter's queue, leased to
// this meter until leaseUntil.
type waitingDelivery struct {
	d          contracts.Delivery
	dest       string
	leaseUntil time.Time
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

// earliest is the earlier of two times, a zero one being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// releaseMessage is the last_error of a delivery given back unsent.
func releaseMessage(r pushqueue.Release[waitingDelivery]) string {
	until := r.Until.UTC().Format(time.RFC3339)
	switch r.Reason {
	case pushqueue.ReasonConfigRate:
		return "held: the push config's own rate (PUT /api/v1/push-caps) lets its next delivery start at " + r.Until.UTC().Format(time.RFC3339Nano)
	case pushqueue.ReasonPaused:
		return "held: the webhook failed every attempt for a while; deliveries to it are paused until " + until
	case pushqueue.ReasonHeld:
		return "held: deliveries to the webhook wait (Retry-After or a pause, seen by another meter) until " + until
	}
	return "held: the webhook asked the meter to wait (Retry-After) until " + until
}

// destinationPaused tells the orgs whose deliveries failed at dest that it
// is paused, through their alert webhooks (the alert outbox), and logs it.
func (p *Proxy) destinationPaused(ctx context.Context, dest string, r pushqueue.Release[waitingDelivery], last string) {
	p.Metrics.pushPaused()
	p.Logger.WarnContext(ctx, "push destination paused: every attempt failed", "destination", dest, "failing_since", r.FailingSince,
		"until", r.Until, "orgs", r.Orgs, "last_error", last)
	now := p.Clock.Now()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, org := range r.Orgs {
		cfg, err := p.Push.Store.PushConfig(wctx, "", "", contracts.AlertConfigID(org))
		if err != nil {
			if !isNotFound(err) {
				p.Logger.ErrorContext(ctx, "push pause alert not sent", "org", org, "err", err)
			}
			continue // no alert webhook: the deliveries' last_error says it
		}
		a := contracts.PushPausedAlert{Type: contracts.PushPausedType, OrgID: org, Destination: dest, FailingSince: r.FailingSince,
			PausedAt: r.At, ResumeAt: r.Until, LastError: last}
		a.ID = a.StableID()
		body, _ := json.Marshal(a)
		d := contracts.Delivery{ID: "dlv_" + a.ID, ConfigID: cfg.ConfigID, OrgID: org, Destination: contracts.Destination(cfg.URL), Body: body,
			NextAttemptAt: now, CreatedAt: now}
		if _, err := p.Push.Store.Enqueue(wctx, d); err != nil {
			p.Logger.ErrorContext(ctx, "push pause alert not sent", "org", org, "err", err)
		}
	}
	p.Push.kick()
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
func (p *Proxy) deliver(ctx context.Context, d contracts.Delivery) (out pushqueue.Outcome, last string) {
	// An attempt that was not made says nothing of the destination.
	unjudged := pushqueue.Outcome{Unjudged: true}
	attempts := d.Attempts + 1
	record := func(status contracts.DeliveryStatus, next time.Time, httpStatus int, msg string) {
		last = msg
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
	// interrupted gives d back when the meter stops before or during the
	// attempt: it does not count, and it is due again at once, for
	// whichever meter runs next (left leased, it would wait for its lease
	// to end).
	interrupted := func() (pushqueue.Outcome, string) {
		attempts = d.Attempts
		record(contracts.DeliveryPending, p.Clock.Now(), 0, "interrupted: the meter stopped during the attempt")
		return unjudged, last
	}
	// The read is bounded as an attempt is: a lease outlasts an attempt
	// (the worker checks Timeout against it), so a database stalling
	// past the lease cannot have this meter give back, or send, what
	// another meter claimed meanwhile.
	rctx, cancel := context.WithTimeout(ctx, p.Push.Timeout)
	cfg, err := p.Push.Store.PushConfig(rctx, d.ListingID, d.TaskID, d.ConfigID)
	cancel()
	if err != nil {
		switch {
		case isNotFound(err):
			record(contracts.DeliveryFailed, time.Time{}, 0, "the push notification config was deleted")
		case ctx.Err() != nil:
			return interrupted()
		}
		// Otherwise (the database not answering) it stays leased, and is
		// claimed again when its lease ends.
		return unjudged, last
	}
	bc, err := p.buyerConfig(cfg)
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the config's secrets cannot be opened")
		return unjudged, last
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(d.Body))
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the webhook url is not valid")
		return unjudged, last
	}
	contentType := "application/json"
	if cfg.Version == string(wire.V10) {
		contentType = wire.ContentTypeA2A
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "AgentMarket-Meter/1")
	req.Header.Set("X-AgentMarket-Delivery-Id", d.ID)
	req.Header.Set("X-AgentMarket-Delivery-Attempt", strconv.Itoa(attempts))
	p.injectTrace(ctx, req.Header)
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
			return interrupted()
		}
		if err != nil {
			// Never sent unsigned: a buyer may refuse what is not signed.
			p.retry(d, attempts, 0, "not signed: "+err.Error(), record, 0)
			return unjudged, last
		}
		req.Header.Set(SignatureHeader, sig)
	}
	res, err := p.Push.client.Do(req)
	if err != nil && ctx.Err() != nil {
		return interrupted()
	}
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
			record(contracts.DeliveryFailed, time.Time{}, 0, "refused: "+ae.Message) // the guard: no retry helps
			return unjudged, last
		}
		// The URL may carry a secret (chat webhooks do): keep it out of
		// the recorded error and the logs.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		p.retry(d, attempts, 0, err.Error(), record, 0)
		return out, last
	}
	res.Body.Close()
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		record(contracts.DeliveryDelivered, time.Time{}, res.StatusCode, "")
		p.Metrics.pushCoalesced(d.Covers)
		return pushqueue.Outcome{OK: true}, last
	}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		out.RetryAfter = min(retryAfter(res.Header.Get("Retry-After"), p.Clock.Now()), p.Push.RetryMax)
	}
	p.retry(d, attempts, res.StatusCode, "the webhook answered "+res.Status, record, out.RetryAfter)
	if res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
		// A refusal of this request (a wrong path, a bad token) is the
		// config's failure, not the destination's: it does not count
		// towards pausing the host, which other orgs' webhooks may share
		// (a config of one org aimed at another's host to fail there
		// would otherwise pause that org's deliveries). Still retried.
		out.Unjudged = true
	}
	return out, last
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
