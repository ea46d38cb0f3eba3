package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/contracts"
)

// kill stops the agent's process: its port refuses connections.
func (a *sdkAgent) kill() { a.srv.Close() }

// revive starts the agent again on the port it had, as a restarted
// process would.
func (a *sdkAgent) revive(t *testing.T) {
	t.Helper()
	addr := strings.TrimPrefix(a.URL, "http://")
	var ln net.Listener
	var err error
	for range 50 { // the old listener's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: a.srv.Config.Handler}}
	srv.Start()
	a.srv = srv
	t.Cleanup(srv.Close)
}

// TestAgentHealth (issue 26, item 2): an official-SDK agent behind a
// listing is killed (its port refuses connections). Within the health
// check interval the catalog API and the listing's page show it down,
// saying since when and why, and its seller gets one alert (listed by the
// API and POSTed to its alert webhook); the meter ejects its endpoint after
// 5 failed calls in a row and answers the next ones at once (/readyz lists
// it, /metrics counts it); restarted on the same port, it is shown
// answering again and, after the backoff, readmitted by a call that
// succeeds. On both storage set-ups.
func TestAgentHealth(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, _ string) {
		env["AGENTMARKET_HEALTH_CHECK_INTERVAL"] = "1s"
		env["AGENTMARKET_PUSH_RETRY_BASE"] = "100ms"
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
		_, buyerKey := signup(t, api, "Globex", "it@globex.example")
		hook := newAlertHook(t) // answers 500 first: the alert is retried
		if r := api.with(seller).do("PUT", "/api/v1/alerts/settings", map[string]any{"webhook": map[string]any{"url": hook.srv.URL + "/alerts", "token": "tok-seller"}}); r.Status != 200 {
			t.Fatalf("alert settings: %d %s", r.Status, r.Body)
		}
		ag := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
		listing, endpoint := listAndSubscribe(t, api, seller, buyerKey, ag.URL)
		buyer := newSDKBuyer(buyerKey)

		health := func() map[string]any {
			r := api.do("GET", "/api/v1/listings/"+listing, nil) // what anyone sees
			if r.Status != 200 {
				t.Fatalf("listing: %d %s", r.Status, r.Body)
			}
			h, _ := r.JSON["agent_health"].(map[string]any)
			return h
		}
		waitFor(t, "the agent shown answering", 5*time.Second, func() bool { return health()["state"] == "answering" })
		if page := api.do("GET", "/listings/"+listing, nil); !strings.Contains(string(page.Body), `data-agent="answering">Agent answering`) {
			t.Errorf("the listing's page does not say the agent answers:\n%s", page.Body)
		}
		ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), 30*time.Second)
		defer cancel()
		cl, _, _, err := buyer.connect(ctx, endpoint, "1.0", a2a.TransportProtocolJSONRPC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))}); err != nil {
			t.Fatalf("a call while the agent runs: %v", err)
		}

		ag.kill()
		killed := time.Now()
		var h map[string]any
		waitFor(t, "the agent shown down", 5*time.Second, func() bool { h = health(); return h["state"] == "down" })
		t.Logf("shown down %s after the kill", time.Since(killed).Round(10*time.Millisecond))
		cause, _ := h["cause"].(string)
		if want := "connection refused by " + strings.TrimPrefix(ag.URL, "http://"); !strings.HasPrefix(cause, want) || h["since"] == nil {
			t.Errorf("agent health %v, want down since a time, the cause starting %q", h, want)
		}
		eps, _ := h["endpoints"].([]any)
		if len(eps) != 1 || get(eps[0].(map[string]any), "url") != ag.URL || get(eps[0].(map[string]any), "up") != false {
			t.Errorf("endpoints %v, want the agent's one, down", eps)
		}
		for _, path := range []string{"/", "/listings/" + listing} {
			page := string(api.do("GET", path, nil).Body)
			if !strings.Contains(page, `data-agent="down">Agent down since`) || !strings.Contains(page, "connection refused by") {
				t.Errorf("page %s does not show the agent down with its cause:\n%s", path, page)
			}
		}
		// The meter's own calls eject the endpoint after 5 failures in a
		// row; calls then fail at once, saying so, and /readyz lists it.
		for i := range 5 {
			if _, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))}); err == nil ||
				strings.Contains(err.Error(), "ejected") {
				t.Fatalf("call %d to the killed agent: %v, want it to fail trying", i+1, err)
			}
		}
		began := time.Now()
		_, err = cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))})
		if err == nil || !strings.Contains(err.Error(), "the agent could not be reached: the meter ejected its endpoint after 5 failed calls in a row, until ") {
			t.Errorf("a call once ejected: %v", err)
		}
		t.Logf("a call once ejected failed in %s", time.Since(began).Round(time.Millisecond))
		ready := string(api.do("GET", "/readyz", nil).Body)
		if !strings.Contains(ready, `"agent_endpoints":{"state":"up","detail":"1 ejected: `+ag.URL+` until `) {
			t.Errorf("/readyz does not list the ejected endpoint: %s", ready)
		}
		metrics := string(api.do("GET", "/metrics", nil).Body)
		for _, want := range []string{"agentmarket_meter_endpoint_ejections_total 1", "agentmarket_meter_endpoints_ejected 1", `agentmarket_marketplace_health_probes_total{result="down"}`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}

		// One alert for the down period, however many probes fail.
		waitFor(t, "the seller's alert webhook", 10*time.Second, func() bool { return len(hook.received()) == 2 })
		time.Sleep(2500 * time.Millisecond) // two more rounds of probes, still down
		reqs := hook.received()
		if len(reqs) != 2 || reqs[0].deliveryID != reqs[1].deliveryID || reqs[1].token != "tok-seller" {
			t.Errorf("the webhook got %d requests, want one alert delivered twice (the first answered 500): %+v", len(reqs), reqs)
		}
		var got contracts.AgentDownBody
		if err := json.Unmarshal(reqs[len(reqs)-1].raw, &got); err != nil || got.Type != "agent_down" || got.ListingID != listing ||
			got.ListingName != "SDK 1.0 JSONRPC agent" || !strings.HasPrefix(got.Cause, "connection refused by") || got.Since.IsZero() {
			t.Errorf("webhook got %s, want an agent_down alert for %s", reqs[len(reqs)-1].raw, listing)
		}
		r := api.with(seller).do("GET", "/api/v1/alerts", nil)
		items, _ := r.JSON["items"].([]any)
		if len(items) != 1 || get(items[0].(map[string]any), "budget_kind") != "agent_down" || get(items[0].(map[string]any), "budget_id") != listing {
			t.Errorf("the seller's alerts: %s", r.Body)
		}

		ag.revive(t)
		waitFor(t, "the agent shown answering again", 5*time.Second, func() bool { return health()["state"] == "answering" })
		if page := string(api.do("GET", "/", nil).Body); strings.Contains(page, `data-agent="down"`) || !strings.Contains(page, `data-agent="answering"`) {
			t.Errorf("the catalog still shows the agent down")
		}
		var lastErr error
		waitFor(t, "a call served again", 10*time.Second, func() bool {
			_, lastErr = cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello again"))})
			return lastErr == nil
		})
		if ready := string(api.do("GET", "/readyz", nil).Body); !strings.Contains(ready, `"agent_endpoints":{"state":"up","detail":"none ejected"}`) {
			t.Errorf("/readyz after readmission: %s", ready)
		}
	})
}

// TestDemoAgentsAnswerHealthProbes: the built-in demo agents answer the
// marketplace's health probe (each in its own protocol version), so the
// demo's catalog shows every agent answering.
func TestDemoAgentsAnswerHealthProbes(t *testing.T) {
	m := startMarketplace(t, map[string]string{"AGENTMARKET_DEMO_PORT": "0", "AGENTMARKET_FETCH_ALLOW_CIDRS": "", "AGENTMARKET_HEALTH_CHECK_INTERVAL": "1s"}, "--demo")
	waitOutput(t, m, "the operator ")
	api := client{t: t, base: m.URL}
	var states []string
	waitFor(t, "every demo agent shown answering", 10*time.Second, func() bool {
		r := api.do("GET", "/api/v1/listings", nil)
		items, _ := r.JSON["items"].([]any)
		states = states[:0]
		for _, it := range items {
			l := it.(map[string]any)
			states = append(states, fmt.Sprint(get(l, "name"), ": ", get(l, "agent_health", "state"), " ", get(l, "agent_health", "cause")))
		}
		return len(items) > 0 && !strings.Contains(strings.Join(states, "|"), ": unknown") && !strings.Contains(strings.Join(states, "|"), ": down")
	})
	t.Logf("demo agents: %s", strings.Join(states, "; "))
}

// TestWebSellerSeesAgentDown: in Chromium, a seller lists an official-SDK
// agent; its console shows the agent answering, and once the agent is
// killed, down since when and why, without a refresh by hand.
func TestWebSellerSeesAgentDown(t *testing.T) {
	b := newBrowser(t)
	m := startMarketplace(t, map[string]string{"AGENTMARKET_HEALTH_CHECK_INTERVAL": "1s"})
	ag := startSDKAgent(t, "0.3", a2a.TransportProtocolJSONRPC)
	b.signUp(m.URL, "Down Agents", "owner@down-agents.example")
	b.open(m.URL + "/seller/new")
	b.fill(map[string]string{"#card_url": ag.URL + "/", "#monthly_fee": "10"})
	b.submit(`form[action="/seller/new"] button[type=submit]`, `.buy-box`)
	waitFor(t, "the console to show the agent answering", 10*time.Second, func() bool {
		b.open(m.URL + "/seller")
		return b.count(`[data-agent="answering"]`) == 1
	})
	ag.kill()
	waitFor(t, "the console to show the agent down", 10*time.Second, func() bool {
		b.open(m.URL + "/seller")
		return b.count(`[data-agent="down"]`) == 1
	})
	if got := b.text(`[data-agent="down"]`); !strings.HasPrefix(got, "Agent down since 20") {
		t.Errorf("badge %q", got)
	}
	if got, want := b.text(`[data-agent-cause]`), "(connection refused by "+strings.TrimPrefix(ag.URL, "http://"); !strings.HasPrefix(got, want) {
		t.Errorf("cause %q, want it to start %q", got, want)
	}
}
