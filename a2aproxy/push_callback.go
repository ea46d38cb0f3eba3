package a2aproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// notification is a push notification as an agent posted it to the
// meter's callback.
type notification struct {
	callbackID  string
	token       string // the secret the agent sent with it
	traceparent string
	body        []byte // Fiber's buffer: copied before it is kept
}

// notification takes a notification from an agent: the callback must be
// known and the secret right; the notification is metered, stored for
// delivery, then acknowledged (200). Any other status is a refusal with
// its reason, for the agent.
func (p *Proxy) notification(ctx context.Context, n notification) (status int, reason string) {
	cfg, err := p.Push.Store.PushCallback(ctx, n.callbackID)
	if err != nil {
		if isNotFound(err) {
			return http.StatusNotFound, "no such callback"
		}
		// The agent is told to try again: its retry is how the
		// notification is not lost.
		p.Logger.ErrorContext(ctx, "push callback lookup failed", "err", err)
		return http.StatusServiceUnavailable, "try again"
	}
	if subtle.ConstantTimeCompare([]byte(secretHash(n.token)), []byte(cfg.SecretHash)) != 1 {
		p.Metrics.pushReceived(cfg.ListingID, "refused")
		p.Logger.WarnContext(ctx, "push notification with a wrong token refused", "listing", cfg.ListingID, "task_id", cfg.TaskID)
		return http.StatusUnauthorized, "wrong notification token"
	}
	body := bytes.Clone(n.body)
	if len(body) > p.Limits.MaxResultBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("a notification may be %d bytes at most", p.Limits.MaxResultBytes)
	}
	agentV := notificationVersion(body)
	ob := wire.Observe(agentV, wire.MethodStream, body)
	if ob.TaskID != cfg.TaskID {
		p.Metrics.pushReceived(cfg.ListingID, "refused")
		return http.StatusBadRequest, "the notification must be a task, message or event of this callback's task"
	}
	out := json.RawMessage(body)
	if v := wire.Version(cfg.Version); v != agentV {
		if out, err = wire.TranslateResult(agentV, v, wire.MethodStream, body); err != nil {
			return http.StatusBadRequest, "the notification is not an A2A task, message or event: " + err.Error()
		}
	}
	// One id per notification, the same on every retry of it: its delivery
	// is enqueued once, and its usage row (keyed by the same sum) is
	// stored and billed once, however often the agent sends it again.
	sum := sha256.Sum256(append([]byte(cfg.CallbackID+"\x00"), body...))
	if err := p.meterNotification(ctx, n.traceparent, "use_push_"+hex.EncodeToString(sum[:16]), cfg, ob, len(body), len(out)); err != nil {
		p.Logger.ErrorContext(ctx, "push notification not metered", "task_id", cfg.TaskID, "err", err)
		return http.StatusServiceUnavailable, "try again" // the agent's retry brings it again
	}
	if err := p.enqueueNotification(ctx, cfg, "dlv_"+hex.EncodeToString(sum[:16]), out, ob); err != nil {
		// Metered already: the agent's retry records the same usage row
		// again (its id is the notification's), which the store and the
		// ledger take once.
		p.Logger.ErrorContext(ctx, "push notification not stored", "task_id", cfg.TaskID, "err", err)
		return http.StatusServiceUnavailable, "try again" // the agent's retry brings it again
	}
	p.Metrics.pushReceived(cfg.ListingID, "accepted")
	return http.StatusOK, ""
}

// enqueueNotification stores the delivery of a notification (body, in the
// buyer's version; ob, what it is) to cfg's webhook under id, superseding
// the pending status updates it makes stale, and wakes the delivery loop.
func (p *Proxy) enqueueNotification(ctx context.Context, cfg *contracts.PushConfig, id string, body []byte, ob wire.Observation) error {
	now := p.Clock.Now()
	d := contracts.Delivery{ID: id, ListingID: cfg.ListingID, TaskID: cfg.TaskID, ConfigID: cfg.ConfigID, OrgID: cfg.OrgID,
		Destination: contracts.Destination(cfg.URL), Kind: deliveryKind(ob), Body: body, Status: contracts.DeliveryPending, NextAttemptAt: now, CreatedAt: now}
	if _, err := p.Push.Store.Enqueue(ctx, d); err != nil {
		return err
	}
	p.Push.kick()
	return nil
}

// deliveryKind says what a notification is to coalescing: a status
// update to a state that is not terminal is superseded by a later status
// of its config; a terminal one, or a task, supersedes them and is never
// superseded; anything else (an artifact, a message) neither.
func deliveryKind(ob wire.Observation) contracts.DeliveryKind {
	switch {
	case ob.Kind == wire.KindStatusUpdate && !ob.Terminal:
		return contracts.DeliveryStatusUpdate
	case ob.Kind == wire.KindStatusUpdate, ob.Kind == wire.KindTask:
		return contracts.DeliveryState
	}
	return contracts.DeliveryOther
}

// notificationVersion tells a 1.0 notification (a StreamResponse: one
// member naming the type) from a 0.3 one (a Task or event with kind).
func notificationVersion(body []byte) wire.Version {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil {
		if _, ok := top["kind"]; ok {
			return wire.V03
		}
		for _, k := range []string{"task", "message", "statusUpdate", "artifactUpdate"} {
			if _, ok := top[k]; ok {
				return wire.V10
			}
		}
	}
	return wire.V03
}

// meterNotification records the usage a notification reports, as a call
// of the key that set the config.
func (p *Proxy) meterNotification(ctx context.Context, traceparent, rowID string, cfg *contracts.PushConfig, ob wire.Observation, in, out int) error {
	b, err := p.owners.Known(ctx, cfg.ListingID, cfg.TaskID)
	if err != nil {
		return err
	}
	body, err := wire.TaskRequest(wire.V10, wire.MethodGetTask, cfg.TaskID, nil)
	if err != nil {
		return err
	}
	cl, err := p.backgroundCall(ctx, *b, parseTraceparent(traceparent), body)
	if err != nil {
		return err
	}
	cl.actor.KeyID, cl.label, cl.bytesIn, cl.bytesOut, cl.rowID = cfg.APIKeyID, "push", in, out, rowID
	cl.obs.add(ob)
	p.noteProgress(cl, ob)
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	return nil
}
