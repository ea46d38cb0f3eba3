package cardsig_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/cardsig"
	"github.com/agentmarket/agentmarket/listings/cardsig/cardsigtest"
)

// The vector of testdata/vector: card.json is a 1.0 card with members at
// their defaults and a stale signature; payload.json is its §8.4.1
// signing payload, written by hand (signatures excluded; the empty
// tenant, extensions, examples and securitySchemes removed as proto3
// non-optional members at their defaults; the optional streaming false
// and iconUrl "" kept; members sorted, no whitespace, no escape beyond
// RFC 8785's). vectorSeed is the Ed25519 key that signs it, and
// vectorSignature that signature (Ed25519 is deterministic), so the
// vector is fixed bytes that any implementation can check.
const (
	vectorKid       = "vector-1"
	vectorSeed      = "agentmarket card signing vector!" // 32 bytes
	vectorProtected = `{"alg":"EdDSA","kid":"vector-1","typ":"JOSE"}`
	vectorSignature = "StpBjhwZQ165X7XOQHM0gcEmAiwyzJ1U_auD8DRded9U8YRh0a6qRaO7Ww-dlRWQeBtH9OIQR92A8wAhF6GoAA"
)

// TestSignedCardVector: a signature made over a payload built without
// cardsig (by hand, and by a second RFC 8785 implementation of this
// test's own) verifies with cardsig's verifier; a signature cardsig makes
// verifies with this test's verifier; both agree on the payload bytes.
func TestSignedCardVector(t *testing.T) {
	ctx := context.Background()
	card, err := os.ReadFile("testdata/vector/card.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/vector/payload.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := independentPayload(t, card); !bytes.Equal(got, want) {
		t.Fatalf("this test's payload differs from the hand-written one:\n got %s\nwant %s", got, want)
	}
	if p, err := cardsig.Payloads(card); err != nil || !bytes.Equal(p[0], want) {
		t.Fatalf("cardsig's payload differs from the hand-written one (%v):\n got %s\nwant %s", err, p[0], want)
	}

	// Signed by the fixed key, with nothing but the standard library.
	priv := ed25519.NewKeyFromSeed([]byte(vectorSeed))
	protected := base64.RawURLEncoding.EncodeToString([]byte(vectorProtected))
	sig := base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(protected+"."+base64.RawURLEncoding.EncodeToString(want))))
	if sig != vectorSignature {
		t.Fatalf("the vector's signature is %s, want %s", sig, vectorSignature)
	}
	jwks := fmt.Appendf(nil, `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":%q,"x":%q}]}`, vectorKid,
		base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)))
	signed := withSignatures(t, card, fmt.Sprintf(`[{"protected":%q,"signature":%q}]`, protected, sig))
	v := verifier(t)
	if got := v.VerifyCard(ctx, signed, jwks, ""); got.Status != listings.SignatureVerified || got.KeyID != vectorKid {
		t.Errorf("the vector does not verify with cardsig: %+v", got)
	}
	tampered := bytes.Replace(signed, []byte(`"Zürich"`), []byte(`"Zurich"`), 1)
	if got := v.VerifyCard(ctx, tampered, jwks, ""); got.Status != listings.SignatureFailed {
		t.Errorf("a tampered vector: %+v", got)
	}

	// Signed by cardsig, checked here.
	k := cardsigtest.NewKeys("mkt-7")
	bySigner, err := cardsig.Signer{Keys: k, JKU: "https://meter.example/.well-known/jwks.json"}.SignCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyES256Independently(t, bySigner, &k.Priv.PublicKey); err != nil {
		t.Errorf("cardsig's signature, checked independently: %v", err)
	}
	if err := verifyES256Independently(t, bytes.Replace(bySigner, []byte(`"Route Planner"`), []byte(`"Route Planer"`), 1), &k.Priv.PublicKey); err == nil {
		t.Error("a tampered card verified independently")
	}
}

func withSignatures(t *testing.T, card []byte, sigs string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(card, &m); err != nil {
		t.Fatal(err)
	}
	m["signatures"] = json.RawMessage(sigs)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyES256Independently checks card's only signature with pub: the
// payload by independentPayload, ECDSA P-256 by the standard library.
func verifyES256Independently(t *testing.T, card []byte, pub *ecdsa.PublicKey) error {
	var c struct {
		Signatures []struct{ Protected, Signature string }
	}
	if err := json.Unmarshal(card, &c); err != nil || len(c.Signatures) != 1 {
		return fmt.Errorf("want one signature: %v", err)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(c.Signatures[0].Protected)
	var h struct{ Alg, Typ, Kid, Jku string }
	if json.Unmarshal(hdr, &h) != nil || h.Alg != "ES256" || h.Typ != "JOSE" || h.Kid != "mkt-7" || h.Jku == "" {
		return fmt.Errorf("protected header %s", hdr)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(c.Signatures[0].Signature)
	if len(sig) != 64 {
		return fmt.Errorf("an ES256 signature of %d bytes", len(sig))
	}
	digest := sha256.Sum256([]byte(c.Signatures[0].Protected + "." + base64.RawURLEncoding.EncodeToString(independentPayload(t, card))))
	if pub.Curve != elliptic.P256() || !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return fmt.Errorf("the signature does not verify")
	}
	return nil
}

// independentPayload is the §8.4.1 payload of the vector's card, made
// without cardsig: the signatures excluded, the defaults the vector
// holds removed by name, the rest in RFC 8785 form by canonicalJSON.
func independentPayload(t *testing.T, card []byte) []byte {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(card))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	delete(m, "signatures")
	dropIfEmpty := func(obj any, name string) {
		o, _ := obj.(map[string]any)
		switch v := o[name].(type) {
		case string:
			if v == "" {
				delete(o, name)
			}
		case []any:
			if len(v) == 0 {
				delete(o, name)
			}
		case map[string]any:
			if len(v) == 0 {
				delete(o, name)
			}
		}
	}
	dropIfEmpty(m, "securitySchemes")
	dropIfEmpty(m["capabilities"], "extensions")
	for _, i := range m["supportedInterfaces"].([]any) {
		dropIfEmpty(i, "tenant")
	}
	for _, s := range m["skills"].([]any) {
		dropIfEmpty(s, "examples")
	}
	var b strings.Builder
	if err := canonicalJSON(&b, m); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// canonicalJSON writes v in RFC 8785 form, for the values a card holds
// (no fractions or exponents): a second implementation, short and
// separate from cardsig's, so that the two check each other.
func canonicalJSON(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		fmt.Fprint(b, v)
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return fmt.Errorf("the vector has no fractions: %s", v)
		}
		b.WriteString(string(v))
	case string:
		b.WriteByte('"')
		for _, r := range v {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\f':
				b.WriteString(`\f`)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonicalJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		// RFC 8785 §3.2.3: by UTF-16 code units, not bytes.
		sort.Slice(names, func(i, j int) bool {
			a, c := utf16.Encode([]rune(names[i])), utf16.Encode([]rune(names[j]))
			for n := 0; n < len(a) && n < len(c); n++ {
				if a[n] != c[n] {
					return a[n] < c[n]
				}
			}
			return len(a) < len(c)
		})
		b.WriteByte('{')
		for i, k := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonicalJSON(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := canonicalJSON(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}
