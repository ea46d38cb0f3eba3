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
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// pushWorkers bounds the deliveries one meter has in flight.
const pushWorkers = 32

// RunPushDelivery delivers the outbox until ctx ends: due deliveries are
// claimed (one per config at a time, so each webhook gets its task's
// updates in order) as workers free up, sent, and retried with
// exponential backoff and full jitter, up to MaxAttempts. A slow webhook
// holds one worker, not the others.
func (p *Proxy) RunPushDelivery(ctx context.Context) {
	if p.Push == nil {
		return
	}
	p.Push.init()
	slots := make(chan struct{}, pushWorkers)
	var wg sync.WaitGroup
	defer wg.Wait()
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
		free := pushWorkers - len(slots)
		claimed := 0
		if free > 0 {
			now := p.Clock.Now()
			ds, err := p.Push.Store.ClaimDeliveries(ctx, now, now.Add(p.Push.Timeout+30*time.Second), free)
			if err != nil && ctx.Err() == nil {
				// Nothing was leased: the loop reads the outbox again after
				// Poll (or a kick).
				p.Logger.ErrorContext(ctx, "push outbox not read", "err", err)
			}
			for _, d := range ds {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() {
						<-slots
						wg.Done()
						p.Push.kick() // a slot is free, and the config's next may be due
					}()
					p.deliver(ctx, d)
				}()
			}
			claimed = len(ds)
		}
		if claimed > 0 && claimed == free {
			continue // there may be more due
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Push.wake:
		case <-time.After(p.Push.Poll):
		}
	}
}

func (p *Proxy) deliver(ctx context.Context, d contracts.Delivery) {
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
		return
	}
	bc, err := p.buyerConfig(cfg)
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the config's secrets cannot be opened")
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(d.Body))
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the webhook url is not valid")
		return
	}
	contentType := "application/json"
	if cfg.Version == string(wire.V10) {
		contentType = wire.ContentTypeA2A
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "AgentMarket-Meter/1")
	req.Header.Set("X-AgentMarket-Delivery-Id", d.ID)
	req.Header.Set("X-AgentMarket-Delivery-Attempt", strconv.Itoa(attempts))
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
			return
		}
		if err != nil {
			// Never sent unsigned: a buyer may refuse what is not signed.
			p.retry(d, attempts, 0, "not signed: "+err.Error(), record)
			return
		}
		req.Header.Set(SignatureHeader, sig)
	}
	res, err := p.Push.client.Do(req)
	if err != nil && ctx.Err() != nil {
		// The meter stopped during the attempt: it does not count, and the
		// delivery is due again at once, for whichever meter runs next.
		attempts = d.Attempts
		record(contracts.DeliveryPending, p.Clock.Now(), 0, "interrupted: the meter stopped during the attempt")
		return
	}
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
			record(contracts.DeliveryFailed, time.Time{}, 0, "refused: "+ae.Message) // the guard: no retry helps
			return
		}
		// The URL may carry a secret (chat webhooks do): keep it out of
		// the recorded error and the logs.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		p.retry(d, attempts, 0, err.Error(), record)
		return
	}
	res.Body.Close()
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		record(contracts.DeliveryDelivered, time.Time{}, res.StatusCode, "")
		return
	}
	p.retry(d, attempts, res.StatusCode, "the webhook answered "+res.Status, record)
}

func (p *Proxy) retry(d contracts.Delivery, attempts, status int, msg string, record func(contracts.DeliveryStatus, time.Time, int, string)) {
	if attempts >= p.Push.MaxAttempts {
		record(contracts.DeliveryFailed, time.Time{}, status, fmt.Sprintf("%s (gave up after %d attempts)", msg, attempts))
		return
	}
	record(contracts.DeliveryPending, p.Clock.Now().Add(p.Push.backoff(attempts)), status, msg)
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
