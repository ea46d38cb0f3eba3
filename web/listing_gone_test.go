package web_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestBuyerPageWithListingGone: a buyer whose subscribed agent left the
// catalog (the operator suspended it, its seller retired it) still gets
// its subscriptions page, which says so in words, and offers no link to
// the listing page that would answer "not found" (the README's tour ends
// by suspending the listing it subscribed to: the page answered 404).
func TestBuyerPageWithListingGone(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	seller, buyer, l, _ := s.sellerAndBuyer(t)
	other := s.list(t, s.actor(t, "seller@acme.example"), "translator-v1.0.json", pricing)
	for _, id := range []string{l.ID, other.ID} {
		if p := buyer.post("/listings/"+id+"/subscribe", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("subscribe = %d %s", p.Status, excerpt(p.Body))
		}
	}

	op := s.browser(t)
	op.signinKey(s.operatorKey)
	if p := op.post("/operator/listings/"+l.ID+"/status", url.Values{"status": {"suspended"}, "from": {"published"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("suspend = %d %s", p.Status, excerpt(p.Body))
	}
	p := buyer.get("/buyer")
	if p.Status != http.StatusOK {
		t.Fatalf("/buyer with a suspended listing = %d %s", p.Status, excerpt(p.Body))
	}
	mustContain(t, p, "no longer in the catalog", "Translator")
	mustNotContain(t, p, `href="/listings/`+l.ID+`"`)

	if p := seller.post("/seller/listings/"+other.ID+"/status", url.Values{"status": {"retired"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("retire = %d %s", p.Status, excerpt(p.Body))
	}
	p = buyer.get("/buyer")
	if p.Status != http.StatusOK {
		t.Fatalf("/buyer with a retired listing = %d %s", p.Status, excerpt(p.Body))
	}
	mustNotContain(t, p, `href="/listings/`+other.ID+`"`)
}

// TestSubscribeRefusedSaysWhy: a Subscribe sent from a page loaded before
// the org subscribed (another tab) is refused, and the page that answers
// says why, though it offers no form any more.
func TestSubscribeRefusedSaysWhy(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	_, buyer, l, _ := s.sellerAndBuyer(t)
	mustContain(t, buyer.get("/listings/"+l.ID), "Subscribe")
	if p := buyer.post("/listings/"+l.ID+"/subscribe", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("subscribe = %d %s", p.Status, excerpt(p.Body))
	}
	p := buyer.post("/listings/"+l.ID+"/subscribe", nil)
	if p.Status != http.StatusConflict {
		t.Fatalf("second subscribe = %d", p.Status)
	}
	mustContain(t, p, `id="error-summary"`, "already")
}
