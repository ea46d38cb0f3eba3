package stripe_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// testPlan has a price of each form: whole minor units (the fee, tasks),
// exact decimals (tokens), an inexact decimal (compute at 1 USD an hour is
// 0.0000277… cent a ms), with and without an allowance.
func testPlan() listings.Plan {
	return listings.Plan{
		Version:                      3,
		Currency:                     "usd",
		MonthlyFeeMicros:             49_000_000, // 4,900 cents
		InputTokensPerMillionMicros:  3_000_000,  // 0.0003 cent a token
		OutputTokensPerMillionMicros: 15_000_000, // 0.0015 cent a token
		ComputePerHourMicros:         1_000_000,  // 0.000027777778 cent a ms (rounded)
		PerTaskMicros:                10_000,     // 1 cent a task
		IncludedInputTokens:          1_000_000,
		IncludedComputeMs:            3_600_000,
		IncludedTasks:                100,
	}
}

func priceForm(kind billing.LineKind, extra ...map[string]string) map[string]string {
	base := map[string]string{
		"currency":                           "usd",
		"product":                            "am_lst_test",
		"metadata[agentmarket_listing_id]":   "lst_test",
		"metadata[agentmarket_plan_version]": "3",
		"metadata[agentmarket_line_kind]":    string(kind),
	}
	return merge(append([]map[string]string{base}, extra...)...)
}

var metered = map[string]string{
	"recurring[interval]":        "month",
	"recurring[usage_type]":      "metered",
	"recurring[aggregate_usage]": "sum",
}

func tiered(included, tier1Key, tier1Value string) map[string]string {
	return map[string]string{
		"billing_scheme":             "tiered",
		"tiers_mode":                 "graduated",
		"tiers[0][up_to]":            included,
		"tiers[0][unit_amount]":      "0",
		"tiers[1][up_to]":            "inf",
		"tiers[1][" + tier1Key + "]": tier1Value,
	}
}

// ensurePlanCalls are the calls EnsurePlan makes for testPlan.
var ensurePlanCalls = []want{
	{"POST", "/v1/products", "am1/listing/lst_test/plan/3/product", map[string]string{
		"id": "am_lst_test", "name": "Echo agent", "metadata[agentmarket_listing_id]": "lst_test"}, 0},
	{"POST", "/v1/prices", "am1/listing/lst_test/plan/3/price/flat_fee", priceForm(billing.LineFlatFee, map[string]string{
		"nickname": "Monthly fee, plan v3", "billing_scheme": "per_unit",
		"recurring[interval]": "month", "recurring[usage_type]": "licensed",
		"unit_amount": "4900"}), 0},
	{"POST", "/v1/prices", "am1/listing/lst_test/plan/3/price/input_tokens", priceForm(billing.LineInputTokens, metered,
		map[string]string{"nickname": "Input tokens, per token, plan v3"},
		tiered("1000000", "unit_amount_decimal", "0.0003")), 0},
	{"POST", "/v1/prices", "am1/listing/lst_test/plan/3/price/output_tokens", priceForm(billing.LineOutputTokens, metered,
		map[string]string{"nickname": "Output tokens, per token, plan v3",
			"billing_scheme": "per_unit", "unit_amount_decimal": "0.0015"}), 0},
	{"POST", "/v1/prices", "am1/listing/lst_test/plan/3/price/compute", priceForm(billing.LineCompute, metered,
		map[string]string{"nickname": "Compute, per millisecond, plan v3"},
		tiered("3600000", "unit_amount_decimal", "0.000027777778")), 0},
	{"POST", "/v1/prices", "am1/listing/lst_test/plan/3/price/tasks", priceForm(billing.LineTasks, metered,
		map[string]string{"nickname": "Tasks, per task, plan v3"},
		tiered("100", "unit_amount", "1")), 0},
}

var ensureCustomerCall = want{"POST", "/v1/customers", "am1/org/org_buyer/customer", map[string]string{
	"name": "Buyer Ltd", "email": "billing@buyer.example", "metadata[agentmarket_org_id]": "org_buyer"}, 0}

// subscribeForm is the subscription of ctr_test to prices, items in
// LineKinds order.
func subscribeForm(prices billing.PlanPrices, extra map[string]string) map[string]string {
	f := map[string]string{
		"customer":                                  "cus_test",
		"metadata[agentmarket_contract_id]":         "ctr_test",
		"items[0][price]":                           prices.FlatPriceID,
		"items[0][quantity]":                        "1",
		"items[0][metadata][agentmarket_line_kind]": "flat_fee",
	}
	for i, k := range billing.MeteredLineKinds {
		n := string(rune('1' + i))
		f["items["+n+"][price]"] = prices.MeteredPriceIDs[k]
		f["items["+n+"][metadata][agentmarket_line_kind]"] = string(k)
	}
	return merge(f, extra)
}

// TestLifecycleOnStripeMock runs a contract's whole life against
// stripe-mock and checks every request: stripe-mock accepting each one
// proves its shape (it refuses unknown parameters), the recorder proves
// the parameters, the order and the idempotency keys.
func TestLifecycleOnStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	ctx := context.Background()
	var all []call
	take := func() []call {
		c := rec.take()
		all = append(all, c...)
		return c
	}
	t.Cleanup(func() {
		if testing.Verbose() {
			for i, c := range all {
				t.Logf("call %d: %s", i+1, c)
			}
		}
	})

	prices, err := p.EnsurePlan(ctx, "lst_test", "Echo agent", testPlan())
	if err != nil {
		t.Fatalf("EnsurePlan: %v", err)
	}
	checkCalls(t, take(), ensurePlanCalls)
	if prices.ProductID != "am_lst_test" {
		t.Errorf("product %q, want am_lst_test", prices.ProductID)
	}
	ids := map[string]bool{prices.FlatPriceID: true}
	for _, k := range billing.MeteredLineKinds {
		ids[prices.MeteredPriceIDs[k]] = true
	}
	if len(ids) != 5 || ids[""] {
		t.Errorf("want 5 distinct price ids, got %+v", prices)
	}

	cus, err := p.EnsureCustomer(ctx, "org_buyer", "Buyer Ltd", "billing@buyer.example")
	if err != nil {
		t.Fatalf("EnsureCustomer: %v", err)
	}
	checkCalls(t, take(), []want{ensureCustomerCall})
	if !strings.HasPrefix(cus.ID, "cus_") {
		t.Errorf("customer id %q", cus.ID)
	}

	anchor := time.Date(2026, time.May, 1, 0, 0, 0, 0, time.UTC)
	refs, err := p.Subscribe(ctx, billing.SubscribeInput{
		ContractID: "ctr_test", CustomerID: "cus_test", Prices: prices,
		BillingCycleAnchor: anchor, ConnectedAccountID: "acct_seller", PlatformFeePercent: 12.5,
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	checkCalls(t, take(), []want{{"POST", "/v1/subscriptions", "am1/contract/ctr_test/subscription",
		subscribeForm(prices, map[string]string{
			"billing_cycle_anchor":       "1777593600",
			"proration_behavior":         "create_prorations",
			"transfer_data[destination]": "acct_seller",
			"application_fee_percent":    "12.5000",
		}), 0}})
	if !strings.HasPrefix(refs.ID, "sub_") || refs.FlatItemID != "si_echo_0" {
		t.Errorf("refs %+v", refs)
	}
	for i, k := range billing.MeteredLineKinds {
		if got, want := refs.MeteredItemIDs[k], "si_echo_"+string(rune('1'+i)); got != want {
			t.Errorf("%s item %q, want %q", k, got, want)
		}
	}

	// Usage of two closed windows, the second reported twice (a retry
	// after a lost answer): same key both times.
	w1 := billing.Period{Start: time.Date(2026, time.May, 3, 10, 0, 0, 0, time.UTC), End: time.Date(2026, time.May, 3, 10, 5, 0, 0, time.UTC)}
	w2 := billing.Period{Start: w1.End, End: w1.End.Add(5 * time.Minute)}
	input := refs.MeteredItemIDs[billing.LineInputTokens]
	for _, r := range []struct {
		w billing.Period
		q int64
	}{{w1, 1_250_000}, {w2, 40_000}, {w2, 40_000}} {
		if err := p.ReportUsage(ctx, input, r.q, r.w.End.Add(-time.Second), billing.UsageReportKey("ctr_test", billing.LineInputTokens, r.w)); err != nil {
			t.Fatalf("ReportUsage: %v", err)
		}
	}
	usage := func(q, ts, key string) want {
		return want{"POST", "/v1/subscription_items/si_echo_1/usage_records", key,
			map[string]string{"quantity": q, "timestamp": ts, "action": "increment"}, 0}
	}
	checkCalls(t, take(), []want{
		usage("1250000", "1777802699", "am1/contract/ctr_test/usage/input_tokens/1777802400-1777802700"),
		usage("40000", "1777802999", "am1/contract/ctr_test/usage/input_tokens/1777802700-1777803000"),
		usage("40000", "1777802999", "am1/contract/ctr_test/usage/input_tokens/1777802700-1777803000"),
	})

	if err := p.CancelSubscription(ctx, refs.ID, billing.CancelKey("ctr_test")); err != nil {
		t.Fatalf("CancelSubscription: %v", err)
	}
	checkCalls(t, take(), []want{{"DELETE", "/v1/subscriptions/" + refs.ID, "am1/contract/ctr_test/cancel",
		map[string]string{"invoice_now": "true", "prorate": "true"}, 0}})
}

// TestRetriesSendTheSameRequests repeats every create, as a caller does
// after a timeout: each retry sends the same idempotency key with the same
// parameters, so Stripe answers it from its record of the first.
func TestRetriesSendTheSameRequests(t *testing.T) {
	p, rec := mockProvider(t)
	ctx := context.Background()
	var prices billing.PlanPrices
	for range 2 {
		var err error
		if prices, err = p.EnsurePlan(ctx, "lst_test", "Echo agent", testPlan()); err != nil {
			t.Fatalf("EnsurePlan: %v", err)
		}
		checkCalls(t, rec.take(), ensurePlanCalls)
		if _, err := p.EnsureCustomer(ctx, "org_buyer", "Buyer Ltd", "billing@buyer.example"); err != nil {
			t.Fatalf("EnsureCustomer: %v", err)
		}
		checkCalls(t, rec.take(), []want{ensureCustomerCall})
	}
	// stripe-mock makes new ids each time; fix them for the subscription.
	in := billing.SubscribeInput{ContractID: "ctr_test", CustomerID: "cus_test", Prices: prices}
	for range 2 {
		if _, err := p.Subscribe(ctx, in); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		checkCalls(t, rec.take(), []want{{"POST", "/v1/subscriptions", "am1/contract/ctr_test/subscription", subscribeForm(prices, nil), 0}})
	}
}

// TestStripeMockRefusesBadShapes shows what stripe-mock's acceptance
// proves: it refuses an unknown top-level parameter and a value outside a
// nested parameter's type or enumeration. (It does not refuse an unknown
// key inside a nested object such as items[0][…]: those names come from
// stripe-go's generated params, and TestDecimalKeysMatchStripeGo checks
// the two the adapter writes by hand.)
func TestStripeMockRefusesBadShapes(t *testing.T) {
	_, rec := mockProvider(t)
	for _, c := range []struct{ path, body string }{
		{"/v1/subscriptions", "customer=cus_test&items[0][price]=price_f&unit_amount_micros=1"},
		{"/v1/subscriptions", "customer=cus_test&items[0][price]=price_f&items[0][quantity]=one"},
		{"/v1/prices", "currency=usd&product=am_lst_test&recurring[interval]=month&recurring[usage_type]=per_token"},
	} {
		req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(baseURL(t), "/")+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(secretKey(t), "")
		resp, err := (&http.Client{Transport: rec}).Do(req)
		if err != nil {
			t.Fatalf("raw request: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("stripe-mock answered %d to POST %s %q, want 400", resp.StatusCode, c.path, c.body)
		}
	}
}

// TestTrialOnStripeMock: a subscription that starts in a free trial, the
// buyer's choice to stop with it set and taken back, and the trial ended
// early (its usage allowance used up), each call checked in full against
// stripe-mock.
func TestTrialOnStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	ctx := context.Background()
	prices, err := p.EnsurePlan(ctx, "lst_test", "Echo agent", testPlan())
	if err != nil {
		t.Fatalf("EnsurePlan: %v", err)
	}
	rec.take()
	trialEnd := time.Date(2026, time.May, 17, 10, 17, 42, 0, time.UTC)
	refs, err := p.Subscribe(ctx, billing.SubscribeInput{ContractID: "ctr_test", CustomerID: "cus_test", Prices: prices,
		BillingCycleAnchor: time.Date(2026, time.June, 1, 0, 0, 0, 0, time.UTC), TrialEnd: trialEnd, CancelAtTrialEnd: true})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	checkCalls(t, rec.take(), []want{{"POST", "/v1/subscriptions", "am1/contract/ctr_test/subscription",
		subscribeForm(prices, map[string]string{
			"billing_cycle_anchor": "1780272000", // 1 June: the first period, from the trial's end, is prorated
			"proration_behavior":   "create_prorations",
			"trial_end":            "1779013062",
			"cancel_at":            "1779013062",
		}), 0}})

	at := time.Date(2026, time.May, 4, 9, 0, 0, 0, time.UTC)
	if err := p.SetCancelAt(ctx, refs.ID, time.Time{}, billing.ScheduleEndKey("ctr_test", time.Time{}, at)); err != nil {
		t.Fatalf("SetCancelAt(none): %v", err)
	}
	if err := p.SetCancelAt(ctx, refs.ID, trialEnd, billing.ScheduleEndKey("ctr_test", trialEnd, at.Add(time.Second))); err != nil {
		t.Fatalf("SetCancelAt(trial end): %v", err)
	}
	if err := p.EndTrialNow(ctx, refs.ID, billing.TrialEndKey("ctr_test")); err != nil {
		t.Fatalf("EndTrialNow: %v", err)
	}
	checkCalls(t, rec.take(), []want{
		{"POST", "/v1/subscriptions/" + refs.ID, "am1/contract/ctr_test/cancel-at/none/1777885200000000000", map[string]string{"cancel_at": ""}, 0},
		{"POST", "/v1/subscriptions/" + refs.ID, "am1/contract/ctr_test/cancel-at/1779013062/1777885201000000000", map[string]string{"cancel_at": "1779013062"}, 0},
		{"POST", "/v1/subscriptions/" + refs.ID, "am1/contract/ctr_test/trial-end",
			map[string]string{"trial_end": "now", "proration_behavior": "create_prorations"}, 0},
	})
	for _, bad := range []billing.SubscribeInput{
		{ContractID: "ctr_test", CustomerID: "cus_test", Prices: prices, CancelAtTrialEnd: true},
		{ContractID: "ctr_test", CustomerID: "cus_test", Prices: prices, TrialEnd: trialEnd, BillingCycleAnchor: trialEnd.Add(-time.Hour)},
	} {
		if _, err := p.Subscribe(ctx, bad); agentmarket.KindOf(err) != agentmarket.Invalid {
			t.Errorf("Subscribe(%+v) = %v, want Invalid", bad, err)
		}
	}
	if n := len(rec.take()); n != 0 {
		t.Errorf("%d calls for refused input", n)
	}
}

// TestInvoiceItemOnStripeMock: a month's commitment shortfall is one
// invoice item on the subscription, in minor units, with its key and the
// key in its metadata (by which a resend finds it).
func TestInvoiceItemOnStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	may := billing.MonthOf(time.Date(2026, time.May, 3, 0, 0, 0, 0, time.UTC))
	err := p.AddInvoiceItem(context.Background(), billing.InvoiceItem{CustomerID: "cus_test", SubscriptionID: "sub_test", ContractID: "ctr_test",
		Currency: "usd", AmountMinor: 1451, Description: "Minimum commitment shortfall, May 2026", Period: may,
		IdempotencyKey: billing.CommitmentKey("ctr_test", may.Start)})
	if err != nil {
		t.Fatalf("AddInvoiceItem: %v", err)
	}
	checkCalls(t, rec.take(), []want{{"POST", "/v1/invoiceitems", "am1/contract/ctr_test/commitment/1777593600", itemForm("commitment", "1451",
		"Minimum commitment shortfall, May 2026", map[string]string{"subscription": "sub_test"}), 0}})
	if err := p.AddInvoiceItem(context.Background(), billing.InvoiceItem{CustomerID: "cus_test", SubscriptionID: "sub_test", Currency: "usd",
		IdempotencyKey: "k"}); agentmarket.KindOf(err) != agentmarket.Invalid {
		t.Errorf("a zero invoice item: %v, want Invalid", err)
	}
	// Prepaid credit given back: a negative item (billing.ApplyCredits).
	if err := p.AddInvoiceItem(context.Background(), billing.InvoiceItem{CustomerID: "cus_test", SubscriptionID: "sub_test", ContractID: "ctr_test",
		Currency: "usd", AmountMinor: -1235, Description: "Prepaid credit applied, May 2026", Period: may,
		IdempotencyKey: billing.CreditKey("ctr_test", may.Start)}); err != nil {
		t.Fatalf("a credit item: %v", err)
	}
	checkCalls(t, rec.take(), []want{{"POST", "/v1/invoiceitems", "am1/contract/ctr_test/credit/1777593600", itemForm("credit", "-1235",
		"Prepaid credit applied, May 2026", map[string]string{"subscription": "sub_test"}), 0}})
}

// itemForm is ctr_test's May invoice item of kind (commitment, credit).
func itemForm(kind, amount, desc string, extra map[string]string) map[string]string {
	return merge(map[string]string{"customer": "cus_test", "currency": "usd", "amount": amount, "description": desc,
		"period[start]": "1777593600", "period[end]": "1780272000", "metadata[agentmarket_contract_id]": "ctr_test",
		"metadata[agentmarket_item_key]": "am1/contract/ctr_test/" + kind + "/1777593600"}, extra)
}

// invoiceNowCall is the invoice that takes ctr_test's May commitment
// item without a subscription: the customer's pending items included (the
// default leaves them out), advanced and collected by Stripe itself.
var invoiceNowCall = want{"POST", "/v1/invoices", "am1/contract/ctr_test/commitment/1777593600/invoice", map[string]string{
	"customer": "cus_test", "currency": "usd", "pending_invoice_items_behavior": "include", "auto_advance": "true",
	"description": "Minimum commitment shortfall, May 2026", "metadata[agentmarket_contract_id]": "ctr_test",
	"metadata[agentmarket_item_key]": "am1/contract/ctr_test/commitment/1777593600"}, 0}

// TestInvoiceItemWithoutSubscriptionOnStripeMock: with no live
// subscription (the stay's was canceled: it issues no more invoices), the
// item is the customer's, without subscription, and an invoice of the
// customer that includes it is created at once. A resend first lists the
// customer's items since the period's end, then sends the same requests
// with the same keys.
func TestInvoiceItemWithoutSubscriptionOnStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	may := billing.MonthOf(time.Date(2026, time.May, 3, 0, 0, 0, 0, time.UTC))
	in := billing.InvoiceItem{CustomerID: "cus_test", ContractID: "ctr_test", Currency: "usd", AmountMinor: 1451,
		Description: "Minimum commitment shortfall, May 2026", Period: may, IdempotencyKey: billing.CommitmentKey("ctr_test", may.Start)}
	if err := p.AddInvoiceItem(context.Background(), in); err != nil {
		t.Fatalf("AddInvoiceItem: %v", err)
	}
	item := want{"POST", "/v1/invoiceitems", "am1/contract/ctr_test/commitment/1777593600",
		itemForm("commitment", "1451", "Minimum commitment shortfall, May 2026", nil), 0}
	checkCalls(t, rec.take(), []want{item, invoiceNowCall})

	in.Resend = true
	if err := p.AddInvoiceItem(context.Background(), in); err != nil {
		t.Fatalf("AddInvoiceItem (resend): %v", err)
	}
	checkCalls(t, rec.take(), []want{lookupCall, item, invoiceNowCall})
}

var lookupCall = want{"GET", "/v1/invoiceitems", "", map[string]string{"customer": "cus_test", "created[gte]": "1780272000", "limit": "100"}, 0}

// TestInvoiceItemResendFindsIt: a resend past Stripe's 24 hours (the key
// forgotten) finds the item by the key in its metadata: already invoiced,
// or on a subscription, nothing is sent; still pending without a
// subscription, only its invoice is created.
func TestInvoiceItemResendFindsIt(t *testing.T) {
	may := billing.MonthOf(time.Date(2026, time.May, 3, 0, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		name, sub, invoice string
		want               []want
	}{
		{"invoiced", "", `"in_1"`, []want{lookupCall}},
		{"pending", "", "null", []want{lookupCall, invoiceNowCall}},
		{"on a subscription", "sub_test", "null", []want{lookupCall}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, rec := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.Method == http.MethodGet {
					fmt.Fprintf(w, `{"object": "list", "has_more": false, "url": "/v1/invoiceitems", "data": [
						{"id": "ii_other", "object": "invoiceitem", "invoice": null, "metadata": {"agentmarket_item_key": "am1/contract/ctr_other/commitment/1777593600"}},
						{"id": "ii_1", "object": "invoiceitem", "invoice": %s, "metadata": {"agentmarket_item_key": "am1/contract/ctr_test/commitment/1777593600"}}]}`,
						c.invoice)
					return
				}
				okJSON(w, r)
			})
			err := p.AddInvoiceItem(context.Background(), billing.InvoiceItem{CustomerID: "cus_test", SubscriptionID: c.sub, ContractID: "ctr_test",
				Currency: "usd", AmountMinor: 1451, Description: "Minimum commitment shortfall, May 2026", Period: may,
				IdempotencyKey: billing.CommitmentKey("ctr_test", may.Start), Resend: true})
			if err != nil {
				t.Fatalf("AddInvoiceItem: %v", err)
			}
			checkCalls(t, rec.take(), c.want)
		})
	}
}

// TestPlanChangeOnStripeMock: a plan change is one update of the
// subscription that deletes its five items and adds the new version's
// five, prorated from the change's second, with the change's key; the new
// items are matched to our line kinds.
func TestPlanChangeOnStripeMock(t *testing.T) {
	p, rec := mockProvider(t)
	ctx := context.Background()
	prices := billing.PlanPrices{ProductID: "am_lst_test", FlatPriceID: "price_v4_flat", MeteredPriceIDs: map[billing.LineKind]string{
		billing.LineInputTokens: "price_v4_in", billing.LineOutputTokens: "price_v4_out", billing.LineCompute: "price_v4_ms", billing.LineTasks: "price_v4_task"}}
	old := billing.SubscriptionRefs{ID: "sub_test", FlatItemID: "si_flat", MeteredItemIDs: map[billing.LineKind]string{
		billing.LineInputTokens: "si_in", billing.LineOutputTokens: "si_out", billing.LineCompute: "si_ms", billing.LineTasks: "si_task"}}
	at := time.Date(2026, time.May, 10, 12, 0, 0, 250_000_000, time.UTC)
	refs, err := p.ChangePlan(ctx, billing.PlanChangeInput{SubscriptionID: "sub_test", Old: old, Prices: prices, At: at,
		IdempotencyKey: billing.PlanChangeKey("ctr_test", 1)})
	if err != nil {
		t.Fatalf("ChangePlan: %v", err)
	}
	form := map[string]string{"proration_behavior": "create_prorations", "proration_date": "1778414400",
		"items[0][id]": "si_flat", "items[0][deleted]": "true", "items[1][id]": "si_in", "items[1][deleted]": "true",
		"items[2][id]": "si_out", "items[2][deleted]": "true", "items[3][id]": "si_ms", "items[3][deleted]": "true",
		"items[4][id]": "si_task", "items[4][deleted]": "true",
		"items[5][price]": "price_v4_flat", "items[5][quantity]": "1", "items[5][metadata][agentmarket_line_kind]": "flat_fee"}
	for i, k := range billing.MeteredLineKinds {
		n := fmt.Sprint(6 + i)
		form["items["+n+"][price]"] = prices.MeteredPriceIDs[k]
		form["items["+n+"][metadata][agentmarket_line_kind]"] = string(k)
	}
	checkCalls(t, rec.take(), []want{{"POST", "/v1/subscriptions/sub_test", "am1/contract/ctr_test/plan-change/1", form, 0}})
	if refs.FlatItemID != "si_echo_5" || refs.MeteredItemIDs[billing.LineTasks] != "si_echo_9" {
		t.Errorf("refs %+v", refs)
	}
	if _, err := p.ChangePlan(ctx, billing.PlanChangeInput{SubscriptionID: "sub_test", IdempotencyKey: "k"}); agentmarket.KindOf(err) != agentmarket.Invalid {
		t.Errorf("a change without items: %v", err)
	}
}
