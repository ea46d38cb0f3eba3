package pushsign_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/pushsign"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func sealer(t *testing.T, b byte) *aesgcm.Sealer {
	t.Helper()
	s, err := aesgcm.New(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rig is one database shared by the keys of several processes, and the
// marketplace's JWKS served over HTTP from the first of them.
type rig struct {
	store *gormstore.Store
	clock *agentmarket.ManualClock
	keys  *pushsign.Keys
	url   string
	// fetches counts the JWKS requests.
	mu      sync.Mutex
	fetches int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{store: gormstore.New(relationaltest.SQLite(t).DB), clock: agentmarket.NewManualClock(t0)}
	r.keys = r.process(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.fetches++
		r.mu.Unlock()
		b, maxAge, err := r.keys.JWKS(req.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age="+maxAge.String())
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// process is the keys of another process on the same database.
func (r *rig) process(t *testing.T) *pushsign.Keys {
	return &pushsign.Keys{Store: r.store, Sealer: sealer(t, 7), Clock: r.clock,
		RotateEvery: 30 * 24 * time.Hour, Retention: 7 * 24 * time.Hour, Lead: time.Hour, Refresh: time.Minute}
}

// verifier is the buyer's (org_b, at hookURL, config cfg-1), on the
// rig's clock, fetching the JWKS afresh.
func (r *rig) verifier() *pushverify.Verifier {
	return &pushverify.Verifier{JWKSURL: r.url, Org: "org_b", URL: hookURL, Config: pushverify.ConfigIDs("cfg-1"), Now: r.clock.Now, MaxSkew: -1}
}

func (r *rig) jwks(t *testing.T) []string {
	t.Helper()
	res, err := http.Get(r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var set struct {
		Keys []struct {
			Kid, Kty, Crv, Alg, Use string
			D                       string `json:"d"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		if k.D != "" {
			t.Errorf("the JWKS publishes a private key: %+v", k)
		}
		if k.Kty != "EC" || k.Crv != "P-256" || k.Alg != "ES256" || k.Use != "sig" {
			t.Errorf("published key %+v, want an EC P-256 ES256 signing key", k)
		}
		kids = append(kids, k.Kid)
	}
	return kids
}

// hookURL is org_b's webhook, where its deliveries go.
const hookURL = "https://hooks.example/push?tenant=b"

func delivery(id string) contracts.Delivery {
	return contracts.Delivery{ID: id, ListingID: "lst_1", TaskID: "task-" + id, ConfigID: "cfg-1", OrgID: "org_b",
		Body: []byte(`{"statusUpdate":{"taskId":"task-` + id + `","status":{"state":"TASK_STATE_WORKING"}}}`)}
}

// sign signs d as the meter does, for hookURL.
func sign(t *testing.T, k *pushsign.Keys, d contracts.Delivery) (string, string) {
	t.Helper()
	sig, err := k.SignDelivery(context.Background(), d, hookURL)
	if err != nil {
		t.Fatalf("sign %s: %v", d.ID, err)
	}
	return sig, header(t, sig)["kid"].(string)
}

func header(t *testing.T, sig string) map[string]any {
	t.Helper()
	parts := strings.Split(sig, ".")
	if len(parts) != 3 || parts[1] != "" {
		t.Fatalf("signature %q is not a compact JWS with a detached payload", sig)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSignAndVerify: a delivery's signature is a detached compact ES256
// JWS over the exact body, with the claims in its protected header (whom
// it is for included: the org as "aud", the URL's hash); the
// buyer's verifier (docs/examples/pushverify) accepts it with the JWKS
// fetched over HTTP, and refuses a changed body, another delivery's
// signature, a stale one, and a forged one.
func TestSignAndVerify(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	d := delivery("dlv_1")
	d.CreatedAt, d.Covers = t0.Add(-2*time.Second), 3 // it stands for 3 status updates before it
	sig, kid := sign(t, r.keys, d)
	h := header(t, sig)
	// The target is the SHA-256 of the URL's bytes, base64url without
	// padding, computed here by hand.
	sum := sha256.Sum256([]byte("https://hooks.example/push?tenant=b"))
	target := base64.RawURLEncoding.EncodeToString(sum[:])
	want := map[string]any{"alg": "ES256", "kid": kid, "iat": float64(t0.Unix()), "agentmarket-delivery": "dlv_1",
		"agentmarket-task": "task-dlv_1", "agentmarket-listing": "lst_1", "agentmarket-config": "cfg-1",
		"aud": "org_b", "agentmarket-target": target, "agentmarket-received": float64(t0.Add(-2 * time.Second).Unix()), "agentmarket-covers": float64(3)}
	if g, w := mustJSON(h), mustJSON(want); g != w {
		t.Errorf("protected header = %s, want %s", g, w)
	}
	if kids := r.jwks(t); len(kids) != 1 || kids[0] != kid {
		t.Errorf("JWKS kids = %v, want [%s]", kids, kid)
	}

	v := r.verifier()
	v.MaxSkew = 5 * time.Minute
	got, err := v.Verify(ctx, sig, d.Body)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if got.KeyID != kid || got.DeliveryID != "dlv_1" || got.TaskID != "task-dlv_1" || got.ListingID != "lst_1" || got.ConfigID != "cfg-1" ||
		got.Org != "org_b" || got.Target != target || !got.IssuedAt.Equal(t0) || !got.Received.Equal(t0.Add(-2*time.Second)) || got.Covers != 3 {
		t.Errorf("verified delivery = %+v", got)
	}

	tampered := bytes.Replace(d.Body, []byte("WORKING"), []byte("FAILED"), 1)
	if _, err := v.Verify(ctx, sig, tampered); !errors.Is(err, pushverify.ErrBadSig) {
		t.Errorf("verify a changed body: %v, want ErrBadSig", err)
	}
	if _, err := v.Verify(ctx, sig, append(bytes.Clone(d.Body), '\n')); !errors.Is(err, pushverify.ErrBadSig) {
		t.Errorf("verify a body with one more byte: %v, want ErrBadSig", err)
	}
	other, _ := sign(t, r.keys, delivery("dlv_2"))
	if _, err := v.Verify(ctx, other, d.Body); !errors.Is(err, pushverify.ErrBadSig) {
		t.Errorf("verify another delivery's signature: %v, want ErrBadSig", err)
	}
	// A signature made with a key the marketplace does not publish.
	forger := newRig(t)
	forged, _ := sign(t, forger.keys, d)
	if _, err := v.Verify(ctx, forged, d.Body); !errors.Is(err, pushverify.ErrUnknownKey) {
		t.Errorf("verify a forged signature: %v, want ErrUnknownKey", err)
	}
	// The forger's header naming the marketplace's kid does not help.
	parts := strings.Split(forged, ".")
	fh := header(t, forged)
	fh["kid"] = kid
	hb, _ := json.Marshal(fh)
	if _, err := v.Verify(ctx, base64.RawURLEncoding.EncodeToString(hb)+".."+parts[2], d.Body); !errors.Is(err, pushverify.ErrBadSig) {
		t.Errorf("verify a forged signature naming the real kid: %v, want ErrBadSig", err)
	}
	// Unsigned, and the payload not detached.
	for _, bad := range []string{"", "abc", strings.Replace(sig, "..", "."+base64.RawURLEncoding.EncodeToString(d.Body)+".", 1)} {
		if _, err := v.Verify(ctx, bad, d.Body); !errors.Is(err, pushverify.ErrMalformed) {
			t.Errorf("verify %q: %v, want ErrMalformed", bad, err)
		}
	}
	r.clock.Advance(6 * time.Minute)
	if _, err := v.Verify(ctx, sig, d.Body); !errors.Is(err, pushverify.ErrStale) {
		t.Errorf("verify a signature 6 minutes old: %v, want ErrStale", err)
	}
}

// TestSignedForWhom: the audience in the header is the delivery's org and
// the hash of the URL it is sent to, each from what the meter has at the
// attempt; the same delivery for another org or URL is signed for that
// one, and a delivery with no org or no URL is not signed at all.
func TestSignedForWhom(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	d := delivery("dlv_1")
	cases := []struct {
		org, url string
	}{
		{"org_b", hookURL},
		{"org_a", hookURL},
		{"org_b", "https://hooks.example/push?tenant=B"}, // one byte apart, another URL
		{"org_b", "https://hooks.example/push?tenant=b "},
	}
	targets := map[string]bool{}
	for _, c := range cases {
		d.OrgID = c.org
		sig, err := r.keys.SignDelivery(ctx, d, c.url)
		if err != nil {
			t.Fatal(err)
		}
		h := header(t, sig)
		if h[pushsign.ParamAudience] != c.org || h[pushsign.ParamTarget] != pushsign.TargetHash(c.url) || h[pushsign.ParamConfig] != "cfg-1" {
			t.Errorf("%s at %q: header %v", c.org, c.url, h)
		}
		if c.org == "org_b" {
			targets[h[pushsign.ParamTarget].(string)] = true
		}
	}
	if len(targets) != 3 {
		t.Errorf("three URLs hash to %d targets", len(targets))
	}
	if got, want := pushsign.TargetHash(hookURL), pushverify.TargetHash(hookURL); got != want || len(got) != 43 {
		t.Errorf("TargetHash: the meter's %q, the verifier's %q (43 base64url characters)", got, want)
	}
	for _, c := range []struct{ org, url string }{{"", hookURL}, {"org_b", ""}} {
		d.OrgID = c.org
		if sig, err := r.keys.SignDelivery(ctx, d, c.url); err == nil {
			t.Errorf("org %q, URL %q: signed %s, want no signature", c.org, c.url, sig)
		}
	}
}

// TestVerifyWithoutJOSE: the signature is plain RFC 7515 — checked here
// with the standard library alone, from the published JWK's x and y, as
// any tool would.
func TestVerifyWithoutJOSE(t *testing.T) {
	r := newRig(t)
	d := delivery("dlv_std")
	sig, kid := sign(t, r.keys, d)
	res, err := http.Get(r.url)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct{ Kid, X, Y string } `json:"keys"`
	}
	json.NewDecoder(res.Body).Decode(&set)
	res.Body.Close()
	if len(set.Keys) != 1 || set.Keys[0].Kid != kid {
		t.Fatalf("JWKS = %+v", set)
	}
	coord := func(s string) *big.Int {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("coordinate %q: %v", s, err)
		}
		return new(big.Int).SetBytes(b)
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: coord(set.Keys[0].X), Y: coord(set.Keys[0].Y)}
	protected, _, _ := strings.Cut(sig, ".")
	raw, err := base64.RawURLEncoding.DecodeString(sig[strings.LastIndex(sig, ".")+1:])
	if err != nil || len(raw) != 64 {
		t.Fatalf("signature part: %d bytes, %v (ES256 is R‖S, 64 bytes)", len(raw), err)
	}
	digest := sha256.Sum256([]byte(protected + "." + base64.RawURLEncoding.EncodeToString(d.Body)))
	if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])) {
		t.Error("the signature does not verify over protected.base64url(body)")
	}
}

// TestRotation: a new key is published an hour before it signs; a
// delivery signed before the rotation still verifies after it, with the
// JWKS as published then; a replaced key is published until the
// retention after its successor took over, then it is gone from the JWKS
// and from the store.
func TestRotation(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	old := delivery("dlv_old")
	oldSig, k1 := sign(t, r.keys, old)

	// The rotation is due an hour before the key's 30 days are over: the
	// next key is published, and the old one still signs.
	r.clock.Advance(30*24*time.Hour - time.Hour)
	kids := r.jwks(t)
	if len(kids) != 2 || kids[1] != k1 {
		t.Fatalf("JWKS after the rotation = %v, want [new %s]", kids, k1)
	}
	k2 := kids[0]
	if _, kid := sign(t, r.keys, delivery("dlv_during")); kid != k1 {
		t.Errorf("signed with %s during the lead, want the old key %s", kid, k1)
	}
	r.clock.Advance(time.Hour)
	newSig, kid := sign(t, r.keys, delivery("dlv_new"))
	if kid != k2 {
		t.Errorf("signed with %s after the lead, want the new key %s", kid, k2)
	}
	// A buyer verifies both with the JWKS after the rotation.
	v := r.verifier()
	if _, err := v.Verify(ctx, oldSig, old.Body); err != nil {
		t.Errorf("a delivery signed before the rotation, after it: %v", err)
	}
	if _, err := v.Verify(ctx, newSig, delivery("dlv_new").Body); err != nil {
		t.Errorf("a delivery signed after the rotation: %v", err)
	}

	// The old key stays until 7 days after the new one took over.
	r.clock.Advance(7*24*time.Hour - time.Minute)
	if kids := r.jwks(t); len(kids) != 2 {
		t.Errorf("JWKS a minute before the retention ends = %v, want both keys", kids)
	}
	v = r.verifier()
	if _, err := v.Verify(ctx, oldSig, old.Body); err != nil {
		t.Errorf("a delivery of the old key a minute before the retention ends: %v", err)
	}
	r.clock.Advance(time.Minute)
	if kids := r.jwks(t); len(kids) != 1 || kids[0] != k2 {
		t.Errorf("JWKS past the retention = %v, want [%s]", kids, k2)
	}
	v = r.verifier()
	if _, err := v.Verify(ctx, oldSig, old.Body); !errors.Is(err, pushverify.ErrUnknownKey) {
		t.Errorf("a delivery of a key past its retention: %v, want ErrUnknownKey", err)
	}
	if ks, err := r.store.PushKeys(ctx); err != nil || len(ks) != 1 || ks[0].ID != k2 {
		t.Errorf("store after the retention = %v, %v; want the new key alone", ks, err)
	}
}

// TestVerifierFetchesOnUnknownKey: a buyer whose copy of the JWKS predates
// a key fetches the set again when it meets the key, not on every
// delivery.
func TestVerifierFetchesOnUnknownKey(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	v := r.verifier()
	v.Refresh = 100 * 24 * time.Hour // only an unknown kid makes it fetch again
	d := delivery("dlv_1")
	sig, _ := sign(t, r.keys, d)
	for range 3 {
		if _, err := v.Verify(ctx, sig, d.Body); err != nil {
			t.Fatal(err)
		}
	}
	r.clock.Advance(30 * 24 * time.Hour) // the next key is made
	r.keys.Ensure(ctx)
	r.clock.Advance(time.Hour) // and signs
	sig2, _ := sign(t, r.keys, d)
	if _, err := v.Verify(ctx, sig2, d.Body); err != nil {
		t.Errorf("a delivery of a key the buyer's copy predates: %v", err)
	}
	if r.fetches != 2 {
		t.Errorf("the JWKS was fetched %d times, want 2", r.fetches)
	}
}

// TestProcessesShareKeys: meters and the marketplace on one database
// sign with the same key and publish the same set; when they rotate at
// once, one key is made.
func TestProcessesShareKeys(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	meters := []*pushsign.Keys{r.process(t), r.process(t), r.process(t)}
	var wg sync.WaitGroup
	kids := make([]string, len(meters))
	for i, m := range meters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sig, err := m.SignDelivery(ctx, delivery("dlv_1"), hookURL)
			if err != nil {
				t.Errorf("meter %d: %v", i, err)
				return
			}
			if _, err := r.verifier().Verify(ctx, sig, delivery("dlv_1").Body); err != nil {
				t.Errorf("meter %d's signature: %v", i, err)
			}
			kids[i] = header(t, sig)["kid"].(string)
		}()
	}
	wg.Wait()
	if kids[0] == "" || kids[0] != kids[1] || kids[1] != kids[2] {
		t.Errorf("meters signed with %v, want one key", kids)
	}
	r.clock.Advance(31 * 24 * time.Hour)
	for _, m := range append(meters, r.keys) {
		wg.Add(1)
		go func() { defer wg.Done(); m.Ensure(ctx) }()
	}
	wg.Wait()
	ks, err := r.store.PushKeys(ctx)
	if err != nil || len(ks) != 2 || ks[0].Generation != 2 {
		t.Errorf("keys after concurrent rotations = %d (%v), want generations 2 and 1", len(ks), err)
	}
}

// TestStoreTrouble: while the store cannot be read, the keys read before
// go on signing and being published; a process whose secret key differs
// says so instead of signing.
func TestStoreTrouble(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, kid := sign(t, r.keys, delivery("dlv_1"))
	flaky := &failingStore{PushKeyStore: r.store}
	k := r.process(t)
	k.Store = flaky
	if _, got := sign(t, k, delivery("dlv_2")); got != kid {
		t.Fatalf("signed with %s, want %s", got, kid)
	}
	flaky.fail = true
	r.clock.Advance(10 * time.Minute)
	if _, got := sign(t, k, delivery("dlv_3")); got != kid {
		t.Errorf("with the store down, signed with %s, want %s", got, kid)
	}
	if b, _, err := k.JWKS(ctx); err != nil || !strings.Contains(string(b), kid) {
		t.Errorf("with the store down, JWKS = %s, %v", b, err)
	}
	// A fresh process cannot start without its store.
	fresh := r.process(t)
	fresh.Store = flaky
	if _, err := fresh.SignDelivery(ctx, delivery("dlv_4"), hookURL); err == nil {
		t.Error("a process that never read its keys signed with the store down")
	}
	// Another secret key cannot open the shared key.
	wrong := r.process(t)
	wrong.Sealer = sealer(t, 9)
	if _, err := wrong.SignDelivery(ctx, delivery("dlv_5"), hookURL); err == nil || !strings.Contains(err.Error(), "AGENTMARKET_SECRET_KEY") {
		t.Errorf("signing with another secret key: %v", err)
	}
}

type failingStore struct {
	contracts.PushKeyStore
	fail bool
}

func (f *failingStore) PushKeys(ctx context.Context) ([]contracts.PushKey, error) {
	if f.fail {
		return nil, errors.New("database down")
	}
	return f.PushKeyStore.PushKeys(ctx)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEmergencyRotation: an operator who deletes every key (one leaked)
// gets a new key signing, and the old ones unpublished, within a minute,
// without a restart.
func TestEmergencyRotation(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, k1 := sign(t, r.keys, delivery("dlv_1"))
	if _, err := r.store.DeletePushKeys(ctx, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	_, k2 := sign(t, r.keys, delivery("dlv_2"))
	if k2 == k1 {
		t.Errorf("still signing with the deleted key %s", k1)
	}
	if kids := r.jwks(t); len(kids) != 1 || kids[0] != k2 {
		t.Errorf("JWKS after the keys were deleted = %v, want [%s]", kids, k2)
	}
}
