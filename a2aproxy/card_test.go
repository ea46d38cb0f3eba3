package a2aproxy_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/listings/agentcard/protoschema"
	"github.com/agentmarket/agentmarket/listings/cardsig"
	"github.com/agentmarket/agentmarket/listings/cardsig/cardsigtest"
)

// sellerCard is a 1.0 card with security requirements at the top and in a
// skill, their scopes written as scopes (an array, as a2a-go writes them)
// or as the proto's StringList ({"list": [...]}, as ProtoJSON SDKs do).
func sellerCard(scopes string) []byte {
	return []byte(strings.ReplaceAll(`{
  "name": "Geo", "description": "Plans routes.", "version": "1.2.0",
  "supportedInterfaces": [{"url": "https://geo.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "capabilities": {"streaming": true},
  "securitySchemes": {"google": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"}}},
  "securityRequirements": [{"schemes": {"google": SCOPES}}],
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "route", "name": "Route", "description": "Plans a route.", "tags": ["maps"],
              "securityRequirements": [{"schemes": {"google": SCOPES}}]}]
}`, "SCOPES", scopes))
}

// TestProxiedCardSecurity: a proxied 1.0 card's security requirement names
// the meter's scheme in the form its reader parses. Asked for A2A 1.0, it
// is the proto's StringList, and the whole card passes the 1.0 JSON
// schema (derived from a2a.proto, protoschema). Asked for no version, it
// follows the seller's card, and is the bare array the official Go SDK
// (a2a-go v2.3.1) parses when the seller's card has none or has that.
// Skills' own requirements name the seller's schemes and are dropped.
func TestProxiedCardSecurity(t *testing.T) {
	schema, err := protoschema.A2A()
	if err != nil {
		t.Fatal(err)
	}
	const ep = "https://meter.example/a2a/lst_1"
	plain := []byte(`{"name": "Echo", "description": "Echoes.", "version": "1",
	  "supportedInterfaces": [{"url": "https://echo.example/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
	  "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
	  "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["test"]}]}`)
	for _, tc := range []struct {
		name      string
		seller    []byte
		protoJSON bool
		want      string // the scopes written
	}{
		{"no requirement, 1.0 asked", plain, true, `{"list":[]}`},
		{"no requirement, no version asked", plain, false, `[]`},
		{"arrays, 1.0 asked", sellerCard(`["openid"]`), true, `{"list":[]}`},
		{"arrays, no version asked", sellerCard(`["openid"]`), false, `[]`},
		{"StringLists, 1.0 asked", sellerCard(`{"list": ["openid"]}`), true, `{"list":[]}`},
		{"StringLists, no version asked", sellerCard(`{"list": ["openid"]}`), false, `{"list":[]}`},
	} {
		card, err := agentcard.Parse(tc.seller)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := a2aproxy.ProxiedCard(tc.seller, card, ep, false, tc.protoJSON)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got struct {
			SecurityRequirements []struct {
				Schemes map[string]json.RawMessage `json:"schemes"`
			} `json:"securityRequirements"`
			Skills []map[string]json.RawMessage `json:"skills"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.SecurityRequirements) != 1 || len(got.SecurityRequirements[0].Schemes) != 1 ||
			string(got.SecurityRequirements[0].Schemes[a2aproxy.SecuritySchemeName]) != tc.want {
			t.Errorf("%s: securityRequirements %s, want [{schemes: {%s: %s}}]", tc.name, mustJSON(got.SecurityRequirements), a2aproxy.SecuritySchemeName, tc.want)
		}
		for _, sk := range got.Skills {
			if _, ok := sk["securityRequirements"]; ok {
				t.Errorf("%s: a skill kept the seller's security requirements: %s", tc.name, out)
			}
		}
		if tc.protoJSON {
			if err := schema.Check("AgentCard", out); err != nil {
				t.Errorf("%s: the proxied card fails the A2A 1.0 JSON schema:\n%v\n%s", tc.name, err, out)
			}
		}
		if tc.want == `[]` {
			var sdk a2a.AgentCard
			if err := json.Unmarshal(out, &sdk); err != nil {
				t.Errorf("%s: the official Go SDK cannot parse the proxied card: %v", tc.name, err)
			} else if len(sdk.SecurityRequirements) != 1 || sdk.SecurityRequirements[0][a2aproxy.SecuritySchemeName] == nil {
				t.Errorf("%s: the SDK reads requirements %v, want the meter's scheme", tc.name, sdk.SecurityRequirements)
			}
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// countingSigner counts the cards it signs.
type countingSigner struct {
	cardsig.Signer
	signed atomic.Int32
}

func (c *countingSigner) SignCard(ctx context.Context, card []byte) ([]byte, error) {
	c.signed.Add(1)
	return c.Signer.SignCard(ctx, card)
}

// TestProxiedCardSignedOnce: GETs of a proxied card answer the same signed
// bytes, signed once (a card fetch is anyone's unauthenticated GET); the
// other form of the card and a new card version are signed once too, and
// a rotation of the keys signs again, with the new key: a new signature.
func TestProxiedCardSignedOnce(t *testing.T) {
	app, m := startCore(t, startCoreAgent(t, "1.0"))
	m.listing.CardJSON = sellerCard(`["openid"]`)
	first := cardsigtest.NewKeys("card-1")
	signer := &countingSigner{Signer: cardsig.Signer{Keys: first, JKU: "http://meter.test" + a2aproxy.CardKeysPath}}
	m.proxy.CardSigner = &a2aproxy.SignedCards{Signer: signer}
	get := func(version string) string {
		t.Helper()
		res, body := do(t, app, "GET", "/a2a/lst_core/.well-known/agent-card.json", "", version, "")
		if res.StatusCode != 200 {
			t.Fatalf("GET card: %d %s", res.StatusCode, body)
		}
		return body
	}
	a, b := get(""), get("")
	if a != b || sigOf(t, a) != sigOf(t, b) || signer.signed.Load() != 1 {
		t.Fatalf("two GETs: signed %d times; identical: %v", signer.signed.Load(), a == b)
	}
	if hdr, err := cardsigtest.Verify([]byte(a), first.PublicJWKS()); err != nil || hdr.Kid != "card-1" {
		t.Fatalf("the cached card does not verify: %+v %v", hdr, err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c := get(""); c != a {
				t.Errorf("a concurrent GET got other bytes: %s", c)
			}
		}()
	}
	wg.Wait()
	if signer.signed.Load() != 1 {
		t.Errorf("concurrent GETs signed %d times", signer.signed.Load())
	}

	// The 1.0 reader's form is another card: signed once as well.
	if c := get("1.0"); c == a || signer.signed.Load() != 2 || get("1.0") != c || signer.signed.Load() != 2 {
		t.Errorf("the 1.0 form: signed %d times", signer.signed.Load())
	}

	// A new card version is another card: signed anew, once.
	m.listing.CardJSON = []byte(strings.Replace(string(sellerCard(`["openid"]`)), "Plans routes.", "Plans routes by sea.", 1))
	bySea := get("")
	if sigOf(t, bySea) == sigOf(t, a) || !strings.Contains(bySea, "by sea") || signer.signed.Load() != 3 || get("") != bySea || signer.signed.Load() != 3 {
		t.Errorf("a new card version: signed %d times", signer.signed.Load())
	}

	// The keys rotate: the same card is signed again, by the new key, once.
	next := cardsigtest.NewKeys("card-2")
	signer.Signer.Keys = next
	rotated := get("")
	if sigOf(t, rotated) == sigOf(t, bySea) || signer.signed.Load() != 4 || get("") != rotated || signer.signed.Load() != 4 {
		t.Fatalf("after a rotation: signed %d times; a new signature: %v", signer.signed.Load(), sigOf(t, rotated) != sigOf(t, bySea))
	}
	if hdr, err := cardsigtest.Verify([]byte(rotated), next.PublicJWKS()); err != nil || hdr.Kid != "card-2" {
		t.Errorf("after a rotation: %+v %v", hdr, err)
	}
}

// sigOf is the signature value of card's only signature.
func sigOf(t *testing.T, card string) string {
	t.Helper()
	var c struct {
		Signatures []struct{ Signature string }
	}
	if err := json.Unmarshal([]byte(card), &c); err != nil || len(c.Signatures) != 1 || c.Signatures[0].Signature == "" {
		t.Fatalf("want one signature (%v): %s", err, card)
	}
	return c.Signatures[0].Signature
}

// TestSignedCardsBounded: the signed cards kept fit in MaxBytes; a card
// that no longer fits is signed again when asked for.
func TestSignedCardsBounded(t *testing.T) {
	ctx := context.Background()
	signer := &countingSigner{Signer: cardsig.Signer{Keys: cardsigtest.NewKeys("card-1"), JKU: "http://meter.test" + a2aproxy.CardKeysPath}}
	x, y := sellerCard(`["openid"]`), sellerCard(`["email"]`)
	one, err := signer.Signer.SignCard(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	cache := &a2aproxy.SignedCards{Signer: signer, MaxBytes: len(one) * 3 / 2} // room for one card
	for i, c := range []struct {
		card []byte
		want int32 // signatures made so far
	}{{x, 1}, {x, 1}, {y, 2}, {y, 2}, {x, 3}} {
		if _, err := cache.SignCard(ctx, c.card); err != nil || signer.signed.Load() != c.want {
			t.Fatalf("step %d: %v; signed %d times, want %d", i, err, signer.signed.Load(), c.want)
		}
	}
}
