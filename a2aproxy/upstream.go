package a2aproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentmarket/agentmarket"
)

// Every connection the meter makes to an agent (calls, streams, settling
// polls, the sweeper's cancels, push-config calls, dialect probes) goes
// through one client, built here from the Proxy's Guard: the SSRF policy
// judges the address each connection is about to use, after DNS
// resolution, so neither a card naming 10.0.0.1 nor a name that resolves
// to 169.254.169.254 only after the listing was accepted (DNS rebinding)
// is reached. Redirects are never followed: an agent's 3xx is an error.

// initUpstream builds the meter's client toward agents.
func (p *Proxy) initUpstream() {
	base := p.Dialer
	if base == nil {
		base = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	}
	dial := refuseAll
	if p.Guard != nil {
		dial = p.Guard.DialContext(base)
	}
	p.fast = &fastClients{dial: dial}
	now := time.Now
	if p.Clock != nil {
		now = p.Clock.Now
	}
	p.outliers = newOutliers(now)
	p.upstream = &http.Client{
		Transport: &http.Transport{
			// A proxy from the environment would be dialled instead of the
			// agent, and the guard would judge the wrong address.
			Proxy:               nil,
			DialContext:         dial,
			MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: false,
			// A request is written once (a large body goes past the buffer);
			// a smaller write buffer is memory every held stream saves.
			WriteBufferSize: 1024,
			ReadBufferSize:  2048,
		},
		// A redirect could lead anywhere, the meter's own network included.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refuseAll is the dialer of a Proxy wired without a Guard: a forgotten
// guard closes the way to every agent rather than opening the network.
func refuseAll(context.Context, string, string) (net.Conn, error) {
	return nil, &agentmarket.Error{Kind: agentmarket.Invalid, Code: "url_refused", Message: "the meter has no address guard (Proxy.Guard): it connects to no agent"}
}

// send sends req to cl's agent. A connection the guard refused and an
// answer that redirects come back as the buyer's errors; any other
// failure is the transport's, for upstreamErr.
func (p *Proxy) send(cl *call, req *http.Request) (*http.Response, error) {
	if cl != nil && cl.routed != nil && !cl.routed.tried {
		return p.sendRouted(cl, req) // balance.go
	}
	ep := endpointOf(cl)
	pass, err := p.outliers.admit(ep)
	if err != nil {
		return nil, err
	}
	res, err := p.upstream.Do(req)
	p.outliers.report(ep, pass, outcomeOf(req.Context(), res, err))
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
			return nil, p.refused(req.Context(), cl, req.URL.Redacted(), err)
		}
		return nil, err
	}
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		res.Body.Close()
		return nil, rpcErr(CodeUpstreamInvalid, http.StatusOK,
			fmt.Sprintf("the agent answered HTTP %d, a redirect; the meter does not follow an agent's redirects", res.StatusCode))
	}
	return res, nil
}

// endpointOf is the endpoint a call goes to, whose failures are counted
// (eject.go); "" when it has none.
func endpointOf(cl *call) string {
	if cl == nil {
		return ""
	}
	return cl.iface.URL
}

// outcomeOf is what a round trip showed of the agent: a transport error
// that is the caller's (it left) or the meter's (the guard refused) says
// nothing of it; any other is a failure, as is an HTTP 5xx.
func outcomeOf(ctx context.Context, res *http.Response, err error) outcome {
	var ae *agentmarket.Error
	switch {
	case err == nil && res.StatusCode >= 500:
		return failed
	case err == nil, errors.Is(err, fasthttp.ErrBodyTooLarge):
		return answered
	case errors.Is(ctx.Err(), context.Canceled), errors.As(err, &ae) && ae.Kind == agentmarket.Invalid:
		return neutral
	}
	return failed
}

// refused is the buyer's error for a connection the guard refused. The
// address is for the operator's log only: the buyer must not learn what
// the seller's name resolves to inside.
func (p *Proxy) refused(ctx context.Context, cl *call, url string, err error) error {
	p.Logger.WarnContext(ctx, "agent address refused by the SSRF guard", "listing", cl.target.ListingID, "url", url, "err", err)
	return rpcErr(CodeUpstreamRefused, http.StatusOK,
		"the meter does not connect to this agent's address (loopback, private, link-local and cloud metadata addresses are refused); the seller must list a public endpoint")
}
