package stripe_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
)

// TestPing: stripe-mock answers with a test-mode balance; a refused key
// and an unreachable API each say so, without the address.
func TestPing(t *testing.T) {
	ctx := context.Background()
	t.Run("stripe-mock", func(t *testing.T) {
		p, _ := mockProvider(t)
		got, err := p.Ping(ctx)
		if err != nil || got != "Stripe (test mode)" {
			t.Fatalf("Ping = %q, %v", got, err)
		}
	})
	t.Run("key refused", func(t *testing.T) {
		p, _ := fakeStripe(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`))
		})
		_, err := p.Ping(ctx)
		if agentmarket.KindOf(err) != agentmarket.Unavailable || !strings.Contains(err.Error(), "refused the secret key (HTTP 401)") {
			t.Fatalf("Ping = %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		ln.Close()
		p, _ := fakeProvider(t, base, -1)
		_, err = p.Ping(ctx)
		var ae *agentmarket.Error
		if !errors.As(err, &ae) || ae.Message != "Stripe could not be reached: connection refused" {
			t.Fatalf("Ping = %v", err)
		}
	})
}
