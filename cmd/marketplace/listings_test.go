package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

var pricing = map[string]any{
	"currency":                         "usd",
	"monthly_fee_micros":               49_000_000,
	"input_tokens_per_million_micros":  3_000_000,
	"output_tokens_per_million_micros": 15_000_000,
	"compute_per_hour_micros":          360_000,
	"per_task_micros":                  1_000,
	"included_input_tokens":            100_000,
}

// TestListAndFind lists a 0.3 card and a 1.0 card by URL, each served by a
// local agent, and finds them by skill and free text, on both databases.
func TestListAndFind(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, dsn string) {
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		sellerOrg, sellerAdmin := signup(t, api, "Acme Agents", "owner@acme.example")
		_, buyerAdmin := signup(t, api, "Globex", "it@globex.example")

		r := api.with(sellerAdmin).do("POST", "/api/v1/api-keys", map[string]any{"name": "listing bot", "role": "seller"})
		if r.Status != 201 || !strings.HasPrefix(r.str("key"), "amk_") {
			t.Fatalf("create seller key: %d %s", r.Status, r.Body)
		}
		seller := api.with(r.str("key"))
		buyer := api.with(buyerAdmin)

		v03 := agent(t, testdataCard(t, "summarizer-v0.3.json"))
		v10 := agent(t, testdataCard(t, "translator-v1.0.json"))
		const secret = "Bearer sk-live-DO-NOT-LEAK-4242"
		ids := map[string]string{}
		for name, a := range map[string]*httptest.Server{"summarizer": v03, "translator": v10} {
			r := seller.do("POST", "/api/v1/listings", map[string]any{
				"card_url":      a.URL,
				"pricing":       pricing,
				"upstream_auth": map[string]string{"header": "Authorization", "value": secret},
			})
			if r.Status != 201 {
				t.Fatalf("list %s: %d %s", name, r.Status, r.Body)
			}
			if r.str("status") != "published" || r.str("health") != "healthy" || r.str("seller_org_id") != sellerOrg {
				t.Errorf("%s listed as %s/%s by %s", name, r.str("status"), r.str("health"), r.str("seller_org_id"))
			}
			if r.JSON["has_upstream_auth"] != true || strings.Contains(string(r.Body), "DO-NOT-LEAK") {
				t.Errorf("%s: credentials must be stored and never shown: %s", name, r.Body)
			}
			if got := r.str("card_url"); got != a.URL+"/.well-known/agent-card.json" {
				t.Errorf("%s card_url = %q", name, got)
			}
			ids[name] = r.str("id")
		}

		// The versions, as the card said.
		r = buyer.do("GET", "/api/v1/listings/"+ids["summarizer"], nil)
		if pv := fmt.Sprint(r.JSON["protocol_versions"]); r.Status != 200 || pv != "[0.3]" {
			t.Errorf("0.3 listing: %d protocol_versions %s", r.Status, pv)
		}
		r = buyer.do("GET", "/api/v1/listings/"+ids["translator"], nil)
		if pv := fmt.Sprint(r.JSON["protocol_versions"]); r.Status != 200 || pv != "[1.0]" {
			t.Errorf("1.0 listing: %d protocol_versions %s", r.Status, pv)
		}

		find := func(query string) []string {
			t.Helper()
			r := buyer.do("GET", "/api/v1/listings?"+query, nil)
			if r.Status != 200 {
				t.Fatalf("search %s: %d %s", query, r.Status, r.Body)
			}
			var got []string
			for _, it := range r.JSON["items"].([]any) {
				got = append(got, it.(map[string]any)["id"].(string))
			}
			if total := int(r.JSON["total"].(float64)); total != len(got) && !strings.Contains(query, "page=") {
				t.Errorf("search %s: total %v for %d items", query, r.JSON["total"], len(got))
			}
			return got
		}
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"skill=summarize", []string{ids["summarizer"]}},
			{"skill=translate", []string{ids["translator"]}},
			{"q=one-page+brief", []string{ids["summarizer"]}},
			{"q=forty+languages", []string{ids["translator"]}},
			{"q=nothing-matches-this", nil},
			{"tag=translation", []string{ids["translator"]}},
			{"input_mode=application/pdf", []string{ids["summarizer"]}},
			{"push=true", []string{ids["translator"]}},
			{"streaming=true&sort=-name", []string{ids["translator"], ids["summarizer"]}},
			{"max_monthly_fee_micros=1000", nil},
			{"seller=" + sellerOrg + "&page_size=1&page=2", []string{ids["translator"]}},
		} {
			if got := find(tc.query); !slices.Equal(got, tc.want) {
				t.Errorf("search %s = %v, want %v", tc.query, got, tc.want)
			}
		}

		// Credentials are sealed in the row, never in clear.
		row := dumpRow(t, m, dsn, ids["translator"])
		if strings.Contains(row, "DO-NOT-LEAK") || strings.Contains(row, "sk-live") {
			t.Fatalf("seller credentials readable in the database row:\n%s", row)
		}
		if !strings.Contains(row, "upstream_auth=") {
			t.Fatalf("row dump has no upstream_auth column:\n%s", row)
		}

		// Version history: a changed card is kept beside the first one.
		r = seller.do("GET", "/api/v1/listings/"+ids["translator"]+"/versions", nil)
		if r.Status != 200 || len(r.JSON["items"].([]any)) != 1 {
			t.Fatalf("versions: %d %s", r.Status, r.Body)
		}
	})
}

// TestRejections: every bad listing gets a clear error naming the field.
func TestRejections(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, _ string) {
		env["AGENTMARKET_CARD_FETCH_TIMEOUT"] = "1s"
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		_, key := signup(t, api, "Acme Agents", "owner@acme.example")
		seller := api.with(key)

		big := agent(t, []byte(`{"name":"`+strings.Repeat("x", 70<<10)+`"}`))
		noName := agent(t, []byte(strings.Replace(string(testdataCard(t, "translator-v1.0.json")), `"name": "Translator",`, "", 1)))
		html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>hello</html>"))
		}))
		defer html.Close()
		var loop *httptest.Server
		loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, loop.URL+"/again"+r.URL.Path, http.StatusFound)
		}))
		defer loop.Close()
		hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		}))
		defer hang.Close()
		good := agent(t, testdataCard(t, "translator-v1.0.json"))

		cases := []struct {
			name     string
			body     map[string]any
			code     string
			field    string // "field:rule" expected among the field errors
			inMesage string
		}{
			{"card over 64 KiB", map[string]any{"card_url": big.URL, "pricing": pricing}, "card_too_large", "card_url:max_bytes", ""},
			{"card missing name", map[string]any{"card_url": noName.URL, "pricing": pricing}, "card_invalid", "card.name:required", ""},
			{"private address", map[string]any{"card_url": "http://10.0.0.1/", "pricing": pricing}, "card_url_refused", "card_url:public_address", "10.0.0.1"},
			{"cloud metadata", map[string]any{"card_url": "http://169.254.169.254/latest/meta-data", "pricing": pricing}, "card_url_refused", "card_url:public_address", "169.254.169.254"},
			{"ipv6 loopback", map[string]any{"card_url": "http://[::1]:9/", "pricing": pricing}, "card_url_refused", "card_url:public_address", "::1"},
			{"not JSON", map[string]any{"card_url": html.URL + "/card", "pricing": pricing}, "card_not_json", "card_url:json_object", "text/html"},
			{"redirect loop", map[string]any{"card_url": loop.URL + "/card", "pricing": pricing}, "card_fetch_redirects", "card_url:max_redirects", "redirect"},
			{"no answer", map[string]any{"card_url": hang.URL + "/card", "pricing": pricing}, "card_fetch_timeout", "card_url:timeout", "within"},
			{"negative price", map[string]any{"card_url": good.URL, "pricing": map[string]any{"currency": "usd", "monthly_fee_micros": -5}}, "invalid_listing", "pricing.monthly_fee_micros:non_negative", ""},
			{"fractional price", map[string]any{"card_url": good.URL, "pricing": map[string]any{"currency": "usd", "per_task_micros": 1.5}}, "invalid_listing", "pricing.per_task_micros:integer", ""},
			{"no card at all", map[string]any{"pricing": pricing}, "invalid_listing", "card_url:required", ""},
			{"pasted card missing skills", map[string]any{"card": map[string]any{"name": "x"}, "pricing": pricing}, "card_invalid", "card.skills:required", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := seller.do("POST", "/api/v1/listings", tc.body)
				if r.Status != 422 || r.code() != tc.code {
					t.Fatalf("got %d %s, want 422 %s", r.Status, r.Body, tc.code)
				}
				if !slices.Contains(r.errorFields(), tc.field) {
					t.Errorf("fields %v, want %s", r.errorFields(), tc.field)
				}
				if !strings.Contains(r.str("error", "message"), tc.inMesage) {
					t.Errorf("message %q should mention %q", r.str("error", "message"), tc.inMesage)
				}
			})
		}
		t.Run("malformed JSON", func(t *testing.T) {
			r := seller.do("POST", "/api/v1/listings", `{"card_url": `)
			if r.Status != 422 || r.code() != "malformed_json" {
				t.Fatalf("got %d %s", r.Status, r.Body)
			}
		})
		t.Run("unknown field", func(t *testing.T) {
			r := seller.do("POST", "/api/v1/listings", map[string]any{"card_url": good.URL, "pricing": pricing, "colour": "red"})
			if r.Status != 422 || !slices.Contains(r.errorFields(), "colour:unknown") {
				t.Fatalf("got %d %s", r.Status, r.Body)
			}
		})
		t.Run("nothing was stored", func(t *testing.T) {
			r := seller.do("GET", "/api/v1/listings?seller=me", nil)
			if r.JSON["total"] != float64(0) {
				t.Fatalf("rejected listings were stored: %s", r.Body)
			}
		})
	})
}

// TestOwnership: roles and org boundaries hold on every listing route.
func TestOwnership(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, _ string) {
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		_, aKey := signup(t, api, "Acme Agents", "owner@acme.example")
		_, bKey := signup(t, api, "Initech", "owner@initech.example")
		a, b := api.with(aKey), api.with(bKey)
		good := agent(t, testdataCard(t, "translator-v1.0.json"))

		r := a.do("POST", "/api/v1/listings", map[string]any{"card_url": good.URL, "pricing": pricing})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := r.str("id")

		r = b.do("PATCH", "/api/v1/listings/"+id, map[string]any{"pricing": map[string]any{"currency": "usd", "monthly_fee_micros": 1}})
		if r.Status != 403 || r.code() != "not_listing_owner" {
			t.Errorf("another org's PATCH: %d %s", r.Status, r.Body)
		}
		r = b.do("POST", "/api/v1/listings/"+id+"/refresh", nil)
		if r.Status != 403 {
			t.Errorf("another org's refresh: %d %s", r.Status, r.Body)
		}
		r = a.do("GET", "/api/v1/listings/"+id, nil)
		if r.JSON["pricing"].(map[string]any)["monthly_fee_micros"] != float64(49_000_000) {
			t.Errorf("price changed by another org: %s", r.Body)
		}

		r = b.do("POST", "/api/v1/api-keys", map[string]any{"name": "orchestrator", "role": "buyer"})
		if r.Status != 201 {
			t.Fatalf("buyer key: %d %s", r.Status, r.Body)
		}
		buyer := api.with(r.str("key"))
		r = buyer.do("POST", "/api/v1/listings", map[string]any{"card_url": good.URL, "pricing": pricing})
		if r.Status != 403 || r.code() != "forbidden" {
			t.Errorf("buyer key created a listing: %d %s", r.Status, r.Body)
		}
		r = buyer.do("POST", "/api/v1/api-keys", map[string]any{"name": "sneaky", "role": "admin"})
		if r.Status != 403 || r.code() != "role_escalation" {
			t.Errorf("buyer minted an admin key: %d %s", r.Status, r.Body)
		}
		if r := buyer.do("GET", "/api/v1/listings/"+id, nil); r.Status != 200 {
			t.Errorf("buyer cannot read a published listing: %d", r.Status)
		}

		// The seller updates its own plan: a new plan version.
		r = a.do("PATCH", "/api/v1/listings/"+id, map[string]any{"pricing": map[string]any{"currency": "usd", "monthly_fee_micros": 59_000_000}})
		if r.Status != 200 || r.JSON["pricing"].(map[string]any)["version"] != float64(2) {
			t.Errorf("own PATCH: %d %s", r.Status, r.Body)
		}

		// A revoked key stops working at once.
		r = a.do("GET", "/api/v1/api-keys", nil)
		keyID := r.JSON["items"].([]any)[0].(map[string]any)["id"].(string)
		if r := a.do("DELETE", "/api/v1/api-keys/"+keyID, nil); r.Status != 200 || r.str("revoked_at") == "" {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		if r := a.do("GET", "/api/v1/listings", nil); r.Status != 401 || r.code() != "invalid_api_key" {
			t.Errorf("revoked key: %d %s", r.Status, r.Body)
		}
		if r := api.do("GET", "/api/v1/api-keys", nil); r.Status != 401 || r.code() != "missing_api_key" {
			t.Errorf("no key: %d %s", r.Status, r.Body)
		}
	})
}

// TestPayoutAccount: a seller attaches its Stripe Connect account.
func TestPayoutAccount(t *testing.T) {
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, admin := signup(t, api, "Acme Agents", "owner@acme.example")
	a := api.with(admin)
	if r := a.do("PATCH", "/api/v1/org", map[string]any{"connect_account_id": "not-an-account"}); r.Status != 422 || !slices.Contains(r.errorFields(), "connect_account_id:format") {
		t.Errorf("bad account: %d %s", r.Status, r.Body)
	}
	if r := a.do("PATCH", "/api/v1/org", map[string]any{"connect_account_id": "acct_1A2b3C4d5E6f"}); r.Status != 200 || r.str("connect_account_id") != "acct_1A2b3C4d5E6f" {
		t.Errorf("set account: %d %s", r.Status, r.Body)
	}
	if r := a.do("GET", "/api/v1/org", nil); r.str("connect_account_id") != "acct_1A2b3C4d5E6f" {
		t.Errorf("get org: %s", r.Body)
	}
	r := a.do("POST", "/api/v1/api-keys", map[string]any{"name": "bot", "role": "buyer"})
	if r := api.with(r.str("key")).do("PATCH", "/api/v1/org", map[string]any{"connect_account_id": ""}); r.Status != 403 {
		t.Errorf("buyer key changed payouts: %d %s", r.Status, r.Body)
	}
}
