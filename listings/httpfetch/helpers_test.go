package httpfetch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// Tests that name a refused non-loopback address dial through the helpers
// below and httpfetchtest, which cannot leave loopback whatever the guard
// decides.

// loopback is the Allow list of tests that talk to httptest servers.
func loopback(t *testing.T) httpfetch.Guard {
	t.Helper()
	allow, err := httpfetch.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	return httpfetch.Guard{Allow: allow}
}

// guardedTransport dials through g, resolving names with dns, and never
// connects outside loopback.
func guardedTransport(t *testing.T, g httpfetch.Guard, dns *httpfetchtest.DNS) *http.Transport {
	tr := &http.Transport{DialContext: g.DialContext(httpfetchtest.Dialer(t, dns))}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// noDialTransport fails the test if anything is dialled at all: for URLs
// the fetcher must refuse before any dial.
func noDialTransport(t *testing.T) *http.Transport {
	return &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			t.Errorf("dialled %s %s; the fetcher should have refused the URL up front", network, addr)
			return nil, errors.New("test: dialling is not allowed here")
		},
	}
}

// server is an httptest server on loopback that counts its requests.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.URL.Path)
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hits...)
}

// wantFetchError checks that err is the fetcher's field-level error with
// the given code and a message containing each of parts.
func wantFetchError(t *testing.T, err error, code string, parts ...string) {
	t.Helper()
	var e *agentmarket.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *agentmarket.Error %s", err, err, code)
	}
	if e.Kind != agentmarket.Invalid || e.Code != code {
		t.Fatalf("err = %s/%s %q, want %s/%s", e.Kind, e.Code, e.Message, agentmarket.Invalid, code)
	}
	if len(e.Fields) != 1 || e.Fields[0].Field != "card_url" || e.Fields[0].Rule == "" || e.Fields[0].Message != e.Message {
		t.Errorf("Fields = %+v, want one card_url field error carrying the message", e.Fields)
	}
	for _, p := range parts {
		if !strings.Contains(e.Message, p) {
			t.Errorf("message %q does not contain %q", e.Message, p)
		}
	}
}
