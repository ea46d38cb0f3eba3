package contracts

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Throttle slows down guessing: every failed attempt (a wrong password, an
// unknown key, a sign-up) is counted per key (an account, a client
// address); after Free failures, the next attempt under that key must
// wait Base, doubling with each further failure up to Max. A key forgets its
// failures Forget after the last one; a success resets it. Check refuses
// with TooManyRequests and the wait, before the attempt is even judged,
// so a right password does not get through a lockout.
//
// The counts live in Store: the state meters and marketplaces share
// (Redis) when there is one, so the limit holds across processes, else
// this process's memory. When Store fails the process's own counts stand
// in (an outage weakens the limit to one process's view; it never locks
// anyone out).
type Throttle struct {
	Store AttemptStore
	Clock agentmarket.Clock
	Free  int
	Base  time.Duration
	Max   time.Duration
	// Forget is how long a key keeps its failures after the last one.
	Forget time.Duration

	once  sync.Once
	local *MemoryAttempts
}

// AttemptStore counts failed attempts per key.
type AttemptStore interface {
	// AddFailure counts a failure of key at now, kept for ttl after it,
	// and returns the count now.
	AddFailure(ctx context.Context, key string, now time.Time, ttl time.Duration) (int64, error)
	// Failures returns key's count and its last failure (0 and the zero
	// time when none is kept).
	Failures(ctx context.Context, key string) (int64, time.Time, error)
	// ResetFailures forgets key's failures.
	ResetFailures(ctx context.Context, key string) error
}

// Sign-in defaults: after five failures 1 s, then 2 s, 4 s … up to 15
// minutes, forgotten an hour after the last.
const (
	DefaultThrottleFree   = 5
	DefaultThrottleBase   = time.Second
	DefaultThrottleMax    = 15 * time.Minute
	DefaultThrottleForget = time.Hour
)

func (t *Throttle) init() {
	t.once.Do(func() {
		t.local = NewMemoryAttempts()
		if t.Store == nil {
			t.Store = t.local
		}
		if t.Free <= 0 {
			t.Free = DefaultThrottleFree
		}
		if t.Base <= 0 {
			t.Base = DefaultThrottleBase
		}
		if t.Max <= 0 {
			t.Max = DefaultThrottleMax
		}
		if t.Forget <= 0 {
			t.Forget = DefaultThrottleForget
		}
	})
}

// delay is how long after its last failure a key with n failures waits.
func (t *Throttle) delay(n int64) time.Duration {
	over := n - int64(t.Free)
	if over < 0 {
		return 0
	}
	if over > 30 {
		return t.Max
	}
	d := t.Base * time.Duration(math.Pow(2, float64(over)))
	return min(d, t.Max)
}

// Check refuses (TooManyRequests, with the wait) when any key must wait.
func (t *Throttle) Check(ctx context.Context, keys ...string) error {
	t.init()
	now := t.Clock.Now()
	var wait time.Duration
	for _, k := range keys {
		n, last, err := t.Store.Failures(ctx, k)
		if err != nil && t.Store != AttemptStore(t.local) {
			n, last, err = t.local.Failures(ctx, k)
		}
		if err != nil || n == 0 {
			continue
		}
		if w := last.Add(t.delay(n)).Sub(now); w > wait {
			wait = w
		}
	}
	if wait <= 0 {
		return nil
	}
	secs := int64(math.Ceil(wait.Seconds()))
	return &agentmarket.Error{Kind: agentmarket.TooManyRequests, Code: "too_many_attempts",
		Message:    fmt.Sprintf("too many failed attempts; try again in %d seconds", secs),
		RetryAfter: time.Duration(secs) * time.Second}
}

// Failed counts a failed attempt under every key.
func (t *Throttle) Failed(ctx context.Context, keys ...string) {
	t.init()
	now := t.Clock.Now()
	for _, k := range keys {
		if _, err := t.Store.AddFailure(ctx, k, now, t.Forget); err != nil && t.Store != AttemptStore(t.local) {
			t.local.AddFailure(ctx, k, now, t.Forget)
		}
	}
}

// Succeeded forgets the keys' failures.
func (t *Throttle) Succeeded(ctx context.Context, keys ...string) {
	t.init()
	for _, k := range keys {
		t.Store.ResetFailures(ctx, k)
		t.local.ResetFailures(ctx, k)
	}
}

// MemoryAttempts is an AttemptStore in this process's memory.
type MemoryAttempts struct {
	mu sync.Mutex
	m  map[string]memoryAttempt
}

type memoryAttempt struct {
	n       int64
	last    time.Time
	expires time.Time
}

var _ AttemptStore = (*MemoryAttempts)(nil)

// NewMemoryAttempts is an empty store.
func NewMemoryAttempts() *MemoryAttempts { return &MemoryAttempts{m: map[string]memoryAttempt{}} }

// AddFailure counts a failure; it also drops the keys whose time is over
// (a sweep as it goes, bounded by the keys failing within ttl).
func (s *MemoryAttempts) AddFailure(_ context.Context, key string, now time.Time, ttl time.Duration) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.m[key]
	if !now.Before(a.expires) {
		a = memoryAttempt{}
	}
	a.n++
	a.last, a.expires = now, now.Add(ttl)
	s.m[key] = a
	if len(s.m) > 1024 && len(s.m)%256 == 0 {
		for k, x := range s.m {
			if !now.Before(x.expires) {
				delete(s.m, k)
			}
		}
	}
	return a.n, nil
}

// Failures returns key's count and last failure; a count whose time is
// over is none. (The time compared is the last failure's own clock.)
func (s *MemoryAttempts) Failures(_ context.Context, key string) (int64, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[key]
	if !ok {
		return 0, time.Time{}, nil
	}
	return a.n, a.last, nil
}

// ResetFailures forgets key.
func (s *MemoryAttempts) ResetFailures(_ context.Context, key string) error {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
	return nil
}
