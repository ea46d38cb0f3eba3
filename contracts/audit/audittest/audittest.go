// Package audittest gives tests an audit signing key without the
// marketplace's key store: one ES256 key that signs checkpoints as
// a2aproxy/pushsign.Keys does and lists its public half as
// contracts.PushKeyStore does.
package audittest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// Key is one ES256 signing key.
type Key struct {
	ID   string
	priv *ecdsa.PrivateKey
}

// NewKey makes a key named kid.
func NewKey(kid string) *Key {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Key{ID: kid, priv: priv}
}

// SignJWS implements audit.Signer.
func (k *Key) SignJWS(_ context.Context, payload []byte, jku string) (string, string, error) {
	hdr, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JOSE", "kid": k.ID, "jku": jku})
	if err != nil {
		return "", "", err
	}
	protected := base64.RawURLEncoding.EncodeToString(hdr)
	sum := sha256.Sum256([]byte(protected + "." + base64.RawURLEncoding.EncodeToString(payload)))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, sum[:])
	if err != nil {
		return "", "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return protected, base64.RawURLEncoding.EncodeToString(sig), nil
}

// PushKeys implements audit.Keys: the key's public half.
func (k *Key) PushKeys(context.Context) ([]contracts.PushKey, error) {
	pub, err := x509.MarshalPKIXPublicKey(&k.priv.PublicKey)
	if err != nil {
		return nil, err
	}
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []contracts.PushKey{{ID: k.ID, Generation: 1, Algorithm: "ES256", Public: pub, CreatedAt: t, ActiveAt: t}}, nil
}
