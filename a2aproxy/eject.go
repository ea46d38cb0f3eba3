package a2aproxy

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Passive outlier ejection (issue 26): an agent endpoint whose calls fail
// EjectAfter times in a row (a connection refused or reset, no answer
// within the call's timeout, an HTTP 5xx) is ejected: for its backoff
// (EjectBackoff, doubled at each ejection in a row, at most
// EjectBackoffMax) the meter answers calls to it at once with "the agent
// could not be reached", saying until when, instead of making every buyer
// wait for the same failure. When the backoff ends one call is let through
// (half-open); its success readmits the endpoint, its failure ejects it
// again for twice as long. A success at any time resets the count.
//
// The state is per endpoint URL (the interface the call goes to) and in
// this meter's memory: each meter judges the endpoints by the calls it
// makes. With nothing failing, a call costs one atomic load and no
// allocation (BenchmarkChainSend).

// Ejection thresholds.
const (
	EjectAfter      = 5                // consecutive failures that eject an endpoint
	EjectBackoff    = 5 * time.Second  // the first ejection's length
	EjectBackoffMax = 10 * time.Minute // the longest
)

// outliers is the ejection state of the endpoints this meter calls. Its
// zero value is not ready: newOutliers.
type outliers struct {
	now func() time.Time
	// watched counts the endpoints with state (a failure counted, an
	// ejection): while it is 0 a call looks at nothing else.
	watched   atomic.Int64
	ejections atomic.Uint64 // since start, for /metrics
	mu        sync.Mutex
	m         map[string]*outlier
}

type outlier struct {
	fails   int       // consecutive failed calls
	ejected int       // consecutive ejections (the backoff's exponent)
	until   time.Time // ejected until; zero when not ejected
	trial   bool      // the half-open call is under way
}

func newOutliers(now func() time.Time) *outliers {
	return &outliers{now: now, m: map[string]*outlier{}}
}

// pass is what admit decided for one call.
type pass uint8

const (
	passQuiet pass = iota // nothing watched: the call reports only failures
	passWatch             // some endpoint watched: the call reports its success too
	passTrial             // the half-open call of an ejected endpoint
)

// admit lets a call to endpoint through, or refuses it while the endpoint
// is ejected.
func (o *outliers) admit(endpoint string) (pass, error) {
	if o.watched.Load() == 0 || endpoint == "" {
		return passQuiet, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.m[endpoint]
	if e == nil || e.until.IsZero() {
		return passWatch, nil
	}
	now := o.now()
	if now.Before(e.until) || e.trial {
		return passWatch, ejectedError{rpcErr(CodeUpstreamUnreachable, http.StatusOK, fmt.Sprintf(
			"the agent could not be reached: the meter ejected its endpoint after %d failed calls in a row, until %s (one call then tests it)",
			EjectAfter, e.until.UTC().Format(time.RFC3339)))}
	}
	e.trial = true
	return passTrial, nil
}

// ejectedError is admit's refusal: the agent took nothing (fallback.go).
type ejectedError struct{ *rpcError }

func (e ejectedError) Unwrap() error { return e.rpcError }

// outcome is what a call showed of its endpoint.
type outcome uint8

const (
	answered outcome = iota // the agent answered (below 500)
	failed                  // refused, reset, timed out, HTTP 5xx
	neutral                 // says nothing of the agent (the caller left, the guard refused)
)

// report records a call's outcome.
func (o *outliers) report(endpoint string, p pass, out outcome) {
	if (out == answered && p == passQuiet) || (out == neutral && p != passTrial) || endpoint == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.m[endpoint]
	switch out {
	case answered:
		if e != nil {
			delete(o.m, endpoint) // readmitted, the count reset
			o.watched.Add(-1)
		}
	case neutral:
		if e != nil && p == passTrial {
			e.trial = false // another call may test it
		}
	case failed:
		if e == nil {
			e = &outlier{}
			o.m[endpoint] = e
			o.watched.Add(1)
		}
		e.fails++
		switch {
		case p == passTrial || (e.until.IsZero() && e.fails >= EjectAfter):
			backoff := EjectBackoff << min(e.ejected, 20)
			e.ejected++
			e.until, e.trial = o.now().Add(min(backoff, EjectBackoffMax)), false
			o.ejections.Add(1)
		}
	}
}

// EjectedEndpoint is an endpoint the meter ejected, for /readyz.
type EjectedEndpoint struct {
	URL   string    `json:"url"`
	Until time.Time `json:"until"`
	Fails int       `json:"consecutive_failures"`
}

// ejected lists the endpoints ejected now, by URL.
func (o *outliers) ejected() []EjectedEndpoint {
	if o.watched.Load() == 0 {
		return nil
	}
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []EjectedEndpoint
	for u, e := range o.m {
		if !e.until.IsZero() && (now.Before(e.until) || e.trial) {
			out = append(out, EjectedEndpoint{URL: u, Until: e.until.UTC(), Fails: e.fails})
		}
	}
	slices.SortFunc(out, func(a, b EjectedEndpoint) int {
		if a.URL < b.URL {
			return -1
		}
		return 1
	})
	return out
}

// Ejected lists the agent endpoints this meter has ejected now.
func (p *Proxy) Ejected() []EjectedEndpoint { return p.outliers.ejected() }

// Ejections counts the ejections since the meter started.
func (p *Proxy) Ejections() uint64 { return p.outliers.ejections.Load() }
