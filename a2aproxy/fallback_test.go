package a2aproxy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/metering"
)

// TestFallbackStage: a send whose listing's agent answers 503 naming no
// task goes to the subscription's first fallback whose admission takes it
// (the first is not published; the second serves: its contract, its usage row,
// its task binding), the answer naming it in AgentMarket-Served-By; the
// primary's attempt is its own row, an error billed nothing. GetTask of
// that task through the primary's endpoint reaches the fallback, for its
// owner only. A 503 that names a task, and a call that is not a send,
// never fall back.
func TestFallbackStage(t *testing.T) {
	fb := startCoreAgent(t, "1.0")
	var namesTask atomic.Bool
	var primaryCalls atomic.Int64
	primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		primaryCalls.Add(1)
		if namesTask.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"overloaded","data":{"taskId":"task-p"}}}`))
			return
		}
		http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(primary.Close)
	p, m := newCoreProxy(t, fb, nil)
	fbCard := *m.listing.Card
	m.others = map[string]*a2aproxy.Target{"lst_fb": {ListingID: "lst_fb", SellerOrgID: "org_seller_fb", Published: true, Card: &fbCard, CardJSON: []byte(`{}`)},
		// The first fallback is not published: its admission refuses, the next one serves.
		"lst_off": {ListingID: "lst_off", SellerOrgID: "org_seller_fb", Published: false, Card: &fbCard, CardJSON: []byte(`{}`)}}
	primaryCard := *m.listing.Card
	primaryCard.Interfaces = []agentcard.Interface{{URL: primary.URL, Binding: agentcard.BindingJSONRPC, ProtocolVersion: "1.0"}}
	m.listing.Card = &primaryCard
	m.fallbacks = []string{"lst_off", "lst_fb"}
	app, _ := mountCore(p, m)

	res, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	if res.Header.Get(a2aproxy.ServedByHeader) != "lst_fb" || !strings.Contains(body, `"id":"task-1"`) ||
		!strings.Contains(body, `"inputTokens":12`) || !strings.Contains(body, `"servedBy":"lst_fb"`) {
		t.Fatalf("a send the primary refused: served by %q: %s; want the fallback's task, its usage extension naming it beside the agent's report",
			res.Header.Get(a2aproxy.ServedByHeader), body)
	}
	rows := m.usage()
	if len(rows) != 2 {
		t.Fatalf("%d usage rows, want the primary's attempt and the fallback's call: %+v", len(rows), rows)
	}
	byListing := map[string]metering.Usage{rows[0].ListingID: rows[0], rows[1].ListingID: rows[1]}
	if u := byListing["lst_core"]; u.ErrorCode == 0 || u.CostMicros != 0 || u.Pending != nil || u.Binds != nil {
		t.Errorf("the primary's row: %+v, want an error billed nothing", u)
	}
	if u := byListing["lst_fb"]; u.ErrorCode != 0 || u.ContractID != "ctr_org_acme_lst_fb" || u.SellerOrgID != "org_seller_fb" ||
		u.TaskID != "task-1" || u.Binds == nil || u.Pending == nil || u.Tags != `{"fallback_for":"lst_core"}` {
		t.Errorf("the fallback's row: %+v, want its contract, seller, task, binding and bill, tagged fallback_for the primary", u)
	}
	if p.Fallbacks() != 1 {
		t.Errorf("Fallbacks() = %d, want 1", p.Fallbacks())
	}

	getTask := `{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"task-1"}}`
	res, body = do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", getTask)
	if res.Header.Get(a2aproxy.ServedByHeader) != "lst_fb" || !strings.Contains(body, `"id":"task-1"`) || fb.requests()[1].method != "GetTask" {
		t.Errorf("GetTask of the fallback's task through the primary: served by %q: %s", res.Header.Get(a2aproxy.ServedByHeader), body)
	}
	if _, body = do(t, app, "POST", "/a2a/lst_core", "amk_initech", "1.0", getTask); !strings.Contains(body, "-32001") || len(fb.requests()) != 2 {
		t.Errorf("another org's GetTask of the task: %s, want TaskNotFound", body)
	}

	// An HTTP+JSON buyer alike, answered in its binding.
	res, body = do(t, app, "POST", "/a2a/lst_core/message:send", "amk_acme", "1.0", `{"message":{"messageId":"m-r","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	if res.StatusCode != 200 || res.Header.Get(a2aproxy.ServedByHeader) != "lst_fb" || !strings.HasPrefix(body, `{"task":{"id":"task-3"`) ||
		!strings.Contains(body, `"servedBy":"lst_fb"`) {
		t.Errorf("an HTTP+JSON send the primary refused: %d served by %q: %s", res.StatusCode, res.Header.Get(a2aproxy.ServedByHeader), body)
	}

	namesTask.Store(true)
	before, atFallback := primaryCalls.Load(), len(fb.requests())
	res, body = do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	if res.Header.Get(a2aproxy.ServedByHeader) != "lst_core" || len(fb.requests()) != atFallback || primaryCalls.Load() != before+1 {
		t.Errorf("a 503 naming a task: served by %q, %d calls at the fallback: %s", res.Header.Get(a2aproxy.ServedByHeader), len(fb.requests())-atFallback, body)
	}
	namesTask.Store(false)
	res, body = do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", `{"jsonrpc":"2.0","id":9,"method":"GetExtendedAgentCard","params":{}}`)
	if res.Header.Get(a2aproxy.ServedByHeader) != "lst_core" || len(fb.requests()) != atFallback {
		t.Errorf("a call that starts no work: served by %q: %s", res.Header.Get(a2aproxy.ServedByHeader), body)
	}
}
