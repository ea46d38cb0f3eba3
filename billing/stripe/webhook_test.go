package stripe_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/stripe"
)

const whsec = "whsec_test_secret"

// signed signs payload as Stripe does: t=<unix>,v1=hex(HMAC-SHA256(secret,
// "<unix>.<payload>")).
func signed(payload, secret string, at time.Time) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.%s", at.Unix(), payload)
	return fmt.Sprintf("t=%d,v1=%s", at.Unix(), hex.EncodeToString(mac.Sum(nil)))
}

func event(id, typ, apiVersion, object string) string {
	return fmt.Sprintf(`{"id": %q, "object": "event", "api_version": %q, "created": 1777802400, "type": %q, "livemode": false,
		"data": {"object": %s}}`, id, apiVersion, typ, object)
}

func TestWebhookVerifierReadsEvents(t *testing.T) {
	v := &stripe.WebhookVerifier{Secret: whsec}
	created := time.Unix(1777802400, 0).UTC()
	for _, tc := range []struct {
		name, payload string
		want          billing.Event
	}{
		{"invoice paid, subscription as an id",
			event("evt_1", "invoice.paid", "2023-10-16", `{"id": "in_1", "object": "invoice", "subscription": "sub_1"}`),
			billing.Event{ID: "evt_1", Type: "invoice.paid", Created: created, SubscriptionID: "sub_1"}},
		{"payment failed, subscription expanded",
			event("evt_2", "invoice.payment_failed", "2023-10-16", `{"id": "in_2", "object": "invoice", "subscription": {"id": "sub_2", "object": "subscription"}}`),
			billing.Event{ID: "evt_2", Type: "invoice.payment_failed", Created: created, SubscriptionID: "sub_2"}},
		{"another API version, the subscription under parent",
			event("evt_3", "invoice.paid", "2025-03-31.basil",
				`{"id": "in_3", "object": "invoice", "parent": {"type": "subscription_details", "subscription_details": {"subscription": "sub_3"}}}`),
			billing.Event{ID: "evt_3", Type: "invoice.paid", Created: created, SubscriptionID: "sub_3"}},
		{"subscription deleted",
			event("evt_4", "customer.subscription.deleted", "2023-10-16", `{"id": "sub_4", "object": "subscription", "status": "canceled"}`),
			billing.Event{ID: "evt_4", Type: "customer.subscription.deleted", Created: created, SubscriptionID: "sub_4"}},
		{"an event of something else",
			event("evt_5", "charge.succeeded", "2023-10-16", `{"id": "ch_1", "object": "charge"}`),
			billing.Event{ID: "evt_5", Type: "charge.succeeded", Created: created}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify([]byte(tc.payload), signed(tc.payload, whsec, time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("event = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWebhookVerifierMatchesStripeGo: a header made by stripe-go's own
// test helper verifies too (the scheme above is Stripe's).
func TestWebhookVerifierMatchesStripeGo(t *testing.T) {
	payload := event("evt_1", "invoice.paid", "2023-10-16", `{"id": "in_1", "object": "invoice", "subscription": "sub_1"}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: whsec})
	if sp.Header != signed(payload, whsec, sp.Timestamp) {
		t.Errorf("stripe-go signs %q, we sign %q", sp.Header, signed(payload, whsec, sp.Timestamp))
	}
	if _, err := (&stripe.WebhookVerifier{Secret: whsec}).Verify(sp.Payload, sp.Header); err != nil {
		t.Fatal(err)
	}
}

func TestWebhookVerifierRefuses(t *testing.T) {
	v := &stripe.WebhookVerifier{Secret: whsec}
	payload := event("evt_1", "invoice.paid", "2023-10-16", `{"id": "in_1", "object": "invoice", "subscription": "sub_1"}`)
	now := time.Now()
	good := signed(payload, whsec, now)
	for _, tc := range []struct {
		name, payload, header, code string
	}{
		{"another secret's signature", payload, signed(payload, "whsec_forged", now), "webhook_signature"},
		{"a tampered payload", strings.Replace(payload, "sub_1", "sub_2", 1), good, "webhook_signature"},
		{"a signature older than the tolerance", payload, signed(payload, whsec, now.Add(-webhook.DefaultTolerance-time.Minute)), "webhook_signature"},
		{"no signature", payload, "", "webhook_signature"},
		{"a malformed header", payload, "v1", "webhook_signature"},
		{"a v0 signature only", payload, strings.Replace(good, "v1=", "v0=", 1), "webhook_signature"},
		{"a signed payload that is not JSON", "not json", signed("not json", whsec, now), "invalid_webhook_payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify([]byte(tc.payload), tc.header)
			if agentmarket.KindOf(err) != agentmarket.Invalid || agentmarket.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want Invalid %s", err, tc.code)
			}
		})
	}
}

func TestWebhookVerifierWithoutSecret(t *testing.T) {
	payload := event("evt_1", "invoice.paid", "2023-10-16", `{"id": "in_1", "object": "invoice", "subscription": "sub_1"}`)
	_, err := (&stripe.WebhookVerifier{}).Verify([]byte(payload), signed(payload, "", time.Now()))
	if agentmarket.KindOf(err) != agentmarket.Internal || agentmarket.CodeOf(err) != "webhook_secret_missing" {
		t.Fatalf("err = %v, want Internal webhook_secret_missing", err)
	}
}
