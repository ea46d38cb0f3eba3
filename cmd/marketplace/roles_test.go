package main

import (
	"net/http"
	"strings"
	"testing"
)

// get sends a GET with the key and an Accept header, returning status and body.
func (c client) get(path, accept string) (int, string) {
	c.t.Helper()
	return raw(c.t, "GET", c.base+path, http.Header{"Authorization": {"Bearer " + c.key}, "Accept": {accept}}, nil)
}

// mintKey creates a key with the given key and request, failing the test
// unless it is created.
func mintKey(t *testing.T, c client, body map[string]any) (id, secret string) {
	t.Helper()
	r := c.do("POST", "/api/v1/api-keys", body)
	if r.Status != 201 {
		t.Fatalf("create key %v: %d %s", body, r.Status, r.Body)
	}
	return r.str("id"), r.str("key")
}

// firstKeyID is the id of the admin key sign-up made for the org of c's key.
func firstKeyID(t *testing.T, c client) string {
	t.Helper()
	r := c.do("GET", "/api/v1/api-keys", nil)
	items, _ := r.JSON["items"].([]any)
	for _, k := range items {
		if k := k.(map[string]any); k["name"] == "first admin key" {
			return k["id"].(string)
		}
	}
	t.Fatalf("no first admin key: %d %s", r.Status, r.Body)
	return ""
}

// TestKeyRevocation: only admins revoke keys other than their own; a
// seller or buyer key may revoke neither its org's admin key nor another
// key of its own role, only itself.
func TestKeyRevocation(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	api := mk.api
	sellerAdminID, buyerAdminID := firstKeyID(t, api.with(mk.seller)), firstKeyID(t, api.with(mk.buyer))
	_, s1 := mintKey(t, api.with(mk.seller), map[string]any{"name": "ci", "role": "seller"})
	s2, _ := mintKey(t, api.with(mk.seller), map[string]any{"name": "ci 2", "role": "seller"})
	b1ID, b1 := mintKey(t, api.with(mk.buyer), map[string]any{"name": "orchestrator", "role": "buyer"})
	b2, _ := mintKey(t, api.with(mk.buyer), map[string]any{"name": "orchestrator 2", "role": "buyer"})
	for _, tc := range []struct {
		name, key, target string
	}{
		{"seller key revokes the admin key", s1, sellerAdminID},
		{"seller key revokes another seller key", s1, s2},
		{"buyer key revokes the admin key", b1, buyerAdminID},
		{"buyer key revokes another buyer key", b1, b2},
	} {
		if r := api.with(tc.key).do("DELETE", "/api/v1/api-keys/"+tc.target, nil); r.Status != 403 || r.code() != "revoke_forbidden" {
			t.Errorf("%s: %d %s, want 403 revoke_forbidden", tc.name, r.Status, r.Body)
		}
	}
	for _, admin := range []string{mk.seller, mk.buyer} {
		r := api.with(admin).do("GET", "/api/v1/api-keys", nil)
		if r.Status != 200 || strings.Contains(string(r.Body), `"revoked_at":"`) {
			t.Errorf("after the refused revocations, the admin's key list: %d %s", r.Status, r.Body)
		}
	}
	if r := api.with(b1).do("DELETE", "/api/v1/api-keys/"+b1ID, nil); r.Status != 200 || r.str("revoked_at") == "" {
		t.Errorf("buyer key revokes itself: %d %s", r.Status, r.Body)
	}
}

// TestKeyBudgetEscape: a key capped at a monthly budget cannot mint an
// uncapped key, nor one with a larger budget, nor a wider role; what it
// gives a key it mints is taken from its own budget.
func TestKeyBudgetEscape(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	api := mk.api
	_, capped := mintKey(t, api.with(mk.buyer), map[string]any{"name": "capped", "role": "buyer", "monthly_budget_micros": 1000})
	for _, budget := range []any{nil, 1001} {
		r := api.with(capped).do("POST", "/api/v1/api-keys", map[string]any{"name": "escape", "monthly_budget_micros": budget})
		if r.Status != 403 || r.code() != "budget_escalation" || strings.Join(r.errorFields(), " ") != "monthly_budget_micros:within_budget" {
			t.Errorf("capped key mints a key with budget %v: %d %s, want 403 budget_escalation", budget, r.Status, r.Body)
		}
	}
	if r := api.with(capped).do("POST", "/api/v1/api-keys", map[string]any{"name": "admin escape", "role": "admin", "monthly_budget_micros": 1}); r.Status != 403 || r.code() != "role_escalation" {
		t.Errorf("buyer key mints an admin key: %d %s", r.Status, r.Body)
	}
	mintKey(t, api.with(capped), map[string]any{"name": "sub-agent", "monthly_budget_micros": 400})
	budgets := map[string]any{}
	for _, k := range api.with(mk.buyer).do("GET", "/api/v1/api-keys", nil).JSON["items"].([]any) {
		k := k.(map[string]any)
		budgets[k["name"].(string)] = k["monthly_budget_micros"]
	}
	if budgets["capped"] != float64(600) || budgets["sub-agent"] != float64(400) || budgets["escape"] != nil {
		t.Errorf("budgets after minting: %v, want capped 600, sub-agent 400, no escape key", budgets)
	}
}

// TestSellerUsageHidesBuyersKeys: the buyer calls the agent; the seller
// sees its buyers in usage, never their API keys, in JSON or CSV.
func TestSellerUsageHidesBuyersKeys(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	api := mk.api
	buyerAdminID := firstKeyID(t, api.with(mk.buyer))
	if _, e := (rpc{t: t, url: mk.ep03, key: mk.buyer}).call("message/send", msg03("usage a seller must not trace to a key", nil)); e != nil {
		t.Fatal(e)
	}
	usageRows(t, mk.m, meterEnv{}, 1)
	seller := api.with(mk.seller)
	for _, accept := range []string{"application/json", "text/csv"} {
		status, body := seller.get("/api/v1/usage?scope=seller&group_by=api_key", accept)
		if status != 422 || !strings.Contains(body, `"field":"group_by","rule":"scope"`) || strings.Contains(body, buyerAdminID) {
			t.Errorf("seller usage by API key (%s): %d %s, want 422 group_by:scope", accept, status, body)
		}
		status, body = seller.get("/api/v1/usage?scope=seller&group_by=buyer&api_key_id="+buyerAdminID, accept)
		if status != 422 || !strings.Contains(body, `"field":"api_key_id","rule":"scope"`) {
			t.Errorf("seller usage filtered on a buyer's key (%s): %d %s, want 422 api_key_id:scope", accept, status, body)
		}
		for _, g := range []string{"task", "buyer", "listing", "day", "seller"} {
			status, body := seller.get("/api/v1/usage?scope=seller&group_by="+g, accept)
			if status != 200 || strings.Contains(body, buyerAdminID) {
				t.Errorf("seller usage by %s (%s): %d %s; it must answer without the buyer's key id %s", g, accept, status, body, buyerAdminID)
			}
		}
	}
	// The buyer still sees its own keys.
	if status, body := api.with(mk.buyer).get("/api/v1/usage?group_by=api_key", "text/csv"); status != 200 || !strings.Contains(body, buyerAdminID) {
		t.Errorf("buyer usage by key: %d %s", status, body)
	}
}
