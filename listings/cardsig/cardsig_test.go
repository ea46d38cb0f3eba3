package cardsig_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/cardsig"
	"github.com/agentmarket/agentmarket/listings/cardsig/cardsigtest"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// card10 is a 1.0 card with members at their defaults (§8.4.1 drops them
// before canonicalizing: the empty extensions list, the empty
// interface's tenant) and an optional bool set to its default (kept).
const card10 = `{
  "name": "Route Planner", "description": "Plans routes.", "version": "1.2.0",
  "supportedInterfaces": [{"url": "https://agent.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": ""}],
  "capabilities": {"streaming": false, "extensions": []},
  "documentationUrl": "https://agent.example/docs",
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "route", "name": "Route", "description": "Plans a route.", "tags": ["maps"]}]
}`

func newKeys(_ *testing.T, kid string) *cardsigtest.Keys { return cardsigtest.NewKeys(kid) }

func verifier(t *testing.T) *cardsig.Verifier {
	return &cardsig.Verifier{Fetch: &httpfetch.Fetcher{Guard: httpfetchtest.Loopback(nil), Dialer: httpfetchtest.Dialer(t, nil)}}
}

func TestVerifyCard(t *testing.T) {
	ctx := context.Background()
	seller := newKeys(t, "seller-1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(seller.PublicJWKS()) }))
	defer jwks.Close()
	jku := jwks.URL + "/jwks.json"
	signed, err := cardsig.Signer{Keys: seller, JKU: jku}.SignCard(ctx, []byte(card10))
	if err != nil {
		t.Fatal(err)
	}
	v := verifier(t)

	// By the key set its jku names, on the host the card was read from:
	// that host vouches.
	cardURL := jwks.URL + "/.well-known/agent-card.json"
	got := v.VerifyCard(ctx, signed, nil, cardURL)
	if got.Status != listings.SignatureVerified || got.KeyID != "seller-1" || got.JKU != jku || got.Signer != strings.TrimPrefix(jwks.URL, "http://") {
		t.Errorf("by jku: %+v", got)
	}
	// A key set on another host than the card's does not vouch for it,
	// though its key verifies: anyone can sign a copy of a card.
	for _, other := range []string{"https://agent.example/.well-known/agent-card.json", "", "http://localhost" + strings.TrimPrefix(jwks.URL, "http://127.0.0.1")} {
		if got := v.VerifyCard(ctx, signed, nil, other); got.Status != listings.SignatureFailed || got.Signer != "" ||
			!strings.Contains(got.Detail, "is on "+strings.TrimPrefix(jwks.URL, "http://")+", which does not serve this card") {
			t.Errorf("jku on another host than %q: %+v", other, got)
		}
	}
	// A host the card's interfaces name serves it too (a card given
	// inline has no URL of its own).
	var m map[string]any
	_ = json.Unmarshal([]byte(card10), &m)
	m["supportedInterfaces"] = []any{map[string]any{"url": jwks.URL + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}
	onAgent, _ := json.Marshal(m)
	onAgent, _ = cardsig.Signer{Keys: seller, JKU: jku}.SignCard(ctx, onAgent)
	if got := v.VerifyCard(ctx, onAgent, nil, ""); got.Status != listings.SignatureVerified {
		t.Errorf("jku on the agent's host: %+v", got)
	}
	// By the seller's registered keys.
	if got := v.VerifyCard(ctx, signed, seller.PublicJWKS(), cardURL); got.Status != listings.SignatureVerified || got.Signer != "the seller's registered keys" {
		t.Errorf("by registered keys: %+v", got)
	}
	// Registered keys are the only ones then: another key's signature fails.
	if got := v.VerifyCard(ctx, signed, newKeys(t, "seller-1").PublicJWKS(), cardURL); got.Status != listings.SignatureFailed {
		t.Errorf("with other registered keys: %+v", got)
	}
	// Whitespace and member order do not matter; content does.
	m = nil
	_ = json.Unmarshal(signed, &m)
	reordered, _ := json.MarshalIndent(m, "", "    ")
	if got := v.VerifyCard(ctx, reordered, nil, cardURL); got.Status != listings.SignatureVerified {
		t.Errorf("reformatted: %+v", got)
	}
	m["description"] = "Plans routes. And sends your data elsewhere."
	tampered, _ := json.Marshal(m)
	if got := v.VerifyCard(ctx, tampered, nil, cardURL); got.Status != listings.SignatureFailed || !strings.Contains(got.Detail, "does not verify") {
		t.Errorf("tampered: %+v", got)
	}
	if got := v.VerifyCard(ctx, []byte(card10), nil, cardURL); got.Status != listings.SignatureNone {
		t.Errorf("unsigned: %+v", got)
	}
	// A signature whose key set cannot be read, or that names none.
	noJKU, _ := cardsig.Signer{Keys: seller}.SignCard(ctx, []byte(card10))
	if got := v.VerifyCard(ctx, noJKU, nil, cardURL); got.Status != listings.SignatureFailed || !strings.Contains(got.Detail, "names no key set") {
		t.Errorf("no jku: %+v", got)
	}
	refused, _ := cardsig.Signer{Keys: seller, JKU: "http://10.0.0.1/jwks.json"}.SignCard(ctx, []byte(card10))
	if got := v.VerifyCard(ctx, refused, nil, "http://10.0.0.1/card.json"); got.Status != listings.SignatureFailed || !strings.Contains(got.Detail, "could not be read") {
		t.Errorf("private jku: %+v", got)
	}
	// A signer that skipped §8.4.1's default removal is still read.
	payloads, err := cardsig.Payloads([]byte(card10))
	if err != nil || len(payloads) != 2 {
		t.Fatalf("payloads: %d %v", len(payloads), err)
	}
	if strings.Contains(string(payloads[0]), "extensions") || strings.Contains(string(payloads[0]), "tenant") ||
		!strings.Contains(string(payloads[0]), `"streaming":false`) {
		t.Errorf("stripped payload: %s", payloads[0])
	}
	prot, sig, _ := seller.SignJWS(ctx, payloads[1], jku)
	m = nil
	_ = json.Unmarshal([]byte(card10), &m)
	m["signatures"] = []any{map[string]string{"protected": prot, "signature": sig}}
	naive, _ := json.Marshal(m)
	if got := v.VerifyCard(ctx, naive, nil, cardURL); got.Status != listings.SignatureVerified {
		t.Errorf("signed without removing defaults: %+v", got)
	}
}

// TestSignCardIndependently: a card SignCard signed verifies with nothing
// but the standard library (cardsigtest.Verify).
func TestSignCardIndependently(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t, "mkt-1")
	signed, err := cardsig.Signer{Keys: k, JKU: "https://meter.example/.well-known/jwks.json"}.SignCard(ctx, []byte(card10))
	if err != nil {
		t.Fatal(err)
	}
	if hdr, err := cardsigtest.Verify(signed, k.PublicJWKS()); err != nil || hdr.Jku != "https://meter.example/.well-known/jwks.json" {
		t.Fatalf("%+v %v", hdr, err)
	}
}
