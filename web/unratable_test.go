package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestOperatorSeesUnratableContracts: a subscription whose plan is in a
// currency AgentMarket cannot rate (stored before currencies were
// checked) is listed for the operator on /operator/unratable, for the
// month that ended, with its agent, buyer, seller and why; other months
// say none is; only the operator sees the page.
func TestOperatorSeesUnratableContracts(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	sb := s.browser(t)
	sb.signup("Acme", "seller@acme.example")
	seller := s.actor(t, "seller@acme.example")
	l := s.list(t, seller, "summarizer-v0.3.json", pricing)
	b := s.browser(t)
	b.signup("Globex", "it@globex.example")
	c := s.subscribe(t, s.actor(t, "it@globex.example"), l.ID, nil)
	if err := s.db.DB.WithContext(context.Background()).Exec(`UPDATE listing_plans SET currency = 'zzz' WHERE listing_id = ?`, l.ID).Error; err != nil {
		t.Fatal(err)
	}
	for _, who := range []*browser{sb, b} {
		if p := who.get("/operator/unratable"); p.Status != http.StatusForbidden {
			t.Errorf("a non-operator's /operator/unratable = %d", p.Status)
		}
	}
	s.clock.Advance(20 * 24 * time.Hour) // June: May has ended

	op := s.browser(t)
	op.signinKey(s.operatorKey)
	mustContain(t, op.get("/operator"), `href="/operator/unratable"`)
	p := op.get("/operator/unratable")
	if p.Status != http.StatusOK {
		t.Fatalf("/operator/unratable = %d %s", p.Status, excerpt(p.Body))
	}
	mustContain(t, p, "Unratable subscriptions, 2026-05", `data-unratable="`+c.ID+`"`, "Summarizer", "Globex", "Acme",
		"currency &#34;zzz&#34; is not one AgentMarket can bill in")
	// The month in progress is rated up to now: the same subscription.
	mustContain(t, op.get("/operator/unratable?period=2026-06"), `data-unratable="`+c.ID+`"`)
	p = op.get("/operator/unratable?period=2026-04")
	mustContain(t, p, "Every subscription of 2026-04 can be rated.")
	mustNotContain(t, p, "data-unratable=")
	mustContain(t, op.get("/operator/unratable?period=May"), `id="period-error"`)
}
