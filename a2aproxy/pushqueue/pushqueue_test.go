package pushqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/contracts"
)

var (
	t0  = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	ctx = context.Background()
)

func newQueue(caps map[string]pushqueue.Caps) (*pushqueue.Queue[string], *agentmarket.ManualClock) {
	clock := agentmarket.NewManualClock(t0)
	return pushqueue.New[string](pushqueue.Options[string]{Clock: clock, Caps: func(d string) pushqueue.Caps { return caps[d] }}), clock
}

// take calls Next until it gives nothing, and returns what it gave.
func take(q *pushqueue.Queue[string]) (got []string, wake time.Time) {
	for {
		v, _, ok, at := q.Next(ctx)
		if !ok {
			return got, at
		}
		got = append(got, v)
	}
}

// TestConcurrencyCap: a destination never has more than its cap in
// flight; each Done lets one more start.
func TestConcurrencyCap(t *testing.T) {
	q, _ := newQueue(map[string]pushqueue.Caps{"https://a:443": {Concurrency: 3, PerSecond: 1000, Burst: 1000}})
	for i := range 10 {
		q.Add("org_a", "https://a:443", fmt.Sprintf("a%d", i))
	}
	got, wake := take(q)
	if !slices.Equal(got, []string{"a0", "a1", "a2"}) || !wake.IsZero() {
		t.Fatalf("started %v (wake %v), want a0..a2 and no wake time: the next waits for a Done", got, wake)
	}
	q.Done(ctx, "x", "https://a:443", "org_a", pushqueue.Outcome{OK: true})
	if got, _ := take(q); !slices.Equal(got, []string{"a3"}) {
		t.Fatalf("after one Done: started %v, want [a3]", got)
	}
	if n := q.Waiting(); n != 6 {
		t.Errorf("Waiting = %d, want 6", n)
	}
}

// TestRateCap: a destination starts at most Burst at once, then one per
// 1/PerSecond, on the injected clock.
func TestRateCap(t *testing.T) {
	q, clock := newQueue(map[string]pushqueue.Caps{"https://a:443": {Concurrency: 100, PerSecond: 4, Burst: 2}})
	for i := range 10 {
		q.Add("org_a", "https://a:443", fmt.Sprintf("a%d", i))
	}
	got, wake := take(q)
	if len(got) != 2 || !wake.Equal(t0.Add(250*time.Millisecond)) {
		t.Fatalf("started %v, wake %v; want the burst of 2 and a wake in 250ms", got, wake)
	}
	clock.Advance(249 * time.Millisecond)
	if got, _ := take(q); len(got) != 0 {
		t.Fatalf("started %v before the next token", got)
	}
	clock.Advance(time.Millisecond)
	if got, _ := take(q); !slices.Equal(got, []string{"a2"}) {
		t.Fatalf("after 250ms: started %v, want [a2]", got)
	}
	clock.Advance(10 * time.Second) // refills to the burst, no more
	if got, _ := take(q); len(got) != 2 {
		t.Fatalf("after a quiet spell: started %d, want the burst (2)", len(got))
	}
}

// TestFairAcrossOrgs: orgs take turns, and within an org its
// destinations: a flood for one org's destination does not delay another
// org's deliveries beyond a turn, and a destination at its cap leaves its
// slots to the others.
func TestFairAcrossOrgs(t *testing.T) {
	fast := pushqueue.Caps{Concurrency: 100, PerSecond: 1000, Burst: 1000}
	q, _ := newQueue(map[string]pushqueue.Caps{"https://flood:443": {Concurrency: 2, PerSecond: 1000, Burst: 1000},
		"https://b:443": fast, "https://a2:443": fast})
	for i := range 50 {
		q.Add("org_a", "https://flood:443", fmt.Sprintf("flood%d", i))
	}
	for i := range 3 {
		q.Add("org_a", "https://a2:443", fmt.Sprintf("a2_%d", i))
		q.Add("org_b", "https://b:443", fmt.Sprintf("b%d", i))
	}
	var got []string
	for range 4 {
		v, _, ok, _ := q.Next(ctx)
		if !ok {
			t.Fatal("nothing to start")
		}
		got = append(got, v)
	}
	// org_a (flood), org_b, org_a (its other destination), org_b.
	if want := []string{"flood0", "b0", "a2_0", "b1"}; !slices.Equal(got, want) {
		t.Errorf("first turns = %v, want %v", got, want)
	}
	rest, _ := take(q)
	// The flooded destination is at its cap of 2: the rest of org_a's
	// other destination and org_b's go, the flood waits.
	if want := []string{"flood1", "b2", "a2_1", "a2_2"}; !slices.Equal(rest, want) {
		t.Errorf("then = %v, want %v", rest, want)
	}
}

// TestRetryAfter: a destination that asked to wait gets nothing until
// then: what waits for it is handed back, the outbox is not claimed for
// it, and what is added meanwhile is refused with the time to come back.
func TestRetryAfter(t *testing.T) {
	q, clock := newQueue(map[string]pushqueue.Caps{"https://a:443": {Concurrency: 1, PerSecond: 1000, Burst: 1000}})
	for i := range 3 {
		q.Add("org_a", "https://a:443", fmt.Sprintf("a%d", i))
	}
	q.Add("org_b", "https://b:443", "b0")
	v, dest, _, _ := q.Next(ctx)
	if v != "a0" || dest != "https://a:443" {
		t.Fatalf("first = %s at %s", v, dest)
	}
	r := q.Done(ctx, "x", dest, "org_a", pushqueue.Outcome{RetryAfter: 30 * time.Second})
	if !slices.Equal(r.Items, []string{"a1", "a2"}) || !r.Until.Equal(t0.Add(30*time.Second)) || r.Reason != pushqueue.ReasonRetryAfter || r.Paused {
		t.Fatalf("Done with Retry-After released %+v, want [a1 a2] until +30s", r)
	}
	if skip := q.Skip(); !slices.Equal(skip, []string{"https://a:443"}) {
		t.Errorf("Skip = %v, want the waiting destination", skip)
	}
	if got, _ := take(q); !slices.Equal(got, []string{"b0"}) {
		t.Errorf("started %v, want only the other destination's", got)
	}
	if until := q.Add("org_a", "https://a:443", "a3"); !until.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("Add during the wait = %v, want refused until +30s", until)
	}
	clock.Advance(30 * time.Second)
	if until := q.Add("org_a", "https://a:443", "a3"); !until.IsZero() {
		t.Errorf("Add after the wait refused until %v", until)
	}
	if skip := q.Skip(); len(skip) != 0 {
		t.Errorf("Skip after the wait = %v, want none", skip)
	}
	if got, _ := take(q); !slices.Equal(got, []string{"a3"}) {
		t.Errorf("after the wait: started %v, want [a3]", got)
	}
}

// TestSkipFullBuffer: once a destination's buffer is full the outbox is
// no longer claimed for it; Drain hands everything back.
func TestSkipFullBuffer(t *testing.T) {
	clock := agentmarket.NewManualClock(t0)
	q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, Buffer: 3})
	for i := range 3 {
		if skip := q.Skip(); len(skip) != 0 {
			t.Fatalf("Skip with %d waiting = %v", i, skip)
		}
		q.Add("org_a", "https://a:443", fmt.Sprintf("a%d", i))
	}
	q.Add("org_b", "https://b:443", "b0")
	if skip := q.Skip(); !slices.Equal(skip, []string{"https://a:443"}) {
		t.Errorf("Skip = %v, want the full destination", skip)
	}
	got := q.Drain()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a0", "a1", "a2", "b0"}) || q.Waiting() != 0 {
		t.Errorf("Drain = %v (waiting %d)", got, q.Waiting())
	}
	if skip := q.Skip(); len(skip) != 0 {
		t.Errorf("Skip after Drain = %v", skip)
	}
}

// TestPause: a destination failing every attempt for PauseAfter (and
// PauseFailures attempts) is paused: what waits is released until the
// pause ends, and the orgs concerned are named once. Then a single probe
// goes; its failure pauses again (without naming anyone again), its
// success resumes the destination at full concurrency. A success before
// PauseAfter resets the count.
func TestPause(t *testing.T) {
	clock := agentmarket.NewManualClock(t0)
	q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, PauseAfter: 10 * time.Minute, PauseFailures: 3, PauseFor: 5 * time.Minute,
		Caps: func(string) pushqueue.Caps { return pushqueue.Caps{Concurrency: 4, PerSecond: 1e6, Burst: 1e6} }})
	const dest = "https://down:443"
	attempt := func(org string, ok bool) pushqueue.Release[string] {
		t.Helper()
		q.Add(org, dest, org+"-x")
		v, got, started, _ := q.Next(ctx)
		if !started || got != dest {
			t.Fatalf("nothing started (%v %s)", v, got)
		}
		return q.Done(ctx, "x", dest, org, pushqueue.Outcome{OK: ok})
	}
	// Failing for 9 minutes, then a success: not paused, the count starts again.
	for range 5 {
		if r := attempt("org_a", false); r.Reason != "" {
			t.Fatalf("paused too soon: %+v", r)
		}
		clock.Advance(2 * time.Minute)
	}
	attempt("org_a", true)
	for i := range 5 {
		r := attempt([]string{"org_a", "org_b"}[i%2], false)
		if r.Reason != "" {
			t.Fatalf("attempt %d after the success: paused (%+v); the failures before it must not count", i, r)
		}
		clock.Advance(2 * time.Minute)
	}
	// 10 minutes of failures: the next failure pauses it, naming the orgs.
	q.Add("org_c", dest, "waiting1")
	q.Add("org_c", dest, "waiting2")
	v, _, _, _ := q.Next(ctx)
	r := q.Done(ctx, "x", dest, "org_c", pushqueue.Outcome{})
	if r.Reason != pushqueue.ReasonPaused || !r.Paused || !slices.Equal(r.Orgs, []string{"org_a", "org_b", "org_c"}) ||
		!r.Until.Equal(clock.Now().Add(5*time.Minute)) || !r.FailingSince.Equal(t0.Add(10*time.Minute)) || len(r.Items) != 1 {
		t.Fatalf("Done of %s = %+v; want paused for 5 minutes, naming org_a, org_b and org_c, failing since +10m, one released", v, r)
	}
	if until := q.Add("org_a", dest, "refused"); !until.Equal(r.Until) {
		t.Errorf("Add during the pause = %v, want refused until %v", until, r.Until)
	}
	if skip := q.Skip(); !slices.Equal(skip, []string{dest}) {
		t.Errorf("Skip during the pause = %v", skip)
	}
	clock.Advance(5 * time.Minute)
	for i := range 3 {
		q.Add("org_a", dest, fmt.Sprintf("probe%d", i))
	}
	if got, _ := take(q); len(got) != 1 {
		t.Fatalf("after the pause: %d started, want one probe", len(got))
	}
	r = q.Done(ctx, "x", dest, "org_a", pushqueue.Outcome{})
	if r.Reason != pushqueue.ReasonPaused || r.Paused || len(r.Orgs) != 0 || len(r.Items) != 2 {
		t.Fatalf("a failed probe: %+v; want paused again, nobody named again, the 2 waiting released", r)
	}
	clock.Advance(5 * time.Minute)
	for i := range 3 {
		q.Add("org_a", dest, fmt.Sprintf("probe%d", i))
	}
	take(q)
	if r := q.Done(ctx, "x", dest, "org_a", pushqueue.Outcome{OK: true}); r.Reason != "" {
		t.Fatalf("a good probe: %+v", r)
	}
	if got, _ := take(q); len(got) != 2 {
		t.Errorf("after a good probe: %d started, want the 2 waiting at once", len(got))
	}
}

// TestRetryAfterIsNoFailure: a destination answering 429 with
// Retry-After for long is held each time, never paused.
func TestRetryAfterIsNoFailure(t *testing.T) {
	clock := agentmarket.NewManualClock(t0)
	q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, PauseAfter: time.Minute, PauseFailures: 2})
	for range 10 {
		q.Add("org_a", "https://busy:443", "x")
		v, dest, ok, _ := q.Next(ctx)
		if !ok {
			t.Fatal("nothing started")
		}
		if r := q.Done(ctx, v, dest, "org_a", pushqueue.Outcome{RetryAfter: 30 * time.Second}); r.Reason != pushqueue.ReasonRetryAfter || r.Paused {
			t.Fatalf("a 429 with Retry-After: %+v, want held, not paused", r)
		}
		clock.Advance(31 * time.Second)
	}
}

// downGate is a Gate that cannot be reached.
type downGate struct{}

func (downGate) TryStart(context.Context, string, string, contracts.PushLimit, time.Time, time.Time) (bool, bool, time.Time, error) {
	return false, false, time.Time{}, errors.New("connection refused")
}
func (downGate) Finish(context.Context, string, string) error {
	return errors.New("connection refused")
}
func (downGate) Hold(context.Context, string, time.Time) error {
	return errors.New("connection refused")
}

// TestShareWhileTheGateIsDown: while the meters' shared Gate fails, a
// meter keeps to its share of a destination's rate as well as of its
// concurrency (1/Meters of each), not the whole rate N times over.
func TestShareWhileTheGateIsDown(t *testing.T) {
	clock := agentmarket.NewManualClock(t0)
	caps := pushqueue.Caps{Concurrency: 100, PerSecond: 10, Burst: 10}
	q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, Gate: downGate{}, Meters: 2,
		Key: func(v string) string { return v }, Caps: func(string) pushqueue.Caps { return caps }})
	for i := range 40 {
		q.Add("org_a", "https://a:443", fmt.Sprintf("a%d", i))
	}
	if got, _ := take(q); len(got) > 5 {
		t.Fatalf("started %d at once with the Gate down, want at most the share of the burst (5)", len(got))
	}
	clock.Advance(time.Second)
	if got, _ := take(q); len(got) > 5 {
		t.Errorf("started %d in the next second, want at most the share of the rate (5)", len(got))
	}
}

// TestOwnCaps: org A lowered its caps at a destination that allows 8 in
// flight to 1 in flight and 5 a second: A never has 2 in flight there,
// its starts are 200 ms apart once its burst (2) is spent, and org B's
// deliveries to the same destination start meanwhile, within the
// destination's caps alone. When A has two waiting, OwnFull names A's
// deliveries there (left in the outbox), not the destination.
func TestOwnCaps(t *testing.T) {
	const dest = "https://a:443"
	q, clock := newQueue(map[string]pushqueue.Caps{dest: {Concurrency: 8, PerSecond: 1000, Burst: 1000}})
	mine := pushqueue.Caps{Concurrency: 1, PerSecond: 5}
	for i := range 4 {
		q.AddWithin("org_a", dest, mine, fmt.Sprintf("a%d", i))
	}
	for i := range 10 {
		q.Add("org_b", dest, fmt.Sprintf("b%d", i))
	}
	if got := q.OwnFull(); !slices.Equal(got, [][2]string{{"org_a", dest}}) {
		t.Errorf("OwnFull = %v, want A's deliveries to %s", got, dest)
	}
	if got := q.Skip(); len(got) != 0 {
		t.Errorf("Skip = %v: B's deliveries to the destination would not be claimed", got)
	}
	got, _ := take(q)
	if !slices.Equal(got, []string{"a0", "b0", "b1", "b2", "b3", "b4", "b5", "b6"}) {
		t.Fatalf("started %v, want a0 and 7 of B's (8 in flight at the destination, 1 of them A's)", got)
	}
	q.Done(ctx, "a0", dest, "org_a", pushqueue.Outcome{OK: true})
	if got, _ := take(q); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("after A's Done: started %v, want [a1] (its second token of the burst)", got)
	}
	q.Done(ctx, "a1", dest, "org_a", pushqueue.Outcome{OK: true})
	if got, _ := take(q); !slices.Equal(got, []string{"b7"}) {
		t.Fatalf("with A's burst spent: started %v, want [b7] (B takes the destination's free slot)", got)
	}
	for _, b := range []string{"b0", "b1", "b2"} {
		q.Done(ctx, b, dest, "org_b", pushqueue.Outcome{OK: true})
	}
	got, wake := take(q)
	if !slices.Equal(got, []string{"b8", "b9"}) || !wake.Equal(clock.Now().Add(200*time.Millisecond)) {
		t.Fatalf("after three of B's end: started %v, wake %v; want b8, b9 and A's next not before %v (5 a second)", got, wake, clock.Now().Add(200*time.Millisecond))
	}
	clock.Advance(200 * time.Millisecond)
	if got, _ := take(q); !slices.Equal(got, []string{"a2"}) {
		t.Fatalf("200 ms on: started %v, want [a2]", got)
	}
}

// TestOwnCapsNeverRaise: caps an org sets above the destination's are
// the destination's.
func TestOwnCapsNeverRaise(t *testing.T) {
	dest := pushqueue.Caps{Concurrency: 2, PerSecond: 10}
	for _, c := range []struct{ own, want pushqueue.Caps }{
		{pushqueue.Caps{Concurrency: 100, PerSecond: 1000}, pushqueue.Caps{Concurrency: 2, PerSecond: 10, Burst: 4}},
		{pushqueue.Caps{Concurrency: 1}, pushqueue.Caps{Concurrency: 1, PerSecond: 10, Burst: 4}},
		{pushqueue.Caps{Concurrency: 1, PerSecond: 5}, pushqueue.Caps{Concurrency: 1, PerSecond: 5, Burst: 2}},
		{pushqueue.Caps{PerSecond: 0.5}, pushqueue.Caps{Concurrency: 2, PerSecond: 0.5, Burst: 1}},
		{pushqueue.Caps{}, pushqueue.Caps{Concurrency: 2, PerSecond: 10, Burst: 4}},
	} {
		if got := pushqueue.Lowered(dest, c.own); got != c.want {
			t.Errorf("Lowered(%+v, %+v) = %+v, want %+v", dest, c.own, got, c.want)
		}
	}
	q, _ := newQueue(map[string]pushqueue.Caps{"https://a:443": {Concurrency: 2, PerSecond: 1000, Burst: 1000}})
	for i := range 4 {
		q.AddWithin("org_a", "https://a:443", pushqueue.Caps{Concurrency: 50}, fmt.Sprintf("a%d", i))
	}
	if got, _ := take(q); len(got) != 2 {
		t.Errorf("started %v with the org's cap of 50 at a destination that allows 2", got)
	}
}

// TestOwnCapsShareWhileTheGateIsDown: without the shared state each of 2
// meters keeps half an org's own caps, like the destination's.
func TestOwnCapsShareWhileTheGateIsDown(t *testing.T) {
	clock := agentmarket.NewManualClock(t0)
	q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, Gate: downGate{}, Meters: 2, Key: func(s string) string { return s },
		Caps: func(string) pushqueue.Caps { return pushqueue.Caps{Concurrency: 8, PerSecond: 1000, Burst: 1000} }})
	for i := range 6 {
		q.AddWithin("org_a", "https://a:443", pushqueue.Caps{Concurrency: 4}, fmt.Sprintf("a%d", i))
	}
	if got, _ := take(q); len(got) != 2 {
		t.Errorf("started %v: want 2, this meter's half of the org's cap of 4", got)
	}
}

// TestOwnCapsCountWhatFlies: caps an org sets while a delivery of its is
// in flight count that one.
func TestOwnCapsCountWhatFlies(t *testing.T) {
	q, _ := newQueue(map[string]pushqueue.Caps{"https://a:443": {Concurrency: 8, PerSecond: 1000, Burst: 1000}})
	q.Add("org_a", "https://a:443", "a0")
	if got, _ := take(q); !slices.Equal(got, []string{"a0"}) {
		t.Fatalf("started %v, want [a0]", got)
	}
	for _, v := range []string{"a1", "a2"} {
		q.AddWithin("org_a", "https://a:443", pushqueue.Caps{Concurrency: 1}, v)
	}
	if got, _ := take(q); len(got) != 0 {
		t.Fatalf("started %v while a0 is in flight under the org's new cap of 1", got)
	}
	q.Done(ctx, "a0", "https://a:443", "org_a", pushqueue.Outcome{OK: true})
	if got, _ := take(q); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("after a0: started %v, want [a1]", got)
	}
}

// TestConfigRate: one push config of org A capped at 4 a second, and
// another config of A at the same destination, capped by nothing but
// the destination (1,000 a second). The outbox is played as it is: a
// config's next delivery is added once its last ended, and one turned
// away waits in the outbox until the time Add gave. Over 5 seconds of
// 10 ms ticks, each delivery ending at once, the capped config starts
// at most 4 a second (21: its first, then one per 250 ms), never two
// within 250 ms, and the other starts at every tick, as it would alone.
func TestConfigRate(t *testing.T) {
	const dest = "https://a:443"
	q, clock := newQueue(map[string]pushqueue.Caps{dest: {Concurrency: 8, PerSecond: 1000, Burst: 1000}})
	capped := pushqueue.Within{Config: "cfg_1", ConfigRate: 4}
	var heldUntil time.Time
	var starts []time.Time
	other := 0
	for tick := range 500 {
		now := clock.Now()
		if !now.Before(heldUntil) {
			until, why := q.AddUnder("org_a", dest, capped, fmt.Sprintf("c%d", tick))
			if !until.IsZero() {
				if why != pushqueue.ReasonConfigRate {
					t.Fatalf("turned away for %q, want %q", why, pushqueue.ReasonConfigRate)
				}
				heldUntil = until
			}
		}
		q.AddUnder("org_a", dest, pushqueue.Within{Config: "cfg_2"}, fmt.Sprintf("o%d", tick))
		got, _ := take(q)
		for _, v := range got {
			if v[0] == 'c' {
				starts = append(starts, now)
			} else {
				other++
			}
			q.Done(ctx, v, dest, "org_a", pushqueue.Outcome{OK: true})
		}
		clock.Advance(10 * time.Millisecond)
	}
	if len(starts) > 21 || len(starts) < 19 {
		t.Errorf("the capped config started %d in 5 s, want 4 a second (21 at most)", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 250*time.Millisecond {
			t.Errorf("the capped config's deliveries %d and %d started %s apart; its rate is 4 a second", i-1, i, gap)
		}
	}
	if other != 500 {
		t.Errorf("the other config started %d in 500 ticks, want 500: the capped config slowed it", other)
	}
	if n := q.Waiting(); n != 0 {
		t.Errorf("Waiting = %d: the capped config's deliveries waited in the queue, not in the outbox", n)
	}
}

// TestConfigRateLowestWins: a config's own rate above its destination's
// (1 a second) gives the destination's; a config's rate lower than its
// org's own caps there binds the config alone.
func TestConfigRateLowestWins(t *testing.T) {
	const dest = "https://a:443"
	q, clock := newQueue(map[string]pushqueue.Caps{dest: {Concurrency: 8, PerSecond: 1, Burst: 1}})
	fast := pushqueue.Within{Config: "cfg_1", ConfigRate: 100}
	q.AddUnder("org_a", dest, fast, "c0")
	take(q)
	q.Done(ctx, "c0", dest, "org_a", pushqueue.Outcome{OK: true})
	clock.Advance(10 * time.Millisecond)
	if until, _ := q.AddUnder("org_a", dest, fast, "c1"); !until.IsZero() {
		t.Fatalf("c1 turned away until %v: the config's rate (100/s) allows it", until)
	}
	if got, wake := take(q); len(got) != 0 || !wake.Equal(t0.Add(time.Second)) {
		t.Fatalf("started %v (wake %v), want nothing before the destination's next token at +1s", got, wake)
	}

	q, clock = newQueue(map[string]pushqueue.Caps{dest: {Concurrency: 8, PerSecond: 1000, Burst: 1000}})
	own := pushqueue.Caps{Concurrency: 4, PerSecond: 50}
	slow := pushqueue.Within{Own: own, Config: "cfg_1", ConfigRate: 2}
	q.AddUnder("org_a", dest, slow, "c0")
	take(q)
	q.Done(ctx, "c0", dest, "org_a", pushqueue.Outcome{OK: true})
	if until, why := q.AddUnder("org_a", dest, slow, "c1"); !until.Equal(t0.Add(500*time.Millisecond)) || why != pushqueue.ReasonConfigRate {
		t.Errorf("c1 turned away until %v (%q), want +500ms for its config's rate", until, why)
	}
	for i := range 3 {
		q.AddUnder("org_a", dest, pushqueue.Within{Own: own, Config: fmt.Sprintf("cfg_o%d", i)}, fmt.Sprintf("o%d", i))
	}
	if got, _ := take(q); len(got) != 3 {
		t.Errorf("the org's other configs started %v, want all 3 (within its own caps)", got)
	}
}

// TestConfigRateShare: without the shared state, each of 2 meters keeps
// half a config's rate (1 a second of 2); with a Gate that fails, the
// same.
func TestConfigRateShare(t *testing.T) {
	for _, gate := range []contracts.PushGate{nil, downGate{}} {
		clock := agentmarket.NewManualClock(t0)
		q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, Gate: gate, Meters: 2, Key: func(s string) string { return s },
			Caps: func(string) pushqueue.Caps { return pushqueue.Caps{Concurrency: 8, PerSecond: 1000, Burst: 1000} }})
		w := pushqueue.Within{Config: "cfg_1", ConfigRate: 2}
		q.AddUnder("org_a", "https://a:443", w, "c0")
		if got, _ := take(q); len(got) != 1 {
			t.Fatalf("gate %v: started %v, want c0", gate, got)
		}
		q.Done(ctx, "c0", "https://a:443", "org_a", pushqueue.Outcome{OK: true})
		clock.Advance(600 * time.Millisecond)
		if until, why := q.AddUnder("org_a", "https://a:443", w, "c1"); !until.Equal(t0.Add(time.Second)) || why != pushqueue.ReasonConfigRate {
			t.Errorf("gate %v: c1 turned away until %v (%q), want +1s (this meter's half of 2 a second)", gate, until, why)
		}
	}
}

// busyGate lets every start through but those of push configs' rates,
// which another meter took (until at).
type busyGate struct{ at time.Time }

func (g busyGate) TryStart(_ context.Context, key, _ string, _ contracts.PushLimit, _, _ time.Time) (bool, bool, time.Time, error) {
	if strings.HasPrefix(key, "cfg|") {
		return false, false, g.at, nil
	}
	return true, false, time.Time{}, nil
}
func (busyGate) Finish(context.Context, string, string) error  { return nil }
func (busyGate) Hold(context.Context, string, time.Time) error { return nil }

// TestConfigRateAcrossMeters: when the shared state says another meter
// started the config's last delivery, its delivery here goes back to the
// outbox until the config's next start (Released), and the org's other
// deliveries to the destination start.
func TestConfigRateAcrossMeters(t *testing.T) {
	clock := agentmarket.NewManualClock(t0)
	at := t0.Add(300 * time.Millisecond)
	q := pushqueue.New[string](pushqueue.Options[string]{Clock: clock, Gate: busyGate{at: at}, Key: func(s string) string { return s },
		Caps: func(string) pushqueue.Caps { return pushqueue.Caps{Concurrency: 8, PerSecond: 1000, Burst: 1000} }})
	q.AddUnder("org_a", "https://a:443", pushqueue.Within{Config: "cfg_1", ConfigRate: 2}, "c0")
	q.Add("org_a", "https://a:443", "o0")
	if got, _ := take(q); !slices.Equal(got, []string{"o0"}) {
		t.Errorf("started %v, want o0 alone", got)
	}
	r := q.Released()
	if len(r) != 1 || r[0].Reason != pushqueue.ReasonConfigRate || !r[0].Until.Equal(at) || !slices.Equal(r[0].Items, []string{"c0"}) {
		t.Errorf("released %+v, want c0 until %v", r, at)
	}
	if n := q.Waiting(); n != 0 {
		t.Errorf("Waiting = %d after the release", n)
	}
}
