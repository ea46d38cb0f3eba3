package contracts

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
)

// RateLimit caps how many requests one key (a client address) makes: at
// most Limit in each fixed Window, the next ones refused with
// TooManyRequests and the wait until the window ends. It guards what
// anyone may read without signing in (the catalog API), where Throttle
// guards guessing.
//
// The counts live in Store, as Throttle's do: Redis shared by the
// processes of a deployment when there is one, so the limit holds across
// them; when Store fails, this process's memory counts instead (an outage
// weakens the limit, it never refuses anyone for it).
type RateLimit struct {
	Store  AttemptStore
	Clock  agentmarket.Clock
	Limit  int
	Window time.Duration

	once  sync.Once
	local *MemoryAttempts
}

// DefaultRateWindow is the window of a RateLimit whose Window is zero.
const DefaultRateWindow = time.Minute

func (r *RateLimit) init() {
	r.once.Do(func() {
		r.local = NewMemoryAttempts()
		if r.Store == nil {
			r.Store = r.local
		}
		if r.Clock == nil {
			r.Clock = agentmarket.SystemClock{}
		}
		if r.Window <= 0 {
			r.Window = DefaultRateWindow
		}
	})
}

// Take counts one request under key and refuses it (TooManyRequests, with
// the wait) when key has had Limit already in this window.
func (r *RateLimit) Take(ctx context.Context, key string) error {
	r.init()
	now := r.Clock.Now()
	window := now.UnixNano() / int64(r.Window)
	// One counter per key and window: it starts at zero with each window,
	// and the store forgets it a window after its last request.
	k := "rate:" + key + ":" + strconv.FormatInt(window, 10)
	n, err := r.Store.AddFailure(ctx, k, now, r.Window)
	if err != nil && r.Store != AttemptStore(r.local) {
		n, err = r.local.AddFailure(ctx, k, now, r.Window)
	}
	if err != nil || n <= int64(r.Limit) {
		return nil
	}
	end := time.Unix(0, (window+1)*int64(r.Window))
	secs := max(int64(math.Ceil(end.Sub(now).Seconds())), 1)
	return &agentmarket.Error{Kind: agentmarket.TooManyRequests, Code: "rate_limited",
		Message:    fmt.Sprintf("too many requests from this address; try again in %d seconds, or send an API key", secs),
		RetryAfter: time.Duration(secs) * time.Second}
}
