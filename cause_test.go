package agentmarket_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
)

// TestCause reads real failures (on loopback) and checks that what Cause
// says names the failure and never the address.
func TestCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, refused := net.Dial("tcp", addr)

	// A server that accepts and hangs up at once.
	hangup, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hangup.Close()
	go func() {
		for {
			c, err := hangup.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", hangup.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, closed := c.Read(make([]byte, 1))
	c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, timedOut := (&net.Dialer{}).DialContext(ctx, "tcp", hangup.Addr().String())

	notFound := &net.DNSError{Err: "no such host", Name: "ch.internal.example", IsNotFound: true}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", refused, "connection refused"},
		{"wrapped", fmt.Errorf("clickhouse: %w", refused), "connection refused"},
		{"closed", closed, "connection closed by the server"},
		{"deadline", timedOut, "timed out"},
		{"no such host", &net.OpError{Op: "dial", Net: "tcp", Err: notFound}, "host not found"},
		{"not a network error", errors.New("syntax error near 127.0.0.1"), ""},
		{"nil", nil, ""},
	} {
		got := agentmarket.Cause(tc.err)
		if got != tc.want {
			t.Errorf("%s: Cause(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
		if strings.Contains(got, "127.0.0.1") || strings.Contains(got, "example") {
			t.Errorf("%s: Cause leaks an address: %q", tc.name, got)
		}
	}
}
