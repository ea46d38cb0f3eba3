// Package pushqueue decides which push delivery a meter starts next. The
// deliveries a meter claimed from the outbox wait here, each under its
// buyer org and its destination (the webhook's scheme, host and port),
// until a delivery slot is free and the destination may take one more:
//
//   - every destination has a concurrency cap (deliveries in flight at
//     once) and a rate cap (deliveries started per second, a token
//     bucket), so a flood for one webhook reaches it at the pace it was
//     promised, never faster;
//   - a destination that answered 429 or 503 with Retry-After gets nothing
//     before then: what waits for it is handed back to the outbox;
//   - a destination that has failed every attempt for long (PauseAfter,
//     at least PauseFailures attempts) is paused: nothing goes to it for
//     PauseFor, then one delivery probes it; a success resumes it, a
//     failure pauses it again. The caller tells the orgs concerned;
//   - slots go round robin over the orgs with work, and within an org
//     over its destinations: an org whose webhook is flooded or slow holds
//     at most that destination's cap of slots, and the others' deliveries
//     start as soon as a slot is free, whatever the flooded one's backlog.
//
// A buyer org may lower the caps of its own deliveries to a destination
// (AddWithin): they then go within the lower of the destination's caps
// and the org's, and wait without holding up the other orgs' deliveries
// there (OwnFull names them, for the outbox to leave alone). It may also
// give one of its push configs a rate of its own (AddUnder,
// Within.ConfigRate): the config's deliveries start at least 1/rate
// apart, besides every other cap. A config's delivery that may not start
// yet is not kept here: AddUnder turns it away, or Next releases it
// (ReasonConfigRate), to wait in the outbox until then, where a later
// status update of the config supersedes it, and the config's next
// delivery is its latest state.
//
// The queue holds a bounded number of deliveries per destination
// (Buffer): the outbox claims for the destinations Skip does not name, so
// a flooded destination's backlog stays in the outbox, where later status
// updates supersede earlier ones.
package pushqueue

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Caps bound what one destination receives: deliveries in flight at once
// (Concurrency), started per second on average (PerSecond), and at once
// after a quiet spell (Burst).
type Caps = contracts.PushLimit

// DefaultCaps are a destination's caps unless the operator set others.
var DefaultCaps = Caps{Concurrency: 8, PerSecond: 50, Burst: 16}

// WithDefaults fills a zero field of c with the default's: the caps a
// destination has when the operator set c.
func WithDefaults(c Caps) Caps { return withDefaults(c) }

// Lowered is c lowered by own where own sets a field (a zero field of own
// leaves c's); never above c. A lower rate lowers the burst too: at
// most twice the concurrency, and what the rate allows in a second.
func Lowered(c, own Caps) Caps {
	c = withDefaults(c)
	out := c
	if own.Concurrency > 0 {
		out.Concurrency = min(c.Concurrency, own.Concurrency)
	}
	if own.PerSecond > 0 && own.PerSecond < c.PerSecond {
		out.PerSecond = own.PerSecond
		out.Burst = min(c.Burst, max(1, min(int(math.Ceil(out.PerSecond)), 2*out.Concurrency)))
	}
	return out
}

func withDefaults(c Caps) Caps {
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultCaps.Concurrency
	}
	if c.PerSecond <= 0 {
		c.PerSecond = DefaultCaps.PerSecond
	}
	if c.Burst <= 0 {
		c.Burst = max(1, min(int(math.Ceil(c.PerSecond)), 2*c.Concurrency))
	}
	return c
}

// Options configure a Queue.
type Options[T any] struct {
	Clock agentmarket.Clock
	// Caps returns a destination's caps; nil, or a zero field: the
	// default's.
	Caps func(destination string) Caps
	// Buffer is how many claimed deliveries may wait for one destination;
	// default twice its concurrency cap (at least 4), but no more than it
	// starts in 20 seconds at its rate (a claimed delivery is leased for
	// a while only: it must start before another meter may claim it).
	Buffer int
	// PauseAfter, PauseFailures: a destination whose attempts have all
	// failed for PauseAfter (default 10 minutes), PauseFailures of them at
	// least (default 5), is paused for PauseFor (default 5 minutes)
	// between probes.
	PauseAfter    time.Duration
	PauseFailures int
	PauseFor      time.Duration

	// Gate is the state the meters share (nil: none): with it, the caps
	// are the destination's across all meters, and a hold (Retry-After,
	// a pause) one meter saw keeps all off. Without it, or while it
	// fails, each meter keeps its share of the caps: 1/Meters of them.
	Gate   contracts.PushGate
	Meters int
	// Key names a delivery in the Gate; Lease is how long its slot is
	// held there unless Done gives it back first.
	Key   func(T) string
	Lease time.Duration
}

func (o *Options[T]) defaults() {
	if o.PauseAfter <= 0 {
		o.PauseAfter = 10 * time.Minute
	}
	if o.PauseFailures <= 0 {
		o.PauseFailures = 5
	}
	if o.PauseFor <= 0 {
		o.PauseFor = 5 * time.Minute
	}
	if o.Meters <= 0 {
		o.Meters = 1
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
}

// Outcome is what became of a delivery attempt, as far as its destination
// is concerned.
type Outcome struct {
	// OK: the webhook answered 2xx. Anything else is a failure of the
	// destination (towards a pause), except Unjudged and an answer with a
	// RetryAfter.
	OK bool
	// Unjudged: the attempt says nothing of the destination (it was not
	// made: the meter stopped, the config is gone, the body could not be
	// signed).
	Unjudged bool
	// RetryAfter is how long the destination asked the meter to wait (429
	// or 503 with Retry-After); 0 when it did not.
	RetryAfter time.Duration
}

// Reasons a Release gives.
const (
	ReasonRetryAfter = "retry_after"
	ReasonPaused     = "paused"
	ReasonHeld       = "held" // another meter saw a Retry-After or paused it (Gate)
	// ReasonConfigRate: its push config's own rate lets it start at
	// Until, not before.
	ReasonConfigRate = "config_rate"
)

// Release is what Done hands back: the deliveries that waited for a
// destination that must now be left alone until Until, and why.
type Release[T any] struct {
	Items  []T
	Until  time.Time
	Reason string // "" when nothing is held, else ReasonRetryAfter or ReasonPaused
	// Paused is set when this attempt paused the destination (it was not
	// paused before): Orgs, the orgs whose deliveries failed there since
	// FailingSince, are to be told.
	Paused       bool
	Orgs         []string
	FailingSince time.Time
	At           time.Time // when it was paused
}

type destination struct {
	name string
	// caps are what this meter keeps locally: the destination's (with a
	// Gate, which keeps them across meters), or its share of them; share
	// is that share, kept while the Gate fails.
	bucket
	limit   Caps
	share   Caps
	waiting int
	// blockedUntil: the destination asked to be left alone until then,
	// or is paused until then.
	blockedUntil time.Time
	// failingSince is the first of the failures since its last success
	// (zero: the last attempt succeeded); failures counts them, and orgs
	// are whose deliveries failed (at most maxOrgs).
	failingSince time.Time
	lastFailure  time.Time
	failures     int
	orgs         map[string]bool
	// paused: one probe at a time, until a success.
	paused bool
}

const maxOrgs = 100

// bucket is a set of caps in force on this meter: deliveries in flight,
// and a token bucket for their starts.
type bucket struct {
	caps     Caps
	inflight int
	tokens   float64
	refilled time.Time
}

func (b *bucket) refill(now time.Time) {
	if el := now.Sub(b.refilled); el > 0 {
		b.tokens = min(float64(b.caps.Burst), b.tokens+el.Seconds()*b.caps.PerSecond)
		b.refilled = now
	}
}

// ready reports whether b may start one more now, and if not, when it may
// next (zero: only once one in flight ends).
func (b *bucket) ready(now time.Time) (bool, time.Time) {
	if b.inflight >= b.caps.Concurrency {
		return false, time.Time{}
	}
	b.refill(now)
	if b.tokens < 1 {
		need := (1 - b.tokens) / b.caps.PerSecond
		return false, now.Add(time.Duration(math.Ceil(need * float64(time.Second))))
	}
	return true, time.Time{}
}

// own is an org's caps for its deliveries to one destination, lower than
// the destination's: limit across the meters, share each meter's without
// the Gate.
type own struct {
	org, dest string
	bucket
	limit, share Caps
	waiting      int
}

// gateKey names an org's own caps at a destination in the Gate.
func (o *own) gateKey() string { return o.dest + "|org=" + o.org }

// rated is a push config's own rate (Within.ConfigRate): its deliveries
// start at least 1/rate apart. limit is the rate across the meters,
// share each meter's without the Gate; rate is the one in force here.
type rated struct {
	name               string
	limit, share, rate float64
	last               time.Time // the last start here (zero: none)
	waiting            int
}

// next is when the config's next delivery may start here.
func (r *rated) next() time.Time {
	if r.last.IsZero() {
		return time.Time{}
	}
	return r.last.Add(time.Duration(math.Ceil(float64(time.Second) / r.rate)))
}

// gateKey names a config's rate in the Gate.
func (r *rated) gateKey() string { return "cfg|" + r.name }

// entry is a delivery waiting, with its config's rate (nil: none).
type entry[T any] struct {
	v   T
	cfg *rated
}

type flow[T any] struct {
	dest  *destination
	own   *own // nil: the org set no caps of its own there
	items []entry[T]
}

type org[T any] struct {
	name  string
	flows []*flow[T] // destinations with work, in round-robin order
	next  int
}

// Queue holds the deliveries a meter claimed and hands them out fairly,
// within each destination's caps. Safe for concurrent use.
type Queue[T any] struct {
	o     Options[T]
	mu    sync.Mutex
	orgs  []*org[T] // orgs with work, in round-robin order
	next  int
	dests map[string]*destination
	owns  map[[2]string]*own // by org and destination
	// flying counts each org's deliveries in flight at each destination,
	// own caps or not: caps an org sets while some are in flight count
	// them.
	flying map[[2]string]int
	// configs are the push configs' own rates in force (by name), and
	// ratedSlots the config whose slot in the Gate each delivery in
	// flight holds (by Key).
	configs    map[string]*rated
	ratedSlots map[string]string
	// released: what Next gave back (Released).
	released []Release[T]
}

// New makes a queue.
func New[T any](o Options[T]) *Queue[T] {
	o.defaults()
	return &Queue[T]{o: o, dests: map[string]*destination{}, owns: map[[2]string]*own{}, flying: map[[2]string]int{},
		configs: map[string]*rated{}, ratedSlots: map[string]string{}}
}

func (q *Queue[T]) dest(name string, now time.Time) *destination {
	d := q.dests[name]
	if d == nil {
		var c Caps
		if q.o.Caps != nil {
			c = q.o.Caps(name)
		}
		c = withDefaults(c)
		share := shareOf(c, q.o.Meters)
		local := share
		if q.o.Gate != nil {
			local = c
		}
		d = &destination{name: name, bucket: bucket{caps: local, tokens: float64(local.Burst), refilled: now}, share: share, limit: c}
		q.dests[name] = d
	}
	return d
}

// shareOf is one meter's share of caps that m meters keep together.
func shareOf(c Caps, m int) Caps {
	return Caps{Concurrency: max(1, c.Concurrency/m), PerSecond: c.PerSecond / float64(m), Burst: max(1, c.Burst/m)}
}

func (q *Queue[T]) buffer(d *destination) int {
	if q.o.Buffer > 0 {
		return q.o.Buffer
	}
	return max(1, min(max(4, 2*d.caps.Concurrency), int(d.caps.PerSecond*20)))
}

// forget drops the state of a destination with nothing waiting or in
// flight, that asks for no wait, whose tokens are full, and that is not
// failing (or has not been tried for a day).
func (q *Queue[T]) forget(d *destination, now time.Time) {
	if d.inflight == 0 && d.waiting == 0 && !now.Before(d.blockedUntil) && (d.failingSince.IsZero() || now.Sub(d.lastFailure) > 24*time.Hour) {
		d.refill(now)
		if d.tokens >= float64(d.caps.Burst) {
			delete(q.dests, d.name)
		}
	}
}

// ready reports whether d may start a delivery now, and if not, when it
// may next (zero: only once one of its deliveries ends).
func (d *destination) ready(now time.Time) (bool, time.Time) {
	if now.Before(d.blockedUntil) {
		return false, d.blockedUntil
	}
	if d.paused && d.inflight > 0 {
		return false, time.Time{}
	}
	return d.bucket.ready(now)
}

// Add puts a claimed delivery in the queue, behind the others of its org
// and destination. A destination that asked to wait takes nothing: Add
// returns until when, and the delivery goes back to the outbox.
func (q *Queue[T]) Add(orgName, destName string, v T) (blockedUntil time.Time) {
	return q.AddWithin(orgName, destName, Caps{}, v)
}

// AddWithin is Add for a delivery of an org that set caps of its own for
// the destination (mine; zero fields: none): it starts within the lower
// of the destination's caps and the org's, shared across meters like the
// destination's.
func (q *Queue[T]) AddWithin(orgName, destName string, mine Caps, v T) (blockedUntil time.Time) {
	blockedUntil, _ = q.AddUnder(orgName, destName, Within{Own: mine}, v)
	return blockedUntil
}

// Within are the caps a delivery starts within besides its
// destination's: its org's own there (Own; zero fields: none), and its
// push config's own rate (ConfigRate, deliveries started per second; 0:
// none), kept under the config's name (Config) across the meters like
// the destination's caps (each meter 1/Meters of it without the Gate).
type Within struct {
	Own        Caps
	Config     string
	ConfigRate float64
}

// AddUnder is Add for a delivery under the caps w names besides its
// destination's. A delivery its destination or its config turns away is
// not added: AddUnder returns until when, and why (ReasonConfigRate when
// its config's rate; "" when its destination's, Paused telling whether
// it is paused).
func (q *Queue[T]) AddUnder(orgName, destName string, w Within, v T) (blockedUntil time.Time, reason string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.o.Clock.Now()
	d := q.dest(destName, now)
	if now.Before(d.blockedUntil) {
		return d.blockedUntil, ""
	}
	var cfg *rated
	if w.ConfigRate > 0 && w.Config != "" {
		cfg = q.rated(w.Config, w.ConfigRate, now)
		if at := cfg.next(); now.Before(at) {
			return at, ReasonConfigRate
		}
		cfg.waiting++
	}
	d.waiting++
	ow := q.own(orgName, d, w.Own, now)
	if ow != nil {
		ow.waiting++
	}
	i := slices.IndexFunc(q.orgs, func(o *org[T]) bool { return o.name == orgName })
	if i < 0 {
		q.orgs = append(q.orgs, &org[T]{name: orgName})
		i = len(q.orgs) - 1
	}
	o := q.orgs[i]
	j := slices.IndexFunc(o.flows, func(f *flow[T]) bool { return f.dest == d })
	if j < 0 {
		o.flows = append(o.flows, &flow[T]{dest: d, own: ow})
		j = len(o.flows) - 1
	}
	o.flows[j].own = ow
	o.flows[j].items = append(o.flows[j].items, entry[T]{v: v, cfg: cfg})
	return time.Time{}, ""
}

// rated is the config's own rate, made or brought up to date with rate
// (a change of rate counts from the last start).
func (q *Queue[T]) rated(name string, rate float64, now time.Time) *rated {
	r := q.configs[name]
	if r == nil {
		r = &rated{name: name}
		q.configs[name] = r
	}
	if r.limit != rate {
		r.limit, r.share = rate, rate/float64(q.o.Meters)
		r.rate = r.share
		if q.o.Gate != nil {
			r.rate = r.limit
		}
	}
	return r
}

// own is the org's own caps at d, made or brought up to date with mine;
// nil when it set none (or none lower than d's) and none are in force.
func (q *Queue[T]) own(orgName string, d *destination, mine Caps, now time.Time) *own {
	k := [2]string{orgName, d.name}
	ow := q.owns[k]
	limit := Lowered(d.limit, mine)
	if limit == withDefaults(d.limit) {
		if ow == nil {
			return nil
		}
		// No longer lower: what is in flight under them ends under them.
	}
	share := shareOf(limit, q.o.Meters)
	local := share
	if q.o.Gate != nil {
		local = limit
	}
	if ow == nil {
		ow = &own{org: orgName, dest: d.name, bucket: bucket{caps: local, inflight: q.flying[k], tokens: float64(local.Burst), refilled: now}}
		q.owns[k] = ow
	} else if ow.limit != limit {
		ow.refill(now)
		ow.caps = local
		ow.tokens = min(ow.tokens, float64(local.Burst))
	}
	ow.limit, ow.share = limit, share
	return ow
}

// forgetOwn drops an org's own caps at a destination with nothing waiting
// or in flight whose tokens are full: the next AddWithin makes them anew.
func (q *Queue[T]) forgetOwn(ow *own, now time.Time) {
	if ow.inflight == 0 && ow.waiting == 0 {
		ow.refill(now)
		if ow.tokens >= float64(ow.caps.Burst) {
			delete(q.owns, [2]string{ow.org, ow.dest})
		}
	}
}

// Paused reports whether the destination is paused (its deliveries
// failed for PauseAfter): what a delivery Add turned away waits for.
func (q *Queue[T]) Paused(destName string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.dests[destName]
	return d != nil && d.paused
}

// Next takes the delivery to start now: the next org in turn with a
// delivery its destination may take, and within it the next destination
// in turn. The caller must call Done for it when its attempt ends. ok is
// false when none may start now; wake is then when one may (zero: not
// before a delivery ends or another is added).
func (q *Queue[T]) Next(ctx context.Context) (v T, destName string, ok bool, wake time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.o.Clock.Now()
scan:
	for n := range len(q.orgs) {
		oi := (q.next + n) % len(q.orgs)
		o := q.orgs[oi]
		for m := range len(o.flows) {
			fi := (o.next + m) % len(o.flows)
			f := o.flows[fi]
			d := f.dest
			can, at := d.ready(now)
			if can && f.own != nil {
				can, at = f.own.ready(now)
			}
			head := f.items[0]
			if can && head.cfg != nil {
				if next := head.cfg.next(); now.Before(next) {
					// Its config's rate changed here since it was added (the
					// Gate failed: this meter's share): it waits in the outbox.
					q.releaseHead(o, f, Release[T]{Until: next, Reason: ReasonConfigRate})
					goto scan
				}
			}
			if can && q.o.Gate != nil {
				var held bool
				can, held, at = q.gate(ctx, d, head.v, now)
				if held {
					// Another meter was told to wait, or paused it: what
					// waits here goes back too (Released).
					q.released = append(q.released, Release[T]{Items: q.removeLocked(d), Until: d.blockedUntil, Reason: ReasonHeld})
					wake = time.Time{}
					goto scan
				}
				if can && f.own != nil {
					if can, at = q.gateOwn(ctx, f.own, head.v, now); !can {
						// The destination's slot is not used: given back.
						_ = q.o.Gate.Finish(ctx, d.name, q.o.Key(head.v))
					}
				}
				if can && head.cfg != nil {
					if ok, until := q.gateConfig(ctx, head.cfg, head.v, now); !ok {
						// Another meter started the config's last delivery:
						// the slots taken are given back, and it waits in the
						// outbox.
						_ = q.o.Gate.Finish(ctx, d.name, q.o.Key(head.v))
						if f.own != nil {
							_ = q.o.Gate.Finish(ctx, f.own.gateKey(), q.o.Key(head.v))
						}
						q.releaseHead(o, f, Release[T]{Until: until, Reason: ReasonConfigRate})
						goto scan
					}
				}
			}
			if !can {
				if !at.IsZero() && (wake.IsZero() || at.Before(wake)) {
					wake = at
				}
				continue
			}
			v = head.v
			f.items[0] = entry[T]{}
			f.items = f.items[1:]
			if c := head.cfg; c != nil {
				c.waiting--
				c.last = now
				if q.o.Gate != nil {
					q.ratedSlots[q.o.Key(v)] = c.gateKey()
				}
			}
			d.waiting--
			d.inflight++
			d.tokens--
			q.flying[[2]string{o.name, d.name}]++
			if f.own != nil {
				f.own.waiting--
				f.own.inflight++
				f.own.tokens--
			}
			o.next = fi + 1
			if len(f.items) == 0 {
				o.flows = slices.Delete(o.flows, fi, fi+1)
				o.next = fi
			}
			q.next = oi + 1
			if len(o.flows) == 0 {
				q.orgs = slices.Delete(q.orgs, oi, oi+1)
				q.next = oi
			}
			return v, d.name, true, time.Time{}
		}
	}
	return v, "", false, wake
}

// gate asks the Gate for a slot of d for v. While the Gate fails, this
// meter keeps to its share.
func (q *Queue[T]) gate(ctx context.Context, d *destination, v T, now time.Time) (can, held bool, at time.Time) {
	ok, held, retryAt, err := q.o.Gate.TryStart(ctx, d.name, q.o.Key(v), d.limit, now, now.Add(q.o.Lease))
	if err != nil {
		// Its rate too: the local bucket, which ran at the whole rate
		// while the Gate kept the meters' sum, runs at the share.
		if d.caps != d.share {
			d.refill(now)
			d.caps = d.share
			d.tokens = min(d.tokens, float64(d.share.Burst))
		}
	} else if d.caps != d.limit {
		d.refill(now)
		d.caps = d.limit
	}
	switch {
	case err != nil:
		return d.inflight < d.share.Concurrency, false, time.Time{}
	case held:
		d.blockedUntil = maxTime(d.blockedUntil, retryAt)
		return false, true, retryAt
	case !ok && retryAt.IsZero():
		// Full: another meter's Done frees a slot, and tells no one here.
		return false, false, now.Add(100 * time.Millisecond)
	}
	return ok, false, retryAt
}

// gateConfig asks the Gate for a start of a config's rate for v: at
// most one per 1/rate across the meters. While the Gate fails, this meter
// keeps to its share. ok false: not before until.
func (q *Queue[T]) gateConfig(ctx context.Context, r *rated, v T, now time.Time) (ok bool, until time.Time) {
	lim := contracts.PushLimit{Concurrency: 1, PerSecond: r.limit, Burst: 1}
	ok, _, retryAt, err := q.o.Gate.TryStart(ctx, r.gateKey(), q.o.Key(v), lim, now, now.Add(q.o.Lease))
	if err != nil {
		r.rate = r.share
		if next := r.next(); now.Before(next) {
			return false, next
		}
		return true, time.Time{}
	}
	r.rate = r.limit
	if !ok && retryAt.IsZero() {
		// One of its deliveries is in flight on another meter (its lease
		// there ran out here): not before its interval.
		retryAt = now.Add(time.Duration(math.Ceil(float64(time.Second) / r.limit)))
	}
	return ok, retryAt
}

// releaseHead takes the first delivery of f (of org o) out of the queue,
// to be Released as r says.
func (q *Queue[T]) releaseHead(o *org[T], f *flow[T], r Release[T]) {
	e := f.items[0]
	f.items[0] = entry[T]{}
	f.items = f.items[1:]
	f.dest.waiting--
	if f.own != nil {
		f.own.waiting--
	}
	if e.cfg != nil {
		e.cfg.waiting--
	}
	if len(f.items) == 0 {
		o.flows = slices.DeleteFunc(o.flows, func(g *flow[T]) bool { return g == f })
		o.next = 0
		if len(o.flows) == 0 {
			q.orgs = slices.DeleteFunc(q.orgs, func(g *org[T]) bool { return g == o })
			q.next = 0
		}
	}
	r.Items = []T{e.v}
	q.released = append(q.released, r)
}

// gateOwn asks the Gate for a slot of an org's own caps at a destination
// for v, as gate does for the destination's: while the Gate fails, this
// meter keeps to its share of them. A hold is the destination's, never
// an org's own.
func (q *Queue[T]) gateOwn(ctx context.Context, ow *own, v T, now time.Time) (bool, time.Time) {
	ok, _, retryAt, err := q.o.Gate.TryStart(ctx, ow.gateKey(), q.o.Key(v), ow.limit, now, now.Add(q.o.Lease))
	if err != nil {
		if ow.caps != ow.share {
			ow.refill(now)
			ow.caps = ow.share
			ow.tokens = min(ow.tokens, float64(ow.share.Burst))
		}
		return ow.inflight < ow.share.Concurrency, time.Time{}
	}
	if ow.caps != ow.limit {
		ow.refill(now)
		ow.caps = ow.limit
	}
	if !ok && retryAt.IsZero() {
		return false, now.Add(100 * time.Millisecond)
	}
	return ok, retryAt
}

// Released takes what Next gave back because the Gate held its
// destination: it goes back to the outbox until Until.
func (q *Queue[T]) Released() []Release[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.released
	q.released = nil
	return r
}

// Done ends delivery v of orgName that Next handed out for destName. A
// destination that asked to wait (Outcome.RetryAfter), or that is paused
// now, gets nothing until then: what waits for it is released, to go back
// to the outbox until Release.Until (with a Gate, every meter holds off).
func (q *Queue[T]) Done(ctx context.Context, v T, destName, orgName string, out Outcome) Release[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.o.Clock.Now()
	d := q.dests[destName]
	if d == nil {
		return Release[T]{}
	}
	k := [2]string{orgName, destName}
	if q.flying[k]--; q.flying[k] <= 0 {
		delete(q.flying, k)
	}
	ow := q.owns[k]
	if q.o.Gate != nil {
		// A slot not given back (the Gate failing) ends with its lease.
		_ = q.o.Gate.Finish(ctx, destName, q.o.Key(v))
		if ow != nil {
			_ = q.o.Gate.Finish(ctx, ow.gateKey(), q.o.Key(v))
		}
		if k, ok := q.ratedSlots[q.o.Key(v)]; ok {
			delete(q.ratedSlots, q.o.Key(v))
			_ = q.o.Gate.Finish(ctx, k, q.o.Key(v))
		}
	}
	d.inflight--
	if ow != nil && ow.inflight > 0 {
		ow.inflight--
		defer q.forgetOwn(ow, now)
	}
	var r Release[T]
	switch {
	case out.OK:
		d.failingSince, d.failures, d.orgs, d.paused = time.Time{}, 0, nil, false
	case out.Unjudged, out.RetryAfter > 0:
		// A destination that says when to come back is pacing the meter,
		// not failing: it is held that long, not paused.
	default:
		if d.failingSince.IsZero() {
			d.failingSince, d.orgs = now, map[string]bool{}
		}
		d.failures++
		d.lastFailure = now
		if len(d.orgs) < maxOrgs {
			d.orgs[orgName] = true
		}
		if d.failures >= q.o.PauseFailures && now.Sub(d.failingSince) >= q.o.PauseAfter {
			d.blockedUntil = maxTime(d.blockedUntil, now.Add(q.o.PauseFor))
			r.Reason = ReasonPaused
			if !d.paused {
				d.paused, r.Paused, r.FailingSince, r.At = true, true, d.failingSince, now
				for o := range d.orgs {
					r.Orgs = append(r.Orgs, o)
				}
				slices.Sort(r.Orgs)
			}
		}
	}
	if out.RetryAfter > 0 {
		d.blockedUntil = maxTime(d.blockedUntil, now.Add(out.RetryAfter))
		if r.Reason == "" {
			r.Reason = ReasonRetryAfter
		}
	}
	if r.Reason != "" {
		r.Items, r.Until = q.removeLocked(d), d.blockedUntil
		if q.o.Gate != nil {
			// Not kept there (the Gate failing): the other meters find out
			// for themselves.
			_ = q.o.Gate.Hold(ctx, destName, r.Until)
		}
	}
	q.forget(d, now)
	return r
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// removeLocked takes every waiting delivery of d out of the queue.
func (q *Queue[T]) removeLocked(d *destination) []T {
	var out []T
	q.orgs = slices.DeleteFunc(q.orgs, func(o *org[T]) bool {
		o.flows = slices.DeleteFunc(o.flows, func(f *flow[T]) bool {
			if f.dest != d {
				return false
			}
			out = appendItems(out, f.items)
			if f.own != nil {
				f.own.waiting -= len(f.items)
				q.forgetOwn(f.own, q.o.Clock.Now())
			}
			return true
		})
		o.next = 0
		return len(o.flows) == 0
	})
	q.next = 0
	d.waiting = 0
	return out
}

// appendItems appends the deliveries of es to out; their configs no
// longer count them waiting.
func appendItems[T any](out []T, es []entry[T]) []T {
	for _, e := range es {
		out = append(out, e.v)
		if e.cfg != nil {
			e.cfg.waiting--
		}
	}
	return out
}

// Drain takes every waiting delivery out of the queue (the meter stops:
// they go back to the outbox for whichever meter runs next).
func (q *Queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []T
	for _, o := range q.orgs {
		for _, f := range o.flows {
			out = appendItems(out, f.items)
			f.dest.waiting = 0
			if f.own != nil {
				f.own.waiting = 0
			}
		}
	}
	q.orgs, q.next = nil, 0
	return out
}

// Skip names the destinations the outbox should not be claimed for now:
// those with a full buffer, and those that asked to wait.
func (q *Queue[T]) Skip() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.o.Clock.Now()
	var out []string
	for _, d := range q.dests {
		q.forget(d, now)
		if d.waiting >= q.buffer(d) || now.Before(d.blockedUntil) {
			out = append(out, d.name)
		}
	}
	for name, r := range q.configs {
		// Nothing of it here and its next start free: a config seen
		// again starts anew, as it would.
		if r.waiting <= 0 && !now.Before(r.next()) {
			delete(q.configs, name)
		}
	}
	slices.Sort(out)
	return out
}

// OwnFull names the orgs and destinations ({org, destination}) whose
// outbox should not be claimed for now: an org's deliveries there wait
// for its own caps, lower than the destination's, and enough of them are
// here already. They wait in the outbox, not in the destination's room
// here, so that the other orgs' deliveries there are still claimed.
func (q *Queue[T]) OwnFull() [][2]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out [][2]string
	for k, ow := range q.owns {
		if ow.waiting >= max(2, min(2*ow.caps.Concurrency, int(ow.caps.PerSecond*20))) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	return out
}

// Crowding names the orgs with at least max deliveries waiting, whose
// outbox should not be claimed for now: however many destinations one
// org's flood is spread over, the other orgs' deliveries still get
// claimed, and then their turn.
func (q *Queue[T]) Crowding(max int) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, o := range q.orgs {
		n := 0
		for _, f := range o.flows {
			n += len(f.items)
		}
		if n >= max {
			out = append(out, o.name)
		}
	}
	slices.Sort(out)
	return out
}

// OwnWaiting is how many of the deliveries waiting in the queue wait
// under caps their org set for their destination (AddWithin).
func (q *Queue[T]) OwnWaiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, ow := range q.owns {
		n += ow.waiting
	}
	return n
}

// Waiting is how many deliveries wait in the queue.
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, o := range q.orgs {
		for _, f := range o.flows {
			n += len(f.items)
		}
	}
	return n
}
