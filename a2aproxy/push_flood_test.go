package a2aproxy_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// hook is a buyer's webhook on 127.0.0.1 that counts what it gets.
type hook struct {
	*httptest.Server
	mu          sync.Mutex
	inflight    int
	maxInflight int
	got         []hookHit
	answer      func(n int) (status int, retryAfter string) // n: the request's number, from 0
	delay       time.Duration
}

type hookHit struct {
	id, attempt string
	body        []byte
	at          time.Time // real time of arrival
}

func newHook(t *testing.T, delay time.Duration) *hook {
	h := &hook{delay: delay}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		h.mu.Lock()
		n := len(h.got)
		h.got = append(h.got, hookHit{id: r.Header.Get("X-AgentMarket-Delivery-Id"), attempt: r.Header.Get("X-AgentMarket-Delivery-Attempt"),
			body: body.Bytes(), at: time.Now()})
		h.inflight++
		h.maxInflight = max(h.maxInflight, h.inflight)
		h.mu.Unlock()
		time.Sleep(h.delay)
		status, ra := 204, ""
		if h.answer != nil {
			status, ra = h.answer(n)
		}
		h.mu.Lock()
		h.inflight--
		h.mu.Unlock()
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) hits() []hookHit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookHit(nil), h.got...)
}

// pushRig is a meter's push delivery on a real SQLite store, delivering
// to webhooks on 127.0.0.1, on a manual clock.
type pushRig struct {
	t      *testing.T
	store  *gormstore.Store
	clock  *agentmarket.ManualClock
	proxy  *a2aproxy.Proxy
	cancel context.CancelFunc
	done   chan struct{}
}

func newPushRig(t *testing.T) *pushRig {
	store := gormstore.New(relationaltest.SQLite(t).DB)
	sealer, err := aesgcm.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	clock := agentmarket.NewManualClock(time.Now())
	p := &a2aproxy.Proxy{Clock: clock, Logger: slog.New(slog.DiscardHandler), Push: &a2aproxy.Push{Store: store, Sealer: sealer,
		Guard: httpfetch.Guard{Allow: allow}, Allow: allow, Poll: 20 * time.Millisecond,
		// The clock stands still: no rate cap in the way unless a test sets one.
		Caps: pushqueue.Caps{PerSecond: 1e6, Burst: 1e6}}}
	return &pushRig{t: t, store: store, clock: clock, proxy: p}
}

// config saves a push config of org for task at url.
func (r *pushRig) config(org, task, url string) contracts.PushConfig {
	r.t.Helper()
	c := contracts.PushConfig{ListingID: "lst_1", TaskID: task, ConfigID: "cfg_" + task, OrgID: org, Version: "1.0", URL: url,
		CallbackID: "pcb_" + task, SecretHash: "x", CreatedAt: r.clock.Now()}
	var err error
	if c.Sealed, err = r.proxy.Push.SealPushSecrets(c, "tok", ""); err != nil {
		r.t.Fatal(err)
	}
	if err := r.proxy.Push.Store.SavePushConfig(context.Background(), c); err != nil {
		r.t.Fatal(err)
	}
	return c
}

// enqueue stores a notification for c's webhook, as the meter's callback
// does.
func (r *pushRig) enqueue(c contracts.PushConfig, id, body string) {
	r.t.Helper()
	d := contracts.Delivery{ID: id, ListingID: c.ListingID, TaskID: c.TaskID, ConfigID: c.ConfigID, OrgID: c.OrgID,
		Destination: contracts.Destination(c.URL), Body: []byte(body), NextAttemptAt: r.clock.Now(), CreatedAt: r.clock.Now()}
	if _, err := r.store.Enqueue(context.Background(), d); err != nil {
		r.t.Fatal(err)
	}
}

func (r *pushRig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); r.proxy.RunPushDelivery(ctx) }()
	r.t.Cleanup(r.stop)
}

func (r *pushRig) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// deliveries returns org's deliveries by status.
func (r *pushRig) deliveries(org string) map[contracts.DeliveryStatus][]contracts.Delivery {
	ds, err := r.store.Deliveries(context.Background(), contracts.DeliveryQuery{OrgID: org, Limit: 1000})
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[contracts.DeliveryStatus][]contracts.Delivery{}
	for _, d := range ds {
		out[d.Status] = append(out[d.Status], d)
	}
	return out
}

// waitFor polls cond for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPushDestinationCapsAndFairness: buyer A's webhook, slow (100 ms),
// gets a backlog of 60 deliveries; buyer B's fast webhook 5, enqueued
// after them. A's webhook never has more than its cap (3) in flight, and
// B's deliveries arrive while A's backlog is still being worked off, not
// after it.
func TestPushDestinationCapsAndFairness(t *testing.T) {
	r := newPushRig(t)
	slow, fast := newHook(t, 100*time.Millisecond), newHook(t, 0)
	r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{contracts.Destination(slow.URL): {Concurrency: 3}}
	for i := range 60 {
		c := r.config("org_a", fmt.Sprintf("task_a%d", i), slow.URL+"/hook")
		r.enqueue(c, fmt.Sprintf("dlv_a%d", i), `{"n":1}`)
	}
	for i := range 5 {
		c := r.config("org_b", fmt.Sprintf("task_b%d", i), fast.URL+"/hook")
		r.enqueue(c, fmt.Sprintf("dlv_b%d", i), `{"n":1}`)
	}
	start := time.Now()
	r.start()
	waitFor(t, 30*time.Second, "every delivery delivered", func() bool {
		return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 60 && len(r.deliveries("org_b")[contracts.DeliveryDelivered]) == 5
	})
	r.stop()
	if slow.maxInflight > 3 {
		t.Errorf("A's webhook had %d deliveries in flight at once, over its cap of 3", slow.maxInflight)
	}
	if slow.maxInflight < 3 {
		t.Errorf("A's webhook had at most %d in flight: the cap of 3 was not used", slow.maxInflight)
	}
	a, b := slow.hits(), fast.hits()
	if len(a) != 60 || len(b) != 5 {
		t.Fatalf("A got %d requests, B %d; want 60 and 5", len(a), len(b))
	}
	// A's backlog takes 60 × 100 ms / 3 = 2 s at least; B's must not wait
	// for it (first in, first out, B's would come after A's 60).
	lastB := b[len(b)-1].at
	before := 0
	for _, h := range a {
		if h.at.Before(lastB) {
			before++
		}
	}
	if before > 12 {
		t.Errorf("%d of A's deliveries arrived before B's last: B waited behind A's backlog", before)
	}
	t.Logf("A: 60 deliveries in %s (max %d in flight); B: 5 within %s, after %d of A's", a[len(a)-1].at.Sub(start), slow.maxInflight, lastB.Sub(start), before)
}

// TestPushRetryAfter: a webhook that answers 429 with Retry-After gets
// nothing more until then, on the meter's clock: its other deliveries go
// back to the outbox, due then, without an attempt counted; once the time
// comes, all are delivered, each once more.
func TestPushRetryAfter(t *testing.T) {
	r := newPushRig(t)
	busy := newHook(t, 0)
	busy.answer = func(n int) (int, string) {
		if n == 0 {
			return 429, "60"
		}
		return 204, ""
	}
	r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{contracts.Destination(busy.URL): {Concurrency: 1}}
	for i := range 4 {
		c := r.config("org_a", fmt.Sprintf("task_%d", i), busy.URL+"/hook")
		r.enqueue(c, fmt.Sprintf("dlv_%d", i), `{"n":1}`)
	}
	t0 := r.clock.Now()
	r.start()
	waitFor(t, 10*time.Second, "the first attempt answered 429", func() bool { return len(busy.hits()) == 1 })
	time.Sleep(300 * time.Millisecond) // 15 polls: none may go out
	if n := len(busy.hits()); n != 1 {
		t.Fatalf("the webhook got %d requests after its 429 with Retry-After: 60", n)
	}
	pending := r.deliveries("org_a")[contracts.DeliveryPending]
	if len(pending) != 4 {
		t.Fatalf("%d pending, want 4", len(pending))
	}
	for _, d := range pending {
		if d.NextAttemptAt.Before(t0.Add(60 * time.Second)) {
			t.Errorf("%s is due at %s, before the webhook's Retry-After (%s)", d.ID, d.NextAttemptAt, t0.Add(60*time.Second))
		}
		if d.ID == busy.hits()[0].id {
			if d.Attempts != 1 || d.LastStatus != 429 {
				t.Errorf("the refused delivery: %d attempts, last status %d; want 1 and 429", d.Attempts, d.LastStatus)
			}
		} else if d.Attempts != 0 {
			t.Errorf("%s held back counts %d attempts, want 0", d.ID, d.Attempts)
		}
	}
	r.clock.Advance(59 * time.Second)
	time.Sleep(200 * time.Millisecond)
	if n := len(busy.hits()); n != 1 {
		t.Fatalf("the webhook got %d requests before its Retry-After ended", n)
	}
	r.clock.Advance(2 * time.Second)
	waitFor(t, 10*time.Second, "all delivered after the wait", func() bool {
		return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 4
	})
	if n := len(busy.hits()); n != 5 {
		t.Errorf("the webhook got %d requests, want 5 (the 429, then each once)", n)
	}
}
