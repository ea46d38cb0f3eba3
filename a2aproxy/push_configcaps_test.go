package a2aproxy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
)

// capConfig gives c a rate of its own.
func (r *pushRig) capConfig(c contracts.PushConfig, perSecond float64) {
	r.t.Helper()
	r.proxy.Push.OwnCaps = r.store
	if err := r.store.SavePushConfigCaps(context.Background(), contracts.PushConfigCaps{OrgID: c.OrgID, ListingID: c.ListingID, TaskID: c.TaskID,
		ConfigID: c.ConfigID, PerSecond: perSecond, UpdatedAt: r.clock.Now()}); err != nil {
		r.t.Fatal(err)
	}
}

// kinded stores a notification of kind k for c's webhook.
func (r *pushRig) kinded(c contracts.PushConfig, id string, k contracts.DeliveryKind, body string) {
	r.t.Helper()
	d := contracts.Delivery{ID: id, ListingID: c.ListingID, TaskID: c.TaskID, ConfigID: c.ConfigID, OrgID: c.OrgID, Kind: k,
		Destination: contracts.Destination(c.URL), Body: []byte(body), NextAttemptAt: r.proxy.Clock.Now(), CreatedAt: r.proxy.Clock.Now()}
	if _, err := r.store.Enqueue(context.Background(), d); err != nil {
		r.t.Fatal(err)
	}
}

// arrivalSlack is how much closer two requests may arrive at a webhook
// than they started: a request reaches the server a little after it
// starts, more so under the race detector and load.
const arrivalSlack = 100 * time.Millisecond

// gaps checks that no two of at are closer than min (less the slack).
func gaps(t *testing.T, what string, at []time.Time, min time.Duration) {
	t.Helper()
	for i := 1; i < len(at); i++ {
		if g := at[i].Sub(at[i-1]); g < min-arrivalSlack {
			t.Errorf("%s: deliveries %d and %d arrived %s apart; the config's rate allows one per %s", what, i-1, i, g, min)
		}
	}
}

// TestPushConfigCaps: buyer A capped one of its push configs at 4 a
// second; another config of A at the same webhook server has no caps of
// its own. Over a real loopback webhook (20 ms an answer), the capped
// config's 10 deliveries arrive at least 250 ms apart (2.25 s in all),
// while the other config's 10 go back to back and are all through in
// about a second at most, before the capped config's sixth (it would come
// after the capped config's last, were it held up behind it): the cap
// holds that config alone. Held deliveries say why, and are counted.
func TestPushConfigCaps(t *testing.T) {
	r := newPushRig(t)
	r.proxy.Clock = agentmarket.SystemClock{} // the rate is measured in real time
	reg := prometheus.NewRegistry()
	r.proxy.Metrics = a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{})
	h := newOrgHook(t, 20*time.Millisecond)
	capped, free := r.config("org_a", "task_a", h.URL+"/a"), r.config("org_a", "task_b", h.URL+"/b")
	r.capConfig(capped, 4)
	for i := range 10 {
		r.kinded(capped, fmt.Sprintf("dlv_a%d", i), contracts.DeliveryOther, `{"n":1}`)
		r.kinded(free, fmt.Sprintf("dlv_b%d", i), contracts.DeliveryOther, `{"n":1}`)
	}
	r.start()
	var held string
	waitFor(t, 20*time.Second, "every delivery delivered", func() bool {
		for _, d := range r.deliveries("org_a")[contracts.DeliveryPending] {
			if strings.HasPrefix(d.LastError, "held: the push config's own rate") {
				held = d.LastError
			}
		}
		return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 20
	})
	r.stop()
	a, b := h.arrivals('a'), h.arrivals('b')
	if len(a) != 10 || len(b) != 10 {
		t.Fatalf("the capped config's webhook got %d requests, the other's %d; want 10 each", len(a), len(b))
	}
	gaps(t, "the capped config", a, 250*time.Millisecond)
	if span := a[9].Sub(a[0]); span < 2200*time.Millisecond {
		t.Errorf("the capped config's 10 deliveries took %s; at 4 a second they take 2.25 s", span)
	}
	start := a[0]
	if b[0].Before(start) {
		start = b[0]
	}
	if last := b[9].Sub(start); last > 1200*time.Millisecond || !b[9].Before(a[5]) {
		t.Errorf("the other config's last delivery came %s after the first, the capped one's sixth %s: the cap slowed it", last, a[5].Sub(start))
	}
	if held == "" {
		t.Errorf("no held delivery said it waited for its config's rate")
	}
	if n := counter(t, reg, "agentmarket_meter_push_deliveries_held_total"); n < 1 {
		t.Errorf("push_deliveries_held_total = %v, want the capped config's held deliveries counted (config_rate)", n)
	}
	t.Logf("capped: 10 in %s; the other: 10 within %s; %q", a[9].Sub(a[0]), b[9].Sub(start), held)
}

// TestPushConfigCapsCoalesce: a capped config's status updates that come
// while it waits for its rate are merged into the latest, which covers
// them; its artifact and its terminal state go, each once, in order,
// each a rate's interval (1 s) after the last.
func TestPushConfigCapsCoalesce(t *testing.T) {
	r := newPushRig(t)
	r.proxy.Clock = agentmarket.SystemClock{}
	h := newHook(t, 10*time.Millisecond)
	c := r.config("org_a", "task_a", h.URL+"/hook")
	r.capConfig(c, 1)
	r.kinded(c, "s0", contracts.DeliveryStatusUpdate, `{"step":0}`)
	r.start()
	waitFor(t, 10*time.Second, "the first update sent", func() bool { return len(h.hits()) == 1 })
	// The next waits in the outbox for the config's rate (1 s), where
	// the later ones supersede it.
	r.kinded(c, "s1", contracts.DeliveryStatusUpdate, `{"step":1}`)
	waitFor(t, 5*time.Second, "s1 held for the config's rate", func() bool {
		for _, d := range r.deliveries("org_a")[contracts.DeliveryPending] {
			if d.ID == "s1" && strings.HasPrefix(d.LastError, "held:") {
				return true
			}
		}
		return false
	})
	for i := 2; i < 6; i++ {
		r.kinded(c, fmt.Sprintf("s%d", i), contracts.DeliveryStatusUpdate, fmt.Sprintf(`{"step":%d}`, i))
	}
	r.kinded(c, "art", contracts.DeliveryOther, `{"artifact":1}`)
	r.kinded(c, "s6", contracts.DeliveryStatusUpdate, `{"step":6}`)
	r.kinded(c, "done", contracts.DeliveryState, `{"state":"completed"}`)
	waitFor(t, 10*time.Second, "the terminal state delivered", func() bool { return len(r.deliveries("org_a")[contracts.DeliveryPending]) == 0 })
	r.stop()
	var ids []string
	var at []time.Time
	hits := h.hits()
	for _, x := range hits {
		ids = append(ids, x.id)
		at = append(at, x.at)
	}
	if !slices.Equal(ids, []string{"s0", "art", "done"}) {
		t.Fatalf("the webhook got %v; want s0, the artifact and the terminal state (s1..s6 merged into it)", ids)
	}
	if hits[2].covers != "6" {
		t.Errorf("the terminal delivery covers %q updates, want 6 (s1..s6)", hits[2].covers)
	}
	gaps(t, "the capped config", at, time.Second)
	if n := len(r.deliveries("org_a")[contracts.DeliverySuperseded]); n != 6 {
		t.Errorf("%d deliveries superseded, want 6", n)
	}
}

// TestPushConfigCapsAcrossMeters: two meters deliver a config capped at
// 4 a second. With the shared state (Redis) its deliveries arrive 250 ms
// apart at least, whichever meter sends them; without it each meter
// keeps half the rate, so the two together send no more than 4 a second
// (and one more each, their first).
func TestPushConfigCapsAcrossMeters(t *testing.T) {
	run := func(t *testing.T, gate contracts.PushGate, meters int) {
		r := newPushRig(t)
		r.proxy.Clock = agentmarket.SystemClock{}
		h := newOrgHook(t, 10*time.Millisecond)
		c := r.config("org_a", "task_a", h.URL+"/a")
		r.capConfig(c, 4)
		r.proxy.Push.Gate, r.proxy.Push.Meters = gate, meters
		for i := range 8 {
			r.kinded(c, fmt.Sprintf("dlv_a%d", i), contracts.DeliveryOther, `{"n":1}`)
		}
		r.start()
		r.second()
		waitFor(t, 20*time.Second, "all delivered", func() bool { return len(r.deliveries("org_a")[contracts.DeliveryDelivered]) == 8 })
		a := h.arrivals('a')
		if gate != nil {
			gaps(t, "two meters sharing the config's rate", a, 250*time.Millisecond)
		}
		for i := range a {
			for j := i + 1; j < len(a); j++ {
				if n, w := j-i+1, a[j].Sub(a[i]); float64(n) > float64(meters)+4*(w+arrivalSlack).Seconds() {
					t.Errorf("deliveries %d to %d (%d) arrived within %s: more than 4 a second across the meters", i, j, n, w)
				}
			}
		}
		t.Logf("8 in %s", a[len(a)-1].Sub(a[0]))
	}
	t.Run("each its share", func(t *testing.T) { run(t, nil, 2) })
	t.Run("shared", func(t *testing.T) { run(t, redistest.Open(t), 1) })
}
