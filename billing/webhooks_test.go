package billing_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/stripe"
	"github.com/agentmarket/agentmarket/contracts"
)

const webhookSecret = "whsec_billing_test"

// delivery is a Stripe webhook delivery: the payload and its
// Stripe-Signature header, signed now with secret.
func delivery(secret, id, typ string, created time.Time, object string) ([]byte, string) {
	payload := fmt.Sprintf(`{"id": %q, "object": "event", "api_version": "2023-10-16", "created": %d, "type": %q, "data": {"object": %s}}`,
		id, created.Unix(), typ, object)
	now := time.Now() // the signature's tolerance is checked against the wall clock
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.%s", now.Unix(), payload)
	return []byte(payload), fmt.Sprintf("t=%d,v1=%s", now.Unix(), hex.EncodeToString(mac.Sum(nil)))
}

func invoiceOf(sub string) string {
	return fmt.Sprintf(`{"id": "in_x", "object": "invoice", "subscription": %q}`, sub)
}

func subscriptionObject(sub string) string {
	return fmt.Sprintf(`{"id": %q, "object": "subscription", "status": "canceled"}`, sub)
}

// states is a fake ContractStates with the contracts' life cycle.
type states struct {
	mu     sync.Mutex
	status map[string]contracts.ContractStatus
	calls  []string
	fail   error
}

func (s *states) Transition(_ context.Context, id string, to contracts.ContractStatus) (*contracts.Contract, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, id+" -> "+string(to))
	if s.fail != nil {
		return nil, s.fail
	}
	from, ok := s.status[id]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "subscription_not_found", "no subscription %q", id)
	}
	if from == contracts.ContractCanceled && to != from {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "invalid_transition", "a canceled contract cannot become %s", to)
	}
	s.status[id] = to
	return &contracts.Contract{ID: id, Status: to}, nil
}

func (s *states) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *states) of(id string) contracts.ContractStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status[id]
}

func (e *env) webhooks(cs billing.ContractStates) *billing.Webhooks {
	return &billing.Webhooks{Verifier: &stripe.WebhookVerifier{Secret: webhookSecret}, Store: e.store, Contracts: cs, Clock: e.clock, Logger: quiet}
}

func handle(t *testing.T, w *billing.Webhooks, payload []byte, sig string, wantApplied bool) {
	t.Helper()
	applied, err := w.Handle(context.Background(), payload, sig)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if applied != wantApplied {
		t.Fatalf("applied = %v, want %v", applied, wantApplied)
	}
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

func TestWebhookAppliesEachEventOnce(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	cs := &states{status: map[string]contracts.ContractStatus{"ctr_1": contracts.ContractActive}}
	w := e.webhooks(cs)

	t1 := date(2026, 5, 3, 11)
	failed, sig := delivery(webhookSecret, "evt_1", billing.EventInvoicePaymentFailed, t1, invoiceOf("sub_ctr_1"))
	handle(t, w, failed, sig, true)
	wantStrings(t, "transitions", cs.take(), "ctr_1 -> past_due")
	if cs.of("ctr_1") != contracts.ContractPastDue {
		t.Fatalf("status %s, want past_due", cs.of("ctr_1"))
	}

	// The same event again (Stripe retries, or sends twice): no change.
	handle(t, w, failed, sig, false)
	failed2, sig2 := delivery(webhookSecret, "evt_1", billing.EventInvoicePaymentFailed, t1, invoiceOf("sub_ctr_1"))
	handle(t, w, failed2, sig2, false)
	wantStrings(t, "transitions", cs.take())

	paid, sig := delivery(webhookSecret, "evt_2", billing.EventInvoicePaid, t1.Add(time.Hour), invoiceOf("sub_ctr_1"))
	handle(t, w, paid, sig, true)
	wantStrings(t, "transitions", cs.take(), "ctr_1 -> active")

	deleted, sig := delivery(webhookSecret, "evt_3", billing.EventSubscriptionDeleted, t1.Add(2*time.Hour), subscriptionObject("sub_ctr_1"))
	handle(t, w, deleted, sig, true)
	wantStrings(t, "transitions", cs.take(), "ctr_1 -> canceled")
	sub, err := e.store.Subscription(context.Background(), "ctr_1")
	if err != nil || sub.CanceledAt == nil || !sub.CanceledAt.Equal(t1.Add(2*time.Hour)) {
		t.Fatalf("subscription after deletion = %+v, %v", sub, err)
	}

	// The final invoice of a canceled contract is paid: recorded, refused
	// by the life cycle, no error (Stripe must not retry it).
	final, sig := delivery(webhookSecret, "evt_4", billing.EventInvoicePaid, t1.Add(3*time.Hour), invoiceOf("sub_ctr_1"))
	handle(t, w, final, sig, false)
	wantStrings(t, "transitions", cs.take(), "ctr_1 -> active")
	if seen, _ := e.store.WebhookEventSeen(context.Background(), "evt_4"); !seen {
		t.Error("the refused event was not recorded")
	}
	if cs.of("ctr_1") != contracts.ContractCanceled {
		t.Errorf("status %s, want canceled", cs.of("ctr_1"))
	}
}

func TestWebhookRefusesForgedSignatures(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	cs := &states{status: map[string]contracts.ContractStatus{"ctr_1": contracts.ContractActive}}
	w := e.webhooks(cs)
	payload, forged := delivery("whsec_someone_else", "evt_1", billing.EventInvoicePaymentFailed, t0, invoiceOf("sub_ctr_1"))
	for _, sig := range []string{forged, "", "t=1,v1=00"} {
		applied, err := w.Handle(context.Background(), payload, sig)
		if applied || agentmarket.KindOf(err) != agentmarket.Invalid || agentmarket.CodeOf(err) != "webhook_signature" {
			t.Fatalf("Handle(forged %q) = %v, %v; want Invalid webhook_signature", sig, applied, err)
		}
	}
	wantStrings(t, "transitions", cs.take())
	if seen, _ := e.store.WebhookEventSeen(context.Background(), "evt_1"); seen {
		t.Error("a forged event was recorded")
	}
	// The genuine delivery of the same event still applies.
	payload, sig := delivery(webhookSecret, "evt_1", billing.EventInvoicePaymentFailed, t0, invoiceOf("sub_ctr_1"))
	handle(t, w, payload, sig, true)
}

func TestWebhookIgnoresStaleEvents(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	cs := &states{status: map[string]contracts.ContractStatus{"ctr_1": contracts.ContractPastDue}}
	w := e.webhooks(cs)
	t1 := date(2026, 5, 3, 11)

	paid, sig := delivery(webhookSecret, "evt_paid", billing.EventInvoicePaid, t1, invoiceOf("sub_ctr_1"))
	handle(t, w, paid, sig, true)
	// The failure that preceded the payment arrives late: recorded, ignored.
	failed, sig := delivery(webhookSecret, "evt_failed", billing.EventInvoicePaymentFailed, t1.Add(-time.Minute), invoiceOf("sub_ctr_1"))
	handle(t, w, failed, sig, false)
	wantStrings(t, "transitions", cs.take(), "ctr_1 -> active")
	if cs.of("ctr_1") != contracts.ContractActive {
		t.Fatalf("status %s, want active", cs.of("ctr_1"))
	}
	if seen, _ := e.store.WebhookEventSeen(context.Background(), "evt_failed"); !seen {
		t.Error("the stale event was not recorded")
	}
	// An event of the same second applies (its order is unknown, and
	// Stripe's times are whole seconds).
	again, sig := delivery(webhookSecret, "evt_failed2", billing.EventInvoicePaymentFailed, t1, invoiceOf("sub_ctr_1"))
	handle(t, w, again, sig, true)
	// A deletion is final: it applies even when older.
	deleted, sig := delivery(webhookSecret, "evt_deleted", billing.EventSubscriptionDeleted, t1.Add(-time.Hour), subscriptionObject("sub_ctr_1"))
	handle(t, w, deleted, sig, true)
	wantStrings(t, "transitions", cs.take(), "ctr_1 -> past_due", "ctr_1 -> canceled")
}

func TestWebhookRecordsAndIgnoresTheRest(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	cs := &states{status: map[string]contracts.ContractStatus{"ctr_1": contracts.ContractActive}}
	w := e.webhooks(cs)
	for _, d := range []struct{ id, typ, object string }{
		{"evt_charge", "charge.succeeded", `{"id": "ch_1", "object": "charge"}`},
		{"evt_created", "invoice.created", invoiceOf("sub_ctr_1")},
		{"evt_unknown", billing.EventInvoicePaymentFailed, invoiceOf("sub_nobody")},
		{"evt_nosub", billing.EventInvoicePaid, `{"id": "in_1", "object": "invoice"}`},
	} {
		payload, sig := delivery(webhookSecret, d.id, d.typ, t0, d.object)
		handle(t, w, payload, sig, false)
		if seen, _ := e.store.WebhookEventSeen(context.Background(), d.id); !seen {
			t.Errorf("%s was not recorded", d.id)
		}
	}
	wantStrings(t, "transitions", cs.take())
}

// TestWebhookFailureIsRetried: an event that could not be applied is not
// recorded, so Stripe's next delivery applies it.
func TestWebhookFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	cs := &states{status: map[string]contracts.ContractStatus{"ctr_1": contracts.ContractActive},
		fail: agentmarket.Errorf(agentmarket.Unavailable, "database_timeout", "the database did not answer in time")}
	w := e.webhooks(cs)
	payload, sig := delivery(webhookSecret, "evt_1", billing.EventInvoicePaymentFailed, t0, invoiceOf("sub_ctr_1"))
	if _, err := w.Handle(context.Background(), payload, sig); agentmarket.KindOf(err) != agentmarket.Unavailable {
		t.Fatalf("Handle = %v, want Unavailable", err)
	}
	if seen, _ := e.store.WebhookEventSeen(context.Background(), "evt_1"); seen {
		t.Fatal("a failed event was recorded")
	}
	cs.fail = nil
	handle(t, w, payload, sig, true)
}

// TestPaymentFailedGraceSuspendPaid runs the life cycle billing drives
// with the real contracts.Subscriptions: payment failed → past due; the
// grace period over → suspended (contracts' SuspendOverdue); paid →
// active again.
func TestPaymentFailedGraceSuspendPaid(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.attach(t, "ctr_1")
	cstore := &memContracts{byID: map[string]contracts.Contract{c.ID: *c}}
	subs := &contracts.Subscriptions{Store: cstore, Policies: noReload{}, Clock: e.clock}
	w := e.webhooks(subs)

	failed, sig := delivery(webhookSecret, "evt_failed", billing.EventInvoicePaymentFailed, e.clock.Now(), invoiceOf("sub_ctr_1"))
	handle(t, w, failed, sig, true)
	if got := cstore.byID["ctr_1"]; got.Status != contracts.ContractPastDue || got.PastDueAt == nil {
		t.Fatalf("after the failed payment: %+v", got)
	}
	const grace = 7 * 24 * time.Hour
	e.clock.Advance(grace - time.Minute)
	if n, err := subs.SuspendOverdue(ctx, grace); err != nil || n != 0 {
		t.Fatalf("SuspendOverdue within the grace period = %d, %v", n, err)
	}
	e.clock.Advance(2 * time.Minute)
	if n, err := subs.SuspendOverdue(ctx, grace); err != nil || n != 1 {
		t.Fatalf("SuspendOverdue after the grace period = %d, %v", n, err)
	}
	if got := cstore.byID["ctr_1"].Status; got != contracts.ContractSuspended {
		t.Fatalf("status %s, want suspended", got)
	}
	paid, sig := delivery(webhookSecret, "evt_paid", billing.EventInvoicePaid, e.clock.Now(), invoiceOf("sub_ctr_1"))
	handle(t, w, paid, sig, true)
	if got := cstore.byID["ctr_1"]; got.Status != contracts.ContractActive || got.PastDueAt != nil {
		t.Fatalf("after the payment: %+v", got)
	}
}

type noReload struct{}

func (noReload) Reload(context.Context) error { return nil }

// memContracts is an in-memory contracts.ContractStore, enough for
// Transition and SuspendOverdue.
type memContracts struct {
	mu   sync.Mutex
	byID map[string]contracts.Contract
}

func (m *memContracts) CreateContract(_ context.Context, c *contracts.Contract, _ []contracts.Rule) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byID[c.ID] = *c
	return nil
}

func (m *memContracts) GetContract(_ context.Context, id string) (*contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "subscription_not_found", "no subscription %q", id)
	}
	return &c, nil
}

func (m *memContracts) OpenContract(context.Context, string, string) (*contracts.Contract, error) {
	return nil, agentmarket.Errorf(agentmarket.NotFound, "not_subscribed", "not subscribed")
}

func (m *memContracts) ListContracts(context.Context, string) ([]contracts.Contract, error) {
	return nil, nil
}

func (m *memContracts) SetContractStatus(_ context.Context, id string, status contracts.ContractStatus, at time.Time, _, _ []contracts.Rule) (*contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.byID[id]
	c.Status, c.UpdatedAt = status, at
	switch status {
	case contracts.ContractPastDue:
		if c.PastDueAt == nil {
			c.PastDueAt = &at
		}
	case contracts.ContractActive:
		c.PastDueAt = nil
	case contracts.ContractCanceled:
		c.CanceledAt = &at
	}
	m.byID[id] = c
	return &c, nil
}

func (m *memContracts) OverdueContracts(_ context.Context, cutoff time.Time) ([]contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []contracts.Contract
	for _, c := range m.byID {
		if c.Status == contracts.ContractPastDue && c.PastDueAt != nil && !c.PastDueAt.After(cutoff) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (m *memContracts) SetContractBudgets(_ context.Context, id string, b contracts.TimeBudgets, at time.Time) (*contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "subscription_not_found", "no subscription %q", id)
	}
	c.Budgets, c.UpdatedAt = b, at
	m.byID[id] = c
	return &c, nil
}

func (m *memContracts) SetContractLimits(_ context.Context, id string, l agentmarket.RateLimits, caps contracts.SessionCaps, at time.Time) (*contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "subscription_not_found", "no subscription %q", id)
	}
	c.RateLimits, c.SessionCaps, c.UpdatedAt = l, caps, at
	m.byID[id] = c
	return &c, nil
}

func (m *memContracts) HadTrial(_ context.Context, buyerOrgID, listingID string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.byID {
		if c.BuyerOrgID == buyerOrgID && c.ListingID == listingID && c.TrialEnd != nil {
			return true, nil
		}
	}
	return false, nil
}

func (m *memContracts) TrialingContracts(context.Context) ([]contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []contracts.Contract
	for _, c := range m.byID {
		if c.Status == contracts.ContractTrialing {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// trialing changes a trialing contract under the lock; NotFound or
// trial_over otherwise.
func (m *memContracts) trialing(id string, change func(c *contracts.Contract)) (*contracts.Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "subscription_not_found", "no subscription %q", id)
	}
	if c.Status != contracts.ContractTrialing {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "trial_over", "not in a trial")
	}
	change(&c)
	m.byID[id] = c
	return &c, nil
}

func (m *memContracts) EndTrial(_ context.Context, id string, end time.Time, status contracts.ContractStatus, at time.Time, _ []contracts.Rule) (*contracts.Contract, error) {
	return m.trialing(id, func(c *contracts.Contract) {
		c.Status, c.TrialEnd, c.UpdatedAt = status, &end, at
		if status == contracts.ContractCanceled {
			c.CanceledAt = &end
		}
	})
}

func (m *memContracts) SetCancelAtTrialEnd(_ context.Context, id string, cancel bool, at time.Time) (*contracts.Contract, error) {
	return m.trialing(id, func(c *contracts.Contract) { c.CancelAtTrialEnd, c.UpdatedAt = cancel, at })
}
