package httpfetch_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// rawServer accepts connections on loopback and hands each to serve.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// TestFetchCardCauses: a failed fetch says why, in words a seller can act
// on, under the stable codes; every failure is a real one on loopback.
func TestFetchCardCauses(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := closed.Addr().String()
	closed.Close() // nothing listens there now

	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		close(held)
		for c := range held {
			c.Close()
		}
	})
	silent := rawServer(t, func(c net.Conn) { held <- c }) // takes the connection, never answers
	hangup := rawServer(t, func(c net.Conn) { c.Close() })
	notHTTP := rawServer(t, func(c net.Conn) {
		c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n"))
		c.Close()
	})

	tlsAgent := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(card)) }))
	tlsAgent.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	tlsAgent.StartTLS()
	t.Cleanup(tlsAgent.Close)
	plain := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bad-location":
			w.Header().Set("Location", "http://[::1")
			w.WriteHeader(http.StatusFound)
		case "/no-location":
			w.WriteHeader(http.StatusFound)
		case "/private":
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.Write([]byte(card))
		}
	})
	tlsPort := tlsAgent.Listener.Addr().(*net.TCPAddr).Port
	plainPort := plain.Listener.Addr().(*net.TCPAddr).Port

	// Names resolve through the in-memory DNS: agent.test to loopback,
	// anything else to nothing.
	dns := httpfetchtest.NewDNS(map[string]string{"agent.test": "127.0.0.1"})
	guard := httpfetchtest.Loopback(dns)
	// A transport that trusts the TLS agent's certificate (which names
	// example.com and 127.0.0.1, not agent.test), under the same guard.
	roots := x509.NewCertPool()
	roots.AddCert(tlsAgent.Certificate())
	trusting := guardedTransport(t, guard, dns)
	trusting.TLSClientConfig = tlsAgent.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	trusting.TLSClientConfig.RootCAs = roots

	tests := []struct {
		name      string
		url       string
		transport http.RoundTripper
		code      string
		want      []string
	}{
		{"connection refused", "http://" + refusedAddr + "/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{"connection refused by " + refusedAddr, "nothing listens on that port"}},
		{"no answer", "http://" + silent + "/card.json", nil, httpfetch.CodeTimeout,
			[]string{"no answer from " + silent + " within 300ms", "timed out waiting for the answer"}},
		{"untrusted certificate", tlsAgent.URL + "/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{"TLS certificate of " + tlsAgent.Listener.Addr().String() + " is not trusted", "unknown authority"}},
		{"certificate for another name", "https://agent.test:" + strconv.Itoa(tlsPort) + "/card.json", trusting, httpfetch.CodeFetchFailed,
			[]string{"TLS certificate of agent.test:" + strconv.Itoa(tlsPort) + " is not valid for that name", "not agent.test"}},
		{"https to a plain HTTP server", "https://agent.test:" + strconv.Itoa(plainPort) + "/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{"agent.test:" + strconv.Itoa(plainPort) + " answered in plain HTTP to an https:// URL", "use http://"}},
		{"https to a server that speaks neither", "https://" + notHTTP + "/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{notHTTP + " did not answer in TLS"}},
		{"unknown host", "http://nowhere.test/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{"host nowhere.test not found", "no DNS record"}},
		{"redirect to a malformed URL", plain.URL + "/bad-location", nil, httpfetch.CodeFetchFailed,
			[]string{"redirect whose Location header is not a valid URL"}},
		{"redirect without Location", plain.URL + "/no-location", nil, httpfetch.CodeStatus,
			[]string{"302 Found", "without a Location header"}},
		{"card behind credentials", plain.URL + "/private", nil, httpfetch.CodeStatus,
			[]string{"401 Unauthorized", "readable without credentials"}},
		{"hang-up", "http://" + hangup + "/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{hangup + " closed the connection without answering"}},
		{"not HTTP", "http://" + notHTTP + "/card.json", nil, httpfetch.CodeFetchFailed,
			[]string{notHTTP + " did not answer in HTTP"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Short only where the timeout is the cause: a handshake on a
			// loaded machine may take longer than 300ms, and its refusal
			// must not turn into a timeout (a CI run saw it).
			timeout := 10 * time.Second
			if tt.code == httpfetch.CodeTimeout {
				timeout = 300 * time.Millisecond
			}
			f := &httpfetch.Fetcher{Guard: guard, Dialer: httpfetchtest.Dialer(t, dns), Timeout: timeout, Transport: tt.transport}
			_, err := f.FetchCard(context.Background(), tt.url, "")
			wantFetchError(t, err, tt.code, tt.want...)
			var e *agentmarket.Error
			if errors.As(err, &e) && strings.Contains(tt.url, ".test") && strings.Contains(e.Message, "127.0.0.1") {
				t.Errorf("the message names the address a name resolved to: %s", e.Message)
			}
		})
	}
}
