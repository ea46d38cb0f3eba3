package a2aproxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// guardedProxy is a Proxy (enough of one to reach agents) whose guard
// allows loopback, where the tests' agents listen, and whose dialer can
// reach nothing else.
func guardedProxy(t *testing.T, clock agentmarket.Clock) *Proxy {
	t.Helper()
	allow, err := httpfetch.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Guard: httpfetch.Guard{Allow: allow}, Dialer: httpfetchtest.Dialer(t, nil), Clock: clock, Logger: slog.New(slog.DiscardHandler)}
	p.initUpstream()
	return p
}

// countingAgent is an agent on loopback that counts what reaches it.
func countingAgent(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func sendTo(t *testing.T, p *Proxy, url string) error {
	t.Helper()
	cl := dialectCall(url, wire.V10, agentcard.BindingJSONRPC)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.send(cl, req)
	if err == nil {
		res.Body.Close()
	}
	return err
}

func wantRPCCode(t *testing.T, err error, code int, msgPart string) {
	t.Helper()
	re, ok := err.(*rpcError)
	if !ok || re.Code != code || !strings.Contains(re.Message, msgPart) {
		t.Fatalf("err = %#v, want JSON-RPC error %d containing %q", err, code, msgPart)
	}
}

// A Proxy wired without a guard connects to no agent: a forgotten wire
// closes the way rather than opening the marketplace's network.
func TestUnguardedProxyDialsNothing(t *testing.T) {
	srv, hits := countingAgent(t, func(w http.ResponseWriter, r *http.Request) {})
	p := &Proxy{Logger: slog.New(slog.DiscardHandler)}
	p.initUpstream()
	wantRPCCode(t, sendTo(t, p, srv.URL), CodeUpstreamRefused, "does not connect to this agent's address")
	if n := hits.Load(); n != 0 {
		t.Errorf("the agent got %d requests", n)
	}
}

// Without AGENTMARKET_FETCH_ALLOW_CIDRS (the zero Guard) a loopback agent
// is refused like any private address, and the buyer is not told the
// address.
func TestProxyRefusesLoopbackWithoutAllowance(t *testing.T) {
	srv, hits := countingAgent(t, func(w http.ResponseWriter, r *http.Request) {})
	p := &Proxy{Guard: httpfetch.Guard{}, Logger: slog.New(slog.DiscardHandler)}
	p.initUpstream()
	err := sendTo(t, p, srv.URL)
	wantRPCCode(t, err, CodeUpstreamRefused, "the seller must list a public endpoint")
	if strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the buyer's error names the address: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the agent got %d requests", n)
	}
}

// An agent's redirect is an error for the buyer, never followed: not to
// the meter's own network, not even to another path of the agent.
func TestProxyFollowsNoRedirect(t *testing.T) {
	inside, insideHits := countingAgent(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		agent, _ := countingAgent(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
				return
			}
			target := inside.URL + "/latest/meta-data/"
			if status == http.StatusTemporaryRedirect {
				target = "/elsewhere"
			}
			http.Redirect(w, r, target, status)
		})
		p := guardedProxy(t, agentmarket.SystemClock{})
		wantRPCCode(t, sendTo(t, p, agent.URL), CodeUpstreamInvalid, "a redirect; the meter does not follow")
	}
	if n := insideHits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}
