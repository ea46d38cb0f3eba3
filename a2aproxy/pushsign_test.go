package a2aproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/pushsign"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

type failingSigner struct{}

func (failingSigner) SignDelivery(context.Context, contracts.Delivery, string) (string, error) {
	return "", errors.New("no key can be opened")
}

// TestDeliverySigned: each attempt of a delivery carries a signature over
// the exact body sent, fresh each attempt, for the delivery's org and the
// URL it is sent to, which the buyer's verifier accepts with the published
// keys; a delivery that cannot be signed is not sent, but retried.
func TestDeliverySigned(t *testing.T) {
	ctx := context.Background()
	if a2aproxy.SignatureHeader != pushsign.Header {
		t.Fatalf("the meter sends %s, the signer documents %s", a2aproxy.SignatureHeader, pushsign.Header)
	}
	store := gormstore.New(relationaltest.SQLite(t).DB)
	sealer, err := aesgcm.New(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	clock := agentmarket.NewManualClock(time.Now())
	keys := &pushsign.Keys{Store: store, Sealer: sealer, Clock: clock}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _, err := keys.JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), 503)
			return
		}
		w.Write(b)
	}))
	defer jwks.Close()

	type got struct {
		sig, id, path string
		body          []byte
		status        int
	}
	var (
		mu       sync.Mutex
		received []got
	)
	var hook *httptest.Server
	verifier := func(path string) *pushverify.Verifier {
		return &pushverify.Verifier{JWKSURL: jwks.URL, Org: "org_b", URL: hook.URL + path, Config: pushverify.ConfigIDs("cfg_1"), Now: clock.Now}
	}
	hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := got{sig: r.Header.Get("AgentMarket-Signature"), id: r.Header.Get("X-AgentMarket-Delivery-Id"), path: r.URL.Path, body: body, status: 204}
		if _, err := verifier(r.URL.Path).Verify(r.Context(), g.sig, body); err != nil {
			t.Errorf("the webhook refused a delivery: %v", err)
		}
		mu.Lock()
		if len(received) == 0 {
			g.status = 503 // the first attempt fails
		}
		received = append(received, g)
		mu.Unlock()
		w.WriteHeader(g.status)
	}))
	defer hook.Close()

	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	p := &a2aproxy.Proxy{Clock: clock, Push: &a2aproxy.Push{Store: store, Sealer: sealer, Signer: keys,
		Guard: httpfetch.Guard{Allow: allow}, Allow: allow}}
	cfg := contracts.PushConfig{ListingID: "lst_1", TaskID: "task_1", ConfigID: "cfg_1", OrgID: "org_b", Version: "0.3", URL: hook.URL + "/hook",
		CallbackID: "pcb_1", SecretHash: "x", CreatedAt: clock.Now()}
	if cfg.Sealed, err = p.Push.SealPushSecrets(cfg, "tok", ""); err != nil {
		t.Fatal(err)
	}
	if err := store.SavePushConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Bytes a re-encoding would change: spacing, key order, escapes.
	body := []byte(`{"kind":"status-update", "taskId":"task_1","status":{"state":"working"},"final":false,"x":"\u00e9\/"}`)
	d := contracts.Delivery{ID: "dlv_1", ListingID: "lst_1", TaskID: "task_1", ConfigID: "cfg_1", OrgID: "org_b", Body: body,
		Status: contracts.DeliveryPending, NextAttemptAt: clock.Now(), CreatedAt: clock.Now()}
	if _, err := store.Enqueue(ctx, d); err != nil {
		t.Fatal(err)
	}
	p.DeliverOnce(ctx, d)
	clock.Advance(2 * time.Second)
	d.Attempts = 1
	p.DeliverOnce(ctx, d)
	if len(received) != 2 {
		t.Fatalf("the webhook got %d attempts, want 2", len(received))
	}
	for i, g := range received {
		if !bytes.Equal(g.body, body) || g.id != "dlv_1" || g.sig == "" {
			t.Errorf("attempt %d: id %q, signature %q, body %s", i+1, g.id, g.sig, g.body)
		}
		v, err := verifier("/hook").Verify(ctx, g.sig, body)
		if err != nil || v.DeliveryID != "dlv_1" || v.TaskID != "task_1" || v.ConfigID != "cfg_1" || v.ListingID != "lst_1" ||
			v.Org != "org_b" || v.Target != pushsign.TargetHash(hook.URL+"/hook") {
			t.Errorf("attempt %d verifies as %+v, %v", i+1, v, err)
		}
		if _, err := verifier("/other").Verify(ctx, g.sig, body); !errors.Is(err, pushverify.ErrNotForYou) {
			t.Errorf("attempt %d at another URL: %v, want ErrNotForYou", i+1, err)
		}
	}
	if received[0].sig == received[1].sig {
		t.Error("the retry carried the first attempt's signature; each attempt is signed anew")
	}

	// The config's URL replaced after the delivery was queued: the
	// delivery goes to the new URL, signed for it.
	moved := d
	moved.ID, moved.Attempts = "dlv_moved", 0
	if _, err := store.Enqueue(ctx, moved); err != nil {
		t.Fatal(err)
	}
	cfg.URL = hook.URL + "/moved"
	if err := store.SavePushConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	p.DeliverOnce(ctx, moved)
	if len(received) != 3 || received[2].path != "/moved" {
		t.Fatalf("the delivery after the move: %d received, last %+v", len(received), received[len(received)-1])
	}
	if v, err := verifier("/moved").Verify(ctx, received[2].sig, body); err != nil || v.Target != pushsign.TargetHash(hook.URL+"/moved") {
		t.Errorf("the delivery after the move verifies at its new URL as %+v, %v", v, err)
	}

	// Unsigned, nothing goes out: the attempt counts, and is retried.
	d2 := d
	d2.ID, d2.Attempts = "dlv_2", 0
	if _, err := store.Enqueue(ctx, d2); err != nil {
		t.Fatal(err)
	}
	p.Push.Signer = failingSigner{}
	p.DeliverOnce(ctx, d2)
	if len(received) != 3 {
		t.Errorf("a delivery that could not be signed was sent")
	}
	ds, err := store.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_b", TaskID: "task_1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ds {
		if x.ID == "dlv_2" && (x.Status != contracts.DeliveryPending || x.Attempts != 1 || x.LastError != "not signed: no key can be opened") {
			t.Errorf("the unsigned delivery: %+v", x)
		}
	}
}
