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

	// By the key set its jku names: the jku's host vouches.
	got := v.VerifyCard(ctx, signed, nil)
	if got.Status != listings.SignatureVerified || got.KeyID != "seller-1" || got.JKU != jku || got.Signer != strings.TrimPrefix(jwks.URL, "http://") {
		t.Errorf("by jku: %+v", got)
	}
	// By the seller's registered keys.
	if got := v.VerifyCard(ctx, signed, seller.PublicJWKS()); got.Status != listings.SignatureVerified || got.Signer != "the seller's registered keys" {
		t.Errorf("by registered keys: %+v", got)
	}
	// Registered keys are the only ones then: another key's signature fails.
	if got := v.VerifyCard(ctx, signed, newKeys(t, "seller-1").PublicJWKS()); got.Status != listings.SignatureFailed {
		t.Errorf("with other registered keys: %+v", got)
	}
	// Whitespace and member order do not matter; content does.
	var m map[string]any
	_ = json.Unmarshal(signed, &m)
	reordered, _ := json.MarshalIndent(m, "", "    ")
	if got := v.VerifyCard(ctx, reordered, nil); got.Status != listings.SignatureVerified {
		t.Errorf("reformatted: %+v", got)
	}
	m["description"] = "Plans routes. And sends your data elsewhere."
	tampered, _ := json.Marshal(m)
	if got := v.VerifyCard(ctx, tampered, nil); got.Status != listings.SignatureFailed || !strings.Contains(got.Detail, "does not verify") {
		t.Errorf("tampered: %+v", got)
	}
	if got := v.VerifyCard(ctx, []byte(card10), nil); got.Status != listings.SignatureNone {
		t.Errorf("unsigned: %+v", got)
	}
	// A signature whose key set cannot be read, or that names none.
	noJKU, _ := cardsig.Signer{Keys: seller}.SignCard(ctx, []byte(card10))
	if got := v.VerifyCard(ctx, noJKU, nil); got.Status != listings.SignatureFailed || !strings.Contains(got.Detail, "names no key set") {
		t.Errorf("no jku: %+v", got)
	}
	refused, _ := cardsig.Signer{Keys: seller, JKU: "http://10.0.0.1/jwks.json"}.SignCard(ctx, []byte(card10))
	if got := v.VerifyCard(ctx, refused, nil); got.Status != listings.SignatureFailed || !strings.Contains(got.Detail, "could not be read") {
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
	if got := v.VerifyCard(ctx, naive, nil); got.Status != listings.SignatureVerified {
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
