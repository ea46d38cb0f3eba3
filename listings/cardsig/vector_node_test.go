package cardsig_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/cardsig"
)

// TestNodeSignedCardVectors: cards signed outside Go, by
// scripts/cardsig.mjs (node:crypto; its own RFC 8785 form and §8.4.1
// default rule, sharing no code with cardsig), verify with cardsig's
// verifier, ES256, EdDSA and RS256 alike; one byte changed, they fail.
// testdata/node/card.json holds what the two could read differently:
// members at their defaults (implicit-presence scalars, empty lists and
// maps, nulls, optional members set to their defaults, in nested
// messages, oneof members and map values), numbers RFC 8785 rewrites
// (1e21, -0, 100.0, 1e-7, 333333333.33333329), member names whose UTF-16
// order is not their code point order, and strings with U+2028, a tab
// and a control character. payload.json is the script's payload for it.
// The keys are test keys made by the script (keygen); to remake the
// vector: cd testdata/node && for a in es256 eddsa rs256; do node
// ../../../../scripts/cardsig.mjs sign --card card.json --key $a.jwk
// --jku https://maps.example/.well-known/jwks.json >signed-$a.json; done
func TestNodeSignedCardVectors(t *testing.T) {
	ctx := context.Background()
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile("testdata/node/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	card, want, jwks := read("card.json"), read("payload.json"), read("jwks.json")
	if p, err := cardsig.Payloads(card); err != nil || !bytes.Equal(p[0], want) {
		t.Errorf("cardsig's payload differs from the script's (%v):\n got %s\nwant %s", err, p[0], want)
	}
	v := verifier(t)
	for _, alg := range []string{"es256", "eddsa", "rs256"} {
		signed := read("signed-" + alg + ".json")
		if got := v.VerifyCard(ctx, signed, jwks, ""); got.Status != listings.SignatureVerified || got.KeyID != "node-"+alg {
			t.Errorf("%s: the script's signature does not verify with cardsig: %+v", alg, got)
		}
		tampered := bytes.Replace(signed, []byte(`"Plans a route."`), []byte(`"Plans a route!"`), 1)
		if bytes.Equal(tampered, signed) {
			t.Fatalf("%s: nothing to tamper with", alg)
		}
		if got := v.VerifyCard(ctx, tampered, jwks, ""); got.Status != listings.SignatureFailed {
			t.Errorf("%s: a tampered copy: %+v", alg, got)
		}
	}
}
