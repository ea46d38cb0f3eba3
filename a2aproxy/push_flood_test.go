package a2aproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/migrations/relational"
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
	id, attempt, covers string
	body                []byte
	at                  time.Time // real time of arrival
}

func newHook(t *testing.T, delay time.Duration) *hook {
	h := &hook{delay: delay}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		h.mu.Lock()
		n := len(h.got)
		h.got = append(h.got, hookHit{id: r.Header.Get("X-AgentMarket-Delivery-Id"), attempt: r.Header.Get("X-AgentMarket-Delivery-Attempt"),
			covers: r.Header.Get("X-AgentMarket-Covers"), body: body.Bytes(), at: time.Now()})
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
	return newPushRigOn(t, relationaltest.SQLite(t))
}

func newPushRigOn(t *testing.T, db *relational.DB) *pushRig {
	store := gormstore.New(db.DB)
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
	reg := prometheus.NewRegistry()
	r.proxy.Metrics = a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{})
	start := time.Now()
	r.start()
	var maxWaiting, maxInflight float64
	waitFor(t, 30*time.Second, "every delivery delivered", func() bool {
		maxWaiting = max(maxWaiting, gauge(t, reg, "agentmarket_meter_push_deliveries_waiting"))
		maxInflight = max(maxInflight, gauge(t, reg, "agentmarket_meter_push_deliveries_in_flight"))
		return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 60 && len(r.deliveries("org_b")[contracts.DeliveryDelivered]) == 5
	})
	r.stop()
	// A's backlog waits in the queue (its cap of 3 in flight), and the
	// metrics say so.
	if maxWaiting == 0 || maxInflight == 0 || maxInflight > 3+5 {
		t.Errorf("the push queue's gauges peaked at %v waiting and %v in flight; want some waiting, at most 8 in flight", maxWaiting, maxInflight)
	}
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

// TestDeliveryKind: what a notification is to coalescing, in both
// versions.
func TestDeliveryKind(t *testing.T) {
	for _, tt := range []struct {
		v    wire.Version
		body string
		want contracts.DeliveryKind
	}{
		{wire.V10, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, contracts.DeliveryStatusUpdate},
		{wire.V10, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_INPUT_REQUIRED"}}}`, contracts.DeliveryStatusUpdate},
		{wire.V10, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}`, contracts.DeliveryState},
		{wire.V10, `{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, contracts.DeliveryState},
		{wire.V10, `{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`, contracts.DeliveryOther},
		{wire.V10, `{"message":{"messageId":"m","role":"ROLE_AGENT","taskId":"t","parts":[{"text":"x"}]}}`, contracts.DeliveryOther},
		{wire.V03, `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working"},"final":false}`, contracts.DeliveryStatusUpdate},
		{wire.V03, `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"failed"},"final":true}`, contracts.DeliveryState},
		{wire.V03, `{"kind":"artifact-update","taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"x"}]}}`, contracts.DeliveryOther},
	} {
		if got := a2aproxy.DeliveryKind(tt.v, []byte(tt.body)); got != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.v, tt.body, got, tt.want)
		}
	}
}

// TestPushCoalescing: a task's status updates that pile up behind a slow
// webhook reach it as the latest state only: the artifact and the
// terminal state go, each once, in order; the terminal delivery says
// (signed header and X-AgentMarket-Covers) how many updates it stands for;
// the superseded ones are in the outbox as such, and counted in the
// metrics.
func TestPushCoalescing(t *testing.T) {
	r := newPushRig(t)
	reg := prometheus.NewRegistry()
	r.proxy.Metrics = a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{})
	h := newHook(t, 20*time.Millisecond)
	r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{contracts.Destination(h.URL): {Concurrency: 1}}
	const tasks, steps = 5, 20
	var cs []contracts.PushConfig
	for i := range tasks {
		cs = append(cs, r.config("org_a", fmt.Sprintf("task_%d", i), h.URL+"/hook"))
	}
	kinded := func(c contracts.PushConfig, id string, k contracts.DeliveryKind, body string) {
		d := contracts.Delivery{ID: id, ListingID: c.ListingID, TaskID: c.TaskID, ConfigID: c.ConfigID, OrgID: c.OrgID, Kind: k,
			Destination: contracts.Destination(c.URL), Body: []byte(body), NextAttemptAt: r.clock.Now(), CreatedAt: r.clock.Now()}
		if _, err := r.store.Enqueue(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	// The first update of each task goes out at once (it is being sent
	// when the others come); the rest pile up behind the cap of 1.
	for i, c := range cs {
		kinded(c, fmt.Sprintf("s_%d_0", i), contracts.DeliveryStatusUpdate, `{"step":0}`)
	}
	r.start()
	waitFor(t, 10*time.Second, "the first update sent", func() bool { return len(h.hits()) > 0 })
	for s := 1; s < steps; s++ {
		for i, c := range cs {
			kinded(c, fmt.Sprintf("s_%d_%d", i, s), contracts.DeliveryStatusUpdate, fmt.Sprintf(`{"step":%d}`, s))
			if s == steps/2 {
				kinded(c, fmt.Sprintf("a_%d", i), contracts.DeliveryOther, `{"artifact":1}`)
			}
		}
	}
	for i, c := range cs {
		kinded(c, fmt.Sprintf("done_%d", i), contracts.DeliveryState, `{"state":"completed"}`)
	}
	waitFor(t, 20*time.Second, "every task's terminal state delivered", func() bool {
		return len(r.deliveries("org_a")[contracts.DeliveryPending]) == 0
	})
	r.stop()
	byTask := map[string][]hookHit{}
	covers := 0
	for _, x := range h.hits() {
		task := strings.Split(x.id, "_")[1] // s_<task>_<step>, a_<task>, done_<task>
		byTask[task] = append(byTask[task], x)
		if strings.HasPrefix(x.id, "done_") {
			n, _ := strconv.Atoi(x.covers)
			covers += n
		}
	}
	for i := range tasks {
		got := byTask[strconv.Itoa(i)]
		var ids []string
		for _, x := range got {
			ids = append(ids, x.id)
		}
		// Updates may go out between the artifact and the end, superseded
		// ones never: the artifact and the end once each, the end last.
		if len(ids) < 2 || ids[len(ids)-1] != fmt.Sprintf("done_%d", i) || !slices.Contains(ids, fmt.Sprintf("a_%d", i)) ||
			len(ids) != len(slices.Compact(slices.Clone(ids))) {
			t.Errorf("task %d: the webhook got %v; want the artifact and the terminal state last, each once", i, ids)
		}
		if len(ids) > steps/2 {
			t.Errorf("task %d: the webhook got %d deliveries for %d updates: not coalesced", i, len(ids), steps+2)
		}
	}
	all := r.deliveries("org_a")
	superseded := len(all[contracts.DeliverySuperseded])
	if sent := len(h.hits()); sent+superseded != tasks*(steps+2) {
		t.Errorf("%d sent + %d superseded, want %d notifications in all", sent, superseded, tasks*(steps+2))
	}
	if superseded < tasks*steps/2 {
		t.Errorf("only %d of %d status updates superseded", superseded, tasks*steps)
	}
	delivered := 0
	for _, d := range all[contracts.DeliveryDelivered] {
		delivered += d.Covers
	}
	if delivered != superseded {
		t.Errorf("the delivered deliveries cover %d updates, %d were superseded", delivered, superseded)
	}
	if c := counter(t, reg, "agentmarket_meter_push_coalesced_total"); int(c) != superseded {
		t.Errorf("push_coalesced_total = %v, want %d", c, superseded)
	}
	t.Logf("%d notifications: %d sent, %d superseded (the terminal deliveries cover %d)", tasks*(steps+2), len(h.hits()), superseded, covers)
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestPushPause: a webhook that fails every attempt for PauseAfter is
// paused: the org is told at its alert webhook (once), nothing goes to
// the paused webhook until the pause ends (the deliveries wait, pending,
// saying why), then one probe goes, and once it succeeds everything is
// delivered.
func TestPushPause(t *testing.T) {
	r := newPushRig(t)
	reg := prometheus.NewRegistry()
	r.proxy.Metrics = a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{})
	r.proxy.Push.PauseAfter, r.proxy.Push.PauseFor, r.proxy.Push.MaxAttempts = time.Minute, 5*time.Minute, 100
	r.proxy.Push.RetryBase, r.proxy.Push.RetryMax = time.Second, 10*time.Second
	var healthy atomic.Bool
	down := newHook(t, 0)
	down.answer = func(int) (int, string) {
		if healthy.Load() {
			return 204, ""
		}
		return 500, ""
	}
	alerts := newHook(t, 0)
	r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{contracts.Destination(down.URL): {Concurrency: 2}}
	alertCfg := contracts.PushConfig{ConfigID: contracts.AlertConfigID("org_a"), OrgID: "org_a", URL: alerts.URL + "/alerts",
		CallbackID: "alerts-x", SecretHash: "x", CreatedAt: r.clock.Now()}
	var err error
	if alertCfg.Sealed, err = r.proxy.Push.SealPushSecrets(alertCfg, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.store.SavePushConfig(context.Background(), alertCfg); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		r.enqueue(r.config("org_a", fmt.Sprintf("task_%d", i), down.URL+"/hook"), fmt.Sprintf("dlv_%d", i), `{"n":1}`)
	}
	start := r.clock.Now()
	r.start()
	// Failing for a minute of the meter's clock, retried every few seconds.
	for r.clock.Now().Sub(start) < 2*time.Minute && len(alerts.hits()) == 0 {
		before := len(down.hits())
		waitFor(t, 10*time.Second, "an attempt", func() bool { return len(down.hits()) > before || len(alerts.hits()) > 0 })
		r.clock.Advance(10 * time.Second)
	}
	waitFor(t, 10*time.Second, "the pause alert", func() bool { return len(alerts.hits()) == 1 })
	var a contracts.PushPausedAlert
	if err := json.Unmarshal(alerts.hits()[0].body, &a); err != nil {
		t.Fatal(err)
	}
	pausedAt := r.clock.Now()
	if a.Type != "push_destination_paused" || a.OrgID != "org_a" || a.Destination != contracts.Destination(down.URL) ||
		a.FailingSince.After(start.Add(30*time.Second)) || a.PausedAt.Sub(a.FailingSince) < time.Minute || a.ResumeAt.Sub(a.PausedAt) != 5*time.Minute || a.LastError != "the webhook answered 500 Internal Server Error" {
		t.Errorf("the pause alert = %+v", a)
	}
	// An attempt started before the pause may still land: count once
	// the webhook has been quiet for a moment.
	attempts := len(down.hits())
	for quiet := time.Now(); time.Since(quiet) < 300*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if n := len(down.hits()); n != attempts {
			attempts, quiet = n, time.Now()
		}
	}
	for range 4 { // 4 minutes into the pause: nothing goes
		r.clock.Advance(time.Minute)
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(down.hits()); n != attempts {
		t.Fatalf("the paused webhook got %d more requests", n-attempts)
	}
	for _, d := range r.deliveries("org_a")[contracts.DeliveryPending] {
		if d.ConfigID != alertCfg.ConfigID && !strings.Contains(d.LastError, "paused until") && d.LastStatus != 500 {
			t.Errorf("%s waits saying %q (last status %d)", d.ID, d.LastError, d.LastStatus)
		}
	}
	healthy.Store(true)
	r.clock.Advance(time.Minute + time.Second) // the pause ends: a probe, then the rest
	waitFor(t, 20*time.Second, "everything delivered after the pause", func() bool {
		if len(r.deliveries("org_a")[contracts.DeliveryPending]) > 0 {
			r.clock.Advance(10 * time.Second) // retries due
			return false
		}
		return true
	})
	if n := len(alerts.hits()); n != 1 {
		t.Errorf("the alert webhook got %d alerts, want 1", n)
	}
	if c := counter(t, reg, "agentmarket_meter_push_destination_pauses_total"); c < 1 {
		t.Errorf("push_destination_pauses_total = %v", c)
	}
	t.Logf("paused after %s of failures (%d attempts); resumed at +%s", pausedAt.Sub(start), attempts, r.clock.Now().Sub(start))
}

// second is another meter delivering the same outbox, with its own
// queue, configured as the first.
func (r *pushRig) second() *a2aproxy.Proxy {
	p := r.proxy.Push
	p2 := &a2aproxy.Proxy{Clock: r.proxy.Clock, Logger: r.proxy.Logger, Push: &a2aproxy.Push{Store: p.Store, Sealer: p.Sealer, Guard: p.Guard, Allow: p.Allow,
		Poll: p.Poll, Caps: p.Caps, DestinationCaps: p.DestinationCaps, Gate: p.Gate, Meters: p.Meters, OwnCaps: p.OwnCaps}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p2.RunPushDelivery(ctx) }()
	r.t.Cleanup(func() { cancel(); <-done })
	return p2
}

// TestPushAcrossMeters: two meters deliver one outbox to a slow webhook
// whose cap is 4. With the shared state (Redis) they keep the cap
// together, and a Retry-After one of them gets holds the other too;
// without it each keeps its share (2), and together still the cap.
func TestPushAcrossMeters(t *testing.T) {
	run := func(t *testing.T, gate contracts.PushGate, meters int) {
		r := newPushRig(t)
		h := newHook(t, 100*time.Millisecond)
		r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{contracts.Destination(h.URL): {Concurrency: 4}}
		r.proxy.Push.Gate, r.proxy.Push.Meters = gate, meters
		for i := range 40 {
			r.enqueue(r.config("org_a", fmt.Sprintf("task_%d", i), h.URL+"/hook"), fmt.Sprintf("dlv_%d", i), `{"n":1}`)
		}
		r.start()
		r.second()
		waitFor(t, 30*time.Second, "all delivered", func() bool { return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 40 })
		if h.maxInflight > 4 {
			t.Errorf("the webhook had %d in flight from the two meters, over its cap of 4", h.maxInflight)
		}
		if h.maxInflight < 3 {
			t.Errorf("the webhook had at most %d in flight: the meters did not use the cap", h.maxInflight)
		}
		t.Logf("max in flight %d", h.maxInflight)
	}
	t.Run("each its share", func(t *testing.T) { run(t, nil, 2) })
	t.Run("shared", func(t *testing.T) { run(t, redistest.Open(t), 1) })

	t.Run("a Retry-After holds both", func(t *testing.T) {
		r := newPushRig(t)
		busy := newHook(t, 20*time.Millisecond)
		busy.answer = func(n int) (int, string) {
			if n == 0 {
				return 429, "60"
			}
			return 204, ""
		}
		r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{contracts.Destination(busy.URL): {Concurrency: 1}}
		r.proxy.Push.Gate = redistest.Open(t)
		for i := range 10 {
			r.enqueue(r.config("org_a", fmt.Sprintf("task_%d", i), busy.URL+"/hook"), fmt.Sprintf("dlv_%d", i), `{"n":1}`)
		}
		r.start()
		r.second()
		waitFor(t, 10*time.Second, "the 429", func() bool { return len(busy.hits()) >= 1 })
		time.Sleep(400 * time.Millisecond)
		if n := len(busy.hits()); n != 1 {
			t.Fatalf("the webhook got %d requests after its 429 with Retry-After: 60 (from either meter)", n)
		}
		r.clock.Advance(61 * time.Second)
		waitFor(t, 20*time.Second, "all delivered after the wait", func() bool {
			return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 10
		})
	})
}

// TestPushNoPauseForRefusals: a webhook host that refuses one org's
// requests (404, 401: a wrong path, a bad token) for longer than
// PauseAfter is not paused: the refusal is that config's, and another
// org's webhook on the same host goes on being delivered to. An org could
// otherwise aim configs at another org's host, fail there on purpose and
// have its deliveries held.
func TestPushNoPauseForRefusals(t *testing.T) {
	r := newPushRig(t)
	r.proxy.Push.PauseAfter, r.proxy.Push.PauseFor, r.proxy.Push.MaxAttempts = time.Minute, 5*time.Minute, 100
	r.proxy.Push.RetryBase, r.proxy.Push.RetryMax = time.Second, 10*time.Second
	var refused, delivered atomic.Int64
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/not-yours" {
			refused.Add(1)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(host.Close)
	for i := range 6 {
		r.enqueue(r.config("org_x", fmt.Sprintf("task_x%d", i), host.URL+"/not-yours"), fmt.Sprintf("dlv_x%d", i), `{"n":1}`)
	}
	start := r.clock.Now()
	r.start()
	// Refused for three minutes of the meter's clock, past PauseAfter.
	for r.clock.Now().Sub(start) < 3*time.Minute {
		before := refused.Load()
		waitFor(t, 10*time.Second, "an attempt", func() bool { return refused.Load() > before })
		r.clock.Advance(10 * time.Second)
	}
	r.enqueue(r.config("org_v", "task_v", host.URL+"/hook"), "dlv_v", `{"n":1}`)
	waitFor(t, 10*time.Second, "the other org's delivery", func() bool { return delivered.Load() == 1 })
}

// TestPushFloodOverManyDestinations: an org whose flood is spread over
// many webhook hosts (each within its own caps) does not fill the meter's
// queue: another org's delivery, enqueued after all of it, is claimed and
// delivered while most of the flood still waits.
func TestPushFloodOverManyDestinations(t *testing.T) {
	r := newPushRig(t)
	var hooksA []*hook
	for range 12 {
		hooksA = append(hooksA, newHook(t, 300*time.Millisecond))
	}
	b := newHook(t, 0)
	n := 0
	for i, h := range hooksA {
		for j := range 20 {
			c := r.config("org_a", fmt.Sprintf("a%d_%d", i, j), h.URL+"/hook")
			r.enqueue(c, fmt.Sprintf("a_%d_%d", i, j), `{"x":1}`)
			n++
		}
	}
	r.enqueue(r.config("org_b", "b0", b.URL+"/hook"), "b_0", `{"x":1}`)
	r.start()
	waitFor(t, time.Minute, "B's delivery", func() bool { return len(b.hits()) == 1 })
	before := 0
	for _, h := range hooksA {
		for _, x := range h.hits() {
			if x.at.Before(b.hits()[0].at) {
				before++
			}
		}
	}
	// At most what one org may hold waiting, and what was in flight.
	if before > 64 {
		t.Errorf("B's delivery arrived after %d of A's %d", before, n)
	}
	t.Logf("B's delivery arrived after %d of A's %d (12 destinations)", before, n)
}

// stallingConfigs is a push store whose config read waits until the
// meter stops (a database slow to answer just then).
type stallingConfigs struct {
	contracts.PushStore
	reading chan struct{}
}

func (s stallingConfigs) PushConfig(ctx context.Context, listingID, taskID, configID string) (*contracts.PushConfig, error) {
	close(s.reading)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestPushStopMidAttemptGivesBack: a meter that stops while it reads a
// delivery's config gives the delivery back, due at once and its attempt
// not counted, so the next meter sends it now, not when a lease of the
// stopped one ends (the clock stands still here: it never would).
func TestPushStopMidAttemptGivesBack(t *testing.T) {
	r := newPushRig(t)
	h := newHook(t, 0)
	c := r.config("org_a", "task_1", h.URL+"/hook")
	r.enqueue(c, "dlv_1", `{"n":1}`)
	stall := stallingConfigs{PushStore: r.store, reading: make(chan struct{})}
	r.proxy.Push.Store = stall
	r.start()
	select {
	case <-stall.reading:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery's config was never read")
	}
	r.stop()
	pending := r.deliveries("org_a")[contracts.DeliveryPending]
	if len(pending) != 1 || pending[0].Attempts != 0 || !strings.Contains(pending[0].LastError, "interrupted") {
		t.Fatalf("after the stop: %+v, want dlv_1 pending, interrupted, no attempt counted", pending)
	}
	r.proxy.Push.Store = r.store
	r.second()
	waitFor(t, 5*time.Second, "the next meter to send it", func() bool { return len(h.hits()) == 1 })
}
