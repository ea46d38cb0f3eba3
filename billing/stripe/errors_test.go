package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/stripe"
	"github.com/agentmarket/agentmarket/listings"
)

func stripeError(status int, typ, code, param, msg string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_test")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error": {"type": %q, "code": %q, "param": %q, "message": %q}}`, typ, code, param, msg)
	}
}

// TestErrorKinds maps each kind of Stripe failure to the application's
// error kinds (retries off: each status is answered once).
func TestErrorKinds(t *testing.T) {
	for _, c := range []struct {
		name     string
		handle   func(http.ResponseWriter, *http.Request)
		kind     agentmarket.Kind
		code     string
		causeHas string
	}{
		{"bad key", stripeError(401, "invalid_request_error", "", "", "Invalid API Key provided: sk_test_***"),
			agentmarket.Internal, "payment_provider_auth", "check AGENTMARKET_STRIPE_SECRET_KEY"},
		{"restricted key", stripeError(403, "invalid_request_error", "", "", "The provided key does not have the required permissions"),
			agentmarket.Internal, "payment_provider_auth", "lacks a permission"},
		{"card declined", stripeError(402, "card_error", "card_declined", "", "Your card was declined."),
			agentmarket.Invalid, "payment_card_declined", "card_declined"},
		{"invalid request", stripeError(400, "invalid_request_error", "parameter_unknown", "items[0][pricee]", "Received unknown parameter: items[0][pricee]"),
			agentmarket.Invalid, "payment_provider_invalid_request", "parameter_unknown"},
		{"missing object", stripeError(404, "invalid_request_error", "resource_missing", "id", "No such subscription: 'sub_x'"),
			agentmarket.NotFound, "payment_provider_not_found", "resource_missing"},
		{"key reused with other parameters", stripeError(400, "idempotency_error", "", "", "Keys for idempotent requests can only be used with the same parameters"),
			agentmarket.Conflict, "payment_provider_idempotency_conflict", "idempotency_error"},
		{"request in progress", stripeError(409, "invalid_request_error", "idempotency_key_in_use", "", "in use"),
			agentmarket.Unavailable, "payment_provider_busy", "idempotency_key_in_use"},
		{"rate limited", stripeError(429, "invalid_request_error", "rate_limit", "", "Too many requests"),
			agentmarket.Unavailable, "payment_provider_rate_limited", "rate_limit"},
		{"stripe down", stripeError(500, "api_error", "", "", "Something went wrong on Stripe's end."),
			agentmarket.Unavailable, "payment_provider_unavailable", "api_error"},
		{"connection dropped", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, agentmarket.Unavailable, "payment_provider_unreachable", "EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, rec := fakeStripe(t, c.handle)
			err := p.ReportUsage(context.Background(), "si_1", 5, time.Unix(1_777_802_699, 0), "am1/k")
			var ae *agentmarket.Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v (%T), want an *agentmarket.Error", err, err)
			}
			if ae.Kind != c.kind || ae.Code != c.code {
				t.Errorf("got %s/%s, want %s/%s (%v)", ae.Kind, ae.Code, c.kind, c.code, err)
			}
			if ae.Err == nil || !strings.Contains(ae.Err.Error(), c.causeHas) {
				t.Errorf("cause %v does not mention %q", ae.Err, c.causeHas)
			}
			if ae.Kind == agentmarket.Internal && strings.Contains(ae.Message, "sk_") {
				t.Errorf("message shown to callers leaks Stripe's details: %q", ae.Message)
			}
			if n := len(rec.take()); n != 1 {
				t.Errorf("%d requests, want 1 (retries are off)", n)
			}
		})
	}
}

// TestStripeGoRetriesWithTheSameKey: stripe-go's own retry of a 503 sends
// the request again with the same idempotency key.
func TestStripeGoRetriesWithTheSameKey(t *testing.T) {
	var n atomic.Int32
	srv := func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			stripeError(503, "api_error", "", "", "try again")(w, r)
			return
		}
		okJSON(w, r)
	}
	p, rec := fakeProvider(t, fakeServer(t, srv), 1)
	if _, err := p.EnsureCustomer(context.Background(), "org_r", "R", ""); err != nil {
		t.Fatalf("EnsureCustomer: %v", err)
	}
	calls := rec.take()
	if len(calls) != 2 || calls[0].Key != "am1/org/org_r/customer" || calls[1].Key != calls[0].Key ||
		calls[0].Status != 503 || calls[1].Status != 200 || calls[0].Form.Encode() != calls[1].Form.Encode() {
		t.Errorf("want the same request twice (503, then 200), got %v", calls)
	}
}

// TestEnsurePlanReusesTheListingsProduct: a later plan version finds the
// listing's product by its deterministic id (Stripe answers
// resource_already_exists) and creates only the new version's prices.
func TestEnsurePlanReusesTheListingsProduct(t *testing.T) {
	p, rec := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/products" {
			stripeError(400, "invalid_request_error", "resource_already_exists", "id", "Product already exists.")(w, r)
			return
		}
		okJSON(w, r)
	})
	plan := testPlan()
	plan.Version = 4
	prices, err := p.EnsurePlan(context.Background(), "lst_test", "Echo agent", plan)
	if err != nil {
		t.Fatalf("EnsurePlan: %v", err)
	}
	if prices.ProductID != "am_lst_test" || prices.FlatPriceID == "" || len(prices.MeteredPriceIDs) != 4 {
		t.Errorf("prices %+v", prices)
	}
	calls := rec.take()
	if len(calls) != 6 || calls[0].Status != 400 || calls[1].Form.Get("product") != "am_lst_test" ||
		calls[5].Key != "am1/listing/lst_test/plan/4/price/tasks" {
		t.Errorf("calls %v", calls)
	}
}

// TestSubscribeNeedsAnItemPerPrice: an answer without an item for one of
// our prices is an error, not a guess.
func TestSubscribeNeedsAnItemPerPrice(t *testing.T) {
	p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": "sub_1", "items": {"object": "list", "data": [
			{"id": "si_f", "price": {"id": "price_f"}}, {"id": "si_i", "price": {"id": "price_i"}},
			{"id": "si_o", "price": {"id": "price_o"}}, {"id": "si_c", "price": {"id": "price_c"}}]}}`)
	})
	in := billing.SubscribeInput{ContractID: "ctr_1", CustomerID: "cus_1", Prices: billing.PlanPrices{
		FlatPriceID: "price_f", MeteredPriceIDs: map[billing.LineKind]string{
			billing.LineInputTokens: "price_i", billing.LineOutputTokens: "price_o", billing.LineCompute: "price_c", billing.LineTasks: "price_t"}}}
	_, err := p.Subscribe(context.Background(), in)
	if agentmarket.KindOf(err) != agentmarket.Internal || agentmarket.CodeOf(err) != "payment_provider_unexpected_response" {
		t.Errorf("got %v, want payment_provider_unexpected_response", err)
	}
}

// TestInvalidInputSendsNothing: bad input is refused, every problem named,
// before any request.
func TestInvalidInputSendsNothing(t *testing.T) {
	p, rec := fakeStripe(t, okJSON)
	ctx := context.Background()
	fields := func(err error) string {
		var ae *agentmarket.Error
		if !errors.As(err, &ae) || ae.Kind != agentmarket.Invalid {
			return fmt.Sprintf("not Invalid: %v", err)
		}
		var fs []string
		for _, f := range ae.Fields {
			fs = append(fs, f.Field+":"+f.Rule)
		}
		return strings.Join(fs, " ")
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"plan", func() error {
			_, err := p.EnsurePlan(ctx, "", "", listings.Plan{Currency: "xxx", PerTaskMicros: -1})
			return err
		}(), "listing_id:required listing_name:required plan.version:positive plan.currency:unknown_currency plan.per_task_micros:non_negative"},
		{"customer", func() error { _, err := p.EnsureCustomer(ctx, "", "x", ""); return err }(), "org_id:required"},
		{"subscribe", func() error {
			_, err := p.Subscribe(ctx, billing.SubscribeInput{PlatformFeePercent: 10, Prices: billing.PlanPrices{
				FlatPriceID: "price_a", MeteredPriceIDs: map[billing.LineKind]string{billing.LineInputTokens: "price_a", "flat_fee": "price_b"}}})
			return err
		}(), "contract_id:required customer_id:required prices.metered_price_ids.input_tokens:unique prices.metered_price_ids.output_tokens:required " +
			"prices.metered_price_ids.compute:required prices.metered_price_ids.tasks:required prices.metered_price_ids.flat_fee:unknown " +
			"platform_fee_percent:requires_connected_account"},
		{"fee precision", billing.SubscribeInput{ContractID: "c", CustomerID: "c", ConnectedAccountID: "acct", PlatformFeePercent: 10.125,
			Prices: billing.PlanPrices{FlatPriceID: "f", MeteredPriceIDs: map[billing.LineKind]string{"input_tokens": "i", "output_tokens": "o", "compute": "c", "tasks": "t"}}}.Validate(),
			"platform_fee_percent:precision"},
		{"usage", p.ReportUsage(ctx, "", -1, time.Time{}, ""), "item_id:required idempotency_key:required quantity:non_negative at:required"},
		{"cancel", p.CancelSubscription(ctx, "sub_1", strings.Repeat("k", 256)), "idempotency_key:max_length"},
	} {
		if got := fields(c.err); got != c.want {
			t.Errorf("%s: got fields %q, want %q", c.name, got, c.want)
		}
	}
	if calls := rec.take(); len(calls) != 0 {
		t.Errorf("invalid input sent %d requests: %v", len(calls), calls)
	}
}

// TestNoGlobalStripeState: the Provider never sets stripe-go's global key.
func TestNoGlobalStripeState(t *testing.T) {
	p, _ := fakeStripe(t, okJSON)
	if _, err := p.EnsureCustomer(context.Background(), "org_g", "G", ""); err != nil {
		t.Fatal(err)
	}
	if stripego.Key != "" {
		t.Errorf("stripe.Key was set to %q", stripego.Key)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (stripe.Config{SecretKey: "sk_test_1", APIBase: "http://127.0.0.1:12111"}).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	err := stripe.Config{APIBase: "127.0.0.1:12111"}.Validate()
	var ae *agentmarket.Error
	if !errors.As(err, &ae) || len(ae.Fields) != 2 || ae.Fields[0].Field != "stripe_secret_key" || ae.Fields[1].Field != "stripe_api_base" {
		t.Errorf("got %v, want stripe_secret_key and stripe_api_base errors", err)
	}
}
