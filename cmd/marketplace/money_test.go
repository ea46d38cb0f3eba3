package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// hostileAgent is a demo agent whose usage reports claim 9·10^18 of every
// counter: a hostile (or broken) seller.
func hostileAgent(t *testing.T) *httptest.Server {
	a := demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, Name: "Bottomless"})
	huge := regexp.MustCompile(`"(inputTokens|outputTokens|computeMs)":\s*\d+`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, r)
		body := huge.ReplaceAll(rec.Body.Bytes(), []byte(`"$1":9000000000000000000`))
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		io.Copy(w, bytes.NewReader(body))
	}))
	a.SetBaseURL(srv.URL + "/")
	t.Cleanup(srv.Close)
	return srv
}

// TestPriceCeiling (issue 11, item 4): a plan at the largest int64 price
// is refused; a plan at every bound, called through the meter by an agent
// reporting 9·10^18 tokens and milliseconds, bills the bounded usage
// exactly, flags it, and leaves every read working for the seller, its
// buyer, the operator and unrelated orgs; a budgeted key is refused once
// its budget is spent.
func TestPriceCeiling(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		const opKey = "amk_operator_key_for_the_price_ceiling"
		env := map[string]string{"AGENTMARKET_OPERATOR_KEY": opKey}
		for k, v := range e.env {
			env[k] = v
		}
		hostile := hostileAgent(t)
		fair := agentServer(t, demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, Name: "Fair"}))
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		_, seller := signup(t, api, "Bottomless Agents", "s@bottomless.example")
		_, buyer := signup(t, api, "Globex", "it@globex.example")
		_, otherSeller := signup(t, api, "Fair Agents", "s@fair.example")
		_, otherBuyer := signup(t, api, "Initech", "it@initech.example")

		// The price ceiling: the largest int64 is no price.
		r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": hostile.URL,
			"pricing": map[string]any{"currency": "usd", "per_task_micros": int64(math.MaxInt64)}})
		if r.Status != 422 || strings.Join(r.errorFields(), " ") != "pricing.per_task_micros:max" {
			t.Errorf("a per-task price of 2^63-1: %d %s, want 422 with pricing.per_task_micros:max", r.Status, r.Body)
		}
		top := agentmarket.MaxUnitPriceMicros
		plan := listings.Plan{Currency: "usd", MonthlyFeeMicros: agentmarket.MaxMonthlyFeeMicros, InputTokensPerMillionMicros: top,
			OutputTokensPerMillionMicros: top, ComputePerHourMicros: top, PerTaskMicros: top}
		list := func(key, url string, pricing map[string]any) string {
			t.Helper()
			r := api.with(key).do("POST", "/api/v1/listings", map[string]any{"card_url": url, "pricing": pricing})
			if r.Status != 201 {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			}
			return r.str("id")
		}
		subscribe := func(key, listing string) (id, endpoint string) {
			t.Helper()
			r := api.with(key).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
			if r.Status != 201 {
				t.Fatalf("subscribe: %d %s", r.Status, r.Body)
			}
			return r.str("id"), r.str("endpoint")
		}
		dear := list(seller, hostile.URL, plan.PricingJSON())
		cheap := list(otherSeller, fair.URL, pricing)
		sub, ep := subscribe(buyer, dear)
		otherSub, otherEp := subscribe(otherBuyer, cheap)

		for i := range 2 {
			if _, e := (rpc{t: t, url: ep, key: buyer}).call("message/send", msg03(fmt.Sprintf("task %d", i), nil)); e != nil {
				t.Fatalf("call %d: %v", i, e)
			}
		}
		if _, e := (rpc{t: t, url: otherEp, key: otherBuyer}).call("message/send", msg03("an ordinary task", nil)); e != nil {
			t.Fatal(e)
		}
		rows := usageRows(t, m, e, 3)
		bound := agentmarket.MaxQuantity
		clamped := metering.Counters{InputTokens: bound, OutputTokens: bound, ComputeMs: bound}
		rowCost := a2aproxy.Rate(plan, clamped, 1)
		for _, u := range rows {
			if u.ListingID == dear && (u.InputTokens != bound || u.OutputTokens != bound || u.ComputeMs != bound || u.CostMicros != rowCost) {
				t.Errorf("hostile row: %d/%d tokens, %d ms, cost %d; want %d of each, cost %d", u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros, bound, rowCost)
			}
		}

		// Every read answers, for everyone, with the exact sums.
		for _, c := range []struct {
			who, key, path string
		}{
			{"the seller", seller, "/api/v1/usage?scope=seller"},
			{"its buyer", buyer, "/api/v1/usage"},
			{"the operator", opKey, "/api/v1/usage?scope=platform"},
			{"the operator by day", opKey, "/api/v1/usage?scope=platform&group_by=day"},
			{"an unrelated buyer", otherBuyer, "/api/v1/usage"},
			{"an unrelated seller", otherSeller, "/api/v1/usage?scope=seller"},
			{"its buyer, previewing", buyer, "/api/v1/invoices/preview?subscription_id=" + sub},
			{"an unrelated buyer, previewing", otherBuyer, "/api/v1/invoices/preview?subscription_id=" + otherSub},
			{"the seller, reconciling", seller, "/api/v1/reconciliation"},
			{"the operator, reconciling", opKey, "/api/v1/reconciliation"},
			{"an unrelated buyer, reconciling", otherBuyer, "/api/v1/reconciliation"},
		} {
			if r := api.with(c.key).do("GET", c.path, nil); r.Status != 200 {
				t.Errorf("%s: GET %s = %d %s", c.who, c.path, r.Status, r.Body)
			}
		}
		r = api.with(buyer).do("GET", "/api/v1/usage?group_by=listing", nil)
		if items, _ := r.JSON["items"].([]any); len(items) != 1 ||
			fmt.Sprint(items[0]) != fmt.Sprint(map[string]any{"key": dear, "name": "Bottomless", "calls": float64(2), "tasks": float64(2),
				"input_tokens": float64(2 * bound), "output_tokens": float64(2 * bound), "compute_ms": float64(2 * bound),
				"cost_micros": float64(2 * rowCost), "estimated_calls": float64(0)}) {
			t.Errorf("the buyer's usage: %s", r.Body)
		}
		r = api.with(buyer).do("GET", "/api/v1/invoices/preview?subscription_id="+sub, nil)
		if !strings.Contains(string(r.Body), fmt.Sprintf(`"used":%d`, 2*bound)) {
			t.Errorf("preview does not bill the bounded usage: %s", r.Body)
		}

		// The clamped reports are flagged.
		metrics := api.do("GET", "/metrics", nil)
		if want := fmt.Sprintf(`agentmarket_meter_usage_clamped_total{listing=%q} 2`, dear); !strings.Contains(string(metrics.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}

		// A budgeted key: its first call is within budget (it reserves about
		// 1.03e10 micros: the plan's per-task price and the default per-call
		// ceiling at its top prices), then it is spent: the hostile report
		// went far past the reservation, which is what bounds the overshoot.
		r = api.with(buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "capped", "role": "buyer", "monthly_budget_micros": 20_000_000_000})
		if r.Status != 201 {
			t.Fatalf("key: %d %s", r.Status, r.Body)
		}
		capped := rpc{t: t, url: ep, key: r.str("key")}
		if _, e := capped.call("message/send", msg03("within budget", nil)); e != nil {
			t.Fatalf("first call of the capped key: %v", e)
		}
		untilBudgetSpent(t, capped, 15*time.Second)
		// A budget past the bound is refused.
		if r := api.with(buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "x", "role": "buyer", "monthly_budget_micros": agentmarket.MaxBudgetMicros + 1}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "monthly_budget_micros:max" {
			t.Errorf("a budget past the bound: %d %s", r.Status, r.Body)
		}
	})
}
