package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
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

// changePricing is version 1 of a plan, and changedPricing version 2:
// the fee, the input and the output prices double.
var (
	changePricing = map[string]any{"currency": "usd", "monthly_fee_micros": 10_000_000, "input_tokens_per_million_micros": 3_000_000,
		"output_tokens_per_million_micros": 15_000_000}
	changedPricing = map[string]any{"currency": "usd", "monthly_fee_micros": 20_000_000, "input_tokens_per_million_micros": 6_000_000,
		"output_tokens_per_million_micros": 30_000_000}
)
