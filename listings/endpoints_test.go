package listings_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

// The endpoints of a card are judged when the card is taken: nothing in
// these tests is dialled, names are answered by the env's in-memory DNS.

// card10 is a 1.0 card whose interfaces are at urls, in order.
func card10(urls ...string) json.RawMessage {
	var ifaces []map[string]string
	for _, u := range urls {
		ifaces = append(ifaces, map[string]string{"url": u, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
	}
	return mustJSON(map[string]any{"name": "Agent", "description": "d", "version": "1", "supportedInterfaces": ifaces,
		"capabilities": map[string]any{}, "defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"skills": []any{map[string]any{"id": "s", "name": "S", "description": "d", "tags": []string{"t"}}}})
}

// card03 is a 0.3 card at url with additional interfaces at more.
func card03(url string, more ...string) json.RawMessage {
	var ifaces []map[string]string
	for _, u := range more {
		ifaces = append(ifaces, map[string]string{"url": u, "transport": "HTTP+JSON"})
	}
	return mustJSON(map[string]any{"protocolVersion": "0.3.0", "name": "Agent", "description": "d", "version": "1", "url": url,
		"additionalInterfaces": ifaces, "capabilities": map[string]any{}, "defaultInputModes": []string{"text/plain"},
		"defaultOutputModes": []string{"text/plain"},
		"skills":             []any{map[string]any{"id": "s", "name": "S", "description": "d", "tags": []string{"t"}}}})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// A pasted card whose endpoints the meter must not dial is refused, each
// refused endpoint named by its JSON path, and no listing is created.
func TestCreateRefusesInternalEndpoints(t *testing.T) {
	tests := []struct {
		name      string
		card      json.RawMessage
		allowLoop bool
		fields    string
		message   []string // parts of the error message
	}{
		{"metadata", card10("https://agent.example.net/a2a", "http://169.254.169.254/latest/meta-data/"), true,
			"card.supportedInterfaces[1].url:public_address", []string{"card.supportedInterfaces[1].url: 169.254.169.254 is a cloud metadata address"}},
		{"private", card10("http://10.0.0.1/a2a"), true,
			"card.supportedInterfaces[0].url:public_address", []string{"10.0.0.1 is a private address"}},
		{"IPv6 loopback", card10("http://[::1]:8080/a2a"), true,
			"card.supportedInterfaces[0].url:public_address", []string{"::1 is a loopback address"}},
		{"loopback without allowance", card10("http://127.0.0.1:9/a2a"), false,
			"card.supportedInterfaces[0].url:public_address", []string{"127.0.0.1 is a loopback address"}},
		{"0.3 url", card03("http://169.254.169.254/"), true,
			"card.url:public_address", []string{"card.url: 169.254.169.254"}},
		{"0.3 additional interfaces", card03("https://agent.example.net/a2a", "https://agent.example.net/rest", "http://10.1.2.3:8080/rest"), true,
			"card.additionalInterfaces[1].url:public_address", []string{"card.additionalInterfaces[1].url: 10.1.2.3 is a private address"}},
		{"every refused one", card10("http://10.0.0.1/a", "https://agent.example.net/a2a", "http://192.168.1.1/b"), true,
			"card.supportedInterfaces[0].url:public_address card.supportedInterfaces[2].url:public_address", nil},
		{"a name resolving inside", card10("http://intranet.test/a2a"), true,
			"card.supportedInterfaces[0].url:public_address", []string{`host "intranet.test" resolves to an address the marketplace does not connect to`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.dns.Set("agent.example.net", "93.184.216.34")
			e.dns.Set("intranet.test", "10.20.30.40")
			if !tt.allowLoop {
				e.svc.Endpoints = httpfetch.Guard{Resolver: e.dns.Resolver()}
			}
			_, err := e.svc.Create(context.Background(), seller, listings.CreateInput{Card: tt.card, Pricing: json.RawMessage(pricing)})
			wantErr(t, err, agentmarket.Invalid, "card_endpoint_refused", tt.fields)
			for _, part := range tt.message {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
			if strings.Contains(err.Error(), "10.20.30.40") {
				t.Errorf("error %q tells what intranet.test resolves to", err)
			}
			if n := countListings(t, e); n != 0 {
				t.Errorf("%d listings created", n)
			}
		})
	}
}

// Allowed endpoints pass: public addresses, names resolving to them,
// loopback when AGENTMARKET_FETCH_ALLOW_CIDRS opens it (the env's guard),
// and names that do not resolve yet (nothing to dial; the meter's dialer
// judges what they resolve to at every connect).
func TestCreateTakesAllowedEndpoints(t *testing.T) {
	e := newEnv(t, true)
	e.dns.Set("agent.example.net", "93.184.216.34 2606:2800:220:1:248:1893:25c8:1946")
	e.dns.Set("agent.test", "127.0.0.1")
	in := listings.CreateInput{Card: card10("https://agent.example.net/a2a", "http://agent.test:8080/a2a", "http://127.0.0.1:9/a2a",
		"https://93.184.216.34/a2a", "https://not-yet.example.net/a2a")}
	e.mustCreate(t, seller, in)
}

// A fetched card is judged like a pasted one, and so is a card that
// replaces the listing's: refused, the listing keeps the card it had.
func TestFetchedAndUpdatedCardsAreJudged(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	e.fetcher.serve(agentURL, card10("http://169.254.169.254/"), `"1"`)
	_, err := e.svc.Create(ctx, seller, listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(pricing)})
	wantErr(t, err, agentmarket.Invalid, "card_endpoint_refused", "card.supportedInterfaces[0].url:public_address")

	l := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "translator-v1.0.json")})
	_, err = e.svc.Update(ctx, seller, l.ID, listings.UpdateInput{Card: card03("http://10.0.0.1/a2a")})
	wantErr(t, err, agentmarket.Invalid, "card_endpoint_refused", "card.url:public_address")
	if got := e.stored(t, l.ID); got.CardHash != l.CardHash {
		t.Errorf("the refused card replaced the listing's")
	}
}

// A refreshed card that names a refused endpoint (the agent's card now
// points inside, or its name now resolves inside) marks the listing
// unhealthy and is not taken: the meter keeps the card it had.
func TestRefreshRefusesInternalEndpoints(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	e.dns.Set("agent.example.net", "93.184.216.34")
	good := card10("https://agent.example.net/a2a")
	e.fetcher.serve(agentURL, good, `"1"`)
	l := e.mustCreate(t, seller, listings.CreateInput{CardURL: agentURL})

	for _, step := range []struct {
		name    string
		arrange func()
		detail  string
	}{
		{"the card points inside", func() { e.fetcher.serve(agentURL, card10("http://10.0.0.1/a2a"), `"2"`) },
			"card.supportedInterfaces[0].url: 10.0.0.1 is a private address"},
		{"the name resolves inside", func() {
			e.fetcher.serve(agentURL, card10("https://agent.example.net/v2"), `"3"`)
			e.dns.Set("agent.example.net", "169.254.169.254")
		}, `host "agent.example.net" resolves to an address the marketplace does not connect to`},
	} {
		step.arrange()
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		var ae *agentmarket.Error
		if !errors.As(err, &ae) || ae.Code != "card_endpoint_refused" {
			t.Fatalf("%s: Refresh error = %v, want card_endpoint_refused", step.name, err)
		}
		if got == nil || got.Health != listings.HealthUnhealthy {
			t.Fatalf("%s: Refresh listing = %+v, want it unhealthy", step.name, got)
		}
		stored := e.stored(t, l.ID)
		if stored.Health != listings.HealthUnhealthy || !strings.Contains(stored.HealthDetail, step.detail) {
			t.Errorf("%s: stored health = %s %q, want unhealthy saying %q", step.name, stored.Health, stored.HealthDetail, step.detail)
		}
		if strings.Contains(stored.HealthDetail, "169.254") {
			t.Errorf("%s: health detail %q tells what the name resolves to", step.name, stored.HealthDetail)
		}
		if stored.CardHash != listings.Hash(good) || len(e.versions(t, l.ID)) != 1 {
			t.Errorf("%s: the refused card was taken", step.name)
		}
	}
}

// A Service wired without Endpoints takes no card: a forgotten guard must
// not let cards through unjudged.
func TestServiceWithoutEndpointsTakesNoCard(t *testing.T) {
	e := newEnv(t, true)
	e.svc.Endpoints = nil
	_, err := e.svc.Create(context.Background(), seller, listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing)})
	wantErr(t, err, agentmarket.Internal, "endpoint_guard_missing", "")
}
