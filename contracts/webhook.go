package contracts

import (
	"context"
	"net/netip"
	"net/url"

	"github.com/agentmarket/agentmarket"
)

// HostChecker refuses a host whose addresses a webhook may not reach (the
// SSRF guard, listings/httpfetch.Guard).
type HostChecker interface {
	CheckHost(ctx context.Context, host string) error
}

// WebhookRule judges an org's alert webhook as the meter judges push
// webhooks: https to a public address; plain http, and private addresses,
// only in Allow (AGENTMARKET_FETCH_ALLOW_CIDRS).
type WebhookRule struct {
	Hosts HostChecker
	Allow []netip.Prefix
}

var _ URLChecker = WebhookRule{}

// CheckWebhook implements URLChecker.
func (w WebhookRule) CheckWebhook(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return agentmarket.Errorf(agentmarket.Invalid, "webhook_refused", "%q is not an absolute URL", raw)
	}
	if u.Scheme != "https" {
		ip, err := netip.ParseAddr(u.Hostname())
		allowed := false
		for _, p := range w.Allow {
			allowed = allowed || err == nil && p.Contains(ip)
		}
		if !allowed {
			return agentmarket.Errorf(agentmarket.Invalid, "webhook_refused", "the webhook must use https")
		}
	}
	return w.Hosts.CheckHost(ctx, u.Hostname())
}
