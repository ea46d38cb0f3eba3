package billing

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// The provider events that move a contract.
const (
	EventInvoicePaid          = "invoice.paid"
	EventInvoicePaymentFailed = "invoice.payment_failed"
	EventSubscriptionDeleted  = "customer.subscription.deleted"
	// EventCheckoutCompleted credits a paid credit purchase (Credits).
	EventCheckoutCompleted = "checkout.session.completed"
)

// eventStatus is the status each event moves a contract to.
var eventStatus = map[string]contracts.ContractStatus{
	EventInvoicePaid:          contracts.ContractActive,
	EventInvoicePaymentFailed: contracts.ContractPastDue,
	EventSubscriptionDeleted:  contracts.ContractCanceled,
}

// Event is a verified webhook event of the provider.
type Event struct {
	ID   string
	Type string
	// Created is when the provider created the event (whole seconds at
	// Stripe): it orders the events of a contract.
	Created time.Time
	// SubscriptionID is the subscription the event concerns (an invoice's
	// subscription, or the subscription itself); empty when none.
	SubscriptionID string
	// Credit is the paid credit purchase a completed checkout carries;
	// nil for none.
	Credit *CreditPurchase
}

// CreditPurchase is a paid purchase of prepaid credit (contracts/credit.go).
type CreditPurchase struct {
	OrgID, Currency string
	AmountMinor     int64
	// Ref is the purchase's own id ("cs:<Checkout Session>"): it credits
	// once, whatever events carry it.
	Ref string
}

// CreditPurchases credits paid purchases (contracts.Credits implements
// it): once per Ref, reporting whether this call credited.
type CreditPurchases interface {
	ConfirmPurchase(ctx context.Context, orgID, currency string, amountMinor int64, ref string) (bool, error)
}

// Verifier checks a webhook's signature and reads the event. A payload
// whose signature is missing, forged or too old is an Invalid error with
// code "webhook_signature". billing/stripe implements it.
type Verifier interface {
	Verify(payload []byte, signature string) (Event, error)
}

// ContractStates moves contracts on billing's word (contracts.Subscriptions
// implements it): moving to the status a contract has is a no-op, a move
// the life cycle forbids a Conflict.
type ContractStates interface {
	Transition(ctx context.Context, contractID string, to contracts.ContractStatus) (*contracts.Contract, error)
}

// Webhooks applies the provider's webhook events to contracts: an invoice
// paid makes its contract active, a payment failed makes it past due (the
// grace period; contracts' SuspendOverdue suspends it when that is over),
// a subscription deleted cancels it.
//
// Each event is applied once: its id is recorded after it is applied, and
// an id already recorded changes nothing. (A crash between the two applies
// it again on the provider's retry, which is harmless: a transition to the
// status a contract has is a no-op.) Events arrive in any order, so an
// invoice event created before the last event applied to its contract is
// stale and only recorded; a subscription deleted is final and applies
// whenever it arrives. Events of other types, of subscriptions we do not
// know, or that the contract's life cycle refuses (a canceled contract's
// final invoice being paid) are recorded and ignored.
type Webhooks struct {
	Verifier  Verifier
	Store     Store
	Contracts ContractStates
	// Credits credits paid credit purchases (nil: a purchase's event is
	// ignored).
	Credits CreditPurchases
	Clock   agentmarket.Clock
	// Logger receives the events ignored for want of a contract; nil is
	// slog.Default().
	Logger *slog.Logger
}

// Handle verifies and applies one webhook delivery, and reports whether
// it changed (or confirmed) a contract's status. A forged or stale
// signature is an Invalid error with code "webhook_signature"; any other
// error means the event was not recorded, and the provider should
// deliver it again.
func (w *Webhooks) Handle(ctx context.Context, payload []byte, signature string) (applied bool, err error) {
	ev, err := w.Verifier.Verify(payload, signature)
	if err != nil {
		if agentmarket.KindOf(err) == agentmarket.Invalid {
			return false, err
		}
		return false, agentmarket.Wrap(agentmarket.Invalid, "webhook_signature", err, "the webhook's signature does not match its payload")
	}
	if ev.ID == "" {
		return false, agentmarket.Errorf(agentmarket.Invalid, "invalid_webhook_payload", "the webhook event has no id")
	}
	seen, err := w.Store.WebhookEventSeen(ctx, ev.ID)
	if err != nil || seen {
		return false, err
	}
	rec := &WebhookEvent{ID: ev.ID, Type: ev.Type, Created: ev.Created.UTC(), ReceivedAt: w.Clock.Now().UTC()}
	rec.Outcome, err = w.apply(ctx, ev, rec)
	if err != nil {
		return false, err
	}
	recorded, err := w.Store.RecordWebhookEvent(ctx, rec)
	if err != nil {
		return false, err
	}
	return recorded && rec.Outcome == WebhookApplied, nil
}

// apply moves the event's contract and says what became of the event;
// rec.ContractID is set when the contract is known.
func (w *Webhooks) apply(ctx context.Context, ev Event, rec *WebhookEvent) (WebhookOutcome, error) {
	if ev.Type == EventCheckoutCompleted && ev.Credit != nil && w.Credits != nil {
		// Credited once per purchase (its Ref), even when the event is
		// delivered again after a crash before it was recorded.
		if _, err := w.Credits.ConfirmPurchase(ctx, ev.Credit.OrgID, ev.Credit.Currency, ev.Credit.AmountMinor, ev.Credit.Ref); err != nil {
			if agentmarket.KindOf(err) == agentmarket.Invalid || agentmarket.KindOf(err) == agentmarket.NotFound {
				w.logger().Warn("credit purchase event ignored", "event", ev.ID, "err", err)
				return WebhookRefused, nil
			}
			return "", err
		}
		return WebhookApplied, nil
	}
	to, ok := eventStatus[ev.Type]
	if !ok {
		return WebhookIgnoredType, nil
	}
	if ev.SubscriptionID == "" {
		w.logger().Info("webhook event without a subscription ignored", "event", ev.ID, "type", ev.Type)
		return WebhookUnknownSubscription, nil
	}
	contractID, err := w.Store.ContractOfSubscription(ctx, ev.SubscriptionID)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		w.logger().Warn("webhook event for an unknown subscription ignored", "event", ev.ID, "type", ev.Type, "subscription", ev.SubscriptionID)
		return WebhookUnknownSubscription, nil
	}
	if err != nil {
		return "", err
	}
	rec.ContractID = contractID
	if to != contracts.ContractCanceled {
		last, err := w.Store.LastAppliedEvent(ctx, contractID)
		if err != nil {
			return "", err
		}
		if ev.Created.Before(last) {
			return WebhookStale, nil
		}
	} else if err := w.Store.SetSubscriptionCanceled(ctx, contractID, ev.Created); err != nil {
		return "", err
	}
	if _, err := w.Contracts.Transition(ctx, contractID, to); err != nil {
		switch agentmarket.KindOf(err) {
		case agentmarket.Conflict:
			w.logger().Info("webhook event refused by the contract's life cycle", "event", ev.ID, "type", ev.Type, "contract", contractID, "err", err)
			return WebhookRefused, nil
		case agentmarket.NotFound:
			w.logger().Warn("webhook event for a missing contract ignored", "event", ev.ID, "type", ev.Type, "contract", contractID)
			return WebhookUnknownSubscription, nil
		}
		return "", err
	}
	return WebhookApplied, nil
}

func (w *Webhooks) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}
