package a2aproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket/listings"
)

// Endpoints (issue 26, items 1 and 3). A listing whose seller set agent
// endpoints (listings.AgentEndpoint: replicas, regions, weights) has its
// new tasks balanced over the endpoints of the interface the meter calls:
// the endpoint with the fewest of this meter's calls in flight per unit of
// weight, among those the meter has not ejected (eject.go). The endpoint
// is kept with the task's binding (TaskBinding.Endpoint: in memory, in the
// usage row that makes the binding durable, in task_owners and the shared
// state), and every later call on the task (GetTask, cancel, resubscribe,
// a reply to input-required, push configs) goes there.
//
// Retries: a call that starts a task is sent once more, to another healthy
// endpoint, when its first endpoint could not have accepted anything: the
// connection was refused or failed (TLS included) before the request was
// written, or the answer was HTTP 502 or 503 naming no task. Nothing else
// is retried: not an answer that named a task, not a stream that began,
// not a connection that broke after the request went out (the agent may
// have started work), not a call on an existing task (it lives at one
// endpoint). A retried send is the same call: one usage row, one hold on
// its messageId (idem.go), one bill.
//
// A listing without endpoints of the seller's costs one nil check here.

// balance is the chain's stage that picks the call's endpoint.
type balance struct {
	p *Proxy
}

func (b balance) serve(cl *call, next handler) error {
	if cl.target.Endpoints == nil {
		return next(cl)
	}
	return b.p.balancer.route(cl, b.p, next)
}

// balancer keeps the calls in flight per endpoint URL, and counts retries.
// Its zero value is ready.
type balancer struct {
	loads   sync.Map // endpoint URL → *atomic.Int64
	turn    atomic.Uint64
	retries atomic.Uint64
}

func (b *balancer) load(url string) *atomic.Int64 {
	if v, ok := b.loads.Load(url); ok {
		return v.(*atomic.Int64)
	}
	v, _ := b.loads.LoadOrStore(url, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// routed is a call's endpoint when its listing has several: the endpoint
// the balancer chose or the task's, and for a new task the pool to retry
// in, its in-flight count, whether it was sent (tried) and retried.
type routed struct {
	endpoint       string
	pool           []listings.AgentEndpoint
	load           *atomic.Int64
	tried, retried bool
}

// endpointOf is the call's endpoint to bind its task to, "" for r nil.
func (r *routed) endpointOf() string {
	if r == nil {
		return ""
	}
	return r.endpoint
}

// route sends cl to its task's endpoint, or to the least loaded healthy
// one for a call that starts a task, and counts it in flight meanwhile.
func (b *balancer) route(cl *call, p *Proxy, next handler) error {
	pool := listings.RouteEndpoints(cl.target.Card, cl.target.Endpoints, cl.iface)
	if len(pool) < 2 { // the chosen interface alone
		return next(cl)
	}
	if cl.obs.bound && cl.obs.taskID != "" {
		// A call on a task bound before: its endpoint, or the card's
		// interface for a task bound before the listing had endpoints.
		if tb, err := p.owners.Lookup(cl.x.Context(), cl.target.ListingID, cl.obs.taskID); err == nil && tb.Endpoint != "" {
			cl.iface.URL = tb.Endpoint
			cl.routed = &routed{endpoint: tb.Endpoint, tried: true} // never retried elsewhere
		}
		return next(cl)
	}
	ep := b.pick(pool, p.outliers, "")
	r := &routed{endpoint: ep, pool: pool, load: b.load(ep)}
	cl.iface.URL, cl.routed = ep, r
	r.load.Add(1)
	defer func() { r.load.Add(-1) }()
	return next(cl)
}

// pick is the endpoint of pool, other than not, with the fewest calls in
// flight per unit of weight among those not ejected; turns break ties, so
// that idle endpoints share the calls. When every one is ejected, the
// first (the meter's answer then says until when).
func (b *balancer) pick(pool []listings.AgentEndpoint, o *outliers, not string) string {
	start := int(b.turn.Add(1) % uint64(len(pool)))
	best, bestLoad, bestWeight := "", int64(0), 1
	for i := range pool {
		e := pool[(start+i)%len(pool)]
		if e.URL == not || o.isEjected(e.URL) {
			continue
		}
		w := max(e.Weight, 1)
		l := b.load(e.URL).Load() + 1
		if best == "" || l*int64(bestWeight) < bestLoad*int64(w) {
			best, bestLoad, bestWeight = e.URL, l, w
		}
	}
	if best == "" && not == "" {
		return pool[0].URL
	}
	return best
}

// isEjected reports whether endpoint is ejected now (its backoff runs, or
// its half-open call is under way), without taking that call.
func (o *outliers) isEjected(endpoint string) bool {
	if o.watched.Load() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.m[endpoint]
	return e != nil && !e.until.IsZero() && (o.now().Before(e.until) || e.trial)
}

// Retries counts the calls the meter sent again to another endpoint.
func (p *Proxy) Retries() uint64 { return p.balancer.retries.Load() }

// retryTo is the endpoint a call that failed at its first endpoint goes
// to, "" when none: it must be a call the balancer routed (a new task),
// not retried yet, with another healthy endpoint. The call then moves
// there, its in-flight count with it.
func (p *Proxy) retryTo(cl *call) string {
	r := cl.routed
	if r == nil || r.pool == nil || r.retried {
		return ""
	}
	r.retried = true
	alt := p.balancer.pick(r.pool, p.outliers, r.endpoint)
	if alt == "" {
		return ""
	}
	p.balancer.retries.Add(1)
	r.load.Add(-1)
	r.load = p.balancer.load(alt)
	r.load.Add(1)
	cl.iface.URL, r.endpoint = alt, alt
	return alt
}

// rebased is u, made for the endpoint from, aimed at the endpoint to
// (a REST path or query after the endpoint's URL stays).
func rebased(u, from, to string) string {
	if rest, ok := strings.CutPrefix(u, from); ok {
		return to + rest
	}
	return to
}

// notAccepted reports whether a round trip's failure shows that the agent
// accepted nothing: the connection (TCP or TLS) never came up, so the
// request was never written; or the endpoint was ejected between the
// balancer's pick and the call (other calls' failures), so nothing was
// sent.
func notAccepted(err error) bool {
	var ej ejectedError
	if errors.As(err, &ej) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var (
		rh  tls.RecordHeaderError
		al  tls.AlertError
		cv  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		hn  x509.HostnameError
		inv x509.CertificateInvalidError
	)
	return errors.As(err, &rh) || errors.As(err, &al) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &inv)
}

// refusedWork reports whether an answer of status with body says the
// agent (or its gateway) took no work: 502 or 503 naming no task and
// carrying no result.
func refusedWork(status int, body []byte) bool {
	if status != http.StatusBadGateway && status != http.StatusServiceUnavailable {
		return false
	}
	for _, k := range [...]string{`"result"`, `"task"`, `"taskId"`, `"kind"`, `"statusUpdate"`, `"artifactUpdate"`, `"message"`} {
		if bytes.Contains(body, []byte(k)) {
			return false
		}
	}
	return true
}

// roundTripRouted is roundTrip for a call the balancer routed: sent once
// more to another endpoint when the first accepted nothing (retryTo).
func (p *Proxy) roundTripRouted(ctx context.Context, cl *call, ar agentRequest, limit int, timeout time.Duration) (agentReply, error) {
	from := cl.routed.endpoint
	cl.routed.tried = true
	rep, err := p.roundTrip(ctx, cl, ar, limit, timeout)
	if err == nil && !refusedWork(rep.status, rep.body) || err != nil && !notAccepted(err) {
		return rep, err
	}
	alt := p.retryTo(cl)
	if alt == "" {
		return rep, err
	}
	if err == nil {
		rep.release()
	}
	p.Logger.InfoContext(ctx, "agent endpoint accepted nothing; the call goes to another", "trace_id", cl.trace.traceID,
		"listing", cl.target.ListingID, "from", from, "to", alt, "err", err, "status", rep.status)
	ar.url = rebased(ar.url, from, alt)
	return p.roundTrip(ctx, cl, ar, limit, timeout)
}

// sendRouted is send for a stream (or probe) of a call the balancer
// routed: sent once more to another endpoint when the first accepted
// nothing, before any event was read.
func (p *Proxy) sendRouted(cl *call, req *http.Request) (*http.Response, error) {
	from := cl.routed.endpoint
	cl.routed.tried = true
	// The body is read out first: the transport consumes it, and a retry
	// sends it again.
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(&sentBody{b: body})
	}
	res, err := p.send(cl, req)
	switch {
	case err != nil && !notAccepted(err):
		return res, err
	case err == nil && (res.StatusCode != http.StatusBadGateway && res.StatusCode != http.StatusServiceUnavailable ||
		strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")):
		return res, err
	}
	var peek []byte
	if err == nil {
		peek, _ = readLimited(res, 64<<10)
		if !refusedWork(res.StatusCode, peek) {
			res.Body = readCloser{bytes.NewReader(peek)}
			return res, nil
		}
	}
	alt := p.retryTo(cl)
	if alt == "" {
		if err == nil {
			res.Body = readCloser{bytes.NewReader(peek)}
		}
		return res, err
	}
	p.Logger.InfoContext(req.Context(), "agent endpoint accepted nothing; the stream goes to another", "trace_id", cl.trace.traceID,
		"listing", cl.target.ListingID, "from", from, "to", alt, "err", err)
	again, rerr := agentRequest{method: req.Method, url: rebased(req.URL.String(), from, alt), body: body, header: flatHeader(req.Header)}.httpRequest(req.Context())
	if rerr != nil {
		return nil, rerr
	}
	return p.send(cl, again)
}

// readCloser is a read body already in memory.
type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// flatHeader flattens h into agentRequest's name, value pairs.
func flatHeader(h http.Header) []string {
	out := make([]string, 0, 2*len(h))
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, k, v)
		}
	}
	return out
}
