package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/listings/cardsig"
	"github.com/agentmarket/agentmarket/listings/cardsig/cardsigtest"
)

// TestSignedCards: a seller's signed card is verified against the keys it
// registered and the result shown with the listing and its version; under
// "require" a card whose signature fails is refused and the verified one
// stays; the meter serves the proxied card signed by the marketplace,
// verifiable by the standard library alone with the JWKS its jku names.
func TestSignedCards(t *testing.T) {
	ctx := context.Background()
	mk := newMarket(t, map[string]string{})
	seller := mk.api.with(mk.seller)
	r := seller.do("GET", "/api/v1/listings/"+mk.id10, nil)
	if r.Status != 200 || r.str("card_signature", "status") != "unsigned" || r.str("card_signatures") != "mark" {
		t.Fatalf("unsigned listing: %d %s", r.Status, r.Body)
	}
	res, err := http.Get(r.str("card_url"))
	if err != nil {
		t.Fatal(err)
	}
	card, _ := io.ReadAll(res.Body)
	res.Body.Close()

	key := cardsigtest.NewKeys("acme-2026")
	jwks := key.PublicJWKS()
	signed, err := cardsig.Signer{Keys: key}.SignCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	r = seller.do("PATCH", "/api/v1/listings/"+mk.id10, map[string]any{"card": json.RawMessage(signed), "card_keys": json.RawMessage(jwks),
		"card_signatures": "require"})
	if r.Status != 200 || r.str("card_signature", "status") != "verified" || r.str("card_signature", "key_id") != "acme-2026" ||
		r.str("card_signature", "signer") != "the seller's registered keys" || r.str("card_signatures") != "require" {
		t.Fatalf("signed card: %d %s", r.Status, r.Body)
	}
	// The seller's own signature stays with the card as sent.
	if !strings.Contains(string(r.Body), `"signatures":[{"protected":"`) {
		t.Errorf("the listing's card lost the seller's signature: %s", r.Body)
	}
	v := seller.do("GET", "/api/v1/listings/"+mk.id10+"/versions", nil)
	if !strings.Contains(string(v.Body), `"signature":{"status":"verified"`) {
		t.Errorf("versions: %s", v.Body)
	}
	page := mk.api.do("GET", "/listings/"+mk.id10, nil)
	if !strings.Contains(string(page.Body), `data-signature="verified"`) {
		t.Errorf("the listing's page does not show the signature")
	}
	if page = mk.api.do("GET", "/?q=Translator", nil); !strings.Contains(string(page.Body), `data-signed-by>Signed by <bdi>the seller&#39;s registered keys</bdi>, verified`) {
		t.Errorf("the catalog does not show the signature:\n%s", page.Body)
	}

	// Tampered after signing: refused under "require"; the verified card stays.
	var m map[string]any
	_ = json.Unmarshal(signed, &m)
	m["description"] = "Now with a different promise."
	tampered, _ := json.Marshal(m)
	r = seller.do("PATCH", "/api/v1/listings/"+mk.id10, map[string]any{"card": json.RawMessage(tampered)})
	if r.Status != 422 && r.Status != 400 || r.code() != "card_signature_refused" {
		t.Fatalf("tampered card: %d %s", r.Status, r.Body)
	}
	if r = seller.do("GET", "/api/v1/listings/"+mk.id10, nil); r.str("card_signature", "status") != "verified" || strings.Contains(string(r.Body), "different promise") {
		t.Errorf("after the refusal: %s", r.Body)
	}
	// Under "mark" it is taken, marked failed.
	r = seller.do("PATCH", "/api/v1/listings/"+mk.id10, map[string]any{"card": json.RawMessage(tampered), "card_signatures": "mark"})
	if r.Status != 200 || r.str("card_signature", "status") != "failed" || !strings.Contains(r.str("card_signature", "detail"), "does not verify") {
		t.Fatalf("tampered, marked: %d %s", r.Status, r.Body)
	}
	r = seller.do("PATCH", "/api/v1/listings/"+mk.id10, map[string]any{"card_keys": map[string]any{"keys": []any{map[string]any{"kty": "oct", "k": "c2VjcmV0"}}}})
	if r.Status == 200 {
		t.Errorf("a secret key as card_keys: %d %s", r.Status, r.Body)
	}
	r = seller.do("PATCH", "/api/v1/listings/"+mk.id10, map[string]any{"card": json.RawMessage(signed)})
	if r.Status != 200 || r.str("card_signature", "status") != "verified" {
		t.Fatalf("signed card again: %d %s", r.Status, r.Body)
	}

	// The proxied card: signed by the marketplace, over what the meter
	// changed, with the key set at its jku.
	for _, version := range []string{"", "1.0"} {
		req, _ := http.NewRequest("GET", mk.ep10+"/.well-known/agent-card.json", nil)
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		proxied, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(proxied), mk.ep10) {
			t.Fatalf("proxied card: %d %s", res.StatusCode, proxied)
		}
		var sigs struct {
			Signatures []cardsig.Signature `json:"signatures"`
		}
		_ = json.Unmarshal(proxied, &sigs)
		if len(sigs.Signatures) != 1 {
			t.Fatalf("proxied card signatures: %s", proxied)
		}
		hdr, err := cardsigtest.Verify(proxied, nil)
		if hdr.Jku != strings.TrimSuffix(mk.m.URL, "/")+a2aproxy.CardKeysPath {
			t.Fatalf("jku %q (%v)", hdr.Jku, err)
		}
		res, err = http.Get(hdr.Jku)
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("jwks: %d %s", res.StatusCode, keys)
		}
		if _, err := cardsigtest.Verify(proxied, keys); err != nil {
			t.Errorf("the proxied card (A2A-Version %q) does not verify: %v\n%s", version, err, proxied)
		}
		if hdr.Kid == "acme-2026" {
			t.Error("the proxied card carries the seller's signature")
		}
	}
}
