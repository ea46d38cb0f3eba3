package contracts_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// refuseHost refuses one host, as the SSRF guard refuses a private one.
type refuseHost string

func (r refuseHost) CheckHost(_ context.Context, host string) error {
	if host == string(r) {
		return agentmarket.Errorf(agentmarket.Invalid, "url_refused", "host %q is private", host)
	}
	return nil
}

// TestWebhookRule: https to a host the guard accepts; plain http only to
// an allowed address; the guard has the last word.
func TestWebhookRule(t *testing.T) {
	rule := contracts.WebhookRule{Hosts: refuseHost("internal.example"), Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	for _, tc := range []struct {
		url  string
		want string // the refusal's code, "" when accepted
	}{
		{"https://hooks.example/alerts", ""},
		{"http://hooks.example/alerts", "webhook_refused"},
		{"http://127.0.0.1:8080/alerts", ""},
		{"http://10.0.0.1/alerts", "webhook_refused"},
		{"https://internal.example/alerts", "url_refused"},
		{"/alerts", "webhook_refused"},
		{"::not a url", "webhook_refused"},
	} {
		err := rule.CheckWebhook(context.Background(), tc.url)
		var ae *agentmarket.Error
		if errors.As(err, &ae) && ae.Kind != agentmarket.Invalid {
			t.Errorf("%s: kind %s, want invalid", tc.url, ae.Kind)
		}
		got := ""
		if err != nil {
			got = agentmarket.CodeOf(err)
		}
		if got != tc.want {
			t.Errorf("%s: code %q (%v), want %q", tc.url, got, err, tc.want)
		}
	}
}
