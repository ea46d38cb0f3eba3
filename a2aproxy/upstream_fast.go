package a2aproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentmarket/agentmarket"
)

// The meter's unary calls to agents go through fasthttp's HostClient, one
// per agent address (and result limit): net/http's client runs two
// goroutines per connection and allocates a request, a response and their
// headers per call, which cost about 18 µs a call at the meter's rate
// (BENCHMARKS.md, "Where the meter's CPU goes"). Streams keep net/http (stream.go): they
// are long and few, and its body reader is what the relay reads event by
// event. Every connection either client makes is dialled through the same
// guard (upstream.go), on the resolved address.

// agentRequest is one request to an agent, whichever client sends it.
type agentRequest struct {
	method, url string
	body        []byte
	// header holds name, value pairs, Content-Type included when there is
	// a body.
	header []string
}

// httpRequest is ar for net/http's client.
func (ar agentRequest) httpRequest(ctx context.Context) (*http.Request, error) {
	var rd *sentBody
	if len(ar.body) > 0 {
		rd = &sentBody{b: ar.body}
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequestWithContext(ctx, ar.method, ar.url, rd)
	} else {
		req, err = http.NewRequestWithContext(ctx, ar.method, ar.url, nil)
	}
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.ContentLength = int64(len(ar.body))
	}
	for i := 0; i+1 < len(ar.header); i += 2 {
		req.Header.Set(ar.header[i], ar.header[i+1])
	}
	return req, nil
}

// agentReply is an agent's whole answer to a unary call. body is valid
// until release is called.
type agentReply struct {
	status      int
	contentType string
	body        []byte
	release     func()
}

// fastKey names one HostClient: an agent's address, whether it speaks
// TLS, and the largest answer read from it (a listing's MaxResultBytes).
type fastKey struct {
	addr  string
	tls   bool
	limit int
}

// fastClients are the meter's HostClients, made on first use.
type fastClients struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	mu   sync.RWMutex
	m    map[fastKey]*fasthttp.HostClient
}

// fastIdle is how long an idle connection to an agent is kept: below the
// keep-alive timeouts servers commonly use (nginx 75 s, many Go servers
// 60 s or more), so that the meter seldom sends a call on a connection the
// agent is closing (a POST is not retried).
const fastIdle = 30 * time.Second

func (f *fastClients) client(k fastKey) *fasthttp.HostClient {
	f.mu.RLock()
	hc := f.m[k]
	f.mu.RUnlock()
	if hc != nil {
		return hc
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if hc = f.m[k]; hc != nil {
		return hc
	}
	if f.m == nil {
		f.m = map[fastKey]*fasthttp.HostClient{}
	}
	dial := f.dial
	hc = &fasthttp.HostClient{
		Addr:  k.addr,
		IsTLS: k.tls,
		Dial: func(addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
			defer cancel()
			return dial(ctx, "tcp", addr)
		},
		MaxConns:                 1024,
		MaxIdleConnDuration:      fastIdle,
		MaxResponseBodySize:      k.limit,
		DisablePathNormalizing:   true, // the agent's URL as the seller wrote it
		NoDefaultUserAgentHeader: true,
		// A POST is never sent twice (it could start a second task).
		MaxIdemponentCallAttempts: 1,
		RetryIf:                   func(*fasthttp.Request) bool { return false },
		ReadBufferSize:            4096,
		WriteBufferSize:           4096,
	}
	f.m[k] = hc
	return hc
}

// dialTimeout bounds a connection to an agent, as the net/http client's
// dialer does.
const dialTimeout = 30 * time.Second

// keyOf is the HostClient key of an agent URL (http or https, with or
// without a port).
func keyOf(u string, limit int) (fastKey, error) {
	rest, tls := strings.CutPrefix(u, "https://")
	if !tls {
		var ok bool
		if rest, ok = strings.CutPrefix(u, "http://"); !ok {
			return fastKey{}, fmt.Errorf("agent URL %q is not http or https", u)
		}
	}
	host := rest
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	if host == "" {
		return fastKey{}, fmt.Errorf("agent URL %q has no host", u)
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		port := "80"
		if tls {
			port = "443"
		}
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	return fastKey{addr: host, tls: tls, limit: limit}, nil
}

// roundTrip sends ar to cl's agent through its HostClient and reads the
// whole answer, at most limit bytes, within timeout. Errors are the
// buyer's (a refused address, a redirect, an answer past the limit) or
// the transport's, for upstreamErr.
func (p *Proxy) roundTrip(ctx context.Context, cl *call, ar agentRequest, limit int, timeout time.Duration) (agentReply, error) {
	if cl != nil && cl.routed != nil && !cl.routed.tried {
		return p.roundTripRouted(ctx, cl, ar, limit, timeout) // balance.go
	}
	k, err := keyOf(ar.url, limit)
	if err != nil {
		return agentReply{}, err
	}
	ep := endpointOf(cl)
	pass, err := p.outliers.admit(ep)
	if err != nil {
		return agentReply{}, err
	}
	hc := p.fast.client(k)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	res := fasthttp.AcquireResponse()
	req.Header.SetMethod(ar.method)
	req.SetRequestURI(ar.url)
	for i := 0; i+1 < len(ar.header); i += 2 {
		req.Header.Set(ar.header[i], ar.header[i+1])
	}
	if len(ar.body) > 0 {
		req.SetBodyRaw(ar.body)
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := hc.DoDeadline(req, res, deadline); err != nil {
		if cl.span != nil {
			cl.span.endClient(0, err)
		}
		p.outliers.report(ep, pass, outcomeOf(ctx, nil, err))
		fasthttp.ReleaseResponse(res)
		return agentReply{}, p.transportErr(ctx, cl, ar, err, limit)
	}
	status := res.StatusCode()
	if cl.span != nil {
		cl.span.endClient(status, nil)
	}
	if status >= 500 {
		p.outliers.report(ep, pass, failed)
	} else {
		p.outliers.report(ep, pass, answered)
	}
	if status >= 300 && status <= 399 {
		fasthttp.ReleaseResponse(res)
		return agentReply{}, rpcErr(CodeUpstreamInvalid, http.StatusOK,
			fmt.Sprintf("the agent answered HTTP %d, a redirect; the meter does not follow an agent's redirects", status))
	}
	return agentReply{status: status, contentType: string(res.Header.ContentType()), body: res.Body(),
		release: func() { fasthttp.ReleaseResponse(res) }}, nil
}

// transportErr is what a failed round trip means for the buyer.
func (p *Proxy) transportErr(ctx context.Context, cl *call, ar agentRequest, err error, limit int) error {
	var ae *agentmarket.Error
	switch {
	case errors.As(err, &ae) && ae.Kind == agentmarket.Invalid:
		shown := ar.url
		if u, perr := url.Parse(ar.url); perr == nil {
			shown = u.Redacted()
		}
		return p.refused(ctx, cl, shown, err)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return rpcErr(CodeResultTooLarge, http.StatusOK, fmt.Sprintf("the agent's answer exceeds the %d-byte result limit", limit))
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return context.DeadlineExceeded
	}
	return err
}
