package main

import (
	"strings"
	"testing"
	"time"
)

// TestCreditPurchase: a buyer's admin buys credit through a Checkout
// Session opened on stripe-mock (one-off price of the amount, the org in
// its metadata); the signed checkout.session.completed webhook credits
// it once: the same delivery again, or another event of the same session,
// credits nothing more; a forged signature is refused and credits
// nothing; an unpaid session credits nothing; the purchase is in the
// movements and the audit log.
func TestCreditPurchase(t *testing.T) {
	rec := newStripeRecorder(t)
	m := startMarketplace(t, map[string]string{
		"AGENTMARKET_STRIPE_SECRET_KEY":     "sk_test_123",
		"AGENTMARKET_STRIPE_API_BASE":       rec.srv.URL,
		"AGENTMARKET_STRIPE_WEBHOOK_SECRET": webhookSecret,
	})
	api := client{t: t, base: m.URL}
	orgID, key := signup(t, api, "Credit buyer", "credit@buyer.example")
	admin := api.with(key)
	rec.take()

	if r := admin.do("POST", "/api/v1/credit/purchases", map[string]any{"currency": "usd", "amount_micros": 1_000_001, "success_url": "https://buyer.example/ok"}); r.Status != 422 ||
		!strings.Contains(string(r.Body), "whole_minor_units") {
		t.Fatalf("a purchase of a fraction of a cent: %d %s, want 422 whole_minor_units", r.Status, r.Body)
	}
	_, buyerKey := mintKey(t, admin, map[string]any{"name": "buyer", "role": "buyer"})
	if r := api.with(buyerKey).do("POST", "/api/v1/credit/purchases", map[string]any{"currency": "usd", "amount_micros": 25_000_000, "success_url": "https://buyer.example/ok"}); r.Status != 403 {
		t.Fatalf("a buyer key buying credit: %d %s, want 403", r.Status, r.Body)
	}
	r := admin.do("POST", "/api/v1/credit/purchases", map[string]any{"currency": "usd", "amount_micros": 25_000_000,
		"success_url": "https://buyer.example/ok", "cancel_url": "https://buyer.example/no"})
	if r.Status != 201 || !strings.HasPrefix(r.str("id"), "cs_") {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
	calls := rec.take()
	if len(calls) != 1 || calls[0].Method+" "+calls[0].Path != "POST /v1/checkout/sessions" {
		t.Fatalf("Stripe calls: %v, want one POST /v1/checkout/sessions", calls)
	}
	f := calls[0].Form
	if f.Get("mode") != "payment" || f.Get("line_items[0][price_data][unit_amount]") != "2500" || f.Get("line_items[0][price_data][currency]") != "usd" ||
		f.Get("metadata[agentmarket_credit_org]") != orgID || f.Get("payment_intent_data[metadata][agentmarket_credit_org]") != orgID {
		t.Errorf("the Checkout Session: %v", f)
	}
	// Nothing is credited before the webhook.
	if r := admin.do("GET", "/api/v1/credit", nil); r.Status != 200 || len(r.JSON["items"].([]any)) != 0 {
		t.Fatalf("credit before the webhook: %d %s, want none", r.Status, r.Body)
	}

	session := func(status string) map[string]any {
		return map[string]any{"id": "cs_test_credit_1", "object": "checkout.session", "payment_status": status, "amount_total": 2500, "currency": "usd",
			"metadata": map[string]any{"agentmarket_credit_org": orgID, "agentmarket_credit_currency": "usd"}}
	}
	balance := func() float64 {
		t.Helper()
		r := admin.do("GET", "/api/v1/credit", nil)
		items, _ := r.JSON["items"].([]any)
		if len(items) == 0 {
			return 0
		}
		return items[0].(map[string]any)["balance_micros"].(float64)
	}
	now := time.Now()
	// Unpaid: nothing.
	if r := api.webhook(signedObject("evt_credit_0", "checkout.session.completed", session("unpaid"), now)); r.Status != 200 || balance() != 0 {
		t.Fatalf("an unpaid session: %d %s, balance %v; want 200 and nothing credited", r.Status, r.Body, balance())
	}
	// Forged: refused.
	payload, sig := signedObject("evt_credit_1", "checkout.session.completed", session("paid"), now)
	forged := strings.Replace(sig, "v1=", "v1=00", 1)
	if r := api.webhook(payload, forged); r.Status != 400 || balance() != 0 {
		t.Fatalf("a forged webhook: %d %s, balance %v; want 400 and nothing credited", r.Status, r.Body, balance())
	}
	if r := api.webhook(payload, sig); r.Status != 200 || r.JSON["applied"] != true || balance() != 25_000_000 {
		t.Fatalf("the signed webhook: %d %s, balance %v; want 25,000,000 credited", r.Status, r.Body, balance())
	}
	// Replayed, and another event of the same session: nothing more.
	if r := api.webhook(payload, sig); r.Status != 200 || r.JSON["applied"] != false || balance() != 25_000_000 {
		t.Fatalf("the webhook replayed: %d %s, balance %v; want nothing more", r.Status, r.Body, balance())
	}
	if r := api.webhook(signedObject("evt_credit_2", "checkout.session.completed", session("paid"), now)); r.Status != 200 || balance() != 25_000_000 {
		t.Fatalf("another event of the same session: %d %s, balance %v; want nothing more", r.Status, r.Body, balance())
	}
	mv := admin.do("GET", "/api/v1/credit/movements", nil)
	items, _ := mv.JSON["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["kind"] != "purchase" || items[0].(map[string]any)["ref"] != "cs:cs_test_credit_1" {
		t.Errorf("movements: %s, want one purchase of the session", mv.Body)
	}
	if a := admin.do("GET", "/api/v1/audit", nil); a.Status != 200 || strings.Count(string(a.Body), `"credit.purchase"`) != 1 {
		t.Errorf("the audit log: %d %s, want the purchase once", a.Status, a.Body)
	}
}
