package a2aproxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
)

// orgHook is a webhook server on 127.0.0.1 shared by two orgs (one
// destination), answering in delay, that counts each org's requests in
// flight (the org is the delivery id's prefix: "a…", "b…").
type orgHook struct {
	*httptest.Server
	mu          sync.Mutex
	inflight    map[byte]int
	maxInflight map[byte]int
	all, maxAll int
	at          map[byte][]time.Time
}

func newOrgHook(t *testing.T, delay time.Duration) *orgHook {
	h := &orgHook{inflight: map[byte]int{}, maxInflight: map[byte]int{}, at: map[byte][]time.Time{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org := strings.TrimPrefix(r.Header.Get("X-AgentMarket-Delivery-Id"), "dlv_")[0]
		h.mu.Lock()
		h.inflight[org]++
		h.all++
		h.maxInflight[org] = max(h.maxInflight[org], h.inflight[org])
		h.maxAll = max(h.maxAll, h.all)
		h.at[org] = append(h.at[org], time.Now())
		h.mu.Unlock()
		time.Sleep(delay)
		h.mu.Lock()
		h.inflight[org]--
		h.all--
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *orgHook) arrivals(org byte) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.at[org]...)
}

func (h *orgHook) peak(org byte) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxInflight[org]
}

// TestPushOwnCaps: buyer A lowered its caps at a webhook server that
// allows 8 in flight to 1 in flight and 5 a second; buyer B set none.
// Over a real loopback webhook (50 ms an answer), A's 15 deliveries go
// one at a time, about 5 a second (a burst of 2, then 200 ms apart),
// while B's 40 to the same server go several at once and are all through
// before A's are: A's caps hold A's deliveries alone. The server never
// has more than its 8 in flight.
func TestPushOwnCaps(t *testing.T) {
	r := newPushRig(t)
	r.proxy.Clock = agentmarket.SystemClock{} // the rate is measured in real time
	h := newOrgHook(t, 50*time.Millisecond)
	dest := contracts.Destination(h.URL)
	r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{dest: {Concurrency: 8}}
	r.proxy.Push.OwnCaps = r.store
	if err := r.store.SavePushCaps(context.Background(), contracts.PushCaps{OrgID: "org_a", Destination: dest, MaxInFlight: 1, PerSecond: 5, UpdatedAt: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	for i := range 15 {
		r.enqueue(r.config("org_a", fmt.Sprintf("task_a%d", i), h.URL+"/a"), fmt.Sprintf("dlv_a%d", i), `{"n":1}`)
	}
	for i := range 40 {
		r.enqueue(r.config("org_b", fmt.Sprintf("task_b%d", i), h.URL+"/b"), fmt.Sprintf("dlv_b%d", i), `{"n":1}`)
	}
	reg := prometheus.NewRegistry()
	r.proxy.Metrics = a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{})
	start := time.Now()
	r.start()
	var ownWaiting float64
	waitFor(t, 30*time.Second, "every delivery delivered", func() bool {
		ownWaiting = max(ownWaiting, gauge(t, reg, "agentmarket_meter_push_deliveries_waiting_own_caps"))
		return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 15 && len(r.deliveries("org_b")[contracts.DeliveryDelivered]) == 40
	})
	if ownWaiting == 0 {
		t.Errorf("agentmarket_meter_push_deliveries_waiting_own_caps never rose: A's deliveries waited under A's caps")
	}
	r.stop()
	a, b := h.arrivals('a'), h.arrivals('b')
	if len(a) != 15 || len(b) != 40 {
		t.Fatalf("A's webhook got %d requests, B's %d; want 15 and 40", len(a), len(b))
	}
	if p := h.peak('a'); p != 1 {
		t.Errorf("A had %d deliveries in flight at once; its own cap is 1", p)
	}
	// 15 at 5 a second after a burst of 2: 13 × 200 ms = 2.6 s at least.
	span := a[len(a)-1].Sub(a[0])
	if rate := float64(len(a)-1) / span.Seconds(); span < 2200*time.Millisecond || rate > 6 || rate < 3 {
		t.Errorf("A's 15 deliveries took %s (%.1f a second); its own rate cap is 5 a second", span, rate)
	}
	// Nowhere more than the bucket allows: its burst of 2, and 5 a second
	// on (200 ms of slack: a request reaches the server a little after it
	// starts, more so under the race detector).
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			if n, w := j-i+1, a[j].Sub(a[i]); float64(n) > 2+5*(w+200*time.Millisecond).Seconds() {
				t.Errorf("A's deliveries %d to %d (%d) came within %s: more than a burst of 2 and 5 a second", i, j, n, w)
			}
		}
	}
	if p := h.peak('b'); p < 3 {
		t.Errorf("B had at most %d in flight: A's own caps held B's deliveries too", p)
	}
	if h.maxAll > 8 {
		t.Errorf("the server had %d in flight, over its cap of 8", h.maxAll)
	}
	lastB := b[len(b)-1]
	if !lastB.Before(a[len(a)-1]) {
		t.Errorf("B's last delivery came %s after the start, A's last %s: B waited behind A's caps", lastB.Sub(start), a[len(a)-1].Sub(start))
	}
	t.Logf("A: 15 in %s, at most %d in flight; B: 40 within %s, at most %d in flight", span, h.peak('a'), lastB.Sub(start), h.peak('b'))
}

// TestPushOwnCapsAcrossMeters: two meters deliver A's 20 deliveries to a
// server that allows 8; A's own cap of 2 in flight holds across both,
// kept together in the shared state (Redis), or each meter its half
// without it.
func TestPushOwnCapsAcrossMeters(t *testing.T) {
	run := func(t *testing.T, gate contracts.PushGate, meters int) {
		r := newPushRig(t)
		h := newOrgHook(t, 60*time.Millisecond)
		dest := contracts.Destination(h.URL)
		r.proxy.Push.DestinationCaps = map[string]pushqueue.Caps{dest: {Concurrency: 8}}
		r.proxy.Push.OwnCaps, r.proxy.Push.Gate, r.proxy.Push.Meters = r.store, gate, meters
		if err := r.store.SavePushCaps(context.Background(), contracts.PushCaps{OrgID: "org_a", Destination: dest, MaxInFlight: 2, UpdatedAt: r.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			r.enqueue(r.config("org_a", fmt.Sprintf("task_a%d", i), h.URL+"/a"), fmt.Sprintf("dlv_a%d", i), `{"n":1}`)
		}
		r.start()
		r.second()
		waitFor(t, 30*time.Second, "all delivered", func() bool { return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 20 })
		if p := h.peak('a'); p > 2 {
			t.Errorf("A had %d in flight from the two meters; its own cap is 2", p)
		} else if p < 2 {
			t.Errorf("A had at most %d in flight: the meters did not use its cap of 2", p)
		}
	}
	t.Run("each its share", func(t *testing.T) { run(t, nil, 2) })
	t.Run("shared", func(t *testing.T) { run(t, redistest.Open(t), 1) })
}
