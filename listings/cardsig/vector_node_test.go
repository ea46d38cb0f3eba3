package cardsig_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
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

// TestNodeScriptPayloads: scripts/cardsig.mjs, the independent verifier
// the signed-card tests trust, makes the bytes the spec's and RFC 8785's
// own examples give: §8.4.1's default-removal example, RFC 8785 §3.2.2's
// values and §3.2.3's member order (a card without supportedInterfaces is
// canonicalized as it is), and the hand-written payload of
// testdata/vector.
func TestNodeScriptPayloads(t *testing.T) {
	vector, _ := os.ReadFile("testdata/vector/card.json")
	vectorPayload, _ := os.ReadFile("testdata/vector/payload.json")
	for _, c := range []struct {
		name, form, card, want string
	}{
		{"A2A 1.0 §8.4.1's example", "1.0",
			`{"name": "Example Agent", "description": "", "capabilities": {"streaming": false, "pushNotifications": false, "extensions": []}, "skills": []}`,
			`{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}`},
		{"RFC 8785 §3.2.2", "", `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"RFC 8785 §3.2.3", "",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"testdata/vector", "", string(vector), string(vectorPayload)},
	} {
		args := []string{"../../scripts/cardsig.mjs", "payload", "--card", "-"}
		if c.form != "" {
			args = append(args, "--form", c.form)
		}
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatalf("node is not on PATH (scripts/test.sh installs nodejs): %v", err)
		}
		cmd := exec.Command(node, args...)
		cmd.Stdin = strings.NewReader(c.card)
		got, err := cmd.Output()
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s (%v)\nwant %s", c.name, got, err, c.want)
		}
	}
}
