package a2aproxy

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
)

// localRates holds rate limits and session caps in this meter's memory:
// the only holder without Redis, the fallback while Redis fails. It
// decides as contracts/redis's scripts do (the same rules, docs/limits.md),
// on the injected clock.
type localRates struct {
	clock agentmarket.Clock
	mu    sync.Mutex
	cells map[string]*rateCell
	// sessions are kept sessionIdle past their last call; swept every
	// sessionSweep new ones.
	sessions map[string]*sessionCell
	added    int
}

// rateCell is one holder's state: per window limit (second, minute) the
// fixed window it is in and the counts of it and the one before; the
// tokens' debt (the bucket is empty while it reaches a minute ahead); the
// calls in flight with their lease's end.
type rateCell struct {
	win      [2]int64
	cur      [2]int64
	prev     [2]int64
	debt     float64 // ms since the epoch up to which tokens are owed
	inFlight map[string]int64
}

type sessionCell struct {
	calls, micros int64
	seen          time.Time
}

const (
	// sessionIdle is how long a conversation's count is kept after its
	// last call (and its key's time to live in Redis).
	sessionIdle  = 24 * time.Hour
	sessionSweep = 4096
)

// windows are the lengths of the request limits' windows, in ms, in the
// order of a RateLimits' fields.
var windows = [2]int64{1000, 60000}

const tokenWindow = 60000.0 // ms: a bucket refills in a minute

func newLocalRates(clock agentmarket.Clock) *localRates {
	return &localRates{clock: clock, cells: map[string]*rateCell{}, sessions: map[string]*sessionCell{}}
}

// limitsOf flattens l in the order the shared scripts take them.
func limitsOf(l agentmarket.RateLimits) [4]int64 {
	return [4]int64{l.RequestsPerSecond, l.RequestsPerMinute, l.TokensPerMinute, l.MaxInFlight}
}

// TakeRates implements SharedRates in memory.
func (r *localRates) TakeRates(_ context.Context, callID string, ids []string, limits []int64, lease time.Duration) (int, time.Duration, []int64, error) {
	now := r.clock.Now().UnixMilli()
	left := make([]int64, len(limits))
	r.mu.Lock()
	defer r.mu.Unlock()
	cells := make([]*rateCell, len(ids))
	for j, id := range ids {
		c := r.cells[id]
		if c == nil {
			c = &rateCell{}
			r.cells[id] = c
		}
		cells[j] = c
		for k := 0; k < 4; k++ {
			i, lim := 4*j+k, limits[4*j+k]
			left[i] = -1
			if lim <= 0 {
				continue
			}
			var ok bool
			var wait float64
			switch k {
			case 0, 1:
				w := windows[k]
				c.roll(k, now/w)
				ok, wait, left[i] = slidingWindow(lim, w, now%w, c.cur[k], c.prev[k])
			case 2:
				ok, wait, left[i] = tokenBucket(lim, c.debt-float64(now))
			case 3:
				for id, end := range c.inFlight {
					if end <= now {
						delete(c.inFlight, id)
					}
				}
				n := int64(len(c.inFlight))
				ok, wait, left[i] = n < lim, 1000, lim-n-1
			}
			if !ok {
				return i, time.Duration(math.Ceil(wait)) * time.Millisecond, nil, nil
			}
		}
	}
	for j, c := range cells {
		for k := 0; k < 2; k++ {
			if limits[4*j+k] > 0 {
				c.cur[k]++
			}
		}
		if limits[4*j+3] > 0 {
			if c.inFlight == nil {
				c.inFlight = map[string]int64{}
			}
			c.inFlight[callID] = now + lease.Milliseconds()
		}
	}
	return -1, 0, left, nil
}

// roll moves cell's window k to win.
func (c *rateCell) roll(k int, win int64) {
	switch {
	case c.win[k] == win:
	case c.win[k] == win-1:
		c.win[k], c.prev[k], c.cur[k] = win, c.cur[k], 0
	default:
		c.win[k], c.prev[k], c.cur[k] = win, 0, 0
	}
}

// slidingWindow decides a call under a limit of lim calls per window of w
// ms, elapsed ms into the current fixed window, which counted cur calls
// and the one before prev: the calls of the last w ms are estimated as
// prev weighted by the share of its window still inside them, plus cur.
// It answers whether the call fits, else the wait until it would, and the
// calls left after it.
func slidingWindow(lim, w, elapsed, cur, prev int64) (bool, float64, int64) {
	est := float64(prev)*float64(w-elapsed)/float64(w) + float64(cur)
	if est < float64(lim) {
		return true, 0, max(int64(float64(lim)-est-1), 0)
	}
	if cur < lim {
		// Within this window, once enough of the previous one slid out.
		at := float64(w) - float64(lim-cur)*float64(w)/float64(prev)
		return false, at - float64(elapsed) + 1, 0
	}
	// In the next window, once enough of this one slid out.
	at := float64(w) - float64(lim)*float64(w)/float64(cur)
	return false, float64(w-elapsed) + at + 1, 0
}

// tokenBucket decides a call under a bucket of lim tokens a minute that
// owes debt ms of refill (the bucket is empty at a minute's debt): it
// answers whether the call may go, else the wait until the bucket holds a
// token again, and the tokens left.
func tokenBucket(lim int64, debt float64) (bool, float64, int64) {
	debt = max(debt, 0)
	if debt >= tokenWindow {
		return false, debt - tokenWindow + 1, 0
	}
	return true, 0, int64(float64(lim) * (tokenWindow - debt) / tokenWindow)
}

// DoneRates implements SharedRates in memory.
func (r *localRates) DoneRates(_ context.Context, callID string, ids []string, limits []int64, tokens int64) error {
	now := float64(r.clock.Now().UnixMilli())
	r.mu.Lock()
	defer r.mu.Unlock()
	for j, id := range ids {
		c := r.cells[id]
		if c == nil {
			continue
		}
		if tpm := limits[4*j+2]; tpm > 0 && tokens > 0 {
			c.debt = max(c.debt, now) + float64(tokens)*tokenWindow/float64(tpm)
		}
		delete(c.inFlight, callID)
	}
	return nil
}

// TakeSession implements SharedRates in memory.
func (r *localRates) TakeSession(_ context.Context, id string, maxCalls, maxMicros int64, count bool) (int, int64, int64, error) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.session(id, now)
	if maxCalls > 0 && s.calls >= maxCalls {
		return 0, s.calls, s.micros, nil
	}
	if maxMicros > 0 && s.micros >= maxMicros {
		return 1, s.calls, s.micros, nil
	}
	if count {
		s.calls++
	}
	return -1, s.calls, s.micros, nil
}

// AddSession implements SharedRates in memory.
func (r *localRates) AddSession(_ context.Context, id string, calls, micros int64) error {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.session(id, now)
	s.calls += calls
	s.micros = agentmarket.AddSat(s.micros, micros)
	return nil
}

// session is id's count, made when new (r.mu held).
func (r *localRates) session(id string, now time.Time) *sessionCell {
	s := r.sessions[id]
	if s == nil || now.Sub(s.seen) > sessionIdle {
		s = &sessionCell{}
		r.sessions[id] = s
		if r.added++; r.added%sessionSweep == 0 {
			for k, v := range r.sessions {
				if now.Sub(v.seen) > sessionIdle {
					delete(r.sessions, k)
				}
			}
		}
	}
	s.seen = now
	return s
}
