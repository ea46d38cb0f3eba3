package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// The meter's SSRF guard, end to end. No test here sends a packet outside
// loopback even if the guard were broken: addresses outside it are only
// ever named in pasted cards (refused before anything is dialled) or given
// by httpfetchtest's in-memory DNS to a dialer that fails the test rather
// than connect outside loopback.

// counted serves h on loopback and counts the requests that reach it.
func counted(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// demoAt serves a 0.3 demo agent on loopback whose card names it by host
// (a name the test's DNS answers), and returns its card and its counter.
func demoAt(t *testing.T, host string) ([]byte, *atomic.Int32) {
	t.Helper()
	a := demoagent.New(demoagent.Config{Version: "0.3", Name: "Agent at " + host, StepDelay: time.Millisecond})
	srv, hits := counted(t, a)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	a.SetBaseURL("http://" + net.JoinHostPort(host, port) + "/")
	res, err := http.Get(srv.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	card, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("card: %d %v", res.StatusCode, err)
	}
	hits.Store(0)
	return card, hits
}

// pasteAndSubscribe lists card (pasted) for seller and subscribes buyer;
// it returns the buyer's endpoint.
func pasteAndSubscribe(t *testing.T, api client, seller, buyer string, card []byte) string {
	t.Helper()
	r := api.with(seller).do("POST", "/api/v1/listings", fmt.Sprintf(`{"card": %s, "pricing": {"currency": "usd", "per_task_micros": 1000}}`, card))
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	s := api.with(buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": r.str("id")})
	if s.Status != 201 {
		t.Fatalf("subscribe: %d %s", s.Status, s.Body)
	}
	return s.str("endpoint")
}

// wantRefusedEverywhere calls ep in every binding a buyer may use and
// wants the meter's refusal of the agent's address, which does not tell
// the buyer what the address is.
func wantRefusedEverywhere(t *testing.T, ep, key, addr string) {
	t.Helper()
	c := rpc{t: t, url: ep, key: key}
	res, e := c.call("message/send", msg03("hello", nil))
	if res != nil || e["code"] != float64(a2aproxy.CodeUpstreamRefused) || !strings.Contains(fmt.Sprint(e["message"]), "does not connect to this agent's address") {
		t.Errorf("message/send with the agent at %s: %v %v, want error %d", addr, res, e, a2aproxy.CodeUpstreamRefused)
	}
	if strings.Contains(fmt.Sprint(e), addr) {
		t.Errorf("the buyer is told the address: %v", e)
	}
	evs := c.stream("message/stream", msg03("hello", nil))
	if len(evs) != 1 || get(evs[0].data, "error", "code") != float64(a2aproxy.CodeUpstreamRefused) {
		t.Errorf("message/stream with the agent at %s: %v, want one error event %d", addr, evs, a2aproxy.CodeUpstreamRefused)
	}
	status, body, _ := restCall(t, key, "POST", ep+"/message:send", "1.0",
		map[string]any{"message": map[string]any{"messageId": "r1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}})
	if status != 502 || !strings.Contains(fmt.Sprint(body), "UPSTREAM_REFUSED") {
		t.Errorf("REST send with the agent at %s: %d %v, want 502 UPSTREAM_REFUSED", addr, status, body)
	}
}

// TestListingRefusesInternalEndpoints: a card, pasted or fetched, whose
// agent endpoints are internal addresses is refused when it is listed,
// with a field error naming each one; loopback too unless
// AGENTMARKET_FETCH_ALLOW_CIDRS opens it.
func TestListingRefusesInternalEndpoints(t *testing.T) {
	cardAt := func(urls ...string) string {
		var ifaces []string
		for _, u := range urls {
			ifaces = append(ifaces, fmt.Sprintf(`{"url": %q, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}`, u))
		}
		return fmt.Sprintf(`{"name": "Sneaky", "description": "d", "version": "1", "supportedInterfaces": [%s],
			"capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
			"skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]}`, strings.Join(ifaces, ","))
	}
	for _, tc := range []struct {
		name, allow, card, fields string
	}{
		{"metadata", "127.0.0.0/8", cardAt("https://93.184.216.34/a2a", "http://169.254.169.254/latest/meta-data/"),
			"card.supportedInterfaces[1].url:public_address"},
		{"private", "127.0.0.0/8", cardAt("http://10.0.0.1/a2a"), "card.supportedInterfaces[0].url:public_address"},
		{"IPv6 loopback", "127.0.0.0/8", cardAt("http://[::1]:8080/a2a"), "card.supportedInterfaces[0].url:public_address"},
		{"loopback without allowance", "", cardAt("http://127.0.0.1:8080/a2a"), "card.supportedInterfaces[0].url:public_address"},
		{"0.3 additional interface", "127.0.0.0/8", `{"protocolVersion": "0.3.0", "name": "Sneaky", "description": "d", "version": "1",
			"url": "https://93.184.216.34/a2a", "additionalInterfaces": [{"url": "http://[::ffff:169.254.169.254]/", "transport": "HTTP+JSON"}],
			"capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
			"skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]}`, "card.additionalInterfaces[0].url:public_address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMarketplace(t, map[string]string{"AGENTMARKET_FETCH_ALLOW_CIDRS": tc.allow})
			api := client{t: t, base: m.URL}
			sellerOrg, seller := signup(t, api, "Acme Agents", "owner@acme.example")
			r := api.with(seller).do("POST", "/api/v1/listings", fmt.Sprintf(`{"card": %s, "pricing": {"currency": "usd"}}`, tc.card))
			if r.Status != 422 || r.code() != "card_endpoint_refused" || strings.Join(r.errorFields(), " ") != tc.fields {
				t.Fatalf("list: %d %s, want 422 card_endpoint_refused with %s", r.Status, r.Body, tc.fields)
			}
			if tc.name == "0.3 additional interface" {
				return
			}
			// The same card served by an agent and fetched by URL.
			ag := agent(t, []byte(tc.card))
			r = api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": ag.URL, "pricing": map[string]any{"currency": "usd"}})
			want := "card_endpoint_refused"
			if tc.allow == "" {
				want = "card_url_refused" // the card itself is on loopback
			}
			if r.Status != 422 || r.code() != want {
				t.Errorf("list by URL: %d %s, want 422 %s", r.Status, r.Body, want)
			}
			if l := api.with(seller).do("GET", "/api/v1/listings?seller="+sellerOrg+"&status=published,draft,pending_review", nil); l.Status != 200 || l.JSON["total"] != float64(0) {
				t.Errorf("listings after the refusals: %d %s, want none", l.Status, l.Body)
			}
		})
	}
}

// TestMeterRefusesRebindingAgent: a listing whose agent's name resolved
// to an allowed address when it was listed, and resolves inside later
// (DNS rebinding), gets the meter's refusal on every binding, and the
// meter connects to nothing: the guard judges the address of each
// connection, not the name.
func TestMeterRefusesRebindingAgent(t *testing.T) {
	dns := httpfetchtest.NewDNS(map[string]string{"rebinding.test": "127.0.0.1", "steady.test": "127.0.0.1"})
	m := startMarketplaceWith(t, nil, []serve.Option{serve.WithDialer(httpfetchtest.Dialer(t, dns))})
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyer := signup(t, api, "Globex", "it@globex.example")
	badCard, badHits := demoAt(t, "rebinding.test")
	goodCard, goodHits := demoAt(t, "steady.test")
	bad := pasteAndSubscribe(t, api, seller, buyer, badCard)
	good := pasteAndSubscribe(t, api, seller, buyer, goodCard)

	// A name resolving to an allowed address is reached through the guard.
	if res, e := (rpc{t: t, url: good, key: buyer}).call("message/send", msg03("hello", nil)); e != nil || get(res, "status", "state") != "completed" {
		t.Fatalf("the steady agent: %v %v", res, e)
	}
	if goodHits.Load() == 0 {
		t.Fatal("the steady agent was not reached")
	}
	for _, addr := range []string{"10.0.0.1", "169.254.169.254", "fd00:ec2::254", "::ffff:10.0.0.1"} {
		dns.Set("rebinding.test", addr)
		wantRefusedEverywhere(t, bad, buyer, addr)
	}
	if n := badHits.Load(); n != 0 {
		t.Errorf("the rebinding agent's server got %d requests", n)
	}
}

// TestMeterRechecksAgentAddress: an agent listed while loopback was
// allowed is refused by a meter that no longer allows it (the process as
// shipped, with its own dialer): the address is judged at every connect,
// not only when the card is taken.
func TestMeterRechecksAgentAddress(t *testing.T) {
	env := map[string]string{"AGENTMARKET_ADDR": freeAddr(t), "AGENTMARKET_DATA_DIR": t.TempDir()}
	m := startMarketplace(t, env)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyer := signup(t, api, "Globex", "it@globex.example")
	card, hits := demoAt(t, "127.0.0.1")
	ep := pasteAndSubscribe(t, api, seller, buyer, card)
	if res, e := (rpc{t: t, url: ep, key: buyer}).call("message/send", msg03("hello", nil)); e != nil || get(res, "status", "state") != "completed" {
		t.Fatalf("while loopback is allowed: %v %v", res, e)
	}
	m.stop(t)
	env["AGENTMARKET_FETCH_ALLOW_CIDRS"] = "192.0.2.0/24" // no longer loopback
	startMarketplace(t, env)
	hits.Store(0)
	wantRefusedEverywhere(t, ep, buyer, "127.0.0.1")
	if n := hits.Load(); n != 0 {
		t.Errorf("the agent got %d requests", n)
	}
}

// TestMeterFollowsNoAgentRedirect: an agent answering a redirect (to the
// meter's own network, or anywhere) gets an error relayed to the buyer;
// the redirect is never followed, so what is behind it never reaches the
// buyer.
func TestMeterFollowsNoAgentRedirect(t *testing.T) {
	inside, insideHits := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":7,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},"secret":"AKIA-INSIDE"}}`)
	}))
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyer := signup(t, api, "Globex", "it@globex.example")
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect} {
		redirecting, _ := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, inside.URL+"/latest/meta-data/", code)
		}))
		card := fmt.Sprintf(`{"protocolVersion": "0.3.0", "name": "Redirecting %d", "description": "d", "version": "1", "url": %q,
			"capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
			"skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]}`, code, redirecting.URL+"/a2a")
		ep := pasteAndSubscribe(t, api, seller, buyer, []byte(card))

		c := rpc{t: t, url: ep, key: buyer}
		res, e := c.call("message/send", msg03("hello", nil))
		if res != nil || e["code"] != float64(-32006) || !strings.Contains(fmt.Sprint(e["message"]), "a redirect; the meter does not follow") {
			t.Errorf("%d: message/send: %v %v, want -32006 saying the agent redirected", code, res, e)
		}
		evs := c.stream("message/stream", msg03("hello", nil))
		if len(evs) != 1 || get(evs[0].data, "error", "code") != float64(-32006) {
			t.Errorf("%d: message/stream: %v, want one -32006 error event", code, evs)
		}
		status, body, _ := restCall(t, buyer, "POST", ep+"/message:send", "1.0",
			map[string]any{"message": map[string]any{"messageId": "r1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}})
		if status != 500 || !strings.Contains(fmt.Sprint(body), "INVALID_AGENT_RESPONSE") || strings.Contains(fmt.Sprint(body), "AKIA-INSIDE") {
			t.Errorf("%d: REST send: %d %v, want 500 INVALID_AGENT_RESPONSE", code, status, body)
		}
	}
	if n := insideHits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}
