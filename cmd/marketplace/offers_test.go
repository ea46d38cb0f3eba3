package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

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

		// The audit log: each offer's life, the acceptance in the request
		// of the subscription it made.
		seller := cm.api.with(cm.seller)
		if got := actions(auditEntries(t, seller, "?object=offer:"+id)); got != "offer.create offer.accept" {
			t.Errorf("the accepted offer's audit entries: %s", got)
		}
		if got := actions(auditEntries(t, seller, "?object=offer:"+later)); got != "offer.create offer.withdraw" {
			t.Errorf("the withdrawn offer's audit entries: %s", got)
		}
		op := cm.api.with(operatorKey(t, cm.m))
		accept, created := auditEntries(t, op, "?object=offer:"+id+"&action=offer.accept"), auditEntries(t, op, "?object=subscription:"+sub)
		if len(accept) != 1 || len(created) == 0 || accept[0]["request_id"] != created[0]["request_id"] || get(created[0], "after", "OfferID") != id ||
			get(accept[0], "before", "Status") != "open" || get(accept[0], "after", "Status") != "accepted" {
			t.Errorf("the acceptance %v and the subscription %v", accept, created)
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
