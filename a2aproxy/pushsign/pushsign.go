// Package pushsign signs the push notifications the meter delivers to
// buyers' webhooks, so that a buyer can tell them from forgeries without
// sharing a secret with the marketplace: every delivery attempt carries a
// JWS (RFC 7515) in the AgentMarket-Signature header, in the compact form
// with a detached payload (appendix F: "header..signature"), made over the
// exact bytes of the body. Its protected header names the key ("kid"), the
// time of signing ("iat"), the delivery, task, listing and config it is
// about, and whom it is for: the buyer org ("aud") and the hash of the URL
// it is POSTed to ("agentmarket-target"). A genuine delivery for one org's
// config is thus no use at another org's webhook, even one whose config
// has the same id and URL. The public keys are published as a JWKS
// (RFC 7517) by the marketplace at GET /api/v1/push/jwks.
//
// Keys are kept in the database every meter and the marketplace share
// (contracts.PushKeyStore), the private half sealed with the marketplace's
// secret key. They rotate: a new key is published Lead before it starts
// signing (so a verifier that caches the JWKS for MaxAge knows it by
// then), and a replaced key stays published for Retention after its
// successor took over (so a delivery it signed still verifies), then is
// deleted. Any process rotates when the newest key is due, on its next
// read of the keys; two that do so at once make one key.
package pushsign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Header is the HTTP header of a delivery that carries its signature.
const Header = "AgentMarket-Signature"

// The protected header parameters of a delivery's signature, besides
// "alg" ("ES256") and "kid". They are private header parameter names
// (RFC 7515 §4.3), not marked critical: a standard JOSE library verifies
// the signature without knowing them, and the buyer reads them after.
const (
	ParamIssuedAt = "iat"                  // when the attempt was signed: seconds since the epoch
	ParamDelivery = "agentmarket-delivery" // the delivery id, also in X-AgentMarket-Delivery-Id, the same on every attempt
	ParamTask     = "agentmarket-task"     // the task the notification is about
	ParamListing  = "agentmarket-listing"  // the listing the task runs on
	ParamConfig   = "agentmarket-config"   // the buyer's push notification config id
	// ParamAudience is the buyer org the delivery is for (JWT's "aud",
	// RFC 7519 §4.1.3, one string): the org that owns the config, so
	// another org's delivery to the same URL says so.
	ParamAudience = "aud"
	// ParamTarget is the base64url (no padding) SHA-256 of the exact URL
	// the delivery is POSTed to, as the buyer set it (TargetHash): the
	// signature is good for that webhook only.
	ParamTarget = "agentmarket-target"
	// ParamReceived is when the meter received the notification the
	// delivery carries (seconds since the epoch); ParamCovers how many
	// earlier status updates of the same task and config, received
	// before it and not sent, it stands for (a later status supersedes
	// the pending ones: push is a signal, the latest state says all they
	// said). ParamCovers is absent when it covers none.
	ParamReceived = "agentmarket-received"
	ParamCovers   = "agentmarket-covers"
)

// TargetHash is the value of ParamTarget for a webhook URL: base64url
// without padding of the SHA-256 of its bytes, as they are, unnormalized.
func TargetHash(url string) string {
	sum := sha256.Sum256([]byte(url))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Algorithm is the signature algorithm of every key made now.
const Algorithm = jose.ES256

// MaxAge is how long the published JWKS may be cached (its Cache-Control
// max-age). A new key is published well before it signs (Lead), so a
// verifier refreshing its copy this often never meets an unknown key.
const MaxAge = 5 * time.Minute

// Sealer encrypts the private keys at rest (listings.Sealer).
type Sealer interface {
	Seal(plaintext, context []byte) ([]byte, error)
	Open(sealed, context []byte) ([]byte, error)
}

// Keys makes, rotates, publishes and signs with the signing keys of one
// purpose: push deliveries (the default) or proxied cards (Purpose "card").
// One Keys per process; every process shares the store.
type Keys struct {
	Store  contracts.PushKeyStore
	Sealer Sealer
	Clock  agentmarket.Clock
	Logger *slog.Logger // nil: no logs

	// Purpose names what the keys sign, kept apart from the others by a
	// store of their own: "" (push deliveries) or "card" (proxied Agent
	// Cards, SignJWS). It binds the sealed private keys to it.
	Purpose string

	// RotateEvery is how long a key signs before the next one takes over;
	// default 30 days.
	RotateEvery time.Duration
	// Retention is how long a replaced key stays published after its
	// successor took over; default 7 days. It must be longer than the
	// longest retry schedule of a delivery.
	Retention time.Duration
	// Lead is how long a new key is published before it signs; default 1
	// hour (more than MaxAge plus Refresh).
	Lead time.Duration
	// Refresh is how often the keys are read again from the store (and a
	// rotation looked for); default 1 minute.
	Refresh time.Duration

	once    sync.Once
	mu      sync.Mutex
	read    time.Time           // when keys were last read (by Clock)
	keys    []contracts.PushKey // the published keys, newest generation first
	jwks    []byte
	private map[string]*ecdsa.PrivateKey
}

func (k *Keys) init() {
	k.once.Do(func() {
		def := func(d *time.Duration, v time.Duration) {
			if *d <= 0 {
				*d = v
			}
		}
		def(&k.RotateEvery, 30*24*time.Hour)
		def(&k.Retention, 7*24*time.Hour)
		def(&k.Lead, time.Hour)
		def(&k.Refresh, time.Minute)
		if k.Logger == nil {
			k.Logger = slog.New(slog.DiscardHandler)
		}
		k.private = map[string]*ecdsa.PrivateKey{}
	})
}

// Ensure reads the keys now, making the first one (or the next, when the
// newest is due for rotation): the marketplace calls it at start, so the
// JWKS has a key before the first delivery is signed.
func (k *Keys) Ensure(ctx context.Context) error {
	k.init()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refreshLocked(ctx)
}

// Run reads the keys again every Refresh until ctx ends, so that a
// rotation comes on time even while nothing is signed or fetched. The
// marketplace runs it (after Ensure); the meters read the keys when they
// sign.
func (k *Keys) Run(ctx context.Context) {
	k.init()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.Refresh):
		}
		if err := k.Ensure(ctx); err != nil && ctx.Err() == nil {
			k.Logger.WarnContext(ctx, k.what()+" signing keys not read", "err", err)
		}
	}
}

// current returns the published keys, read again from the store when the
// last read is older than Refresh. When the store cannot be read the keys
// read before serve (an error only when there are none).
func (k *Keys) current(ctx context.Context) ([]contracts.PushKey, []byte, error) {
	k.init()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil || k.Clock.Now().Sub(k.read) >= k.Refresh {
		if err := k.refreshLocked(ctx); err != nil {
			if k.keys == nil {
				return nil, nil, err
			}
			k.Logger.WarnContext(ctx, k.what()+" signing keys not read again; the ones read before serve", "err", err)
		}
	}
	return k.keys, k.jwks, nil
}

func (k *Keys) refreshLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := k.Clock.Now()
	keys, err := k.Store.PushKeys(ctx)
	if err != nil {
		return err
	}
	if len(keys) == 0 || !now.Before(keys[0].ActiveAt.Add(k.RotateEvery-k.Lead)) {
		next, err := k.newKey(keys, now)
		if err != nil {
			return err
		}
		added, err := k.Store.AddPushKey(ctx, next)
		if err != nil {
			return err
		}
		if added {
			k.Logger.InfoContext(ctx, k.what()+" signing key made", "kid", next.ID, "generation", next.Generation, "active_at", next.ActiveAt)
		}
		if keys, err = k.Store.PushKeys(ctx); err != nil {
			return err
		}
	}
	published := published(keys, now, k.Retention)
	if len(published) < len(keys) {
		oldest := published[len(published)-1].Generation
		if n, err := k.Store.DeletePushKeys(ctx, oldest); err != nil {
			k.Logger.WarnContext(ctx, "expired "+k.what()+" signing keys not deleted", "err", err)
		} else if n > 0 {
			k.Logger.InfoContext(ctx, "expired "+k.what()+" signing keys deleted", "keys", n)
		}
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, pk := range published {
		pub, err := x509.ParsePKIXPublicKey(pk.Public)
		if err != nil {
			return fmt.Errorf("%s signing key %s: public key: %w", k.what(), pk.ID, err)
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: pub, KeyID: pk.ID, Algorithm: pk.Algorithm, Use: "sig"})
	}
	jwks, err := json.Marshal(set)
	if err != nil {
		return err
	}
	for kid := range k.private {
		if !containsKey(published, kid) {
			delete(k.private, kid)
		}
	}
	k.keys, k.jwks, k.read = published, jwks, now
	return nil
}

// published are the keys still published at now, newest first: the newest,
// and each older one until Retention after its successor became active.
// Successors become active in generation order, so the expired keys are
// the oldest ones.
func published(keys []contracts.PushKey, now time.Time, retention time.Duration) []contracts.PushKey {
	for i := 1; i < len(keys); i++ {
		if !now.Before(keys[i-1].ActiveAt.Add(retention)) {
			return keys[:i]
		}
	}
	return keys
}

func containsKey(keys []contracts.PushKey, kid string) bool {
	for _, k := range keys {
		if k.ID == kid {
			return true
		}
	}
	return false
}

// what names the keys in logs and errors: "push" or the Purpose.
func (k *Keys) what() string {
	if k.Purpose != "" {
		return k.Purpose
	}
	return "push"
}

func (k *Keys) sealContext(kid string) []byte {
	if k.Purpose != "" {
		return []byte(k.Purpose + "-signing-key|" + kid)
	}
	return []byte("push-signing-key|" + kid)
}

// newKey makes the generation after keys[0]: active at once when it is
// the first, else Lead from now (and never before its predecessor).
func (k *Keys) newKey(keys []contracts.PushKey, now time.Time) (contracts.PushKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return contracts.PushKey{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return contracts.PushKey{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return contracts.PushKey{}, err
	}
	// The key's id is its RFC 7638 thumbprint: derived from the key, so it
	// never names another.
	tp, err := (&jose.JSONWebKey{Key: &priv.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return contracts.PushKey{}, err
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	sealed, err := k.Sealer.Seal(der, k.sealContext(kid))
	if err != nil {
		return contracts.PushKey{}, err
	}
	out := contracts.PushKey{ID: kid, Generation: 1, Algorithm: string(Algorithm), Public: pub, Sealed: sealed, CreatedAt: now, ActiveAt: now}
	if len(keys) > 0 {
		out.Generation = keys[0].Generation + 1
		out.ActiveAt = now.Add(k.Lead)
		if out.ActiveAt.Before(keys[0].ActiveAt) {
			out.ActiveAt = keys[0].ActiveAt
		}
	}
	return out, nil
}

// JWKS returns the published public keys as a JSON Web Key Set, newest
// first (the next key included once it is published), and how long the
// set may be cached.
func (k *Keys) JWKS(ctx context.Context) ([]byte, time.Duration, error) {
	_, jwks, err := k.current(ctx)
	return jwks, MaxAge, err
}

// Claims are what a delivery's signature says besides the body.
type Claims struct {
	IssuedAt   time.Time
	DeliveryID string
	TaskID     string
	ListingID  string
	ConfigID   string
	// Audience is the buyer org the delivery is for (ParamAudience).
	Audience string
	// TargetURL is where the delivery is POSTed; the header carries its
	// TargetHash (ParamTarget), not the URL, which may hold a secret.
	TargetURL string
	// Received is when the notification reached the meter
	// (ParamReceived; zero: absent); Covers the status updates it stands
	// for besides itself (ParamCovers).
	Received time.Time
	Covers   int
}

// SignDelivery signs one attempt of a delivery, over its body, now, for
// its org (d.OrgID) and the URL it is about to be POSTed to: its config's
// URL at the time of the attempt, which a replaced config may have
// changed since the delivery was queued.
func (k *Keys) SignDelivery(ctx context.Context, d contracts.Delivery, targetURL string) (string, error) {
	k.init()
	return k.Sign(ctx, d.Body, Claims{IssuedAt: k.Clock.Now(), DeliveryID: d.ID, TaskID: d.TaskID, ListingID: d.ListingID, ConfigID: d.ConfigID,
		Audience: d.OrgID, TargetURL: targetURL, Received: d.CreatedAt, Covers: d.Covers})
}

// Sign returns the compact JWS with a detached payload of body, made with
// the active key, with c in its protected header. A signature that says
// for no one is not made: a verifier checking its audience would refuse
// it, one not checking would take it for its own.
func (k *Keys) Sign(ctx context.Context, body []byte, c Claims) (string, error) {
	if c.Audience == "" || c.TargetURL == "" {
		return "", fmt.Errorf("delivery %s has no org or no target URL: not signed", c.DeliveryID)
	}
	priv, kid, err := k.active(ctx, c.IssuedAt)
	if err != nil {
		return "", err
	}
	opts := (&jose.SignerOptions{}).
		WithHeader(ParamIssuedAt, c.IssuedAt.Unix()).
		WithHeader(ParamDelivery, c.DeliveryID).
		WithHeader(ParamTask, c.TaskID).
		WithHeader(ParamListing, c.ListingID).
		WithHeader(ParamConfig, c.ConfigID).
		WithHeader(ParamAudience, c.Audience).
		WithHeader(ParamTarget, TargetHash(c.TargetURL))
	if !c.Received.IsZero() {
		opts = opts.WithHeader(ParamReceived, c.Received.Unix())
	}
	if c.Covers > 0 {
		opts = opts.WithHeader(ParamCovers, c.Covers)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: Algorithm, Key: jose.JSONWebKey{Key: priv, KeyID: kid}}, opts)
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(body)
	if err != nil {
		return "", err
	}
	return obj.DetachedCompactSerialize()
}

// SignJWS signs payload now with the active key: a JWS whose protected
// header holds alg, typ "JOSE", kid and jku (the URL of the JWKS that
// publishes the key), as A2A 1.0 §8.4.2 has Agent Card signatures. It
// returns the protected header and the signature, base64url encoded.
func (k *Keys) SignJWS(ctx context.Context, payload []byte, jku string) (protected, signature string, err error) {
	k.init()
	priv, kid, err := k.active(ctx, k.Clock.Now())
	if err != nil {
		return "", "", err
	}
	opts := (&jose.SignerOptions{}).WithType("JOSE").WithHeader("jku", jku)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: Algorithm, Key: jose.JSONWebKey{Key: priv, KeyID: kid}}, opts)
	if err != nil {
		return "", "", err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return "", "", err
	}
	compact, err := obj.CompactSerialize()
	if err != nil {
		return "", "", err
	}
	parts := strings.Split(compact, ".")
	return parts[0], parts[2], nil
}

// ActiveKeyID is the kid SignJWS signs with now: a signed thing cached
// under it is as good as a fresh signature until the keys rotate.
func (k *Keys) ActiveKeyID(ctx context.Context) (string, error) {
	k.init()
	_, kid, err := k.active(ctx, k.Clock.Now())
	return kid, err
}

// active returns the private key that signs at now: the newest published
// key active by then.
func (k *Keys) active(ctx context.Context, now time.Time) (*ecdsa.PrivateKey, string, error) {
	keys, _, err := k.current(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("%s signing keys: %w", k.what(), err)
	}
	for _, pk := range keys {
		if pk.ActiveAt.After(now) {
			continue
		}
		k.mu.Lock()
		priv := k.private[pk.ID]
		k.mu.Unlock()
		if priv != nil {
			return priv, pk.ID, nil
		}
		der, err := k.Sealer.Open(pk.Sealed, k.sealContext(pk.ID))
		if err != nil {
			return nil, "", fmt.Errorf("%s signing key %s cannot be opened (is AGENTMARKET_SECRET_KEY the same on every process?): %w", k.what(), pk.ID, err)
		}
		parsed, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, "", fmt.Errorf("%s signing key %s: %w", k.what(), pk.ID, err)
		}
		priv, ok := parsed.(*ecdsa.PrivateKey)
		if !ok || pk.Algorithm != string(Algorithm) {
			return nil, "", fmt.Errorf("%s signing key %s: %s keys are not supported", k.what(), pk.ID, pk.Algorithm)
		}
		k.mu.Lock()
		k.private[pk.ID] = priv
		k.mu.Unlock()
		return priv, pk.ID, nil
	}
	return nil, "", errors.New("no push signing key is active yet")
}
