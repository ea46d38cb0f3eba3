package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// TestKillSwitchPages: a buyer org's admin switches a key off from the
// keys page; the keys page shows it switched off with the reason, the kill
// switches page lists it with a lift form; another org can neither see nor
// lift it; lifting moves it to the lifted ones. A seller switches its
// listing off: its listing page says so, a buyer's view of the listing
// does not.
func TestKillSwitchPages(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	seller, buyer, l, buyerActor := s.sellerAndBuyer(t)
	k, _, err := s.accounts.CreateKey(context.Background(), buyerActor, contracts.KeyInput{Name: "orchestrator", Role: agentmarket.RoleBuyer})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, buyer.get("/keys"), `href="/kill-switches?scope=api_key&amp;target=`+k.ID+`"`)
	p := buyer.get("/kill-switches?scope=api_key&target=" + k.ID)
	mustContain(t, p, `value="`+k.ID+`"`, `<option value="api_key" selected>`)
	if p := buyer.post("/kill-switches", url.Values{"scope": {"api_key"}, "target_id": {k.ID}, "reason": {"it loops on the agent"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("switch the key off: %d %s", p.Status, p.Body)
	}
	// Who set it, by name: the signed-in user's e-mail, not "user:usr_…".
	mustContain(t, buyer.get("/keys"), `data-switched-off`, `it loops on the agent`, `Switched off by it@globex.example`)
	mustContain(t, buyer.get("/kill-switches"), `An API key <bdi>orchestrator</bdi>`, `<bdi>it@globex.example</bdi>`)
	mustNotContain(t, buyer.get("/keys"), `user:usr_`)
	mustNotContain(t, buyer.get("/kill-switches"), `user:usr_`)
	on, err := s.store.ListSwitches(context.Background(), buyerActor.OrgID, true, 10)
	if err != nil || len(on) != 1 {
		t.Fatalf("switches on: %v %v", on, err)
	}
	mustContain(t, buyer.get("/kill-switches"), `data-switch="`+on[0].ID+`"`, `action="/kill-switches/`+on[0].ID+`/lift"`)

	mustNotContain(t, seller.get("/kill-switches"), on[0].ID)
	if p := seller.post("/kill-switches/"+on[0].ID+"/lift", url.Values{"reason": {"x"}}); p.Status != http.StatusNotFound {
		t.Errorf("another org lifting the switch: %d, want 404", p.Status)
	}
	if p := buyer.post("/kill-switches/"+on[0].ID+"/lift", url.Values{"reason": {"fixed"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("lift: %d %s", p.Status, p.Body)
	}
	mustNotContain(t, buyer.get("/keys"), `data-switched-off`)
	mustContain(t, buyer.get("/kill-switches"), `No kill switch is on.`, `fixed`)

	if p := seller.post("/kill-switches", url.Values{"scope": {"listing"}, "target_id": {l.ID}, "reason": {"redeploying"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("the seller switching its listing off: %d %s", p.Status, p.Body)
	}
	mustContain(t, seller.get("/listings/"+l.ID), `data-switched-off`, `redeploying`, `by seller@acme.example`)
	mustNotContain(t, buyer.get("/listings/"+l.ID), `data-switched-off`)
}

// TestKillSwitchFormRefused: a switch-off form sent incomplete, or a lift
// without a reason, comes back as the page with what to correct (422),
// the values kept, not as an error page.
func TestKillSwitchFormRefused(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	_, buyer, _, buyerActor := s.sellerAndBuyer(t)
	k, _, err := s.accounts.CreateKey(context.Background(), buyerActor, contracts.KeyInput{Name: "orchestrator", Role: agentmarket.RoleBuyer})
	if err != nil {
		t.Fatal(err)
	}
	p := buyer.post("/kill-switches", url.Values{"scope": {"api_key"}, "target_id": {k.ID}, "reason": {""}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a switch without a reason: %d, want 422", p.Status)
	}
	mustContain(t, p, `id="error-summary"`, `href="#reason"`, `reason is required`, `value="`+k.ID+`"`, `<option value="api_key" selected>`)
	mustNotContain(t, p, `That did not work`)
	if p := buyer.post("/kill-switches", url.Values{"scope": {"api_key"}, "target_id": {k.ID}, "reason": {"loops"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("switch the key off: %d %s", p.Status, p.Body)
	}
	on, err := s.store.ListSwitches(context.Background(), buyerActor.OrgID, true, 10)
	if err != nil || len(on) != 1 {
		t.Fatalf("switches on: %v %v", on, err)
	}
	p = buyer.post("/kill-switches/"+on[0].ID+"/lift", url.Values{"reason": {""}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a lift without a reason: %d, want 422", p.Status)
	}
	mustContain(t, p, `id="error-summary"`, `data-switch="`+on[0].ID+`"`)
	mustNotContain(t, p, `That did not work`)
}
