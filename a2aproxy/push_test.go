package a2aproxy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

// TestPushURLRules: a buyer's webhook must be https, or plain http inside
// the allowed ranges; loopback, private, link-local and metadata
// addresses are refused unless allowed. Nothing here is dialled.
func TestPushURLRules(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	strict := &a2aproxy.Push{}
	tests := []struct {
		name  string
		push  *a2aproxy.Push
		url   string
		valid bool
		why   string
	}{
		{"private", strict, "https://10.0.0.1/hook", false, "private"},
		{"metadata", strict, "https://169.254.169.254/latest", false, "169.254.169.254"},
		{"loopback", strict, "https://127.0.0.1:8443/hook", false, "127.0.0.1"},
		{"ipv6 loopback", strict, "https://[::1]/hook", false, "::1"},
		{"mapped private", strict, "https://[::ffff:192.168.1.1]/hook", false, "192.168.1.1"},
		{"public https", strict, "https://93.184.216.34/hook", true, ""},
		{"public http", strict, "http://93.184.216.34/hook", false, "https"},
		{"allowed loopback over http", &a2aproxy.Push{Guard: httpfetch.Guard{Allow: allow}, Allow: allow}, "http://127.0.0.1:9/hook", true, ""},
		{"allowed range does not open others", &a2aproxy.Push{Guard: httpfetch.Guard{Allow: allow}, Allow: allow}, "http://10.0.0.1/hook", false, "private"},
		{"credentials in the URL", strict, "https://user:pw@93.184.216.34/hook", false, "credentials"},
		{"not http", strict, "ftp://93.184.216.34/hook", false, "scheme"},
		{"relative", strict, "/hook", false, "absolute"},
		{"empty", strict, "", false, "url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.push.Guard == nil {
				tt.push.Guard = httpfetch.Guard{}
			}
			err := tt.push.CheckPushURL(context.Background(), tt.url)
			if tt.valid {
				if err != nil {
					t.Fatalf("%s refused: %v", tt.url, err)
				}
				return
			}
			we, ok := err.(*wire.Error)
			if !ok || we.Code != wire.CodeInvalidParams || !strings.Contains(we.Message, tt.why) {
				t.Fatalf("%s: %v, want InvalidParams naming %q", tt.url, err, tt.why)
			}
		})
	}
}

// TestPushBackoff: delays double from the base, stay within the upper
// half of each step (jitter), and never pass the maximum.
func TestPushBackoff(t *testing.T) {
	ps := &a2aproxy.Push{Guard: httpfetch.Guard{}, RetryBase: 100 * time.Millisecond, RetryMax: 2 * time.Second}
	for n := 1; n <= 40; n++ {
		step := min(100*time.Millisecond<<min(n-1, 30), 2*time.Second)
		for range 50 {
			d := ps.Backoff(n)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: delay %s outside [%s, %s]", n, d, step/2, step)
			}
		}
	}
}

func TestNotificationVersion(t *testing.T) {
	for body, want := range map[string]wire.Version{
		`{"statusUpdate":{"taskId":"t"}}`:           wire.V10,
		`{"task":{"id":"t"}}`:                       wire.V10,
		`{"kind":"task","id":"t"}`:                  wire.V03,
		`{"kind":"status-update","taskId":"t"}`:     wire.V03,
		`{"id":"t","status":{"state":"completed"}}`: wire.V03,
	} {
		if got := a2aproxy.NotificationVersion([]byte(body)); got != want {
			t.Errorf("%s: %s, want %s", body, got, want)
		}
	}
}
