package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
	"github.com/agentmarket/agentmarket/listings"
)

// commerceT0 is where the commerce tests' clock starts: early in a
// 30-day month, so a 14-day trial ends inside it.
var commerceT0 = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)

// commercePricing: usage at list prices that show (3 micros an input
// token, 15 an output token, 0.1 a millisecond of compute, 1,000 a task),
// no allowance, a $10 monthly fee and a 14-day trial that 30 tokens end
// early.
var commercePricing = map[string]any{
	"currency": "usd", "monthly_fee_micros": 10_000_000, "input_tokens_per_million_micros": 3_000_000,
	"output_tokens_per_million_micros": 15_000_000, "compute_per_hour_micros": 360_000, "per_task_micros": 1_000,
	"trial_days": 14, "trial_tokens": 30,
}

// commerceMarket is a marketplace on a manual clock with one seller, one
// summarizer agent (it reports usage: a message of n words is n input
// tokens, n+4 output tokens and 7(n+4) ms of compute) and two buyers.
type commerceMarket struct {
	m              *started
	clock          *agentmarket.ManualClock
	api            client
	seller         string
	buyer, other   string // the buyers' admin keys
	buyerOrg       string
	listing, agent string // listing id, its meter endpoint
	agentURL       string // the agent's own URL
	// agentLag is how far the agent moves the clock while it answers a
	// call (nanoseconds; 0: not at all).
	agentLag atomic.Int64
}

func newCommerceMarket(t *testing.T, env map[string]string, pricing map[string]any) *commerceMarket {
	t.Helper()
	return newCommerceMarketAt(t, env, pricing, commerceT0)
}

// browserT0 is a commerce clock for browser tests: the 3rd of the month
// after next, at midnight, so that the session cookies the manual clock
// dates (12 hours) are still valid for the browser's own clock.
func browserT0() time.Time {
	now := time.Now().UTC()
	return time.Date(now.Year(), now.Month()+2, 3, 0, 0, 0, 0, time.UTC)
}

func newCommerceMarketAt(t *testing.T, env map[string]string, pricing map[string]any, t0 time.Time) *commerceMarket {
	t.Helper()
	vars := map[string]string{"AGENTMARKET_BILLING_GRACE": "1s"} // billing's sweeps every 250 ms
	for k, v := range env {
		vars[k] = v
	}
	cm := &commerceMarket{clock: agentmarket.NewManualClock(t0)}
	agent := demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, Name: "Trial Summarizer"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lag := time.Duration(cm.agentLag.Load()); lag > 0 && r.Method == http.MethodPost {
			cm.clock.Advance(lag) // the agent's work, as the meter's clock sees it
		}
		agent.ServeHTTP(w, r)
	}))
	agent.SetBaseURL(srv.URL + "/")
	t.Cleanup(srv.Close)
	cm.agentURL = srv.URL
	cm.m = startMarketplaceWith(t, vars, []serve.Option{serve.WithClock(cm.clock)})
	cm.api = client{t: t, base: cm.m.URL}
	_, cm.seller = signup(t, cm.api, "Acme Agents", "owner@acme.example")
	cm.buyerOrg, cm.buyer = signup(t, cm.api, "Globex", "it@globex.example")
	_, cm.other = signup(t, cm.api, "Initech", "it@initech.example")
	r := cm.api.with(cm.seller).do("POST", "/api/v1/listings", map[string]any{"card_url": srv.URL, "pricing": pricing})
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	cm.listing = r.str("id")
	return cm
}

func (cm *commerceMarket) subscribe(t *testing.T, key string, body map[string]any) response {
	t.Helper()
	body["listing_id"] = cm.listing
	r := cm.api.with(key).do("POST", "/api/v1/subscriptions", body)
	if r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	cm.agent = r.str("endpoint")
	return r
}

// call sends one message of nine words through the meter at the clock's
// time and waits until its usage row is in the usage store.
func (cm *commerceMarket) call(t *testing.T, key string) {
	t.Helper()
	before := cm.calls(t, key)
	res, e := rpc{t: t, url: cm.agent, key: key}.call("message/send", msg03("The quick brown fox jumps over the lazy dog", nil))
	if e != nil || get(res, "status", "state") != "completed" {
		t.Fatalf("call through the meter: %v %v", res, e)
	}
	waitFor(t, "the call's usage row", 15*time.Second, func() bool { return cm.calls(t, key) > before })
}

// usage is the key's org's usage of the listing in [from, to), as the
// usage API sums it.
func (cm *commerceMarket) usage(t *testing.T, key string, from, to time.Time) billing.Usage {
	t.Helper()
	q := url.Values{"group_by": {"listing"}, "from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)}}
	r := cm.api.with(key).do("GET", "/api/v1/usage?"+q.Encode(), nil)
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		if row := it.(map[string]any); row["key"] == cm.listing {
			n := func(k string) int64 { return int64(row[k].(float64)) }
			return billing.Usage{InputTokens: n("input_tokens"), OutputTokens: n("output_tokens"), ComputeMs: n("compute_ms"), Tasks: n("tasks")}
		}
	}
	return billing.Usage{}
}

func (cm *commerceMarket) calls(t *testing.T, key string) int64 {
	now := cm.clock.Now()
	q := url.Values{"group_by": {"listing"}, "from": {now.AddDate(-1, 0, 0).Format(time.RFC3339)}, "to": {now.AddDate(1, 0, 0).Format(time.RFC3339)}}
	r := cm.api.with(key).do("GET", "/api/v1/usage?"+q.Encode(), nil)
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		if row := it.(map[string]any); row["key"] == cm.listing {
			return int64(row["calls"].(float64))
		}
	}
	return 0
}

func (cm *commerceMarket) subscription(t *testing.T, key, id string) response {
	t.Helper()
	r := cm.api.with(key).do("GET", "/api/v1/subscriptions/"+id, nil)
	if r.Status != 200 {
		t.Fatalf("subscription %s: %d %s", id, r.Status, r.Body)
	}
	return r
}

// invoiceSummary renders an invoice of the API as billing's tests render
// one: kind=micros[minor] per line, then the total.
func invoiceSummary(r response) string {
	var parts []string
	lines, _ := r.JSON["lines"].([]any)
	for _, l := range lines {
		m := l.(map[string]any)
		parts = append(parts, fmt.Sprintf("%s=%d[%d]", m["kind"], int64(m["amount_micros"].(float64)), int64(m["amount_minor"].(float64))))
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" subtotal=%d total=%d", int64(r.JSON["subtotal_micros"].(float64)), int64(r.JSON["total_minor"].(float64)))
}

// wantSummary renders a billing invoice the same way.
func wantSummary(inv *billing.Invoice) string {
	var parts []string
	for _, l := range inv.Lines {
		parts = append(parts, fmt.Sprintf("%s=%d[%d]", l.Kind, l.AmountMicros, l.AmountMinor))
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" subtotal=%d total=%d", inv.SubtotalMicros, inv.TotalMinor)
}

// TestTrials (issue 14, item 1), on SQLite with the embedded usage store
// and on PostgreSQL with ClickHouse, without Stripe: a buyer's first
// subscription starts a 14-day trial; the call that uses up its 30 tokens
// is the last free one (the trial ends a millisecond after it, to the
// millisecond, whenever billing notices); the invoice preview shows the
// trial's usage at zero and charges the fee from the trial's end, by the
// second, and the later usage, to the micro. Another buyer who chose to
// stop with the trial is canceled at its end, owing nothing. A trial is
// had once per org and listing.
func TestTrials(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, commercePricing)
		r := cm.subscribe(t, cm.buyer, map[string]any{})
		sub := r.str("id")
		trialEnd := commerceT0.Add(14 * 24 * time.Hour)
		if r.str("status") != "trialing" || r.str("trial_end") != trialEnd.Format(time.RFC3339) || r.JSON["cancel_at_trial_end"] != false {
			t.Fatalf("first subscription: %s", r.Body)
		}

		// 22 tokens: the trial goes on.
		cm.clock.Advance(time.Minute)
		cm.call(t, cm.buyer)
		time.Sleep(600 * time.Millisecond) // two sweeps
		if s := cm.subscription(t, cm.buyer, sub).str("status"); s != "trialing" {
			t.Fatalf("after 22 of 30 tokens: %s", s)
		}
		// 44 tokens: this call uses the trial up; it is still free.
		cm.clock.Advance(time.Minute)
		crossing := cm.clock.Now()
		cm.call(t, cm.buyer)
		cm.clock.Advance(time.Minute)
		waitFor(t, "the trial to end", 10*time.Second, func() bool { return cm.subscription(t, cm.buyer, sub).str("status") == "active" })
		end := crossing.Add(time.Millisecond)
		if got := cm.subscription(t, cm.buyer, sub).str("trial_end"); got != end.Format(time.RFC3339Nano) {
			t.Fatalf("trial ended at %s, want %s: right after the call that used it up", got, end.Format(time.RFC3339Nano))
		}
		// Paid from here.
		cm.clock.Advance(time.Minute)
		cm.call(t, cm.buyer)

		now := cm.clock.Now()
		month := billing.MonthOf(now)
		trialUse, paidUse := cm.usage(t, cm.buyer, month.Start, end), cm.usage(t, cm.buyer, end, now.Add(time.Millisecond))
		if want := (billing.Usage{InputTokens: 18, OutputTokens: 26, ComputeMs: 182, Tasks: 2}); trialUse != want {
			t.Fatalf("usage in the trial %+v, want %+v", trialUse, want)
		}
		if want := (billing.Usage{InputTokens: 9, OutputTokens: 13, ComputeMs: 91, Tasks: 1}); paidUse != want {
			t.Fatalf("usage after the trial %+v, want %+v", paidUse, want)
		}
		pv := cm.api.with(cm.buyer).do("GET", "/api/v1/invoices/preview?subscription_id="+sub, nil)
		if pv.Status != 200 {
			t.Fatalf("preview: %d %s", pv.Status, pv.Body)
		}
		plan, err := listings.ParsePricing([]byte(mustJSON(commercePricing)))
		if err != nil {
			t.Fatal(err)
		}
		plan.Version = 1
		want, err := billing.PreviewParts(month, []billing.Part{
			{Plan: plan, Span: billing.Period{Start: commerceT0, End: end}, Usage: trialUse, Trial: true},
			{Plan: plan, Span: billing.Period{Start: end, End: month.End}, Usage: paidUse},
		}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := invoiceSummary(pv); got != wantSummary(want) {
			t.Errorf("preview\n  %s\nwant\n  %s", got, wantSummary(want))
		}
		// By hand: the fee for 2,383,080 of November's 2,592,000 seconds
		// (from 10:02:00, the trial's end to the second) is 9,193,981 +
		// 13/27 micros; the last call 27 + 195 + 9.1 + 1,000 = 1,231.1; in
		// all 9,195,212.58… micros: 920 cents.
		fee := new(big.Rat).SetFrac64(10_000_000*2_383_080, 2_592_000)
		if want.Lines[5].ExactMicros().Cmp(fee) != 0 || want.TotalMinor != 920 || want.Lines[0].AmountMicros != 0 || want.Lines[1].AmountMicros != 0 {
			t.Errorf("the expected invoice is not what the rules say: %s", wantSummary(want))
		}
		parts, _ := pv.JSON["parts"].([]any)
		if len(parts) != 2 || get(parts[0].(map[string]any), "trial") != true || get(parts[1].(map[string]any), "trial") != false {
			t.Errorf("preview parts: %s", pv.Body)
		}

		// Another buyer chooses to stop with the trial; 14 days on, it is
		// canceled at the trial's end and may no longer call; it owes
		// nothing.
		cm.clock.Advance(time.Hour)
		start := cm.clock.Now()
		r = cm.subscribe(t, cm.other, map[string]any{"cancel_at_trial_end": true})
		other := r.str("id")
		if r.str("status") != "trialing" || r.JSON["cancel_at_trial_end"] != true {
			t.Fatalf("second buyer's subscription: %s", r.Body)
		}
		cm.call(t, cm.other)
		cm.clock.Advance(14*24*time.Hour + time.Minute)
		waitFor(t, "the stopped trial to end", 10*time.Second, func() bool {
			return cm.subscription(t, cm.other, other).str("status") == "canceled"
		})
		r = cm.subscription(t, cm.other, other)
		if stop := start.Add(14 * 24 * time.Hour).Format(time.RFC3339); r.str("canceled_at") != stop || r.str("trial_end") != stop {
			t.Errorf("stopped with its trial: %s, want canceled at %s", r.Body, stop)
		}
		pv = cm.api.with(cm.other).do("GET", "/api/v1/invoices/preview?subscription_id="+other, nil)
		if pv.Status != 200 || int64(pv.JSON["total_minor"].(float64)) != 0 {
			t.Errorf("a stay that ended with its trial: %d %s, want a total of 0", pv.Status, pv.Body)
		}
		waitFor(t, "the meter to refuse the stopped buyer", 10*time.Second, func() bool {
			_, e := rpc{t: t, url: cm.agent, key: cm.other}.call("message/send", msg03("still there?", nil))
			return e != nil
		})

		// One trial per org and listing: canceled and back, no trial.
		if r := cm.api.with(cm.buyer).do("DELETE", "/api/v1/subscriptions/"+sub, nil); r.Status != 200 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		r = cm.api.with(cm.buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": cm.listing, "cancel_at_trial_end": true})
		if r.Status != 422 || strings.Join(r.errorFields(), " ") != "cancel_at_trial_end:no_trial" {
			t.Errorf("stop with a trial one does not get: %d %s", r.Status, r.Body)
		}
		r = cm.subscribe(t, cm.buyer, map[string]any{})
		if r.str("status") != "active" || r.JSON["trial_end"] != nil {
			t.Errorf("second subscription of the same org: %s, want active without a trial", r.Body)
		}
		// Trial choices are for trials only.
		if r := cm.api.with(cm.buyer).do("PATCH", "/api/v1/subscriptions/"+r.str("id"), map[string]any{"cancel_at_trial_end": true}); r.Status != 409 || r.code() != "trial_over" {
			t.Errorf("choosing to stop without a trial: %d %s", r.Status, r.Body)
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// stripeEnv is the marketplace's Stripe settings, on the recorder.
func stripeEnv(rec *stripeRecorder) map[string]string {
	return map[string]string{
		"AGENTMARKET_STRIPE_SECRET_KEY":     "sk_test_123",
		"AGENTMARKET_STRIPE_API_BASE":       rec.srv.URL,
		"AGENTMARKET_STRIPE_WEBHOOK_SECRET": webhookSecret,
	}
}

// callLines renders Stripe calls as "METHOD path key" lines, with the
// parameters named in show.
func callLines(calls []stripeCall, show ...string) []string {
	var out []string
	for _, c := range calls {
		line := c.Method + " " + c.Path + " " + c.Key
		for _, k := range show {
			if vs, ok := c.Form[k]; ok {
				line += " " + k + "=" + strings.Join(vs, ",")
			}
		}
		out = append(out, line)
	}
	return out
}

func wantLines(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: Stripe calls\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestTrialsOnStripe (issue 14, item 1, with Stripe on stripe-mock): the
// subscription is created with trial_end (and its billing cycle anchored
// on the month after it); the buyer's choice to stop with the trial sets
// and clears cancel_at, each change its own idempotent call; the trial's
// own invoice being paid does not end it; the trial used up ends it at
// Stripe (trial_end=now), once; and when the buyer cancels, only the usage
// after the trial is reported before the subscription is canceled.
func TestTrialsOnStripe(t *testing.T) {
	rec := newStripeRecorder(t)
	cm := newCommerceMarket(t, stripeEnv(rec), commercePricing)
	rec.take()
	sub := cm.subscribe(t, cm.buyer, map[string]any{}).str("id")
	trialEnd := commerceT0.Add(14 * 24 * time.Hour).Unix()
	calls := callLines(rec.take(), "trial_end", "billing_cycle_anchor", "cancel_at")
	if len(calls) != 8 {
		t.Fatalf("subscribe: %d Stripe calls, want 8 (product, 5 prices, customer, subscription):\n%s", len(calls), strings.Join(calls, "\n"))
	}
	wantLines(t, "subscribe", calls[6:],
		"POST /v1/customers am1/org/"+cm.buyerOrg+"/customer",
		fmt.Sprintf("POST /v1/subscriptions am1/contract/%s/subscription trial_end=%d billing_cycle_anchor=%d", sub, trialEnd,
			time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()))

	patch := func(v bool) {
		t.Helper()
		r := cm.api.with(cm.buyer).do("PATCH", "/api/v1/subscriptions/"+sub, map[string]any{"cancel_at_trial_end": v})
		if r.Status != 200 || r.JSON["cancel_at_trial_end"] != v {
			t.Fatalf("PATCH cancel_at_trial_end=%v: %d %s", v, r.Status, r.Body)
		}
	}
	patch(true)
	cm.clock.Advance(time.Second)
	patch(false)
	patch(false) // no change: no call
	t0 := commerceT0.UnixNano()
	wantLines(t, "the buyer's choice", callLines(rec.take(), "cancel_at"),
		fmt.Sprintf("POST /v1/subscriptions/sub_test_1 am1/contract/%s/cancel-at/%d/%d cancel_at=%d", sub, trialEnd, t0, trialEnd),
		fmt.Sprintf("POST /v1/subscriptions/sub_test_1 am1/contract/%s/cancel-at/none/%d cancel_at=", sub, t0+int64(time.Second)))

	// Stripe's invoice of the trial (of nothing) is paid: still trialing.
	payload, sig := signedEvent("evt_trial_invoice", "invoice.paid", "sub_test_1", cm.clock.Now())
	if r := cm.api.webhook(payload, sig); r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	if s := cm.subscription(t, cm.buyer, sub).str("status"); s != "trialing" {
		t.Fatalf("after the trial's invoice was paid: %s", s)
	}

	// Two calls use the trial's 30 tokens up.
	cm.clock.Advance(time.Minute)
	cm.call(t, cm.buyer)
	cm.clock.Advance(time.Minute)
	crossing := cm.clock.Now()
	cm.call(t, cm.buyer)
	cm.clock.Advance(time.Minute)
	waitFor(t, "the trial to end", 10*time.Second, func() bool { return cm.subscription(t, cm.buyer, sub).str("status") == "active" })
	if got := cm.subscription(t, cm.buyer, sub).str("trial_end"); got != crossing.Add(time.Millisecond).Format(time.RFC3339Nano) {
		t.Errorf("trial ended at %s, want right after %s", got, crossing)
	}
	time.Sleep(600 * time.Millisecond) // more sweeps: nothing more to tell Stripe
	wantLines(t, "the trial used up", callLines(rec.take(), "trial_end", "proration_behavior"),
		fmt.Sprintf("POST /v1/subscriptions/sub_test_1 am1/contract/%s/trial-end trial_end=now proration_behavior=create_prorations", sub))

	// A paid call, then the buyer cancels: only that call's usage is
	// reported (one report per kind), then the subscription is canceled.
	cm.clock.Advance(time.Minute)
	cm.call(t, cm.buyer)
	cm.clock.Advance(time.Minute)
	if r := cm.api.with(cm.buyer).do("DELETE", "/api/v1/subscriptions/"+sub, nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	got := callLines(rec.take(), "quantity")
	for i := range got {
		got[i] = got[i][:strings.Index(got[i], " am1/")] + got[i][strings.LastIndex(got[i], " "):]
	}
	wantLines(t, "cancel", got,
		"POST /v1/subscription_items/si_test_1/usage_records quantity=9",
		"POST /v1/subscription_items/si_test_2/usage_records quantity=13",
		"POST /v1/subscription_items/si_test_3/usage_records quantity=91",
		"POST /v1/subscription_items/si_test_4/usage_records quantity=1",
		"DELETE /v1/subscriptions/sub_test_1 am1/contract/"+sub+"/cancel")
}

// offerPricing is a private offer's plan: a $1 fee, 1 micro an input
// token, 2 an output token, and $20 a month at least.
var offerPricing = map[string]any{"currency": "usd", "monthly_fee_micros": 1_000_000, "input_tokens_per_million_micros": 1_000_000,
	"output_tokens_per_million_micros": 2_000_000, "min_commit_micros": 20_000_000}

func (cm *commerceMarket) offer(t *testing.T, buyerOrg string, pricing map[string]any, expires time.Time) string {
	t.Helper()
	r := cm.api.with(cm.seller).do("POST", "/api/v1/listings/"+cm.listing+"/offers", map[string]any{"buyer_org_id": buyerOrg,
		"pricing": pricing, "expires_at": expires.Format(time.RFC3339)})
	if r.Status != 201 || r.str("status") != "open" {
		t.Fatalf("offer: %d %s", r.Status, r.Body)
	}
	return r.str("id")
}

// TestPrivateOffers (issue 14, item 2), without Stripe, on both storage
// set-ups: a seller offers one buyer its own plan; nobody else sees or can
// accept it, and the listing's public plan is unchanged for them; the
// buyer accepts it once; the meter prices calls at the offer's rates; the
// invoice preview charges the offer's fee and what the month falls short
// of its minimum commitment, to the micro; expired and withdrawn offers
// cannot be accepted.
func TestPrivateOffers(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, map[string]any{"currency": "usd", "monthly_fee_micros": 10_000_000,
			"input_tokens_per_million_micros": 3_000_000})
		otherOrg := cm.api.with(cm.other).do("GET", "/api/v1/org", nil).str("id")
		id := cm.offer(t, cm.buyerOrg, offerPricing, commerceT0.Add(30*24*time.Hour))

		// Invisible to others.
		if r := cm.api.with(cm.other).do("GET", "/api/v1/offers", nil); r.Status != 200 || len(r.JSON["items"].([]any)) != 0 {
			t.Errorf("another buyer's offers: %d %s", r.Status, r.Body)
		}
		for _, path := range []string{"/api/v1/offers/" + id} {
			if r := cm.api.with(cm.other).do("GET", path, nil); r.Status != 404 {
				t.Errorf("another buyer GET %s: %d %s", path, r.Status, r.Body)
			}
		}
		if r := cm.api.with(cm.other).do("POST", "/api/v1/offers/"+id+"/accept", nil); r.Status != 404 {
			t.Errorf("another buyer accepts: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.other).do("GET", "/api/v1/listings/"+cm.listing, nil); get(r.JSON, "pricing", "monthly_fee_micros") != float64(10_000_000) ||
			get(r.JSON, "pricing", "version") != float64(1) {
			t.Errorf("the listing as another buyer sees it: %s", r.Body)
		}
		if r := cm.api.with(cm.seller).do("GET", "/api/v1/offers?made=true", nil); len(r.JSON["items"].([]any)) != 1 {
			t.Errorf("the seller's offers: %s", r.Body)
		}

		// The buyer sees and accepts it, once.
		r := cm.api.with(cm.buyer).do("GET", "/api/v1/offers", nil)
		items, _ := r.JSON["items"].([]any)
		if len(items) != 1 || get(items[0].(map[string]any), "pricing", "min_commit_micros") != float64(20_000_000) {
			t.Fatalf("the buyer's offers: %s", r.Body)
		}
		r = cm.api.with(cm.buyer).do("POST", "/api/v1/offers/"+id+"/accept", nil)
		if r.Status != 201 || r.str("offer_id") != id || r.JSON["plan_version"] != float64(2) || r.str("status") != "active" {
			t.Fatalf("accept: %d %s", r.Status, r.Body)
		}
		sub := r.str("id")
		cm.agent = r.str("endpoint")
		if r := cm.api.with(cm.buyer).do("POST", "/api/v1/offers/"+id+"/accept", nil); r.Status != 409 || r.code() != "offer_not_open" {
			t.Errorf("accept again: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/offers/"+id, nil); r.str("status") != "accepted" || r.str("subscription_id") != sub {
			t.Errorf("the accepted offer: %s", r.Body)
		}

		// One call at the offer's rates: 9 input tokens × 1 + 13 output × 2.
		cm.clock.Advance(time.Minute)
		cm.call(t, cm.buyer)
		rows := cm.api.with(cm.buyer).do("GET", "/api/v1/usage?group_by=listing&from=2026-11-01&to=2026-12-01", nil)
		if items, _ := rows.JSON["items"].([]any); len(items) != 1 || items[0].(map[string]any)["cost_micros"] != float64(35) {
			t.Errorf("usage at the offer's rates: %s", rows.Body)
		}

		// The preview: the offer's fee, usage and the commitment's shortfall.
		now := cm.clock.Now()
		month := billing.MonthOf(now)
		pv := cm.api.with(cm.buyer).do("GET", "/api/v1/invoices/preview?subscription_id="+sub, nil)
		plan, err := listings.ParsePricing([]byte(mustJSON(offerPricing)))
		if err != nil {
			t.Fatal(err)
		}
		plan.Version = 2
		want, err := billing.PreviewParts(month, []billing.Part{{Plan: plan, Span: billing.Period{Start: commerceT0, End: month.End},
			Usage: cm.usage(t, cm.buyer, month.Start, now.Add(time.Millisecond))}}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := invoiceSummary(pv); got != wantSummary(want) {
			t.Errorf("preview\n  %s\nwant\n  %s", got, wantSummary(want))
		}
		// By hand: $20 for 2,383,200 of 2,592,000 seconds is 18,388,888 +
		// 8/9 micros, more than the fee and the usage: 1,839 cents.
		if want.TotalMinor != 1839 || want.Lines[5].Kind != billing.LineCommitment {
			t.Errorf("the expected invoice is not what the rules say: %s", wantSummary(want))
		}

		// Expired, and withdrawn, offers cannot be accepted.
		soon := cm.offer(t, otherOrg, offerPricing, cm.clock.Now().Add(24*time.Hour))
		later := cm.offer(t, otherOrg, offerPricing, cm.clock.Now().Add(10*24*time.Hour))
		cm.clock.Advance(2 * 24 * time.Hour)
		if r := cm.api.with(cm.other).do("POST", "/api/v1/offers/"+soon+"/accept", nil); r.Status != 409 || r.code() != "offer_expired" {
			t.Errorf("accept an expired offer: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.seller).do("DELETE", "/api/v1/offers/"+later, nil); r.Status != 200 || r.str("status") != "withdrawn" {
			t.Fatalf("withdraw: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.other).do("POST", "/api/v1/offers/"+later+"/accept", nil); r.Status != 409 || r.code() != "offer_not_open" {
			t.Errorf("accept a withdrawn offer: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.seller).do("POST", "/api/v1/listings/"+cm.listing+"/offers", map[string]any{"buyer_org_id": "org_nobody",
			"pricing": offerPricing, "expires_at": cm.clock.Now().Add(time.Hour).Format(time.RFC3339)}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "buyer_org_id:unknown" {
			t.Errorf("an offer to no org: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.buyer).do("POST", "/api/v1/listings/"+cm.listing+"/offers", map[string]any{"buyer_org_id": otherOrg,
			"pricing": offerPricing, "expires_at": cm.clock.Now().Add(time.Hour).Format(time.RFC3339)}); r.Status != 403 {
			t.Errorf("a buyer makes an offer on another's listing: %d %s", r.Status, r.Body)
		}
	})
}

// TestPrivateOffersOnStripe (issue 14, item 2, with Stripe on
// stripe-mock): accepting an offer creates the private plan version's
// product prices and a subscription on them; once the month is over, its
// shortfall of the minimum commitment goes to Stripe once, as an invoice
// item of exactly the invoice's commitment line.
func TestPrivateOffersOnStripe(t *testing.T) {
	rec := newStripeRecorder(t)
	cm := newCommerceMarket(t, stripeEnv(rec), map[string]any{"currency": "usd", "monthly_fee_micros": 10_000_000})
	id := cm.offer(t, cm.buyerOrg, offerPricing, commerceT0.Add(30*24*time.Hour))
	rec.take()
	r := cm.api.with(cm.buyer).do("POST", "/api/v1/offers/"+id+"/accept", nil)
	if r.Status != 201 {
		t.Fatalf("accept: %d %s", r.Status, r.Body)
	}
	sub := r.str("id")
	l := cm.listing
	wantLines(t, "accept", callLines(rec.take(), "unit_amount", "unit_amount_decimal", "items[0][price]"),
		"POST /v1/products am1/listing/"+l+"/plan/2/product",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/flat_fee unit_amount=100",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/input_tokens unit_amount_decimal=0.0001",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/output_tokens unit_amount_decimal=0.0002",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/compute unit_amount=0",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/tasks unit_amount=0",
		"POST /v1/customers am1/org/"+cm.buyerOrg+"/customer",
		"POST /v1/subscriptions am1/contract/"+sub+"/subscription items[0][price]=price_test_1")

	// The month ends with no usage: the commitment less the fee, from
	// 10:00 on 3 November.
	cm.clock.Advance(28*24*time.Hour - 10*time.Hour + 5*time.Minute) // 1 December, 00:05
	waitFor(t, "the commitment charge", 10*time.Second, func() bool {
		for _, c := range rec.take() {
			if c.Path == "/v1/invoiceitems" {
				rec.mu.Lock()
				rec.calls = append([]stripeCall{c}, rec.calls...)
				rec.mu.Unlock()
				return true
			}
		}
		return false
	})
	time.Sleep(600 * time.Millisecond) // more sweeps: charged once
	var items []string
	for _, c := range rec.take() {
		if c.Path == "/v1/invoiceitems" {
			items = append(items, fmt.Sprintf("%s amount=%s currency=%s subscription=%s", c.Key, c.Form.Get("amount"), c.Form.Get("currency"),
				c.Form.Get("subscription")))
		}
	}
	nov := billing.MonthOf(commerceT0)
	plan, _ := listings.ParsePricing([]byte(mustJSON(offerPricing)))
	inv, err := billing.RateParts(nov, []billing.Part{{Plan: plan, Span: billing.Period{Start: commerceT0, End: nov.End}}})
	if err != nil {
		t.Fatal(err)
	}
	// $20 − $1 for 2,383,200 of 2,592,000 seconds: 17,469,444.4… micros.
	if inv.Lines[5].AmountMinor != 1747 {
		t.Errorf("the commitment line %+v, want 1,747 cents", inv.Lines[5])
	}
	wantLines(t, "month end", items, fmt.Sprintf("am1/contract/%s/commitment/%d amount=%d currency=usd subscription=sub_test_1", sub, nov.Start.Unix(),
		inv.Lines[5].AmountMinor))
}

// changePricing is version 1 of a plan, and changedPricing version 2:
// the fee, the input and the output prices double.
var (
	changePricing = map[string]any{"currency": "usd", "monthly_fee_micros": 10_000_000, "input_tokens_per_million_micros": 3_000_000,
		"output_tokens_per_million_micros": 15_000_000}
	changedPricing = map[string]any{"currency": "usd", "monthly_fee_micros": 20_000_000, "input_tokens_per_million_micros": 6_000_000,
		"output_tokens_per_million_micros": 30_000_000}
)

func planOf(t *testing.T, pricing map[string]any, version int) listings.Plan {
	t.Helper()
	p, err := listings.ParsePricing([]byte(mustJSON(pricing)))
	if err != nil {
		t.Fatal(err)
	}
	p.Version = version
	return p
}

// TestPlanChanges (issue 14, item 3), without Stripe, on both storage
// set-ups: a buyer moves to the seller's new plan version mid-month; the
// preview has two parts, each plan's fee prorated by the second and each
// call rated by the plan in force when it was made, one total to the
// micro; a second change that month is refused; a buyer accepting a
// private offer while subscribed changes plan; a cancellation at the end
// of the period keeps the calls working until then and ends the contract
// at that instant.
func TestPlanChanges(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, changePricing)
		sub := cm.subscribe(t, cm.buyer, map[string]any{}).str("id")
		cm.clock.Advance(time.Minute)
		cm.call(t, cm.buyer) // at version 1

		if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"pricing": changedPricing}); r.Status != 200 ||
			get(r.JSON, "pricing", "version") != float64(2) {
			t.Fatalf("new prices: %d %s", r.Status, r.Body)
		}
		path := "/api/v1/subscriptions/" + sub + "/plan"
		if r := cm.api.with(cm.buyer).do("POST", path, map[string]any{"plan_version": 1}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "plan_version:not_current" {
			t.Errorf("to the old version: %d %s", r.Status, r.Body)
		}
		cm.clock.Advance(time.Hour - time.Minute + 500*time.Millisecond) // 11:00:00.5
		change := cm.clock.Now()
		r := cm.api.with(cm.buyer).do("POST", path, map[string]any{"plan_version": 2})
		if r.Status != 200 || r.JSON["plan_version"] != float64(2) {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		time.Sleep(2500 * time.Millisecond) // the meter's contract cache
		cm.clock.Advance(time.Hour)
		cm.call(t, cm.buyer) // at version 2
		if r := cm.api.with(cm.buyer).do("POST", path, map[string]any{"plan_version": 2}); r.Status != 409 || r.code() != "same_plan" {
			t.Errorf("to the plan it has: %d %s", r.Status, r.Body)
		}

		now := cm.clock.Now()
		month := billing.MonthOf(now)
		before, after := cm.usage(t, cm.buyer, month.Start, change), cm.usage(t, cm.buyer, change, now.Add(time.Millisecond))
		if before.InputTokens != 9 || after.InputTokens != 9 {
			t.Fatalf("usage before %+v and after %+v the change", before, after)
		}
		want, err := billing.PreviewParts(month, []billing.Part{
			{Plan: planOf(t, changePricing, 1), Span: billing.Period{Start: commerceT0, End: change}, Usage: before},
			{Plan: planOf(t, changedPricing, 2), Span: billing.Period{Start: change, End: month.End}, Usage: after},
		}, now)
		if err != nil {
			t.Fatal(err)
		}
		pv := cm.api.with(cm.buyer).do("GET", "/api/v1/invoices/preview?subscription_id="+sub, nil)
		if got := invoiceSummary(pv); got != wantSummary(want) {
			t.Errorf("preview\n  %s\nwant\n  %s", got, wantSummary(want))
		}
		// By hand: $10 for 3,600 s and $20 for 2,379,600 s of 2,592,000:
		// 13,888 + 8/9 and 18,361,111 + 1/9, so 18,375,000 of fee; the calls
		// 9 × 3 + 13 × 15 = 222 and 9 × 6 + 13 × 30 = 444: 1,838 cents.
		if want.TotalMinor != 1838 || want.SubtotalMicros != 18_375_666 || want.Lines[0].Used != 3600 || want.Lines[5].Used != 2_379_600 {
			t.Errorf("the expected invoice is not what the rules say: %s", wantSummary(want))
		}

		// Another buyer subscribed at version 2 accepts a private offer:
		// its plan changes.
		other := cm.subscribe(t, cm.other, map[string]any{}).str("id")
		otherOrg := cm.api.with(cm.other).do("GET", "/api/v1/org", nil).str("id")
		offer := cm.offer(t, otherOrg, offerPricing, now.Add(24*time.Hour))
		r = cm.api.with(cm.other).do("POST", "/api/v1/offers/"+offer+"/accept", nil)
		if r.Status != 200 || r.str("id") != other || r.JSON["plan_version"] != float64(3) {
			t.Errorf("accepting an offer while subscribed: %d %s", r.Status, r.Body)
		}

		// A second change this month is refused; the end of the period is not.
		if r := cm.api.with(cm.other).do("POST", "/api/v1/subscriptions/"+other+"/plan", map[string]any{"plan_version": 2}); r.Status != 409 ||
			r.code() != "plan_changed_this_period" {
			t.Errorf("a second change: %d %s", r.Status, r.Body)
		}
		r = cm.api.with(cm.buyer).do("DELETE", "/api/v1/subscriptions/"+sub+"?at=period_end", nil)
		if r.Status != 200 || r.str("cancel_at") != month.End.Format(time.RFC3339) || r.str("status") != "active" {
			t.Fatalf("cancel at the period's end: %d %s", r.Status, r.Body)
		}
		cm.clock.Advance(time.Minute)
		cm.call(t, cm.buyer) // still works
		cm.clock.Advance(month.End.Sub(cm.clock.Now()) + time.Minute)
		waitFor(t, "the cancellation at the period's end", 10*time.Second, func() bool {
			return cm.subscription(t, cm.buyer, sub).str("status") == "canceled"
		})
		if got := cm.subscription(t, cm.buyer, sub).str("canceled_at"); got != month.End.Format(time.RFC3339) {
			t.Errorf("canceled at %s, want the period's end %s", got, month.End.Format(time.RFC3339))
		}
	})
}

// TestPlanChangesOnStripe (issue 14, item 3, with Stripe on stripe-mock):
// the change reports the usage until then to the old items, makes the new
// version's prices and replaces the subscription's items with proration
// from the change's second, once; a cancellation at the period's end sets
// cancel_at; at that end, the usage since the change is reported to the
// new items and no cancel is sent (Stripe ended it itself).
func TestPlanChangesOnStripe(t *testing.T) {
	rec := newStripeRecorder(t)
	cm := newCommerceMarket(t, stripeEnv(rec), changePricing)
	sub := cm.subscribe(t, cm.buyer, map[string]any{}).str("id")
	cm.clock.Advance(time.Minute)
	cm.call(t, cm.buyer)
	if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"pricing": changedPricing}); r.Status != 200 {
		t.Fatalf("new prices: %d %s", r.Status, r.Body)
	}
	rec.take()
	cm.clock.Advance(time.Hour - time.Minute + 500*time.Millisecond)
	change := cm.clock.Now()
	if r := cm.api.with(cm.buyer).do("POST", "/api/v1/subscriptions/"+sub+"/plan", map[string]any{"plan_version": 2}); r.Status != 200 {
		t.Fatalf("change: %d %s", r.Status, r.Body)
	}
	got := callLines(rec.take(), "quantity", "proration_date", "items[0][id]", "items[0][deleted]", "items[5][price]")
	for i, l := range got { // usage keys carry the window; the change's is what matters
		if strings.Contains(l, "/usage/") {
			got[i] = l[:strings.Index(l, " am1/")] + l[strings.LastIndex(l, " "):]
		}
	}
	l := cm.listing
	wantLines(t, "the plan change", got,
		"POST /v1/subscription_items/si_test_1/usage_records quantity=9",
		"POST /v1/subscription_items/si_test_2/usage_records quantity=13",
		"POST /v1/subscription_items/si_test_3/usage_records quantity=91",
		"POST /v1/subscription_items/si_test_4/usage_records quantity=1",
		"POST /v1/products am1/listing/"+l+"/plan/2/product",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/flat_fee",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/input_tokens",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/output_tokens",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/compute",
		"POST /v1/prices am1/listing/"+l+"/plan/2/price/tasks",
		fmt.Sprintf("POST /v1/subscriptions/sub_test_1 am1/contract/%s/plan-change/1 proration_date=%d items[0][id]=si_test_0 items[0][deleted]=true items[5][price]=price_test_6",
			sub, change.Unix()))

	time.Sleep(2500 * time.Millisecond) // the meter's contract cache
	cm.clock.Advance(time.Hour)
	cm.call(t, cm.buyer)
	month := billing.MonthOf(cm.clock.Now())
	if r := cm.api.with(cm.buyer).do("DELETE", "/api/v1/subscriptions/"+sub+"?at=period_end", nil); r.Status != 200 {
		t.Fatalf("cancel at the period's end: %d %s", r.Status, r.Body)
	}
	wantLines(t, "cancel at the period's end", callLines(rec.take(), "cancel_at"),
		fmt.Sprintf("POST /v1/subscriptions/sub_test_1 am1/contract/%s/cancel-at/%d/%d cancel_at=%d", sub, month.End.Unix(), cm.clock.Now().UnixNano(),
			month.End.Unix()))
	cm.clock.Advance(month.End.Sub(cm.clock.Now()) + time.Minute)
	waitFor(t, "the end of the period", 10*time.Second, func() bool { return cm.subscription(t, cm.buyer, sub).str("status") == "canceled" })
	got = callLines(rec.take(), "quantity")
	for i, l := range got {
		got[i] = l[:strings.Index(l, " am1/")] + l[strings.LastIndex(l, " "):]
	}
	wantLines(t, "the end of the period", got,
		"POST /v1/subscription_items/si_test_6/usage_records quantity=9",
		"POST /v1/subscription_items/si_test_7/usage_records quantity=13",
		"POST /v1/subscription_items/si_test_8/usage_records quantity=91",
		"POST /v1/subscription_items/si_test_9/usage_records quantity=1")
}

// alertHook is an org's alert webhook: it answers 500 to its first
// request, then 200, and records every request.
type alertHook struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []hookRequest
}

type hookRequest struct {
	token, contentType, deliveryID string
	body                           contracts.AlertBody
	raw                            []byte
	signature                      string
}

func newAlertHook(t *testing.T) *alertHook {
	h := &alertHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b contracts.AlertBody
		json.Unmarshal(raw, &b)
		h.mu.Lock()
		h.reqs = append(h.reqs, hookRequest{r.Header.Get("X-A2A-Notification-Token"), r.Header.Get("Content-Type"), r.Header.Get("X-AgentMarket-Delivery-Id"), b,
			raw, r.Header.Get("AgentMarket-Signature")})
		first := len(h.reqs) == 1
		h.mu.Unlock()
		if first {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *alertHook) received() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.reqs...)
}

// alerted is the org's alerts this month, as "budget_kind percent".
func (cm *commerceMarket) alerted(t *testing.T, key string) []string {
	r := cm.api.with(key).do("GET", "/api/v1/alerts", nil)
	if r.Status != 200 {
		t.Fatalf("alerts: %d %s", r.Status, r.Body)
	}
	var out []string
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		out = append(out, fmt.Sprintf("%s %v%% %v/%v", m["budget_kind"], m["threshold_percent"], m["spent_micros"], m["monthly_budget_micros"]))
	}
	return out
}

// TestSpendAlerts (issue 14, item 4), on both storage set-ups: an org sets
// its thresholds and its alert webhook; a key's budget reaches 50% then
// 100% through metered calls; each threshold is alerted once, listed by
// the API, and POSTed to the webhook by the meter's push delivery outbox
// with the org's token, retried after the webhook's first failure; bad
// webhook addresses are refused. (Alerts involve no payment provider: the
// same with Stripe.)
func TestSpendAlerts(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		env := map[string]string{"AGENTMARKET_PUSH_RETRY_BASE": "100ms"}
		for k, v := range e.env {
			env[k] = v
		}
		pricing := map[string]any{}
		for k, v := range commercePricing {
			if !strings.HasPrefix(k, "trial") {
				pricing[k] = v
			}
		}
		cm := newCommerceMarket(t, env, pricing)
		hook := newAlertHook(t)
		cm.subscribe(t, cm.buyer, map[string]any{})
		r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "orchestrator", "role": "buyer", "monthly_budget_micros": 2_000})
		if r.Status != 201 {
			t.Fatalf("key: %d %s", r.Status, r.Body)
		}
		key, keyID := r.str("key"), r.str("id")

		if r := cm.api.with(cm.buyer).do("PUT", "/api/v1/alerts/settings", map[string]any{"webhook": map[string]any{"url": "https://10.0.0.1/alerts"}}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "webhook.url:refused" {
			t.Errorf("a private webhook: %d %s", r.Status, r.Body)
		}
		r = cm.api.with(cm.buyer).do("PUT", "/api/v1/alerts/settings", map[string]any{"thresholds": []int{100, 50},
			"webhook": map[string]any{"url": hook.srv.URL + "/alerts", "token": "tok-1"}})
		if r.Status != 200 || fmt.Sprint(r.JSON["thresholds"]) != "[50 100]" || r.str("webhook_url") != hook.srv.URL+"/alerts" {
			t.Fatalf("settings: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/alerts/settings", nil); strings.Contains(string(r.Body), "tok-1") {
			t.Errorf("the token is shown back: %s", r.Body)
		}

		// 1,231 micros a call (27 + 195 + 9 + 1,000), a budget of 2,000.
		cm.clock.Advance(time.Minute)
		cm.call(t, key)
		waitFor(t, "the 50% alert", 10*time.Second, func() bool { return len(cm.alerted(t, cm.buyer)) == 1 })
		cm.clock.Advance(time.Minute)
		cm.call(t, key)
		waitFor(t, "the 100% alert", 10*time.Second, func() bool { return len(cm.alerted(t, cm.buyer)) == 2 })
		waitFor(t, "the webhook's deliveries", 15*time.Second, func() bool {
			cm.clock.Advance(time.Second) // the retry's backoff runs on the clock
			return len(hook.received()) >= 3
		})
		time.Sleep(time.Second) // more sweeps and deliveries: none repeats
		if got, want := strings.Join(cm.alerted(t, cm.buyer), "; "), "api_key 100% 2462/2000; api_key 50% 1231/2000"; got != want {
			t.Errorf("alerts: %s, want %s", got, want)
		}
		reqs := hook.received()
		if len(reqs) != 3 {
			t.Fatalf("the webhook got %d requests, want 3 (the first one twice): %+v", len(reqs), reqs)
		}
		if reqs[0].deliveryID != reqs[1].deliveryID || reqs[1].deliveryID == reqs[2].deliveryID {
			t.Errorf("delivery ids %s %s %s: the first retried, then another", reqs[0].deliveryID, reqs[1].deliveryID, reqs[2].deliveryID)
		}
		// Signed like push deliveries: verified as a buyer would, against
		// the marketplace's key set.
		v := &pushverify.Verifier{JWKSURL: cm.m.URL + "/api/v1/push/jwks", Now: cm.clock.Now}
		for i, req := range reqs {
			if d, err := v.Verify(context.Background(), req.signature, req.raw); err != nil || d.DeliveryID != req.deliveryID {
				t.Errorf("alert %d's signature: %+v, %v", i, d, err)
			}
			if _, err := v.Verify(context.Background(), req.signature, append(bytes.Clone(req.raw), ' ')); !errors.Is(err, pushverify.ErrBadSig) {
				t.Errorf("alert %d with a byte added: %v, want ErrBadSig", i, err)
			}
		}
		for i, req := range reqs {
			wantPct := []int{50, 50, 100}[i]
			if req.token != "tok-1" || req.contentType != "application/json" || req.body.Type != "spend_alert" || req.body.BudgetID != keyID ||
				req.body.Percent != wantPct || req.body.BudgetName != "orchestrator" || req.body.BudgetMicros != 2000 {
				t.Errorf("request %d: %+v", i, req)
			}
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/push-deliveries?status=delivered", nil); len(r.JSON["items"].([]any)) != 2 {
			t.Errorf("the outbox's delivered deliveries: %s", r.Body)
		}
	})
}

// byTag is the usage API's totals grouped by a tag key, as "value=cost".
func (cm *commerceMarket) byTag(t *testing.T, key, tag, accept string) (string, response) {
	t.Helper()
	r := cm.api.with(key).do("GET", "/api/v1/usage?group_by=tag:"+tag+"&from=2026-11-01&to=2026-12-01", nil)
	if r.Status != 200 {
		t.Fatalf("usage by tag %s: %d %s", tag, r.Status, r.Body)
	}
	var out []string
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		out = append(out, fmt.Sprintf("%s=%v/%v", m["key"], m["calls"], m["cost_micros"]))
	}
	return strings.Join(out, " "), r
}

// TestCostAllocation (issue 14, item 5), on both storage set-ups: API keys
// and a subscription carry tags; every usage row carries, at call time,
// the subscription's tags under the key's (which win); the usage API groups
// by any tag key, usage without it under "" (untagged), in JSON and CSV;
// a change of the subscription's tags applies to later calls only; sellers
// cannot group their buyers' usage by tag.
func TestCostAllocation(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, changePricing)
		sub := cm.subscribe(t, cm.buyer, map[string]any{"tags": map[string]string{"env": "prod", "team": "platform"}}).str("id")
		key := func(name string, tags map[string]string) string {
			r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": name, "role": "buyer", "tags": tags})
			if r.Status != 201 {
				t.Fatalf("key: %d %s", r.Status, r.Body)
			}
			return r.str("key")
		}
		payments := key("payments", map[string]string{"team": "payments", "project": "kyc"})
		plain := key("plain", nil)
		if r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "bad", "tags": map[string]string{"Team": "x"}}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "tags:tag_key" {
			t.Errorf("a bad tag key: %d %s", r.Status, r.Body)
		}

		cm.clock.Advance(time.Minute)
		cm.call(t, payments) // team=payments (the key's), env=prod, project=kyc
		cm.clock.Advance(time.Minute)
		cm.call(t, plain) // team=platform, env=prod
		r := cm.api.with(cm.buyer).do("PATCH", "/api/v1/subscriptions/"+sub, map[string]any{"tags": map[string]string{"env": "staging"}})
		if r.Status != 200 || fmt.Sprint(r.JSON["tags"]) != "map[env:staging]" {
			t.Fatalf("new tags: %d %s", r.Status, r.Body)
		}
		time.Sleep(2500 * time.Millisecond) // the meter's contract cache
		cm.clock.Advance(time.Minute)
		cm.call(t, plain) // env=staging only

		// Grouping by a tag reads the rows, cm.call waited on the cells (by
		// listing): ClickHouse writes the cells only once the rows are in.
		// 222 micros a call (9 × 3 + 13 × 15).
		for tag, want := range map[string]string{
			"team":    "=1/222 payments=1/222 platform=1/222",
			"env":     "prod=2/444 staging=1/222",
			"project": "=2/444 kyc=1/222",
			"nowhere": "=3/666",
		} {
			if got, _ := cm.byTag(t, cm.buyer, tag, ""); got != want {
				t.Errorf("by tag %s: %s, want %s", tag, got, want)
			}
		}
		csvReq, _ := http.NewRequest("GET", cm.m.URL+"/api/v1/usage?group_by=tag:team&from=2026-11-01&to=2026-12-01", nil)
		csvReq.Header.Set("Authorization", "Bearer "+cm.buyer)
		csvReq.Header.Set("Accept", "text/csv")
		res, err := http.DefaultClient.Do(csvReq)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := "tag:team,calls,tasks,input_tokens,output_tokens,compute_ms,cost_micros,estimated_calls\n,1,1,9,13,91,222,0\npayments,1,1,9,13,91,222,0\nplatform,1,1,9,13,91,222,0\n"; string(body) != want {
			t.Errorf("CSV:\n%s\nwant\n%s", body, want)
		}
		r = cm.api.with(cm.seller).do("GET", "/api/v1/usage?scope=seller&group_by=tag:team", nil)
		if r.Status != 422 || strings.Join(r.errorFields(), " ") != "group_by:scope" {
			t.Errorf("a seller groups by its buyers' tags: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/usage?group_by=tag:Team", nil); r.Status != 422 {
			t.Errorf("a bad tag key in group_by: %d %s", r.Status, r.Body)
		}
	})
}
