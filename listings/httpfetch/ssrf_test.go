package httpfetch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// No test in this file sends a packet anywhere but loopback, even with a
// broken guard: see helpers_test.go.

// Literal IP hosts are refused up front, before any dial. The transport
// fails the test if it is asked to dial at all.
func TestFetchCardRefusesLiteralAddresses(t *testing.T) {
	srv := agentServer(t, "/.well-known/agent-card.json")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	tests := []struct{ url, wantMsg string }{
		{srv.URL, "refusing to fetch from 127.0.0.1:" + port + ": 127.0.0.1 is a loopback address"},
		{"http://[::1]:" + port + "/", "::1 is a loopback address"},
		{"http://10.0.0.1/", "refusing to fetch from 10.0.0.1: 10.0.0.1 is a private address"},
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254 is a cloud metadata address"},
		{"http://[fd00:ec2::254]/", "fd00:ec2::254 is a cloud metadata address"},
		{"http://[::ffff:10.0.0.1]/", "::ffff:10.0.0.1 is an IPv4-mapped address of 10.0.0.1, which is a private address"},
		{"http://[::ffff:a9fe:a9fe]/", "IPv4-mapped address of 169.254.169.254"},
		{"https://192.168.0.1:8443/card.json", "192.168.0.1 is a private address"},
		{"http://0.0.0.0:" + port + "/", "0.0.0.0 is the unspecified address"},
		{"http://[::]:" + port + "/", ":: is the unspecified address"},
		{"http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address"},
		{"http://[fe80::1%25eth0]/", "fe80::1%eth0 is a link-local address"},
		{"http://[64:ff9b::a9fe:a9fe]/", "NAT64 address embedding 169.254.169.254"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			f := &httpfetch.Fetcher{Transport: noDialTransport(t)} // no Allow
			_, err := f.FetchCard(context.Background(), tt.url, "")
			wantFetchError(t, err, "card_url_refused", tt.wantMsg)
			// The guard's own error stays reachable as the cause.
			var outer *agentmarket.Error
			if errors.As(err, &outer) && agentmarket.CodeOf(outer.Err) != "url_refused" {
				t.Errorf("cause = %v, want the guard's url_refused error", outer.Err)
			}
		})
	}
	if hits := srv.requests(); len(hits) != 0 {
		t.Errorf("server saw %v, want no request", hits)
	}
}

// With the default transport and no Allow, a loopback server stays
// unreachable (loopback is safe to try for real).
func TestFetchCardDefaultTransportRefusesLoopback(t *testing.T) {
	srv := agentServer(t, "/.well-known/agent-card.json")
	f := &httpfetch.Fetcher{}
	_, err := f.FetchCard(context.Background(), srv.URL, "")
	wantFetchError(t, err, "card_url_refused", "127.0.0.1 is a loopback address")
	if hits := srv.requests(); len(hits) != 0 {
		t.Errorf("server saw %v, want no request", hits)
	}
}

// Hostnames are judged by the address they resolve to, at dial time: the
// fetcher cannot know it up front, and checking at connect is what defeats
// DNS rebinding.
func TestFetchCardRefusesHostnamesAtDialTime(t *testing.T) {
	srv := agentServer(t, "/.well-known/agent-card.json")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dns := httpfetchtest.NewDNS(map[string]string{
		"intranet.test": "10.0.0.1",
		"metadata.test": "169.254.169.254",
		"imds6.test":    "fd00:ec2::254",
		"mapped.test":   "::ffff:10.0.0.1",
		"mixed.test":    "10.0.0.1 192.168.1.1",
		"agent.test":    "127.0.0.1",
	})
	tests := []struct {
		url     string
		wantMsg string
	}{
		{"http://intranet.test/", "refusing to connect to intranet.test: 10.0.0.1 is a private address"},
		{"http://metadata.test/latest/meta-data", "refusing to connect to metadata.test: 169.254.169.254 is a cloud metadata address"},
		{"http://imds6.test/", "fd00:ec2::254 is a cloud metadata address"},
		{"http://mapped.test/", "10.0.0.1"},
		{"https://mixed.test/", "10.0.0.1 is a private address"},
		// Loopback names reach a real server if the guard fails, which is
		// harmless, and the server then reports the request.
		{"http://agent.test:" + port + "/", "refusing to connect to agent.test:" + port + ": 127.0.0.1 is a loopback address"},
		{"http://localhost:" + port + "/", "127.0.0.1 is a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			g := httpfetch.Guard{} // no Allow
			f := &httpfetch.Fetcher{Guard: g, Transport: guardedTransport(t, g, dns)}
			_, err := f.FetchCard(context.Background(), tt.url, "")
			wantFetchError(t, err, "card_url_refused", tt.wantMsg)
		})
	}
	if hits := srv.requests(); len(hits) != 0 {
		t.Errorf("server saw %v, want no request", hits)
	}
}

// The same resolution path reaches an allowed address: the refusals above
// are the guard's doing, not a broken resolver's. (The default transport,
// on the Fetcher's own base dialer.)
func TestFetchCardAllowedHostname(t *testing.T) {
	srv := agentServer(t, "/.well-known/agent-card.json")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dns := httpfetchtest.NewDNS(map[string]string{"agent.test": "127.0.0.1"})
	f := &httpfetch.Fetcher{Guard: loopback(t), Dialer: httpfetchtest.Dialer(t, dns)}
	got, err := f.FetchCard(context.Background(), "http://agent.test:"+port, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://agent.test:" + port + "/.well-known/agent-card.json"; got.URL != want || string(got.Body) != card {
		t.Errorf("got %s %q, want %s %q", got.URL, got.Body, want, card)
	}
}

// Each redirect hop is checked again: a public card URL must not bounce
// the fetcher into the private network.
func TestFetchCardRefusesRedirectsToPrivateAddresses(t *testing.T) {
	dns := httpfetchtest.NewDNS(map[string]string{"intranet.test": "10.0.0.1"})
	tests := []struct{ location, wantMsg string }{
		{"http://10.0.0.1/card.json", "redirected to http://10.0.0.1/card.json: refusing to fetch from 10.0.0.1: 10.0.0.1 is a private address"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"},
		{"http://[::ffff:10.0.0.1]/", "IPv4-mapped address of 10.0.0.1"},
		{"http://[fd00:ec2::254]/", "fd00:ec2::254 is a cloud metadata address"},
		{"http://intranet.test/card.json", "refusing to connect to intranet.test: 10.0.0.1 is a private address"},
	}
	for _, tt := range tests {
		t.Run(tt.location, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tt.location, http.StatusFound)
			})
			g := loopback(t) // the first hop is allowed, the second is not
			f := &httpfetch.Fetcher{Guard: g, Transport: guardedTransport(t, g, dns)}
			_, err := f.FetchCard(context.Background(), srv.URL+"/card.json", "")
			wantFetchError(t, err, "card_url_refused", tt.wantMsg)
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Error() = %q, want it to carry the message", err.Error())
			}
		})
	}
}
