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
	share localShare // of each limit and cap this meter admits
	mu    sync.Mutex
	cells map[string]*rateCell
	// sessions are kept sessionIdle past their last call; swept every
	// sessionSweep new ones.
	sessions map[string]*sessionCell
	added    int
}

// rateCell is one holder's state: per bucket (requests a second, a
// minute, tokens a minute) the time up to which it owes refill, in ms
// since the epoch (a generic cell rate algorithm: the bucket is full when
// that is past); the calls in flight with their lease's end.
type rateCell struct {
	owed     [3]float64
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

// windows are how long each bucket takes to refill, in ms, in the order
// of a RateLimits' fields.
var windows = [3]int64{1000, 60000, 60000}

func newLocalRates(clock agentmarket.Clock) *localRates {
	return &localRates{clock: clock, cells: map[string]*rateCell{}, sessions: map[string]*sessionCell{}}
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
			i, lim := 4*j+k, r.share.of(limits[4*j+k])
			left[i] = -1
			if lim <= 0 {
				continue
			}
			var ok bool
			var wait float64
			switch k {
			case 0, 1:
				ok, wait, left[i] = takeRequest(lim, float64(windows[k]), c.owed[k]-float64(now))
			case 2:
				ok, wait, left[i] = tokenBucket(lim, c.owed[k]-float64(now))
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
			if lim := r.share.of(limits[4*j+k]); lim > 0 {
				c.owed[k] = max(c.owed[k], float64(now)) + float64(windows[k])/float64(lim)
			}
		}
		if r.share.of(limits[4*j+3]) > 0 {
			if c.inFlight == nil {
				c.inFlight = map[string]int64{}
			}
			c.inFlight[callID] = now + lease.Milliseconds()
		}
	}
	return -1, 0, left, nil
}

// takeRequest decides a call under a bucket of lim requests that refills
// in w ms and owes owed ms of refill: a call takes one request (w/lim ms
// of refill), and goes if the bucket holds it. It answers whether the
// call goes, else the wait until it would, and the requests left after
// it.
func takeRequest(lim int64, w, owed float64) (bool, float64, int64) {
	owed = max(owed, 0)
	t := w / float64(lim)
	if owed+t > w {
		return false, owed + t - w, 0
	}
	return true, 0, int64((w - owed - t) / t)
}

// tokenBucket decides a call under a bucket of lim tokens that refills in
// a minute and owes owed ms of refill: the call goes while the bucket is
// not empty (its tokens are taken when it ends). It answers whether the
// call goes, else the wait until the bucket holds a token again, and the
// tokens left.
func tokenBucket(lim int64, owed float64) (bool, float64, int64) {
	const w = 60000.0
	owed = max(owed, 0)
	if owed >= w {
		return false, owed - w + 1, 0
	}
	return true, 0, int64(float64(lim) * (w - owed) / w)
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
		if tpm := r.share.of(limits[4*j+2]); tpm > 0 && tokens > 0 {
			c.owed[2] = max(c.owed[2], now) + float64(tokens)*float64(windows[2])/float64(tpm)
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
	maxCalls, maxMicros = r.share.of(maxCalls), r.share.of(maxMicros)
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

// localShare is the share of a limit a meter admits while it holds the
// limit on its own (Limits.LocalShare): 1 (the zero value reads so) is the
// whole limit.
type localShare float64

// share is Limits.LocalShare as a localShare: 0 and anything outside
// (0, 1] is 1.
func share(v float64) localShare {
	if v <= 0 || v > 1 {
		return 1
	}
	return localShare(v)
}

// of is this meter's part of a limit: lim times the share, rounded down
// (so that N meters at 1/N stay within it together), at least 1 (a limit
// below N admits up to N together: the alternative is refusing every
// call); a limit that is not set (≤ 0) stays so. The small epsilon keeps
// 3 × 1/3 of 9 at 3, not 2.
func (s localShare) of(lim int64) int64 {
	if lim <= 0 || s == 0 || s == 1 {
		return lim
	}
	return max(1, int64(math.Floor(float64(lim)*float64(s)+1e-9)))
}

// over reports whether amount, beside local (what this meter settled
// since it last read the store's figure, and holds in flight), is more
// than this meter's share of what limit left at that reading (base): a
// budget or a credit balance the meter holds on its own. Each reading
// gives each meter its share of what is left then, so N meters at 1/N
// spend at most what was left between two readings. With the whole limit
// it never is: the caller's own check against the limit decides.
func (s localShare) over(limit, base, local, amount int64) bool {
	if s == 0 || s == 1 {
		return false
	}
	return float64(agentmarket.AddSat(local, amount)) > float64(limit-base)*float64(s)
}
