package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/storetest"
	"github.com/agentmarket/agentmarket/metering"
)

const pricing = `{"currency":"usd","monthly_fee_micros":19000000,"input_tokens_per_million_micros":3000000,"per_task_micros":2000}`

func TestSignUpSignInSignOut(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.get("/signup")
	p := b.post("/signup", url.Values{"org_name": {"Acme Agents"}, "email": {"Owner@Acme.example"}, "password": {"correct horse battery"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("signup = %d %s", p.Status, excerpt(p.Body))
	}
	cookie := p.Header.Values("Set-Cookie")
	var sess string
	for _, c := range cookie {
		if strings.HasPrefix(c, "am_session=") {
			sess = c
		}
	}
	if !strings.Contains(sess, "HttpOnly") || !strings.Contains(sess, "SameSite=Lax") || strings.Contains(sess, "Secure") {
		t.Errorf("session cookie %q: want HttpOnly, SameSite=Lax, not Secure over plain HTTP", sess)
	}
	home := b.get("/")
	mustContain(t, home, "Acme Agents", "Sign out", `href="/seller"`, `href="/finance"`)
	if h := home.Header.Get("Content-Security-Policy"); !strings.Contains(h, "script-src 'self'") || home.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("signed-in page headers: CSP %q, Cache-Control %q", h, home.Header.Get("Cache-Control"))
	}

	// Behind a TLS-terminating proxy the cookies are Secure.
	req := httptest.NewRequest("GET", "http://market.test/signin", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	res, err := s.app.Test(req)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Header.Get("Set-Cookie"); !strings.Contains(c, "am_seed=") || !strings.Contains(c, "secure") && !strings.Contains(c, "Secure") {
		t.Errorf("cookie over HTTPS: %q, want Secure", c)
	}

	// The token in the cookie is not what is stored.
	tok := b.cookies["am_session"]
	if _, err := s.store.SessionByHash(context.Background(), tok); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("session found by its raw token: %v", err)
	}
	if got, err := s.store.SessionByHash(context.Background(), contracts.HashSessionToken(tok)); err != nil || got.Role != agentmarket.RoleAdmin {
		t.Fatalf("stored session = %+v, %v; want the admin's", got, err)
	}

	if p := b.post("/signout", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("signout = %d", p.Status)
	}
	mustNotContain(t, b.get("/"), "Acme Agents")
	// The old token no longer works, even if a copy was kept.
	old := s.browser(t)
	old.cookies["am_session"] = tok
	mustNotContain(t, old.get("/"), "Acme Agents")

	// Wrong password and unknown e-mail fail alike; the right one signs in.
	for _, c := range []struct{ email, pw string }{{"owner@acme.example", "wrong password!"}, {"nobody@acme.example", "correct horse battery"}} {
		b.get("/signin")
		p := b.post("/signin", url.Values{"email": {c.email}, "password": {c.pw}})
		if p.Status != http.StatusUnauthorized {
			t.Errorf("sign in %s/%s = %d", c.email, c.pw, p.Status)
		}
		mustContain(t, p, "The e-mail or the password is wrong.")
	}
	b.get("/signin?next=/keys")
	p = b.post("/signin", url.Values{"email": {"OWNER@acme.example "}, "password": {"correct horse battery"}, "next": {"/keys"}})
	if p.Status != http.StatusSeeOther || p.Location != "/keys" {
		t.Fatalf("sign in = %d → %q", p.Status, p.Location)
	}
	mustContain(t, b.get("/keys"), "first admin key")

	// Only local redirects after signing in.
	b.post("/signout", nil)
	b.get("/signin")
	p = b.post("/signin", url.Values{"email": {"owner@acme.example"}, "password": {"correct horse battery"}, "next": {"//evil.example/x"}})
	if p.Location != "/" {
		t.Errorf("next=//evil.example redirected to %q", p.Location)
	}
}

func TestSignupErrorsInline(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Acme", "a@acme.example")
	b.post("/signout", nil)
	b.get("/signup")
	p := b.post("/signup", url.Values{"org_name": {""}, "email": {"not-an-email"}, "password": {"short"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("status = %d", p.Status)
	}
	mustContain(t, p, `id="org_name-error"`, `id="email-error"`, `id="password-error"`, `aria-invalid="true"`, `href="#password"`,
		"at least 10 characters")
	b.get("/signup")
	p = b.post("/signup", url.Values{"org_name": {"Other"}, "email": {"a@acme.example"}, "password": {"correct horse battery"}})
	if p.Status != http.StatusConflict {
		t.Fatalf("taken e-mail = %d", p.Status)
	}
	mustContain(t, p, `id="email-error"`, "already registered")
	mustNotContain(t, p, "correct horse battery") // passwords are not sent back

	// A form carries raw bytes: names that are not UTF-8 or hold control
	// characters are refused beside their input.
	b.get("/signup")
	p = b.post("/signup", url.Values{"org_name": {"Evil\xffCorp"}, "email": {"e\x00@evil.example"}, "password": {"correct horse battery"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("bad bytes = %d", p.Status)
	}
	mustContain(t, p, `id="org_name-error"`, "org_name must be UTF-8 text", `id="email-error"`, "email must not contain control characters")
}

func TestCSRF(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Acme", "a@acme.example")
	for name, form := range map[string]url.Values{
		"missing": {"name": {"k"}},
		"wrong":   {"name": {"k"}, "csrf": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
	} {
		if p := b.do("POST", "/keys", form); p.Status != http.StatusForbidden {
			t.Errorf("%s token: POST /keys = %d, want 403", name, p.Status)
		}
	}
	// The token of another visitor (another seed) is refused too.
	other := s.browser(t)
	other.get("/signup")
	if p := b.do("POST", "/keys", url.Values{"name": {"k"}, "csrf": {other.csrf}}); p.Status != http.StatusForbidden {
		t.Errorf("another visitor's token: %d", p.Status)
	}
	// A cross-site origin is refused even with the right token.
	b.get("/keys")
	b.origin = "http://evil.example"
	if p := b.post("/keys", url.Values{"name": {"k"}}); p.Status != http.StatusForbidden {
		t.Errorf("cross-site POST = %d", p.Status)
	}
	b.origin = "http://market.test"
	if p := b.post("/keys", url.Values{"name": {"k"}, "role": {"buyer"}}); p.Status != http.StatusCreated {
		t.Errorf("same-site POST = %d %s", p.Status, excerpt(p.Body))
	}
	// Sign-in forms carry a token before there is a session.
	anon := s.browser(t)
	if p := anon.do("POST", "/signin", url.Values{"email": {"a@acme.example"}, "password": {"correct horse battery"}}); p.Status != http.StatusForbidden {
		t.Errorf("sign in without token = %d", p.Status)
	}
}

func TestPrivatePagesNeedSignIn(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	for _, path := range []string{"/seller", "/seller/new", "/buyer", "/keys", "/finance", "/finance/reconciliation", "/finance/invoices", "/operator"} {
		p := b.get(path)
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/signin?next=") {
			t.Errorf("GET %s signed out = %d → %q", path, p.Status, p.Location)
		}
	}
	// A finance key may read money but not sell, buy or operate.
	b.signup("Acme", "a@acme.example")
	admin := s.actor(t, "a@acme.example")
	_, secret, err := s.accounts.CreateKey(context.Background(), admin, contracts.KeyInput{Name: "books", Role: agentmarket.RoleFinance})
	if err != nil {
		t.Fatal(err)
	}
	f := s.browser(t)
	f.signinKey(secret)
	home := f.get("/")
	mustContain(t, home, `href="/finance"`)
	mustNotContain(t, home, `href="/seller"`, `href="/operator"`)
	for path, want := range map[string]int{"/finance": 200, "/seller": 403, "/seller/new": 403, "/operator": 403, "/finance/reconciliation": 200} {
		if p := f.get(path); p.Status != want {
			t.Errorf("finance key GET %s = %d, want %d", path, p.Status, want)
		}
	}
	// Revoking the key ends its session.
	keys, _ := s.accounts.ListKeys(context.Background(), admin)
	for _, k := range keys {
		if k.Name == "books" {
			s.accounts.RevokeKey(context.Background(), admin, k.ID)
		}
	}
	if p := f.get("/finance"); p.Status != http.StatusSeeOther {
		t.Errorf("revoked key's session: GET /finance = %d", p.Status)
	}
}

func TestSessionExpires(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Acme", "a@acme.example")
	s.clock.Advance(contracts.DefaultSessionTTL + time.Second)
	if p := b.get("/keys"); p.Status != http.StatusSeeOther {
		t.Errorf("expired session: GET /keys = %d", p.Status)
	}
}

func TestCatalogSearchAndListing(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	b := s.browser(t)
	b.signup("Acme Agents", "a@acme.example")
	seller := s.actor(t, "a@acme.example")
	sum := s.list(t, seller, "summarizer-v0.3.json", pricing)
	tr := s.list(t, seller, "translator-v1.0.json", `{"currency":"eur","monthly_fee_micros":5500000,"per_task_micros":12345}`)
	ex := s.list(t, seller, "extractor-v1.0.json", `{"currency":"jpy","monthly_fee_micros":1500000000}`)
	draft, err := s.catalog.Create(context.Background(), seller, listings.CreateInput{Card: storetest.Card(t, "summarizer-v0.3.json"), Pricing: []byte(pricing), Draft: true})
	if err != nil {
		t.Fatal(err)
	}

	visitor := s.browser(t)
	p := visitor.get("/")
	if p.Status != 200 {
		t.Fatalf("catalog = %d", p.Status)
	}
	mustContain(t, p, "3 agents", "/listings/"+sum.ID, "/listings/"+tr.ID, "/listings/"+ex.ID, "$19.00", "€5.50", "¥1,500", "><bdi>Acme Agents</bdi></a>",
		"+ €0.012345 per task", `<label for="q">`)
	mustNotContain(t, p, "/listings/"+draft.ID)

	for _, c := range []struct {
		query string
		want  []string
		not   []string
	}{
		{"q=one-page+brief", []string{sum.ID}, []string{tr.ID, ex.ID}},
		{"input_mode=application/pdf", []string{sum.ID}, []string{tr.ID}},
		{"streaming=true", []string{sum.ID}, nil},
		{"max_fee=10", []string{tr.ID}, []string{sum.ID}},
		{"max_fee=10&currency=usd", nil, []string{sum.ID, tr.ID, ex.ID}},
		{"sort=-price", []string{sum.ID}, nil},
		{"seller=" + seller.OrgID, []string{sum.ID, tr.ID, ex.ID, "Seller: <strong>Acme Agents</strong>"}, nil},
		{"seller=org_other", nil, []string{sum.ID, tr.ID, ex.ID}},
	} {
		p := visitor.get("/?" + c.query)
		if p.Status != 200 {
			t.Errorf("%s: status %d", c.query, p.Status)
		}
		for _, w := range c.want {
			if !strings.Contains(p.Body, w) {
				t.Errorf("%s: %s missing", c.query, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(p.Body, n) {
				t.Errorf("%s: %s found", c.query, n)
			}
		}
	}
	// Bad filters are shown on their inputs.
	p = visitor.get("/?max_fee=ten&streaming=maybe&sort=cheapest")
	if p.Status != http.StatusUnprocessableEntity {
		t.Errorf("bad filters = %d", p.Status)
	}
	mustContain(t, p, `id="max_fee-error"`, `id="streaming-error"`)
	p = visitor.get("/?sort=cheapest")
	mustContain(t, p, "sort must be one of")

	// Paging keeps the filters.
	for i := range 22 {
		s.list(t, seller, "translator-v1.0.json", pricing)
		_ = i
	}
	p = visitor.get("/?q=translate")
	mustContain(t, p, "page 1 of 2", `rel="next"`, "q=translate")

	// The listing page: skills, modes, capabilities, price, history.
	p = visitor.get("/listings/" + sum.ID)
	mustContain(t, p, "Summarize document", "text/markdown", "$19.00 per month", "$3.00 per million", "$0.002 per task", sum.CardHash,
		"Sign in to subscribe", meterURL+"/a2a/"+sum.ID+"/.well-known/agent-card.json", "Card healthy", "0.3")
	if p := visitor.get("/listings/" + draft.ID); p.Status != http.StatusNotFound {
		t.Errorf("a draft for a visitor = %d, want 404", p.Status)
	}
	if p := b.get("/listings/" + draft.ID); p.Status != 200 {
		t.Errorf("a draft for its seller = %d", p.Status)
	}
}

func TestSellerListsAgentWithInlineErrors(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	b := s.browser(t)
	b.signup("Acme", "a@acme.example")
	b.get("/seller/new")

	// Amounts that are not numbers never reach the catalog.
	p := b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://agent.test/"}, "currency": {"usd"}, "monthly_fee": {"19 dollars"},
		"included_tasks": {"1.5"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("status = %d", p.Status)
	}
	mustContain(t, p, `id="monthly_fee-error"`, `id="included_tasks-error"`, `href="#monthly_fee"`)
	// The per-call ceiling is whole units too, named in the form's words.
	p = b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://agent.test/"}, "currency": {"usd"}, "max_call_output_tokens": {"lots"}})
	mustContain(t, p, `id="max_call_output_tokens-error"`, "Most output tokens one call may use")
	// With a local error, the catalog's own rules are still reported at once.
	p = b.post("/seller/new", url.Values{"source": {"paste"}, "card": {`{"protocolVersion":"0.3.0","description":"no name"}`}, "currency": {"US$"},
		"task_price": {"abc"}, "output_price": {"-1"}})
	mustContain(t, p, `id="task_price-error"`, `id="currency-error"`, `id="output_price-error"`, `id="card-error"`)

	// The catalog's rules land on the right inputs: a negative price
	// (pricing.monthly_fee_micros), a bad currency, a bad header.
	p = b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://agent.test/"}, "currency": {"US Dollar"}, "monthly_fee": {"-5"},
		"auth_header": {"Bad Header"}, "auth_value": {"Bearer s3cret-token"}})
	mustContain(t, p, `id="monthly_fee-error"`, "must not be negative", `id="currency-error"`, `id="auth_header-error"`)
	mustNotContain(t, p, "s3cret-token")
	// In the form's words: its labels and dollars, never the API's field
	// names or micros.
	p = b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://agent.test/"}, "currency": {"usd"}, "task_price": {"-0.5"},
		"input_price": {"20000"}})
	mustContain(t, p, "Price per task must not be negative.", "Price per million input tokens must be at most $10,000.00.")
	mustNotContain(t, p, "per_task_micros", "input_tokens_per_million_micros", "_micros")

	// A pasted card with a missing required field: card.* errors on the card.
	p = b.post("/seller/new", url.Values{"source": {"paste"}, "card": {`{"protocolVersion":"0.3.0","description":"no name"}`}, "currency": {"usd"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("bad card = %d", p.Status)
	}
	mustContain(t, p, `id="card-error"`, "name")
	p = b.post("/seller/new", url.Values{"source": {"paste"}, "card": {`{not json`}, "currency": {"usd"}})
	mustContain(t, p, `id="card-error"`, "not valid JSON")

	// A card URL with nothing there: the error is on the URL.
	p = b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://nothing.test/"}, "currency": {"usd"}})
	mustContain(t, p, `id="card_url-error"`, "No card at")

	// And then a good one.
	s.fetcher.cards["http://agent.test/"] = storetest.Card(t, "summarizer-v0.3.json")
	p = b.post("/seller/new", url.Values{"source": {"url"}, "card_url": {"http://agent.test/"}, "currency": {"usd"}, "monthly_fee": {"19.99"},
		"input_price": {"3"}, "task_price": {"0.002"}, "included_tasks": {"1,000"}, "max_call_input_tokens": {"2,000"}, "max_call_compute_ms": {"30000"},
		"auth_header": {"Authorization"}, "auth_value": {"Bearer s3cret"}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/listings/lst_") {
		t.Fatalf("list = %d → %q %s", p.Status, p.Location, excerpt(p.Body))
	}
	id := strings.TrimPrefix(strings.Split(p.Location, "?")[0], "/listings/")
	l, err := s.listings.GetListing(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if l.Plan.MonthlyFeeMicros != 19_990_000 || l.Plan.InputTokensPerMillionMicros != 3_000_000 || l.Plan.PerTaskMicros != 2000 ||
		l.Plan.IncludedTasks != 1000 || l.Plan.MaxCallInputTokens != 2000 || l.Plan.MaxCallOutputTokens != 0 || l.Plan.MaxCallComputeMs != 30_000 ||
		!l.HasUpstreamAuth() {
		t.Errorf("stored plan %+v, auth %v", l.Plan, l.HasUpstreamAuth())
	}
	p = b.get(p.Location)
	mustContain(t, p, "Your agent is listed.", "$19.99 per month", "1,000 tasks", "Most one call may use", "2,000 input tokens, 4,000 output tokens")

	// The console shows it with its status and health, and can retire it.
	p = b.get("/seller")
	mustContain(t, p, "Summarizer", "published", "healthy", "Retire", "Refresh card")
	if p := b.post("/seller/listings/"+id+"/status", url.Values{"status": {"retired"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("retire = %d %s", p.Status, excerpt(p.Body))
	}
	mustContain(t, b.get("/seller"), "retired")
}

func TestBuyerSubscribesAndManagesKeys(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	sb := s.browser(t)
	sb.signup("Acme", "seller@acme.example")
	l := s.list(t, s.actor(t, "seller@acme.example"), "summarizer-v0.3.json", pricing)

	b := s.browser(t)
	b.signup("Globex", "it@globex.example")
	p := b.get("/listings/" + l.ID)
	mustContain(t, p, "Subscribe", `name="budget"`)
	p = b.post("/listings/"+l.ID+"/subscribe", url.Values{"budget": {"lots"}})
	mustContain(t, p, `id="budget-error"`)
	p = b.post("/listings/"+l.ID+"/subscribe", url.Values{"budget": {"25"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("subscribe = %d %s", p.Status, excerpt(p.Body))
	}
	endpoint := meterURL + "/a2a/" + l.ID
	p = b.get(p.Location)
	mustContain(t, p, "Summarizer", endpoint, endpoint+"/.well-known/agent-card.json", "a2a send &#34;$AGENT_URL&#34;", "of $25.00 budget", "$0.00")
	if p := b.post("/listings/"+l.ID+"/subscribe", nil); p.Status != http.StatusConflict {
		t.Errorf("second subscription = %d", p.Status)
	}
	mustContain(t, b.get("/listings/"+l.ID), "Your organisation subscribes to this agent")

	// Keys: created and shown once, listed by prefix, revoked.
	b.get("/keys")
	p = b.post("/keys", url.Values{"name": {""}, "role": {"buyer"}})
	mustContain(t, p, `id="name-error"`)
	p = b.post("/keys", url.Values{"name": {"orchestrator prod"}, "role": {"buyer"}, "budget": {"50"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("create key = %d %s", p.Status, excerpt(p.Body))
	}
	key := keyRE.FindStringSubmatch(p.Body)
	if key == nil {
		t.Fatalf("no key shown:\n%s", excerpt(p.Body))
	}
	actor, err := s.accounts.Authenticate(context.Background(), key[1])
	if err != nil || actor.Role != agentmarket.RoleBuyer || *actor.KeyBudgetMicros != 50_000_000 {
		t.Fatalf("shown key authenticates as %+v, %v", actor, err)
	}
	p = b.get("/keys")
	mustNotContain(t, p, key[1])
	mustContain(t, p, "orchestrator prod", key[1][:12]+"…", "$50.00")

	// Usage shows up against the budgets.
	cs, _ := s.subs.List(context.Background(), actor)
	row := usageRow("u1", now.Add(-time.Hour), l, actor.OrgID, actor.KeyID, cs[0].ID, 1_234_567)
	if err := s.usage.Insert(context.Background(), []metering.Usage{row}); err != nil {
		t.Fatal(err)
	}
	// Amounts to the cent, the exact one on hover.
	mustContain(t, b.get("/buyer"), `<span data-spent><span class="money" title="$1.234567">$1.23</span></span> of $25.00 budget`)
	mustContain(t, b.get("/keys"), `<span class="money" title="$1.234567">$1.23</span>`)

	keys, _ := s.accounts.ListKeys(context.Background(), actor)
	var id string
	for _, k := range keys {
		if k.Name == "orchestrator prod" {
			id = k.ID
		}
	}
	if p := b.post("/keys/"+id+"/revoke", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke = %d", p.Status)
	}
	if _, err := s.accounts.Authenticate(context.Background(), key[1]); err == nil {
		t.Error("revoked key still authenticates")
	}
	mustContain(t, b.get("/keys"), "Revoked")

	// Cancel.
	if p := b.post("/buyer/subscriptions/"+cs[0].ID+"/cancel", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("cancel = %d", p.Status)
	}
	mustContain(t, b.get("/buyer"), "canceled")
}

var keyRE = regexp.MustCompile(`<code id="new-key" tabindex="0">(amk_[a-z0-9]+)</code>`)

func TestFinanceAndOperator(t *testing.T) {
	s := newSite(t, siteOptions{})
	ctx := context.Background()
	sb := s.browser(t)
	sb.signup("Acme", "seller@acme.example")
	seller := s.actor(t, "seller@acme.example")
	l := s.list(t, seller, "summarizer-v0.3.json", pricing)
	l2 := s.list(t, seller, "translator-v1.0.json", pricing)

	// Review is on: the operator approves through the UI.
	op := s.browser(t)
	op.signinKey(s.operatorKey)
	p := op.get("/operator")
	mustContain(t, p, "Summarizer", "Translator", "Approve", "Platform fee (12.50%)")
	for _, id := range []string{l.ID, l2.ID} {
		if p := op.post("/operator/listings/"+id+"/status", url.Values{"status": {"published"}, "from": {"pending_review"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("approve = %d %s", p.Status, excerpt(p.Body))
		}
	}
	mustContain(t, op.get("/operator?status=published"), "Suspend")
	// Statuses in words: the tab and an empty one say "waiting for review".
	p = op.get("/operator")
	mustContain(t, p, "Waiting for review", "No listing is waiting for review.")
	mustNotContain(t, p, "pending_review<", "are pending_review")
	if p := sb.get("/operator"); p.Status != http.StatusForbidden {
		t.Errorf("a seller's /operator = %d", p.Status)
	}

	b := s.browser(t)
	b.signup("Globex", "it@globex.example")
	buyer := s.actor(t, "it@globex.example")
	c1, c2 := s.subscribe(t, buyer, l.ID, nil), s.subscribe(t, buyer, l2.ID, nil)
	keys, _ := s.accounts.ListKeys(ctx, buyer)
	var rows []metering.Usage
	for i := range 30 {
		at := now.AddDate(0, 0, -(i % 10)).Add(-time.Hour)
		lst, c := l, c1.ID
		if i%3 == 0 {
			lst, c = l2, c2.ID
		}
		rows = append(rows, usageRow(fmtID("u", i), at, lst, buyer.OrgID, keys[0].ID, c, int64(100_000+i)))
	}
	if err := s.usage.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var want1, wantAll int64
	for _, r := range rows {
		wantAll += r.CostMicros
		if r.ListingID == l.ID {
			want1 += r.CostMicros
		}
	}

	p = b.get("/finance")
	if p.Status != 200 {
		t.Fatalf("finance = %d %s", p.Status, excerpt(p.Body))
	}
	mustContain(t, p, "<svg", "Cost per day", "Cost per agent", "Summarizer", `data-key="`+l.ID+`"`, formatUSD(want1), formatUSD(wantAll),
		"2026-05-01", `href="/finance/usage.csv?`)
	for _, g := range []string{"seller", "buyer", "api_key", "day"} {
		p := b.get("/finance?group=" + g)
		if p.Status != 200 {
			t.Errorf("group %s = %d", g, p.Status)
		}
	}
	mustContain(t, b.get("/finance?group=api_key"), "first admin key")
	mustContain(t, b.get("/finance?group=seller"), "Acme")
	// Another period has nothing.
	p = b.get("/finance?from=2026-04-01&to=2026-04-30")
	mustContain(t, p, "No usage in this period")
	p = b.get("/finance?from=2026-05-10&to=2026-05-01")
	mustContain(t, p, `id="to-error"`)

	// The seller sees the same usage as revenue, per buyer.
	p = sb.get("/seller")
	mustContain(t, p, "Globex", formatUSD(wantAll))
	mustContain(t, sb.get("/finance?scope=seller"), formatUSD(wantAll))
	// Only operators see the whole platform.
	if p := b.get("/finance?scope=platform"); p.Status != http.StatusForbidden {
		t.Errorf("buyer platform scope = %d", p.Status)
	}
	mustContain(t, op.get("/finance?scope=platform"), formatUSD(wantAll))

	// CSV, as the API has it, with names.
	p = b.get("/finance/usage.csv?group_by=listing&from=2026-05-01&to=2026-05-31")
	if ct := p.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("csv content type %q", ct)
	}
	if !strings.HasPrefix(p.Body, "listing,name,calls,tasks,input_tokens,output_tokens,compute_ms,cost_micros,estimated_calls\n") ||
		!strings.Contains(p.Body, l.ID+",Summarizer,20,20,2000,1000,14000,"+itoa(want1)+",0") {
		t.Errorf("csv:\n%s", p.Body)
	}

	// Invoice previews and reconciliation.
	p = b.get("/finance/invoices")
	mustContain(t, p, "Summarizer", "Monthly fee, prorated", "$10.77", "Total")
	p = b.get("/finance/reconciliation")
	if p.Status != 200 {
		t.Fatalf("reconciliation = %d %s", p.Status, excerpt(p.Body))
	}
	mustContain(t, p, "Reconciliation, 2026-05")
	mustContain(t, b.get("/finance/reconciliation?period=May"), `id="period-error"`)
}

// TestKeysPageFollowsKeyRules: signed in with a buyer key, the keys page
// offers only buyer keys and a revoke button only on that key itself; the
// admin sees both everywhere, and a forged revoke of the admin's key is
// refused.
func TestKeysPageFollowsKeyRules(t *testing.T) {
	s := newSite(t, siteOptions{})
	ctx := context.Background()
	admin := s.browser(t)
	admin.signup("Globex", "it@globex.example")
	actor := s.actor(t, "it@globex.example")
	k, secret, err := s.accounts.CreateKey(ctx, actor, contracts.KeyInput{Name: "orchestrator", Role: agentmarket.RoleBuyer})
	if err != nil {
		t.Fatal(err)
	}
	var first string // the admin key sign-up made
	keys, _ := s.accounts.ListKeys(ctx, actor)
	for _, k := range keys {
		if k.Role == agentmarket.RoleAdmin {
			first = k.ID
		}
	}
	p := admin.get("/keys")
	mustContain(t, p, `<option value="admin"`, `action="/keys/`+first+`/revoke"`, `action="/keys/`+k.ID+`/revoke"`)

	b := s.browser(t)
	b.signinKey(secret)
	p = b.get("/keys")
	mustContain(t, p, `<option value="buyer"`, `action="/keys/`+k.ID+`/revoke"`)
	mustNotContain(t, p, `<option value="admin"`, `<option value="seller"`, `action="/keys/`+first+`/revoke"`)
	if p := b.post("/keys/"+first+"/revoke", nil); p.Status != http.StatusForbidden {
		t.Errorf("buyer key revokes the admin key = %d", p.Status)
	}
	for _, k := range keys {
		if stored, _ := s.accounts.Store.APIKeyByHash(ctx, k.Hash); stored == nil || stored.RevokedAt != nil {
			t.Errorf("key %s (%s) was revoked", k.Name, k.Role)
		}
	}
}

// sellerAndBuyer signs up a seller (Acme) who lists a published agent and
// a buyer (Globex), each signed in in a browser of their own.
func (s *site) sellerAndBuyer(t *testing.T) (seller, buyer *browser, l *listings.Listing, buyerActor agentmarket.Actor) {
	t.Helper()
	seller = s.browser(t)
	seller.signup("Acme", "seller@acme.example")
	l = s.list(t, s.actor(t, "seller@acme.example"), "summarizer-v0.3.json", pricing)
	buyer = s.browser(t)
	buyer.signup("Globex", "it@globex.example")
	return seller, buyer, l, s.actor(t, "it@globex.example")
}

// TestSellerNeverSeesBuyersKeys: the seller's view of what it sold shows
// its buyers, never which of their API keys called: no "API key" grouping
// is offered, asking for it anyway falls back to agents, and no page or
// CSV of the seller's carries a buyer's key id or name.
func TestSellerNeverSeesBuyersKeys(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	ctx := context.Background()
	sb, b, l, buyer := s.sellerAndBuyer(t)
	c, err := s.subs.Subscribe(ctx, buyer, contracts.SubscribeInput{ListingID: l.ID})
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := s.accounts.CreateKey(ctx, buyer, contracts.KeyInput{Name: "globex secret orchestrator", Role: agentmarket.RoleBuyer})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.usage.Insert(ctx, []metering.Usage{usageRow("u-1", now.Add(-time.Hour), l, buyer.OrgID, key.ID, c.ID, 123_000)}); err != nil {
		t.Fatal(err)
	}
	// The buyer sees its own key by name.
	mustContain(t, b.get("/finance?group=api_key"), "globex secret orchestrator")

	secrets := []string{key.ID, key.Name, key.Prefix}
	p := sb.get("/finance?scope=seller&group=api_key")
	if p.Status != 200 {
		t.Fatalf("seller finance = %d %s", p.Status, excerpt(p.Body))
	}
	mustContain(t, p, "Summarizer", formatUSD(123_000))
	mustNotContain(t, p, append(secrets, "group=api_key")...)
	mustContain(t, sb.get("/finance?scope=seller&group=buyer"), "Globex")
	for _, path := range []string{"/finance?scope=seller", "/finance?scope=seller&group=buyer", "/finance?scope=seller&group=day", "/seller",
		"/finance/usage.csv?scope=seller&group_by=task", "/finance/usage.csv?scope=seller&group_by=buyer", "/finance/usage.csv?scope=seller&group_by=listing"} {
		p := sb.get(path)
		if p.Status != 200 {
			t.Errorf("%s = %d", path, p.Status)
		}
		mustNotContain(t, p, secrets...)
	}
	p = sb.get("/finance/usage.csv?scope=seller&group_by=api_key")
	if p.Status != http.StatusUnprocessableEntity {
		t.Errorf("seller CSV by API key = %d, want 422", p.Status)
	}
	mustNotContain(t, p, secrets...)
}

func formatUSD(micros int64) string {
	whole, frac := micros/1_000_000, micros%1_000_000
	s := strings.TrimRight(itoa(frac + 1_000_000)[1:], "0")
	if len(s) < 2 {
		s += strings.Repeat("0", 2-len(s))
	}
	return "$" + itoa(whole) + "." + s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestBuyerSeesFailedPushDeliveries: the buyer's page lists the push
// notifications that failed (with why) or are being retried, and sends a
// failed one again; another org's buyer sees none of them.
func TestBuyerSeesFailedPushDeliveries(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	ctx := context.Background()
	_, b, l, buyer := s.sellerAndBuyer(t)
	if p := b.post("/listings/"+l.ID+"/subscribe", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("subscribe = %d", p.Status)
	}
	mustNotContain(t, b.get("/buyer"), "Push notifications needing attention")

	for _, d := range []contracts.Delivery{
		{ID: "dlv_failed", ListingID: l.ID, TaskID: "task-1", ConfigID: "c1", OrgID: buyer.OrgID, Body: []byte(`{}`), CreatedAt: now},
		{ID: "dlv_retrying", ListingID: l.ID, TaskID: "task-2", ConfigID: "c2", OrgID: buyer.OrgID, Body: []byte(`{}`), CreatedAt: now},
		{ID: "dlv_fresh", ListingID: l.ID, TaskID: "task-3", ConfigID: "c3", OrgID: buyer.OrgID, Body: []byte(`{}`), CreatedAt: now},
	} {
		if _, err := s.store.Enqueue(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.store.DeliveryAttempted(ctx, "dlv_failed", contracts.DeliveryFailed, 8, time.Time{}, 503, "the webhook answered 503 Service Unavailable (gave up after 8 attempts)", now); err != nil {
		t.Fatal(err)
	}
	if err := s.store.DeliveryAttempted(ctx, "dlv_retrying", contracts.DeliveryPending, 2, now.Add(time.Minute), 0, "connection refused", now); err != nil {
		t.Fatal(err)
	}
	p := b.get("/buyer")
	mustContain(t, p, "Push notifications needing attention", "Summarizer", "task-1", "gave up after 8 attempts", "task-2", "connection refused",
		`action="/buyer/deliveries/dlv_failed/retry"`)
	mustNotContain(t, p, "task-3", `action="/buyer/deliveries/dlv_retrying/retry"`)

	o := s.browser(t)
	o.signup("Initech", "it@initech.example")
	mustNotContain(t, o.get("/buyer"), "task-1")
	if p := o.post("/buyer/deliveries/dlv_failed/retry", nil); p.Status != http.StatusNotFound {
		t.Errorf("another org's retry = %d", p.Status)
	}

	if p := b.post("/buyer/deliveries/dlv_failed/retry", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("retry = %d %s", p.Status, excerpt(p.Body))
	}
	ds, err := s.store.Deliveries(ctx, contracts.DeliveryQuery{OrgID: buyer.OrgID, Status: contracts.DeliveryPending})
	if err != nil || len(ds) != 3 {
		t.Errorf("after the retry, pending deliveries = %d, %v; want 3", len(ds), err)
	}
}

// TestBuyerSeesTaskLife: the buyer's console shows a task of theirs
// (linked from the deliveries it had): running, then stalled (with the
// meter's event), then lost by its agent; another org gets not found.
func TestBuyerSeesTaskLife(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	ctx := context.Background()
	_, b, l, buyer := s.sellerAndBuyer(t)
	if p := b.post("/listings/"+l.ID+"/subscribe", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("subscribe = %d", p.Status)
	}
	if _, err := s.store.BindTask(ctx, contracts.TaskBinding{ListingID: l.ID, TaskID: "task-s", OrgID: buyer.OrgID, ContractID: "ctr_x", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	page := "/buyer/tasks/" + l.ID + "/task-s"
	mustContain(t, b.get(page), `data-task-status="running"`, "task-s")

	if _, err := s.store.TaskStalled(ctx, contracts.TaskEvent{ListingID: l.ID, TaskID: "task-s", Kind: contracts.TaskStalled, State: "working",
		At: now.Add(10 * time.Minute), Actor: "meter", Reason: "no progress since 10:00"}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.get(page), `data-task-status="stalled"`, `data-event="stalled"`, "no progress since 10:00")

	if _, err := s.store.TaskEnded(ctx, contracts.TaskEvent{ListingID: l.ID, TaskID: "task-s", Kind: contracts.TaskLost,
		At: now.Add(20 * time.Minute), Reason: "the agent answered tasks/get with TaskNotFound"}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.get(page), `data-task-status="lost"`, `data-event="lost"`, "The agent no longer knows this task")

	o := s.browser(t)
	o.signup("Initech", "it@initech.example")
	if p := o.get(page); p.Status != http.StatusNotFound {
		t.Errorf("another org's view of the task = %d, want 404", p.Status)
	}
}

// TestTotalsPastInt64 (issue 11): per-agent sums that each fit but
// together pass int64 (rows stored before amounts were bounded) show a
// saturated total on the finance and buyer pages, and a chart axis up to
// it, never a wrapped, negative amount.
func TestTotalsPastInt64(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	ctx := context.Background()
	s.browser(t).signup("Acme", "seller@acme.example")
	seller := s.actor(t, "seller@acme.example")
	l := s.list(t, seller, "summarizer-v0.3.json", pricing)
	l2 := s.list(t, seller, "translator-v1.0.json", pricing)
	b := s.browser(t)
	b.signup("Globex", "it@globex.example")
	buyer := s.actor(t, "it@globex.example")
	budget := agentmarket.MaxBudgetMicros
	c1, c2 := s.subscribe(t, buyer, l.ID, &budget), s.subscribe(t, buyer, l2.ID, nil)
	keys, _ := s.accounts.ListKeys(ctx, buyer)
	const big = 6_000_000_000_000_000_000 // each fits; two do not
	rows := []metering.Usage{
		usageRow("u1", now.Add(-time.Hour), l, buyer.OrgID, keys[0].ID, c1.ID, big),
		usageRow("u2", now.Add(-time.Hour), l2, buyer.OrgID, keys[0].ID, c2.ID, big),
	}
	if err := s.usage.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	const saturated, each = `<span class="money" title="$9,223,372,036,854.775807">$9,223,372,036,854.78</span>`, "$6,000,000,000,000.00"
	p := b.get("/finance")
	mustContain(t, p, `<dd data-total-cost>`+saturated+`</dd>`, each, `<td class="cost">`+saturated+`</td></tr></tfoot>`)
	mustNotContain(t, p, "-$")
	p = b.get("/buyer")
	mustContain(t, p, "<strong>"+saturated+"</strong> in usage at list price, before monthly allowances; monthly fees come on top", "<span data-spent>"+each+"</span> of $1,000,000,000.00 budget")
	mustNotContain(t, p, "-$")
}

// TestOrgBudgetForm: an org's admin sets the organisation's monthly budget
// on the keys page (the meter holds it like a key's), sees it, is told in
// the form's words what is wrong with a bad one, and clears it.
func TestOrgBudgetForm(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Globex", "it@globex.example")
	p := b.get("/keys")
	mustContain(t, p, "Organisation's monthly budget", `data-org-budget>none<`, `action="/keys/org-budget"`)
	p = b.post("/keys/org-budget", url.Values{"org_budget": {"lots"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a bad budget = %d", p.Status)
	}
	mustContain(t, p, `id="org_budget-error"`, "The organisation&#39;s monthly budget must be an amount")
	mustNotContain(t, p, "monthly_budget_micros")
	if p = b.post("/keys/org-budget", url.Values{"org_budget": {"500"}}); p.Status != http.StatusSeeOther || p.Location != "/keys?notice=orgbudget" {
		t.Fatalf("save = %d → %q", p.Status, p.Location)
	}
	p = b.get("/keys?notice=orgbudget")
	mustContain(t, p, "budget is saved", `data-org-budget>$500.00<`, `value="500"`)
	if p = b.post("/keys/org-budget", url.Values{"org_budget": {""}}); p.Status != http.StatusSeeOther {
		t.Fatalf("clear = %d", p.Status)
	}
	mustContain(t, b.get("/keys"), `data-org-budget>none<`)
}

// TestOrgRatesForm: an org's admin sets the organisation's rate limits on
// the keys page, sees them in words, is told in the form's words what is
// wrong with a bad one, and clears them.
func TestOrgRatesForm(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser(t)
	b.signup("Globex", "it@globex.example")
	p := b.get("/keys")
	mustContain(t, p, "Organisation's rate limits", `data-org-rates>none<`, `action="/keys/org-rates"`)
	p = b.post("/keys/org-rates", url.Values{"requests_per_second": {"fast"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a bad limit = %d", p.Status)
	}
	mustContain(t, p, `id="requests_per_second-error"`, "Enter a whole number")
	p = b.post("/keys/org-rates", url.Values{"requests_per_minute": {"99999999999"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a limit past its bound = %d", p.Status)
	}
	mustContain(t, p, `id="requests_per_minute-error"`, "requests_per_minute must be 0 (no limit) or between 1 and 60000000")
	if p = b.post("/keys/org-rates", url.Values{"requests_per_minute": {"600"}, "max_in_flight": {"8"}}); p.Status != http.StatusSeeOther || p.Location != "/keys?notice=orgrates" {
		t.Fatalf("save = %d → %q", p.Status, p.Location)
	}
	p = b.get("/keys?notice=orgrates")
	mustContain(t, p, "rate limits are saved", `data-org-rates>600 requests a minute, 8 calls in flight<`, `value="600"`)
	if p = b.post("/keys/org-rates", url.Values{}); p.Status != http.StatusSeeOther {
		t.Fatalf("clear = %d", p.Status)
	}
	mustContain(t, b.get("/keys"), `data-org-rates>none<`)
}
