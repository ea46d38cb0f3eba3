package a2aproxy

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// The 0.3 HTTP+JSON of the official Go SDK (a2a-go) is a dialect of its
// own (wire/rest_sdk03.go), on both sides of the meter.
//
// Buyer side: a REST call on a 1.0 path whose A2A-Version is 0.3 or
// missing is in the dialect. wire.ParseREST reads it into the same 0.3
// Request as every other binding, and the pipeline renders its answers in
// the dialect (call.restResult, call.restError) and its stream events
// (onEvent, streamError).
//
// Agent side: a 0.3 card's HTTP+JSON interface may be a specification
// server (/v1 paths, the 0.3 proto's JSON) or a dialect server, and the
// card does not say which. The rule: the first call to such an interface
// probes it with two GETs of a task that does not exist (wire's
// DialectProbeURLs), which change nothing at the agent: it speaks the
// dialect when GET /v1/tasks/{x} misses its route (404 or 405 without an
// A2A error) and GET /tasks/{x} is answered with an A2A error
// (google.rpc.Status of the a2a-protocol.org domain), and the
// specification's binding in every other case, which is what the card
// claims. The answer is remembered per interface URL for dialectTTL;
// when the agent could not answer a probe (unreachable, timeout), calls go
// on in the specification's binding, and it is probed again after
// dialectRetry.

// dialectTTL is how long a probed dialect is trusted: agents are
// redeployed, and a probe is two small GETs.
const dialectTTL = 10 * time.Minute

// dialectRetry is how long a probe the agent did not answer stands (the
// calls go in the specification's form meanwhile): long enough that an
// unreachable agent does not cost every call a probe, short enough that
// one back up is soon probed again.
const dialectRetry = 5 * time.Second

// restDialects are the HTTP+JSON dialects of a call's two sides.
type restDialects struct {
	buyer wire.Dialect // set by the rest handler
	agent wire.Dialect // set by upstreamRequest
}

// dialectCache remembers the dialect of 0.3 HTTP+JSON interfaces by URL.
// Its zero value is ready; concurrent first calls to one interface wait
// for a single probe.
type dialectCache struct {
	mu sync.Mutex
	m  map[string]*dialectEntry
}

type dialectEntry struct {
	done    chan struct{} // closed once d and expires are set
	d       wire.Dialect
	expires time.Time // zero: not to be reused
}

// get returns the dialect of the interface at key, probing it when it is
// not known or no longer trusted.
func (dc *dialectCache) get(ctx context.Context, key string, now func() time.Time, probe func() (wire.Dialect, bool)) wire.Dialect {
	dc.mu.Lock()
	if e := dc.m[key]; e != nil {
		select {
		case <-e.done:
			if now().Before(e.expires) {
				dc.mu.Unlock()
				return e.d
			}
		default: // being probed
			dc.mu.Unlock()
			select {
			case <-e.done:
				return e.d
			case <-ctx.Done():
				return wire.DialectSpec
			}
		}
	}
	if dc.m == nil {
		dc.m = map[string]*dialectEntry{}
	}
	e := &dialectEntry{done: make(chan struct{})}
	dc.m[key] = e
	dc.mu.Unlock()

	d, known := wire.DialectSpec, false
	defer func() {
		e.d = d
		if known {
			e.expires = now().Add(dialectTTL)
		} else {
			e.expires = now().Add(dialectRetry)
		}
		close(e.done)
	}()
	d, known = probe()
	return d
}

// agentDialect is the dialect of the agent interface a call goes to:
// probed for 0.3 HTTP+JSON interfaces, the specification's otherwise.
func (p *Proxy) agentDialect(ctx context.Context, cl *call) wire.Dialect {
	if !cl.upREST() || cl.upVersion != wire.V03 {
		return wire.DialectSpec
	}
	return p.dialects.get(ctx, cl.iface.URL, p.Clock.Now, func() (wire.Dialect, bool) {
		d, known := p.probeDialect(ctx, cl)
		if known && d == wire.DialectSDK03 {
			p.Logger.InfoContext(ctx, "agent interface speaks the a2a-go 0.3 HTTP+JSON dialect", "listing", cl.target.ListingID, "url", cl.iface.URL)
		}
		return d, known
	})
}

// probeDialect tells the dialect of cl's 0.3 HTTP+JSON interface (see the
// top of the file); known is false when the agent did not answer.
func (p *Proxy) probeDialect(ctx context.Context, cl *call) (d wire.Dialect, known bool) {
	ctx, cancel := context.WithTimeout(ctx, cl.lim.RequestTimeout)
	defer cancel()
	spec, sdk := wire.DialectProbeURLs(cl.iface.URL, "agentmarket-dialect-probe-"+strconv.FormatUint(rand.Uint64(), 16))
	status, body, err := p.probeGet(ctx, cl, spec)
	if err != nil {
		return wire.DialectSpec, false
	}
	if !wire.ProbeMissesRoute(status, body) {
		return wire.DialectSpec, true
	}
	if status, body, err = p.probeGet(ctx, cl, sdk); err != nil {
		return wire.DialectSpec, false
	}
	if wire.ProbeAnswersSDK03(status, body) {
		return wire.DialectSDK03, true
	}
	return wire.DialectSpec, true
}

// probeGet sends one probe, with the seller's credentials (an agent may
// guard every route).
func (p *Proxy) probeGet(ctx context.Context, cl *call, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "AgentMarket-Meter/1")
	if a := cl.target.UpstreamAuth; a != nil {
		req.Header.Set(a.Header, a.Value)
	}
	res, err := p.send(cl, req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, body, nil
}
