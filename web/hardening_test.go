package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/storetest"
)

// wantSecurityHeaders checks the headers every page carries.
func wantSecurityHeaders(t *testing.T, what string, p page, private bool) {
	t.Helper()
	h := p.Header
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "form-action 'self'") {
		t.Errorf("%s: Content-Security-Policy %q", what, csp)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("%s: X-Frame-Options %q, X-Content-Type-Options %q, Referrer-Policy %q", what, h.Get("X-Frame-Options"),
			h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
	}
	if private && h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", what, h.Get("Cache-Control"))
	}
}

// TestRefusalPagesCarryHeaders: the page refusing a form without its CSRF
// token, an error page and a CSV export carry the same security headers as
// every other page (they cannot be framed, and are not cached).
func TestRefusalPagesCarryHeaders(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Acme Agents", "owner@acme.example")
	wantSecurityHeaders(t, "the home page", b.get("/"), true)

	refused := b.do("POST", "/keys", url.Values{"name": {"ci"}}) // no token
	if refused.Status != http.StatusForbidden {
		t.Fatalf("a form without its token: %d, want 403", refused.Status)
	}
	wantSecurityHeaders(t, "the CSRF refusal page", refused, true)
	wantSecurityHeaders(t, "a missing listing", b.get("/listings/lst_nosuch"), true)
	wantSecurityHeaders(t, "the usage CSV", b.get("/finance/usage.csv"), true)

	anon := s.browser(t)
	wantSecurityHeaders(t, "the sign-in page", anon.get("/signin"), false)
	wantSecurityHeaders(t, "a refused sign-in", anon.do("POST", "/signin", url.Values{"email": {"x@y.example"}, "password": {"x"}}), false)
}

// TestCSRFTokenNotFromQuery: the token is read from the form body or the
// X-CSRF-Token header, never from the query string (where logs, history
// and Referer headers would keep it).
func TestCSRFTokenNotFromQuery(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Acme Agents", "owner@acme.example")
	b.get("/keys")
	tok := b.csrf
	if p := b.do("POST", "/keys?csrf="+url.QueryEscape(tok), url.Values{"name": {"from-query"}}); p.Status != http.StatusForbidden {
		t.Errorf("the token in the query string: %d, want 403", p.Status)
	}
	if p := b.post("/keys", url.Values{"name": {"from-body"}}); p.Status >= 400 {
		t.Errorf("the token in the body: %d %s", p.Status, excerpt(p.Body))
	}
	mustNotContain(t, b.get("/keys"), "from-query")
	mustContain(t, b.get("/keys"), "from-body")
}

// TestBidiControls: names typed here may not carry characters that
// reorder text; a name that comes from elsewhere (an agent's card) is shown
// isolated, so it cannot reorder the page around it, and leaves them out
// of a CSV export.
func TestBidiControls(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	b := s.browser(t)
	b.get("/signup")
	p := b.post("/signup", url.Values{"org_name": {"Evil\u202e Corp"}, "email": {"e@evil.example"}, "password": {"correct horse battery"}})
	if p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, "reorder text") {
		t.Errorf("sign-up with U+202E in the org name: %d %s, want 422 naming the rule", p.Status, excerpt(p.Body))
	}
	b.signup("Acme Agents", "owner@acme.example")
	if p := b.post("/keys", url.Values{"name": {"ci\u2066"}}); p.Status != http.StatusUnprocessableEntity {
		t.Errorf("a key named with U+2066: %d, want 422", p.Status)
	}

	seller := s.actor(t, "owner@acme.example")
	var card map[string]any
	if err := json.Unmarshal(storetest.Card(t, "summarizer-v0.3.json"), &card); err != nil {
		t.Fatal(err)
	}
	card["name"] = "Summarizer\u202e 9.0$"
	raw, _ := json.Marshal(card)
	l, err := s.catalog.Create(context.Background(), seller, listings.CreateInput{Card: raw, Pricing: json.RawMessage(pricing)})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/listings/" + l.ID, "/seller"} {
		pg := b.get(path)
		if !strings.Contains(pg.Body, "<bdi>Summarizer\u202e 9.0$</bdi>") {
			t.Errorf("%s: the card's name is not isolated: %s", path, excerpt(pg.Body))
		}
	}
	if got := agentmarket.CSVCell("Summarizer\u202e 9.0$"); got != "Summarizer 9.0$" {
		t.Errorf("CSV cell %q", got)
	}
}

// TestRefreshShowsOutcome: "Refresh card" says what the service did: a
// refused refresh (another org's listing, none, a pasted card) shows the
// refusal in the API's words, a failed fetch says it failed, and only a
// fetched card says it was fetched.
func TestRefreshShowsOutcome(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	b := s.browser(t)
	b.signup("Acme Agents", "owner@acme.example")
	s.fetcher.cards["http://agent.test/"] = storetest.Card(t, "summarizer-v0.3.json")
	p := b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://agent.test/"}, "currency": {"usd"}, "monthly_fee": {"19"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("list: %d %s", p.Status, excerpt(p.Body))
	}
	byURL := strings.TrimPrefix(strings.Split(p.Location, "?")[0], "/listings/")
	pasted := s.list(t, s.actor(t, "owner@acme.example"), "translator-v1.0.json", pricing)

	b.get("/seller")
	p = b.post("/seller/listings/"+byURL+"/refresh", nil)
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=refreshed") {
		t.Errorf("a card that fetches: %d → %q", p.Status, p.Location)
	}
	mustContain(t, b.get(p.Location), "The card was fetched again.")

	delete(s.fetcher.cards, "http://agent.test/")
	b.get("/seller")
	p = b.post("/seller/listings/"+byURL+"/refresh", nil)
	if !strings.Contains(p.Location, "notice=refreshfailed") {
		t.Errorf("a card that no longer fetches: %d → %q", p.Status, p.Location)
	}
	pg := b.get(p.Location)
	mustContain(t, pg, "could not be fetched again")
	mustNotContain(t, pg, "The card was fetched again.")

	b.get("/seller")
	p = b.post("/seller/listings/"+pasted.ID+"/refresh", nil)
	if p.Status != http.StatusUnprocessableEntity {
		t.Errorf("a pasted card: %d, want 422", p.Status)
	}
	mustContain(t, p, "The listing has no card URL", "there is no URL to refresh it from")

	b.get("/seller")
	if p = b.post("/seller/listings/lst_nosuch/refresh", nil); p.Status != http.StatusNotFound || strings.Contains(p.Body, "fetched again") {
		t.Errorf("no such listing: %d %s, want 404", p.Status, excerpt(p.Body))
	}

	other := s.browser(t)
	other.signup("Globex Agents", "owner@globex.example")
	other.get("/seller")
	if p = other.post("/seller/listings/"+byURL+"/refresh", nil); (p.Status != http.StatusForbidden && p.Status != http.StatusNotFound) || strings.Contains(p.Body, "fetched again") {
		t.Errorf("another org's listing: %d %s, want a refusal", p.Status, excerpt(p.Body))
	}
}

// TestSignInThrottled: after five wrong passwords for an account, sign-in
// answers 429 with Retry-After, the right password included, until the
// wait is over; waits grow; other accounts from the same address are
// throttled too; a success resets; key sign-in and refused sign-ups are
// throttled the same way.
func TestSignInThrottled(t *testing.T) {
	s := newSite(t, siteOptions{})
	owner := s.browser(t)
	owner.signup("Acme Agents", "owner@acme.example")

	b := s.browser(t)
	b.get("/signin")
	signin := func(email, password string) page {
		t.Helper()
		b.get("/signin")
		return b.post("/signin", url.Values{"email": {email}, "password": {password}})
	}
	for i := range 5 {
		if p := signin("owner@acme.example", "wrong"); p.Status != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i+1, p.Status)
		}
	}
	p := signin("owner@acme.example", "correct horse battery")
	if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") != "1" {
		t.Fatalf("the right password after five wrong ones: %d Retry-After %q, want 429 and 1", p.Status, p.Header.Get("Retry-After"))
	}
	mustContain(t, p, "Too many failed attempts; try again in 1 seconds")
	if p := signin("other@acme.example", "wrong"); p.Status != http.StatusTooManyRequests {
		t.Errorf("another account from the same address: %d, want 429", p.Status)
	}
	s.clock.Advance(time.Second)
	if p := signin("owner@acme.example", "wrong again"); p.Status != http.StatusUnauthorized {
		t.Fatalf("after the wait, a wrong password: %d, want 401", p.Status)
	}
	if p := signin("owner@acme.example", "correct horse battery"); p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") != "2" {
		t.Errorf("after a sixth failure: %d Retry-After %q, want 429 and 2", p.Status, p.Header.Get("Retry-After"))
	}
	s.clock.Advance(2 * time.Second)
	if p := signin("owner@acme.example", "correct horse battery"); p.Status != http.StatusSeeOther {
		t.Fatalf("the right password after the wait: %d %s", p.Status, excerpt(p.Body))
	}
	// The success reset the account and the address.
	b.do("POST", "/signout", url.Values{"csrf": {b.csrf}})
	for i := range 5 {
		if p := signin("owner@acme.example", "wrong"); p.Status != http.StatusUnauthorized {
			t.Fatalf("after the reset, wrong password %d: %d, want 401", i+1, p.Status)
		}
	}

	k := s.browser(t)
	for i := range 5 {
		k.get("/signin")
		if p := k.post("/signin/key", url.Values{"api_key": {"amk_nosuchkey"}}); p.Status != http.StatusUnauthorized && p.Status != http.StatusTooManyRequests {
			t.Fatalf("unknown key %d: %d", i+1, p.Status)
		}
	}
	k.get("/signin")
	if p := k.post("/signin/key", url.Values{"api_key": {"amk_nosuchkey"}}); p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" {
		t.Errorf("a key sign-in after many failures from this address: %d, want 429 with Retry-After", p.Status)
	}
	s.clock.Advance(time.Hour)

	u := s.browser(t)
	for i := range 5 {
		u.get("/signup")
		if p := u.post("/signup", url.Values{"org_name": {"Copycat"}, "email": {"owner@acme.example"}, "password": {"correct horse battery"}}); p.Status != http.StatusConflict {
			t.Fatalf("sign-up with a taken e-mail %d: %d", i+1, p.Status)
		}
	}
	u.get("/signup")
	if p := u.post("/signup", url.Values{"org_name": {"Copycat"}, "email": {"x" + "@acme.example"}, "password": {"correct horse battery"}}); p.Status != http.StatusTooManyRequests {
		t.Errorf("a sign-up after five refused ones from this address: %d, want 429", p.Status)
	}
}
