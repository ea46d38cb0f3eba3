// Package cardsigtest checks card signatures for tests the way a buyer's
// code could, with the standard library alone (no JOSE library), so that a
// signature cardsig makes is proven by something other than cardsig's own
// verifier.
package cardsigtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentmarket/agentmarket/listings/cardsig"
)

// Header is a card signature's protected header.
type Header struct {
	Alg, Typ, Kid, Jku string
}

// Verify checks card's one signature, ES256, against jwks: the key of its
// kid read by hand from the set, ECDSA P-256 over SHA-256 of the JWS
// signing input, whose payload is the card without signatures in the
// canonical form of A2A 1.0 §8.4.1 (cardsig.Payloads, itself tested on
// RFC 8785's vectors). It returns the protected header.
func Verify(card, jwks []byte) (Header, error) {
	var hdr Header
	var c struct {
		Signatures []struct{ Protected, Signature string }
	}
	if err := json.Unmarshal(card, &c); err != nil || len(c.Signatures) != 1 {
		return hdr, fmt.Errorf("want one signature: %v", err)
	}
	hb, err := base64.RawURLEncoding.DecodeString(c.Signatures[0].Protected)
	if err != nil || json.Unmarshal(hb, &hdr) != nil {
		return hdr, errors.New("protected header is not base64url JSON")
	}
	if hdr.Alg != "ES256" || hdr.Typ != "JOSE" || hdr.Kid == "" {
		return hdr, fmt.Errorf("protected header %s", hb)
	}
	var set struct {
		Keys []struct{ Kid, Kty, Crv, X, Y string }
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		return hdr, fmt.Errorf("jwks: %w", err)
	}
	var pub *ecdsa.PublicKey
	for _, key := range set.Keys {
		if key.Kid == hdr.Kid && key.Kty == "EC" && key.Crv == "P-256" {
			x, _ := base64.RawURLEncoding.DecodeString(key.X)
			y, _ := base64.RawURLEncoding.DecodeString(key.Y)
			pub = &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		}
	}
	if pub == nil {
		return hdr, fmt.Errorf("kid %q is not in the key set", hdr.Kid)
	}
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(card)))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return hdr, err
	}
	delete(m, "signatures")
	bare, _ := json.Marshal(m)
	payloads, err := cardsig.Payloads(bare)
	if err != nil {
		return hdr, err
	}
	sig, _ := base64.RawURLEncoding.DecodeString(c.Signatures[0].Signature)
	if len(sig) != 64 {
		return hdr, fmt.Errorf("an ES256 signature of %d bytes", len(sig))
	}
	h := sha256.Sum256([]byte(c.Signatures[0].Protected + "." + base64.RawURLEncoding.EncodeToString(payloads[0])))
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return hdr, errors.New("the signature does not verify")
	}
	return hdr, nil
}

// Keys sign as a seller's build would: an ES256 key of its own, a JWS
// with typ JOSE, the kid and (when given) the jku; it implements
// cardsig.Keys.
type Keys struct {
	Priv *ecdsa.PrivateKey
	Kid  string
}

// NewKeys makes a P-256 key named kid.
func NewKeys(kid string) *Keys {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Keys{Priv: priv, Kid: kid}
}

// SignJWS implements cardsig.Keys.
func (k *Keys) SignJWS(_ context.Context, payload []byte, jku string) (string, string, error) {
	opts := (&jose.SignerOptions{}).WithType("JOSE")
	if jku != "" {
		opts = opts.WithHeader("jku", jku)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.Priv, KeyID: k.Kid}}, opts)
	if err != nil {
		return "", "", err
	}
	obj, err := s.Sign(payload)
	if err != nil {
		return "", "", err
	}
	c, err := obj.CompactSerialize()
	if err != nil {
		return "", "", err
	}
	parts := strings.Split(c, ".")
	return parts[0], parts[2], nil
}

// ActiveKeyID implements cardsig.Keys.
func (k *Keys) ActiveKeyID(context.Context) (string, error) { return k.Kid, nil }

// JWKS implements cardsig.Keys: the public key.
func (k *Keys) JWKS(context.Context) ([]byte, time.Duration, error) {
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.Priv.PublicKey, KeyID: k.Kid, Algorithm: "ES256", Use: "sig"}}})
	return b, time.Minute, err
}

// PublicJWKS is JWKS's set alone.
func (k *Keys) PublicJWKS() []byte {
	b, _, _ := k.JWKS(context.Background())
	return b
}
