package pushverify_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/pushsign"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// The victim, org A, and its webhook; org B registers its own config with
// A's config id and A's URL.
const (
	orgA  = "org_aaaaaaaaaaaaaaaa"
	orgB  = "org_bbbbbbbbbbbbbbbb"
	hookA = "https://hooks.a.example/agentmarket"
)

// meter signs deliveries as the meter does, with keys the returned JWKS
// URL publishes.
func meter(t *testing.T, clock agentmarket.Clock) (*pushsign.Keys, string) {
	t.Helper()
	sealer, err := aesgcm.New(bytes.Repeat([]byte{4}, 32))
	if err != nil {
		t.Fatal(err)
	}
	keys := &pushsign.Keys{Store: gormstore.New(relationaltest.SQLite(t).DB), Sealer: sealer, Clock: clock}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _, err := keys.JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return keys, srv.URL
}

func signed(t *testing.T, keys *pushsign.Keys, org, config, url string) (contracts.Delivery, string) {
	t.Helper()
	d := contracts.Delivery{ID: "dlv_" + org + config, ListingID: "lst_1", TaskID: "task-1", ConfigID: config, OrgID: org,
		Body: []byte(`{"statusUpdate":{"taskId":"task-1","status":{"state":"TASK_STATE_COMPLETED"}}}`)}
	sig, err := keys.SignDelivery(context.Background(), d, url)
	if err != nil {
		t.Fatal(err)
	}
	return d, sig
}

// TestForWhom: a genuine delivery is accepted only by the verifier of
// its org, webhook URL and config. Org B's delivery for its config "cfg-1"
// at A's URL (the cross-org replay) is refused by A's verifier, although
// its signature, config id and URL are all right.
func TestForWhom(t *testing.T) {
	ctx := context.Background()
	clock := agentmarket.NewManualClock(time.Now())
	keys, jwks := meter(t, clock)
	verifier := func(org, url string, configs ...string) *pushverify.Verifier {
		return &pushverify.Verifier{JWKSURL: jwks, Org: org, URL: url, Config: pushverify.ConfigIDs(configs...), Now: clock.Now}
	}
	a := verifier(orgA, hookA, "cfg-1")
	own, ownSig := signed(t, keys, orgA, "cfg-1", hookA)
	d, err := a.Verify(ctx, ownSig, own.Body)
	if err != nil || d.Org != orgA || d.Target != pushverify.TargetHash(hookA) || d.ConfigID != "cfg-1" {
		t.Fatalf("A's own delivery: %+v, %v", d, err)
	}

	tests := []struct {
		name         string
		org, config  string // the delivery's, as the meter signed it
		url          string // where the meter sent it
		v            *pushverify.Verifier
		wantRefusal  bool
		refusalNames string
	}{
		{"cross-org replay: B's config with A's id and URL", orgB, "cfg-1", hookA, a, true, orgB},
		{"A's delivery to another of A's URLs", orgA, "cfg-1", hookA + "/other", a, true, "another URL"},
		{"A's delivery for another config of A's", orgA, "cfg-2", hookA, a, true, "cfg-2"},
		{"A's alert, at a verifier that takes it", orgA, "alerts:" + orgA, hookA, verifier(orgA, hookA, "cfg-1", "alerts:"+orgA), false, ""},
		{"B's delivery at B's own verifier", orgB, "cfg-1", hookA, verifier(orgB, hookA, "cfg-1"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dl, sig := signed(t, keys, tt.org, tt.config, tt.url)
			got, err := tt.v.Verify(ctx, sig, dl.Body)
			if !tt.wantRefusal {
				if err != nil || got.Org != tt.org || got.ConfigID != tt.config {
					t.Errorf("verified as %+v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, pushverify.ErrNotForYou) || !bytes.Contains([]byte(err.Error()), []byte(tt.refusalNames)) {
				t.Errorf("got %+v, %v; want ErrNotForYou naming %q", got, err, tt.refusalNames)
			}
		})
	}

	// A verifier that does not say whom it is for verifies nothing.
	for _, v := range []*pushverify.Verifier{
		{JWKSURL: jwks, URL: hookA, Config: pushverify.ConfigIDs("cfg-1")},
		{JWKSURL: jwks, Org: orgA, Config: pushverify.ConfigIDs("cfg-1")},
		{JWKSURL: jwks, Org: orgA, URL: hookA},
	} {
		if _, err := v.Verify(ctx, ownSig, own.Body); err == nil {
			t.Errorf("a verifier with Org %q, URL %q, Config set %v accepted a delivery", v.Org, v.URL, v.Config != nil)
		}
	}
}

// TestHandlerRefusesOtherOrgs: org A's webhook answers 401 to org B's
// genuine delivery replayed at it, headers and all, and 204 to its own.
func TestHandlerRefusesOtherOrgs(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Now())
	keys, jwks := meter(t, clock)
	v := &pushverify.Verifier{JWKSURL: jwks, Org: orgA, URL: hookA, Config: pushverify.ConfigIDs("cfg-1"), Now: clock.Now}
	var reached []string
	hook := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := pushverify.FromContext(r.Context())
		reached = append(reached, d.Org)
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tt := range []struct {
		org  string
		want int
	}{{orgB, http.StatusUnauthorized}, {orgA, http.StatusNoContent}} {
		d, sig := signed(t, keys, tt.org, "cfg-1", hookA)
		req := httptest.NewRequest(http.MethodPost, hookA, bytes.NewReader(d.Body))
		req.Header.Set(pushverify.SignatureHeader, sig)
		req.Header.Set("X-AgentMarket-Delivery-Id", d.ID)
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s's delivery at A's webhook: %d %s, want %d", tt.org, rec.Code, rec.Body, tt.want)
		}
	}
	if len(reached) != 1 || reached[0] != orgA {
		t.Errorf("A's webhook saw deliveries for %v, want [%s]", reached, orgA)
	}
}

// TestAudienceRequired: a signature by a published key whose header lacks
// "aud" or "agentmarket-target", or has them of the wrong type, is
// refused: whom it is for is not optional.
func TestAudienceRequired(t *testing.T) {
	ctx := context.Background()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := (&jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &priv.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}}).Key("k1")[0].MarshalJSON()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"keys":[` + string(set) + `]}`))
	}))
	defer srv.Close()
	v := &pushverify.Verifier{JWKSURL: srv.URL, Org: orgA, URL: hookA, Config: pushverify.ConfigIDs("cfg-1")}
	body := []byte(`{}`)
	sign := func(extra map[string]any) string {
		opts := (&jose.SignerOptions{}).WithHeader("iat", time.Now().Unix()).WithHeader("agentmarket-delivery", "dlv_1").
			WithHeader("agentmarket-task", "").WithHeader("agentmarket-config", "cfg-1")
		for k, val := range extra {
			opts = opts.WithHeader(jose.HeaderKey(k), val)
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: "k1"}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.Sign(body)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := obj.DetachedCompactSerialize()
		return out
	}
	target := pushverify.TargetHash(hookA)
	if _, err := v.Verify(ctx, sign(map[string]any{"aud": orgA, "agentmarket-target": target}), body); err != nil {
		t.Fatalf("a complete header: %v", err)
	}
	for name, extra := range map[string]map[string]any{
		"no aud":           {"agentmarket-target": target},
		"no target":        {"aud": orgA},
		"aud as a list":    {"aud": []string{orgA}, "agentmarket-target": target},
		"the URL in clear": {"aud": orgA, "agentmarket-target": hookA},
	} {
		if _, err := v.Verify(ctx, sign(extra), body); !errors.Is(err, pushverify.ErrNotForYou) {
			t.Errorf("%s: %v, want ErrNotForYou", name, err)
		}
	}
}

// TestReplays: with Seen, a copy of an attempt is refused (401,
// ErrReplayed) while its signature is fresh, and as stale after; a retry
// of a delivery the webhook handled (signed anew) is acknowledged without
// reaching the handler; a delivery whose handler failed reaches it again.
func TestReplays(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Now())
	keys, jwks := meter(t, clock)
	v := &pushverify.Verifier{JWKSURL: jwks, Org: orgA, URL: hookA, Config: pushverify.ConfigIDs("cfg-1", "cfg-2"), Now: clock.Now,
		MaxSkew: 5 * time.Minute, Seen: &pushverify.Seen{}}
	var reached []string
	fail := map[string]bool{"dlv_" + orgA + "cfg-2": true} // cfg-2's handler fails once
	hook := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := pushverify.FromContext(r.Context())
		reached = append(reached, d.DeliveryID)
		if fail[d.DeliveryID] {
			delete(fail, d.DeliveryID)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	post := func(d contracts.Delivery, sig string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, hookA, bytes.NewReader(d.Body))
		req.Header.Set(pushverify.SignatureHeader, sig)
		req.Header.Set("X-AgentMarket-Delivery-Id", d.ID)
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	d1, sig1 := signed(t, keys, orgA, "cfg-1", hookA)
	if code, body := post(d1, sig1); code != http.StatusNoContent {
		t.Fatalf("the first attempt: %d %s", code, body)
	}
	if code, body := post(d1, sig1); code != http.StatusUnauthorized || !strings.Contains(body, pushverify.ErrReplayed.Error()) {
		t.Errorf("the same attempt again: %d %s, want 401 replayed", code, body)
	}
	if _, err := v.Verify(context.Background(), sig1, d1.Body); !errors.Is(err, pushverify.ErrReplayed) {
		t.Errorf("Verify of a copy: %v, want ErrReplayed", err)
	}
	clock.Advance(30 * time.Second)
	_, retry := signed(t, keys, orgA, "cfg-1", hookA) // the meter's retry: signed anew
	if code, body := post(d1, retry); code != http.StatusOK {
		t.Errorf("a retry of a handled delivery: %d %s, want 200 (acknowledged)", code, body)
	}
	d2, sig2 := signed(t, keys, orgA, "cfg-2", hookA)
	if code, _ := post(d2, sig2); code != http.StatusInternalServerError {
		t.Errorf("cfg-2's first attempt: %d, want the handler's 500", code)
	}
	clock.Advance(2 * time.Second)
	_, retry2 := signed(t, keys, orgA, "cfg-2", hookA)
	if code, _ := post(d2, retry2); code != http.StatusNoContent {
		t.Errorf("the retry of a delivery whose handler failed: %d, want handled (204)", code)
	}
	if want := []string{d1.ID, d2.ID, d2.ID}; !slices.Equal(reached, want) {
		t.Errorf("the handler saw %v, want %v", reached, want)
	}
	clock.Advance(10 * time.Minute)
	if code, body := post(d1, sig1); code != http.StatusUnauthorized || !strings.Contains(body, "too old") {
		t.Errorf("a copy after the window: %d %s, want 401 stale", code, body)
	}
}
