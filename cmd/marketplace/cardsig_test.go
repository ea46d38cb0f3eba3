package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
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

	// Members at their defaults, which §8.4.1 leaves out of what is
	// signed: an empty examples list and extensions list.
	var sc map[string]any
	if err := json.Unmarshal(card, &sc); err != nil {
		t.Fatal(err)
	}
	sc["skills"].([]any)[0].(map[string]any)["examples"] = []any{}
	sc["capabilities"].(map[string]any)["extensions"] = []any{}
	card, _ = json.Marshal(sc)

	// Signed with keys whose set (jku) is on a host that does not serve
	// the card: the key verifies, but that host does not vouch for the
	// seller, so the card is marked failed and the catalog names no
	// signer (anyone can sign a copy of a card with keys of their own).
	other := cardsigtest.NewKeys("elsewhere-1")
	otherKeys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(other.PublicJWKS()) }))
	defer otherKeys.Close()
	bySomeone, err := cardsig.Signer{Keys: other, JKU: otherKeys.URL + "/jwks.json"}.SignCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	r = seller.do("PATCH", "/api/v1/listings/"+mk.id10, map[string]any{"card": json.RawMessage(bySomeone)})
	if r.Status != 200 || r.str("card_signature", "status") != "failed" || r.str("card_signature", "signer") != "" ||
		!strings.Contains(r.str("card_signature", "detail"), "is on "+strings.TrimPrefix(otherKeys.URL, "http://")+", which does not serve this card") {
		t.Fatalf("a card signed with keys on another host: %d %s", r.Status, r.Body)
	}
	if page := mk.api.do("GET", "/?q=Translator", nil); strings.Contains(string(page.Body), "Signed by") {
		t.Errorf("the catalog names a signer for keys on another host:\n%s", page.Body)
	}

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

		// The same card, checked by a verifier that shares no code with
		// listings/cardsig (scripts/cardsig.mjs: its own RFC 8785 form and
		// §8.4.1 default rule, node:crypto): it fetches the card and the
		// key set its jku names, as a buyer's SDK would.
		cardURL := mk.ep10 + "/.well-known/agent-card.json"
		if version != "" {
			cardURL += "?A2A-Version=" + version
		}
		got, err := nodeVerify(t, nil, "--url", cardURL)
		if err != nil || !got.Verified || got.Kid != hdr.Kid || got.Alg != "ES256" || got.JKU != hdr.Jku {
			t.Errorf("the proxied card (A2A-Version %q), verified by scripts/cardsig.mjs: %+v %v", version, got, err)
		}
		// The seller's card holds members at their defaults, which the
		// proxied card keeps: the §8.4.1 rule decides this signature.
		if got.Form != "1.0" || !slices.Contains(got.RemovedDefaults, "skills[0].examples") || !slices.Contains(got.RemovedDefaults, "capabilities.extensions") {
			t.Errorf("the proxied card (A2A-Version %q): form %q, defaults removed %v", version, got.Form, got.RemovedDefaults)
		}
		// One byte changed: the signature fails.
		tampered := bytes.Replace(proxied, []byte("Translator"), []byte("Translatur"), 1)
		if bytes.Equal(tampered, proxied) {
			t.Fatalf("no name to tamper with in %s", proxied)
		}
		if got, err := nodeVerify(t, tampered, "--card", "-"); err == nil || got.Verified || !strings.Contains(got.Reason, "does not verify") {
			t.Errorf("a tampered proxied card, by scripts/cardsig.mjs: %+v %v", got, err)
		}
	}
}

// nodeVerdict is what scripts/cardsig.mjs verify prints.
type nodeVerdict struct {
	Verified        bool     `json:"verified"`
	Alg             string   `json:"alg"`
	Kid             string   `json:"kid"`
	JKU             string   `json:"jku"`
	Form            string   `json:"form"`
	RemovedDefaults []string `json:"removedDefaults"`
	Reason          string   `json:"reason"`
}

// nodeVerify runs scripts/cardsig.mjs verify with args (and stdin); its
// error is the script's exit status when a signature does not verify.
// scripts/test.sh installs node where it is missing.
func nodeVerify(t *testing.T, stdin []byte, args ...string) (nodeVerdict, error) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH (scripts/test.sh installs nodejs): %v", err)
	}
	cmd := exec.Command(node, append([]string{"../../scripts/cardsig.mjs", "verify"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var v nodeVerdict
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("scripts/cardsig.mjs: %v; stdout %q, stderr %q", runErr, out, stderr.String())
	}
	return v, runErr
}
