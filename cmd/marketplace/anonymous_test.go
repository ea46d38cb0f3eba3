package main

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestAnonymousCatalog (issue 28, item 3): without a key, the API shows
// what the web catalog shows anyone: the published listings (searched,
// read one by one, their measured stats), in the view a signed-in buyer
// of another org gets, never the seller's settings; drafts and listings
// waiting for review do not exist; every other route still answers 401;
// past the per-address limit the reads answer 429 with Retry-After,
// while requests with a key go on.
func TestAnonymousCatalog(t *testing.T) {
	const limit = 25
	m := startMarketplace(t, map[string]string{"AGENTMARKET_ANONYMOUS_READS_PER_MINUTE": strconv.Itoa(limit), "AGENTMARKET_AUTO_APPROVE": "false"})
	api := client{t: t, base: m.URL}
	_, sellerKey := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyerKey := signup(t, api, "Globex", "it@globex.example")
	seller, buyer, anon := api.with(sellerKey), api.with(buyerKey), api

	const secret = "Bearer sk-live-DO-NOT-LEAK-2828"
	create := func(card string, draft bool, status string) string {
		t.Helper()
		r := seller.do("POST", "/api/v1/listings", map[string]any{"card_url": agent(t, testdataCard(t, card)).URL, "pricing": pricing,
			"upstream_auth": map[string]string{"header": "Authorization", "value": secret}, "draft": draft})
		if r.Status != 201 || r.str("status") != status {
			t.Fatalf("list %s: %d %s, want status %s", card, r.Status, r.Body, status)
		}
		return r.str("id")
	}
	published := create("translator-v1.0.json", false, "pending_review")
	if r := api.with(operatorKey(t, m)).do("PATCH", "/api/v1/listings/"+published, map[string]any{"status": "published"}); r.Status != 200 || r.str("status") != "published" {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	draft := create("summarizer-v0.3.json", true, "draft")
	pending := create("summarizer-v0.3.json", false, "pending_review")
	reads := 0 // the anonymous reads counted against the limit
	anonDo := func(method, path string) response {
		t.Helper()
		reads++
		return anon.do(method, path, nil)
	}

	// Search: the published listing only, in the public view.
	r := anonDo("GET", "/api/v1/listings")
	items, _ := r.JSON["items"].([]any)
	if r.Status != 200 || r.JSON["total"] != float64(1) || len(items) != 1 || items[0].(map[string]any)["id"] != published {
		t.Fatalf("anonymous search: %d %s", r.Status, r.Body)
	}
	if _, ok := items[0].(map[string]any)["has_upstream_auth"]; ok || strings.Contains(string(r.Body), "DO-NOT-LEAK") {
		t.Errorf("anonymous search shows the seller's settings: %s", r.Body)
	}
	if r := anonDo("GET", "/api/v1/listings?q=translate&streaming=false"); r.Status != 200 {
		t.Errorf("anonymous search with filters: %d %s", r.Status, r.Body)
	}
	if r := anonDo("GET", "/api/v1/listings?status=draft"); r.Status != 422 || r.code() != "invalid_query" {
		t.Errorf("anonymous search of drafts: %d %s, want 422 invalid_query", r.Status, r.Body)
	}

	// A listing: what a buyer of another org sees, card included.
	r = anonDo("GET", "/api/v1/listings/"+published)
	if r.Status != 200 || r.str("id") != published || r.JSON["card"] == nil {
		t.Fatalf("anonymous read: %d %s", r.Status, r.Body)
	}
	if b := buyer.do("GET", "/api/v1/listings/"+published, nil); b.Status != 200 || !reflect.DeepEqual(b.JSON, r.JSON) {
		t.Errorf("anonymous view differs from a buyer's:\n anonymous %s\n buyer     %s", r.Body, b.Body)
	}
	if _, ok := r.JSON["has_upstream_auth"]; ok || strings.Contains(string(r.Body), "DO-NOT-LEAK") {
		t.Errorf("anonymous read shows the seller's settings: %s", r.Body)
	}
	if s := seller.do("GET", "/api/v1/listings/"+published, nil); s.JSON["has_upstream_auth"] != true {
		t.Errorf("the seller no longer sees its own settings: %s", s.Body)
	}

	// Its stats: shown (null below the minimums), as to anyone.
	if r := anonDo("GET", "/api/v1/listings/"+published+"/stats"); r.Status != 200 || r.str("listing_id") != published || r.JSON["min_tasks"] == nil {
		t.Errorf("anonymous stats: %d %s", r.Status, r.Body)
	}

	// Drafts and listings waiting for review do not exist for a visitor.
	for _, id := range []string{draft, pending} {
		for _, p := range []string{"/api/v1/listings/" + id, "/api/v1/listings/" + id + "/stats"} {
			if r := anonDo("GET", p); r.Status != 404 || r.code() != "listing_not_found" {
				t.Errorf("anonymous GET %s: %d %s, want 404 listing_not_found", p, r.Status, r.Body)
			}
		}
	}

	// Everything else needs a key; a key that is wrong is refused as
	// before, even on the catalog reads.
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/listings/" + published + "/versions"},
		{"POST", "/api/v1/listings"},
		{"PATCH", "/api/v1/listings/" + published},
		{"POST", "/api/v1/listings/" + published + "/refresh"},
		{"GET", "/api/v1/offers"},
		{"GET", "/api/v1/subscriptions"},
		{"POST", "/api/v1/subscriptions"},
		{"GET", "/api/v1/org"},
		{"GET", "/api/v1/api-keys"},
		{"GET", "/api/v1/usage"},
		{"GET", "/api/v1/invoices/preview"},
	} {
		if r := anon.do(c.method, c.path, nil); r.Status != 401 || r.code() != "missing_api_key" {
			t.Errorf("anonymous %s %s: %d %s, want 401 missing_api_key", c.method, c.path, r.Status, r.Body)
		}
	}
	if r := api.with("amk_wrongwrongwrongwrongwrong").do("GET", "/api/v1/listings", nil); r.Status != 401 || r.code() != "invalid_api_key" {
		t.Errorf("a wrong key on the search: %d %s, want 401 invalid_api_key", r.Status, r.Body)
	}

	// The limit per address: the reads left in this minute go through,
	// then 429 with the wait. (Should the minute turn meanwhile, the
	// count starts again: at most one more window's worth goes through.)
	var res *http.Response
	for i := reads; i <= 2*limit+1; i++ {
		resp, err := http.Get(m.URL + "/api/v1/listings/" + published)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			res = resp
			if i < limit {
				t.Errorf("429 after %d anonymous reads, the limit is %d", i, limit)
			}
			break
		}
		if resp.StatusCode != 200 {
			t.Fatalf("anonymous read %d: %d", i+1, resp.StatusCode)
		}
	}
	if res == nil {
		t.Fatalf("no 429 after %d anonymous reads (limit %d a minute)", 2*limit+2, limit)
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Errorf("Retry-After %q, want 1 to 60 seconds", res.Header.Get("Retry-After"))
	}
	if r := anon.do("GET", "/api/v1/listings", nil); r.Status != 429 || r.code() != "rate_limited" {
		t.Errorf("search past the limit: %d %s, want 429 rate_limited", r.Status, r.Body)
	}
	if r := buyer.do("GET", "/api/v1/listings/"+published, nil); r.Status != 200 {
		t.Errorf("a key past the anonymous limit: %d %s", r.Status, r.Body)
	}
}
