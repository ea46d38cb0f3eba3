package stripe

import (
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
)

// WebhookVerifier is the billing.Verifier of Stripe's webhooks: it checks
// the Stripe-Signature header (HMAC-SHA256 of "<t>.<payload>" with the
// endpoint's signing secret, t within stripe-go's default tolerance of 5
// minutes of the wall clock) and reads the event. Events of any API
// version are accepted: the account's webhook endpoint may be on another
// version than stripe-go's (2023-10-16), and only the event's id, type,
// created time and subscription id are read, which every version carries.
type WebhookVerifier struct {
	// Secret is the endpoint's signing secret (whsec_…).
	Secret string
}

var _ billing.Verifier = (*WebhookVerifier)(nil)

// Verify implements billing.Verifier.
func (v *WebhookVerifier) Verify(payload []byte, signature string) (billing.Event, error) {
	if v.Secret == "" {
		// An empty key would make every signature computable by anyone.
		return billing.Event{}, agentmarket.Wrap(agentmarket.Internal, "webhook_secret_missing",
			errors.New("no Stripe webhook signing secret: set AGENTMARKET_STRIPE_WEBHOOK_SECRET"), "webhooks are not configured")
	}
	ev, err := webhook.ConstructEventWithOptions(payload, signature, v.Secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		switch {
		case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader),
			errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrTooOld):
			return billing.Event{}, agentmarket.Wrap(agentmarket.Invalid, "webhook_signature", err,
				"the Stripe-Signature header does not match the payload, or is too old")
		}
		return billing.Event{}, agentmarket.Wrap(agentmarket.Invalid, "invalid_webhook_payload", err, "the webhook payload is not a Stripe event")
	}
	out := billing.Event{ID: ev.ID, Type: string(ev.Type), Created: time.Unix(ev.Created, 0).UTC()}
	if ev.Data != nil {
		out.SubscriptionID = subscriptionOf(ev.Data.Object)
		out.Credit = creditPurchaseOf(ev.Data.Object)
	}
	return out, nil
}

// subscriptionOf finds the subscription id of an event's object: a
// subscription's own id, or an invoice's subscription (a string, or an
// object when expanded; under parent.subscription_details from API version
// 2025-03-31 on).
func subscriptionOf(obj map[string]any) string {
	switch str(obj["object"]) {
	case "subscription":
		return str(obj["id"])
	case "invoice":
		if id := idOf(obj["subscription"]); id != "" {
			return id
		}
		if parent, ok := obj["parent"].(map[string]any); ok {
			if details, ok := parent["subscription_details"].(map[string]any); ok {
				return idOf(details["subscription"])
			}
		}
	}
	return ""
}

// idOf is an id given as itself or as an (expanded) object.
func idOf(v any) string {
	if m, ok := v.(map[string]any); ok {
		return str(m["id"])
	}
	return str(v)
}

func str(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
