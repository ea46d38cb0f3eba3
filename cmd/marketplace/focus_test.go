package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
)

// focusExport downloads an org's FOCUS CSV of a month through the API and
// returns its rows as column → value maps.
func (cm *commerceMarket) focusExport(t *testing.T, key, query string) []map[string]string {
	t.Helper()
	req, _ := http.NewRequest("GET", cm.m.URL+"/api/v1/exports/focus?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("FOCUS export %s: %d %s %s", query, res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	return focusRecords(t, string(body))
}

func focusRecords(t *testing.T, body string) []map[string]string {
	t.Helper()
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(records) == 0 || !slices.Equal(records[0], billing.FocusColumns) {
		t.Fatalf("the FOCUS CSV: %v\n%s", err, body)
	}
	var out []map[string]string
	for _, rec := range records[1:] {
		m := map[string]string{}
		for i, c := range records[0] {
			m[c] = rec[i]
		}
		out = append(out, m)
	}
	return out
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// focusByLine sums the rows' micros per invoice line, as "vN kind=micros",
// and checks every row's BilledCost (a decimal) is its micros.
func focusByLine(t *testing.T, rows []map[string]string) []string {
	t.Helper()
	sums := map[string]int64{}
	for _, r := range rows {
		m := atoi64(r["x_BilledCostMicros"])
		if want := fmt.Sprintf("%d.%06d", m/1_000_000, m%1_000_000); r["BilledCost"] != want || r["EffectiveCost"] != want {
			t.Errorf("a row's costs %s/%s, its micros %d", r["BilledCost"], r["EffectiveCost"], m)
		}
		// FOCUS 1.2: ListCost = ListUnitPrice × PricingQuantity (to the micro).
		price, _ := new(big.Rat).SetString(r["ListUnitPrice"])
		q, _ := new(big.Rat).SetString(r["PricingQuantity"])
		list, _ := new(big.Rat).SetString(r["ListCost"])
		if diff := new(big.Rat).Sub(new(big.Rat).Mul(price, q), list); diff.Abs(diff).Cmp(big.NewRat(1, 1_000_000)) > 0 || r["ContractedCost"] != r["ListCost"] {
			t.Errorf("ListCost %s is not ListUnitPrice %s × PricingQuantity %s", r["ListCost"], r["ListUnitPrice"], r["PricingQuantity"])
		}
		k := "v" + r["x_PlanVersion"] + " " + r["x_LineKind"]
		if r["x_FreeTrial"] == "true" {
			k += " trial"
		}
		sums[k] += m
	}
	var out []string
	for k, v := range sums {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}

// invoiceByLine renders an API invoice's lines the same way, in micros,
// leaving out the lines with nothing to show (no amount, no usage).
func invoiceByLine(inv map[string]any) []string {
	parts := inv["parts"].([]any)
	var out []string
	for _, l := range inv["lines"].([]any) {
		m := l.(map[string]any)
		p := parts[int(m["part"].(float64))].(map[string]any)
		if m["amount_micros"].(float64) == 0 && m["amount_minor"].(float64) == 0 && (m["used"].(float64) == 0 || m["kind"] == "commitment") {
			continue
		}
		k := fmt.Sprintf("v%v %s", p["plan_version"], m["kind"])
		if p["trial"] == true {
			k += " trial"
		}
		out = append(out, fmt.Sprintf("%s=%d", k, int64(m["amount_minor"].(float64))*10_000))
	}
	sort.Strings(out)
	return out
}

func focusTotal(rows []map[string]string) int64 {
	var sum int64
	for _, r := range rows {
		sum += atoi64(r["x_BilledCostMicros"])
	}
	return sum
}

// tagsOf lists the usage rows' tags of a line kind and plan version.
func tagsOf(rows []map[string]string, kind, version string) []string {
	var out []string
	for _, r := range rows {
		if r["x_LineKind"] == kind && r["x_PlanVersion"] == version {
			out = append(out, r["ResourceType"]+" "+r["Tags"]+" "+r["ConsumedQuantity"])
		}
	}
	sort.Strings(out)
	return out
}

// TestFocusExport (issue 14, item 6), without Stripe, on both storage
// set-ups: a month with tagged keys and a plan change exports as FOCUS
// rows — the fees on the listing, each call's task under the tags it
// carried — whose micros add up, line by line, to the invoice preview while
// the month is open and to the ledger's invoice once it is closed; another
// org sees none of them.
func TestFocusExport(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, changePricing)
		sub := cm.subscribe(t, cm.buyer, map[string]any{"tags": map[string]string{"team": "platform"}}).str("id")
		r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "payments", "role": "buyer", "tags": map[string]string{"team": "payments"}})
		if r.Status != 201 {
			t.Fatalf("key: %d %s", r.Status, r.Body)
		}
		payments := r.str("key")
		cm.clock.Advance(time.Minute)
		cm.call(t, payments)
		cm.clock.Advance(time.Minute)
		cm.call(t, cm.buyer)
		if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"pricing": changedPricing}); r.Status != 200 {
			t.Fatalf("new prices: %d %s", r.Status, r.Body)
		}
		cm.clock.Advance(time.Hour + 500*time.Millisecond)
		if r := cm.api.with(cm.buyer).do("POST", "/api/v1/subscriptions/"+sub+"/plan", map[string]any{"plan_version": 2}); r.Status != 200 {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		time.Sleep(2500 * time.Millisecond) // the meter's contract cache
		cm.clock.Advance(time.Hour)
		cm.call(t, payments)

		rows := cm.focusExport(t, cm.buyer, "period=2026-11")
		pv := cm.api.with(cm.buyer).do("GET", "/api/v1/invoices/preview?subscription_id="+sub, nil)
		if got, want := focusByLine(t, rows), invoiceByLine(pv.JSON); !slices.Equal(got, want) {
			t.Errorf("the open month's rows by line\n  %s\nwant the preview's\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		total := int64(pv.JSON["total_minor"].(float64))
		if got := focusTotal(rows); got != total*10_000 || total == 0 {
			t.Errorf("the rows add up to %d micros, the preview to %d cents", got, total)
		}
		if got := tagsOf(rows, "input_tokens", "1"); !slices.Equal(got, []string{`Task {"team":"payments"} 9`, `Task {"team":"platform"} 9`}) {
			t.Errorf("v1's input rows: %q", got)
		}
		if got := tagsOf(rows, "input_tokens", "2"); !slices.Equal(got, []string{`Task {"team":"payments"} 9`}) {
			t.Errorf("v2's input rows: %q", got)
		}
		if got := tagsOf(rows, "flat_fee", "1"); !slices.Equal(got, []string{`Listing {"team":"platform"} `}) {
			t.Errorf("v1's fee rows: %q", got)
		}
		for _, r := range rows {
			if r["BillingAccountName"] != "Globex" || r["PublisherName"] != "Acme Agents" || r["ServiceName"] != "Trial Summarizer" ||
				r["SubAccountId"] != sub || r["x_InvoiceStatus"] != "preview" || r["InvoiceId"] != "" || r["BillingCurrency"] != "USD" ||
				r["BillingPeriodStart"] != "2026-11-01T00:00:00Z" {
				t.Errorf("an open month's row: %v", r)
			}
		}
		if got := cm.focusExport(t, cm.other, "period=2026-11"); len(got) != 0 {
			t.Errorf("another org's export has %d rows", len(got))
		}

		// The month closes on the ledger: the rows are its invoice's.
		cm.clock.Advance(time.Date(2026, 12, 1, 0, 3, 0, 0, time.UTC).Sub(cm.clock.Now()))
		var issued map[string]any
		waitFor(t, "November's invoice", 15*time.Second, func() bool {
			items, _ := cm.api.with(cm.buyer).do("GET", "/api/v1/invoices?period=2026-11", nil).JSON["items"].([]any)
			if len(items) == 1 {
				issued = items[0].(map[string]any)["invoice"].(map[string]any)
			}
			return issued != nil
		})
		rows = cm.focusExport(t, cm.buyer, "period=2026-11")
		if got, want := focusByLine(t, rows), invoiceByLine(issued); !slices.Equal(got, want) {
			t.Errorf("the closed month's rows by line\n  %s\nwant the invoice's\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if got, want := focusTotal(rows), int64(issued["total_minor"].(float64))*10_000; got != want {
			t.Errorf("the rows add up to %d micros, the invoice to %d", got, want)
		}
		for _, r := range rows {
			if r["x_InvoiceStatus"] != "issued" || r["InvoiceId"] != sub+"/2026-11" {
				t.Errorf("a closed month's row: %v", r)
			}
		}

		for _, q := range []string{"period=2026-13", "period=2026-11&format=parquet"} {
			if r := cm.api.with(cm.buyer).do("GET", "/api/v1/exports/focus?"+q, nil); r.Status != 422 || r.code() != "invalid_focus_export" {
				t.Errorf("%s: %d %s", q, r.Status, r.Body)
			}
		}
	})
}

// TestFocusExportOnStripe (issue 14, item 6, with Stripe on stripe-mock):
// the same month with Stripe billing it: the export rates the closed
// month as billing's rating code does (the parts of the plan change, to
// the micro), the units it shows consumed are exactly the units reported
// to Stripe's usage records, and exporting calls Stripe not once.
func TestFocusExportOnStripe(t *testing.T) {
	rec := newStripeRecorder(t)
	cm := newCommerceMarket(t, stripeEnv(rec), changePricing)
	sub := cm.subscribe(t, cm.buyer, map[string]any{"tags": map[string]string{"team": "platform"}}).str("id")
	cm.clock.Advance(time.Minute)
	cm.call(t, cm.buyer)
	if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"pricing": changedPricing}); r.Status != 200 {
		t.Fatalf("new prices: %d %s", r.Status, r.Body)
	}
	cm.clock.Advance(time.Hour + 500*time.Millisecond)
	change := cm.clock.Now()
	if r := cm.api.with(cm.buyer).do("POST", "/api/v1/subscriptions/"+sub+"/plan", map[string]any{"plan_version": 2}); r.Status != 200 {
		t.Fatalf("change: %d %s", r.Status, r.Body)
	}
	time.Sleep(2500 * time.Millisecond) // the meter's contract cache
	cm.clock.Advance(time.Hour)
	cm.call(t, cm.buyer)
	cm.call(t, cm.buyer)
	month := billing.MonthOf(cm.clock.Now())
	before, after := cm.usage(t, cm.buyer, month.Start, change), cm.usage(t, cm.buyer, change, month.End)
	// The buyer leaves at the month's end, so that all its usage is
	// reported to Stripe by then.
	if r := cm.api.with(cm.buyer).do("DELETE", "/api/v1/subscriptions/"+sub+"?at=period_end", nil); r.Status != 200 {
		t.Fatalf("cancel at the period's end: %d %s", r.Status, r.Body)
	}
	calls := rec.take()
	cm.clock.Advance(month.End.Sub(cm.clock.Now()) + 3*time.Minute)
	waitFor(t, "the end of the period", 10*time.Second, func() bool { return cm.subscription(t, cm.buyer, sub).str("status") == "canceled" })
	time.Sleep(500 * time.Millisecond)
	calls = append(calls, rec.take()...)
	var reported int64
	for _, c := range calls {
		if strings.HasSuffix(c.Path, "/usage_records") {
			reported += atoi64(c.Form.Get("quantity"))
		}
	}

	rows := cm.focusExport(t, cm.buyer, "period=2026-11")
	if extra := rec.take(); len(extra) != 0 {
		t.Errorf("the export called Stripe: %v", callLines(extra))
	}
	want, err := billing.RateParts(month, []billing.Part{
		{Plan: planOf(t, changePricing, 1), Span: billing.Period{Start: commerceT0, End: change}, Usage: before},
		{Plan: planOf(t, changedPricing, 2), Span: billing.Period{Start: change, End: month.End}, Usage: after},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := focusTotal(rows); got != want.TotalMinor*10_000 || want.TotalMinor == 0 {
		t.Errorf("the rows add up to %d micros, billing rates the month at %d cents", got, want.TotalMinor)
	}
	var consumed int64
	for _, r := range rows {
		consumed += atoi64(r["ConsumedQuantity"])
		if r["x_InvoiceStatus"] != "rated" || r["InvoiceId"] != "" {
			t.Errorf("a row of a month Stripe invoices: %v", r)
		}
	}
	if u := before.InputTokens + before.OutputTokens + before.ComputeMs + before.Tasks + after.InputTokens + after.OutputTokens + after.ComputeMs + after.Tasks; consumed != u || reported != u {
		t.Errorf("units: exported %d, reported to Stripe %d, metered %d", consumed, reported, u)
	}
}
