package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// The burst's figures (TestBudgetBurst's agent and plan): a send reserves
// 1,350 micros and costs 1,119; a credit of 4,550 takes three
// reservations, never four, and after three calls (3,357 burned) 1,193 is
// left, less than a reservation.
const creditBurstCost, creditBurstReserve, creditBurstGrant = 1119, 1350, 3*1350 + 500

// TestCreditBurst: an org's credit granted by the operator (own-ledger
// mode), required: twelve concurrent sends spend at most the bound (the
// credit, plus what each admitted call used beyond its reservation: here
// nothing), the rest are refused with -32049; once the burns are written
// the balance is the grant less what the calls cost, and the next call is
// refused with the code; an account not required lets the call through
// unburned.
func TestCreditBurst(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		e.env["AGENTMARKET_BILLING_GRACE"] = "1s" // the alerts are swept every 250 ms
		mk := newMarket(t, e.env)
		creditBurst(t, mk.m, mk.api, mk.seller, nil)
	})
}

// TestCreditBurstAcrossMeters: the same burst spread over two meters
// sharing PostgreSQL and Redis: the reservations are one script in Redis,
// so the two meters together admit three calls, never more.
func TestCreditBurstAcrossMeters(t *testing.T) {
	env := sharedEnv(relationaltest.PostgresDSN(t), redistest.Start(t).URL)
	env["AGENTMARKET_POLICY_RELOAD"] = "100ms"
	env["AGENTMARKET_BILLING_GRACE"] = "1s" // the alerts are swept every 250 ms
	env["AGENTMARKET_CLICKHOUSE_URL"] = clickhousetest.DSN(t)
	first, second := startMarketplace(t, env), startMarketplace(t, env)
	api := client{t: t, base: first.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	creditBurst(t, first, api, seller, second)
}

func creditBurst(t *testing.T, m *started, api client, seller string, second *started) {
	listing := listBurstAgent(t, api, seller, "Credit burst")
	op := api.with(operatorKey(t, m))
	for round := range 2 {
		orgID, adminKey := signup(t, api, fmt.Sprintf("Credit buyer %d", round), fmt.Sprintf("credit-%d@burst.example", round))
		admin := api.with(adminKey)
		// Own ledger: credit is not sold here, the operator grants it.
		if r := admin.do("POST", "/api/v1/credit/purchases", map[string]any{"currency": "usd", "amount_micros": 1_000_000, "success_url": "https://buyer.example/ok"}); r.Status != 503 {
			t.Fatalf("a purchase without Stripe: %d %s, want 503", r.Status, r.Body)
		}
		// Only the operator grants.
		if r := admin.do("POST", "/api/v1/credit/grants", map[string]any{"org_id": orgID, "currency": "usd", "amount_micros": 1_000_000}); r.Status != 403 {
			t.Fatalf("a buyer granting itself credit: %d %s, want 403", r.Status, r.Body)
		}
		g := op.do("POST", "/api/v1/credit/grants", map[string]any{"org_id": orgID, "currency": "usd", "amount_micros": creditBurstGrant, "note": "pilot"})
		if g.Status != 201 || get(g.JSON, "account", "balance_micros") != float64(creditBurstGrant) || get(g.JSON, "movement", "kind") != "grant" {
			t.Fatalf("grant: %d %s", g.Status, g.Body)
		}
		if r := admin.do("PUT", "/api/v1/credit/settings", map[string]any{"currency": "usd", "required": true, "low_balance_micros": 2000}); r.Status != 200 || r.JSON["required"] != true {
			t.Fatalf("settings: %d %s", r.Status, r.Body)
		}
		sub := admin.do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
		if sub.Status != 201 {
			t.Fatalf("subscribe: %d %s", sub.Status, sub.Body)
		}
		eps := []string{sub.str("endpoint")}
		if second != nil {
			eps = append(eps, second.URL+"/a2a/"+listing)
			time.Sleep(500 * time.Millisecond) // past the second meter's next policy reload
		}
		// Keys minted after the grant: their org holds credit.
		_, k1 := mintKey(t, admin, map[string]any{"name": "one", "role": "buyer"})
		_, k2 := mintKey(t, admin, map[string]any{"name": "two", "role": "buyer"})
		const n = 12
		admitted, refused := fireSendsRefused(t, n, eps, []string{k1, k2}, a2aproxy.CodeCreditExhausted)
		var calls, spent int64
		waitFor(t, "the burst's usage rows", 15*time.Second, func() bool {
			calls, spent = listingSpend(t, admin, listing)
			return calls == n
		})
		bound := int64(creditBurstGrant) + int64(admitted)*max(0, creditBurstCost-creditBurstReserve)
		if admitted != 3 || admitted+refused != n || spent != int64(admitted)*creditBurstCost || spent > bound {
			t.Errorf("round %d: %d calls admitted, %d refused, %d micros spent; want 3 admitted, within the bound of %d", round, admitted, refused, spent, bound)
		}
		// The burns reach the store within the meters' flush.
		var balance float64
		waitFor(t, "the burns written", 10*time.Second, func() bool {
			r := admin.do("GET", "/api/v1/credit", nil)
			items, _ := r.JSON["items"].([]any)
			if len(items) != 1 {
				return false
			}
			balance = items[0].(map[string]any)["balance_micros"].(float64)
			return balance == float64(creditBurstGrant-3*creditBurstCost)
		})
		// Below the low balance of 2,000: one alert, through the alert
		// outbox.
		waitFor(t, "the low-balance alert", 10*time.Second, func() bool {
			r := admin.do("GET", "/api/v1/alerts", nil)
			n := 0
			for _, it := range r.JSON["items"].([]any) {
				if a := it.(map[string]any); a["budget_kind"] == "credit" && a["budget_id"] == "usd" && a["spent_micros"] == balance {
					n++
				}
			}
			return n == 1
		})
		mv := admin.do("GET", "/api/v1/credit/movements?currency=usd", nil)
		var burned float64
		for _, it := range mv.JSON["items"].([]any) {
			if m := it.(map[string]any); m["kind"] == "burn" {
				burned -= m["amount_micros"].(float64)
				if m["subscription_id"] != sub.str("id") {
					t.Errorf("a burn of another subscription: %v", m)
				}
			}
		}
		if burned != 3*creditBurstCost {
			t.Errorf("burn movements sum to %v, want %d", burned, 3*creditBurstCost)
		}
		// The invoice preview takes off what the calls burned (3,357
		// micros: less than half a cent, so nothing here; TestApplyCredit
		// has the rule) and says what is due.
		inv := admin.do("GET", "/api/v1/invoices/preview?subscription_id="+sub.str("id"), nil)
		if inv.Status != 200 || inv.JSON["credit_applied_minor"] != float64(0) || inv.JSON["amount_due_minor"] != inv.JSON["total_minor"] {
			t.Errorf("invoice preview: %d %s", inv.Status, inv.Body)
		}
		// The grant is in the audit log, with the operator and the note.
		if a := admin.do("GET", "/api/v1/audit", nil); a.Status != 200 || strings.Count(string(a.Body), `"credit.grant"`) != 1 || !strings.Contains(string(a.Body), "pilot") {
			t.Errorf("the audit log: %d %s, want the grant once", a.Status, a.Body)
		}
		// At zero (less than a reservation left) the call is refused.
		_, e := (rpc{t: t, url: eps[len(eps)-1], key: k1}).call("message/send", msg03("one more", nil))
		if e == nil || e["code"] != float64(a2aproxy.CodeCreditExhausted) {
			t.Errorf("a call past the credit: %v, want %d", e, a2aproxy.CodeCreditExhausted)
		}
		if round == 0 && second == nil {
			// Not required: the call goes on, invoiced, burning nothing.
			if r := admin.do("PUT", "/api/v1/credit/settings", map[string]any{"currency": "usd", "required": false}); r.Status != 200 {
				t.Fatalf("settings: %d %s", r.Status, r.Body)
			}
			waitFor(t, "the setting read by the meter", 10*time.Second, func() bool {
				_, e := (rpc{t: t, url: eps[0], key: k2}).call("message/send", msg03("invoiced", nil))
				return e == nil
			})
			time.Sleep(1500 * time.Millisecond) // past a flush
			r := admin.do("GET", "/api/v1/credit", nil)
			if got := r.JSON["items"].([]any)[0].(map[string]any)["balance_micros"]; got != balance {
				t.Errorf("balance after a call not paid by credit: %v, want %v", got, balance)
			}
		}
	}
}
