package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	billinggorm "github.com/agentmarket/agentmarket/billing/gormstore"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
	"github.com/agentmarket/agentmarket/listings/storetest"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/web"
)

// now is the tests' clock: mid-month, so the month to date has days.
var now = time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)

const meterURL = "http://meter.test"

// site is the UI over real services on SQLite and the embedded usage
// store, wired as cmd/marketplace wires them.
type site struct {
	app         *fiber.App
	db          *relational.DB
	clock       *agentmarket.ManualClock
	accounts    *contracts.Accounts
	store       *contractsgorm.Store
	catalog     *listings.Service
	listings    *listingsgorm.Store
	subs        *contracts.Subscriptions
	usage       *embedded.Store
	fetcher     *fakeFetcher
	operatorKey string
}

// fakeFetcher serves cards by URL.
type fakeFetcher struct{ cards map[string][]byte }

func (f *fakeFetcher) FetchCard(_ context.Context, u, _ string) (*listings.FetchedCard, error) {
	b, ok := f.cards[u]
	if !ok {
		return nil, &agentmarket.Error{Kind: agentmarket.Invalid, Code: "card_fetch_failed", Message: "the card could not be fetched",
			Fields: []agentmarket.FieldError{{Field: "card_url", Rule: "fetch", Message: "no card at " + u}}}
	}
	return &listings.FetchedCard{URL: u, Body: b, FetchedAt: now}, nil
}

// catalogTerms lets subscriptions read listings (cmd/ has the same).
type catalogTerms struct{ c *listings.Service }

func (t catalogTerms) ListingTerms(ctx context.Context, actor agentmarket.Actor, id string) (*contracts.ListingTerms, error) {
	l, err := t.c.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	return &contracts.ListingTerms{ID: l.ID, SellerOrgID: l.SellerOrgID, Published: l.Status == listings.StatusPublished, PlanVersion: l.Plan.Version}, nil
}

type siteOptions struct {
	dir         string // data dir; a temp dir when empty
	autoApprove bool
	// reports, when set, wraps the usage store that reports read (the
	// benchmarks memoize it to time the pages without the store).
	reports func(metering.Store) metering.Store
	// search likewise wraps the listing store the catalog searches.
	search func(listings.Store) listings.Store
}

func newSite(tb testing.TB, o siteOptions) *site {
	tb.Helper()
	if o.dir == "" {
		o.dir = tb.TempDir()
	}
	s, closeSite, err := openSite(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(closeSite)
	return s
}

// openSite builds a site in o.dir (which must be set); close releases it.
func openSite(o siteOptions) (_ *site, close func(), err error) {
	ctx := context.Background()
	var closers []func() error
	close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	db, err := relational.OpenSQLite(ctx, filepath.Join(o.dir, "agentmarket.db"))
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, db.Close)
	usage, err := embedded.Open(filepath.Join(o.dir, "usage.db"))
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, usage.Close)
	s := &site{clock: agentmarket.NewManualClock(now), usage: usage, fetcher: &fakeFetcher{cards: map[string][]byte{}}}
	s.db = db
	s.store = contractsgorm.New(db.DB)
	s.accounts = &contracts.Accounts{Store: s.store, Clock: s.clock, BcryptCost: bcrypt.MinCost}
	authz, err := casbin.New(ctx, s.store)
	if err != nil {
		return nil, nil, err
	}
	if _, s.operatorKey, err = s.accounts.EnsurePlatform(ctx, ""); err != nil {
		return nil, nil, err
	}
	sealer, err := aesgcm.New(make([]byte, 32))
	if err != nil {
		return nil, nil, err
	}
	s.listings = listingsgorm.New(db.DB)
	var catalogStore listings.Store = s.listings
	if o.search != nil {
		catalogStore = o.search(s.listings)
	}
	s.catalog = &listings.Service{Store: catalogStore, Fetcher: s.fetcher, Endpoints: httpfetchtest.Loopback(nil), Sealer: sealer, Clock: s.clock, AutoApprove: o.autoApprove,
		DefaultRefresh: time.Hour}
	s.subs = &contracts.Subscriptions{Store: s.store, Listings: catalogTerms{s.catalog}, Policies: authz, Clock: s.clock}
	bill := &billing.Service{Store: billinggorm.New(db.DB), Usage: usage, Clock: s.clock, Plans: s.listings,
		Contracts: billing.ContractsBetween(s.store.ContractsBetween), PlatformFeePercent: 12.5}
	var reports metering.Store = usage
	if o.reports != nil {
		reports = o.reports(usage)
	}
	ui := web.New(web.Deps{Accounts: s.accounts, Sessions: s.store, Listings: s.catalog, Subscriptions: s.subs,
		Usage: &metering.Reports{Store: reports, Clock: s.clock}, Invoices: &billing.Previews{Contracts: s.subs, Plans: s.listings, Usage: usage, Clock: s.clock},
		Billing: bill, Authorizer: authz, Clock: s.clock, PublicMeterURL: meterURL,
		Tasks:    &contracts.Tasks{Life: s.store, Push: s.store, Listings: catalogTerms{s.catalog}, Clock: s.clock},
		Switches: &contracts.Switches{Store: s.store, Clock: s.clock},
		Credits:  &contracts.Credits{Store: s.store, Clock: s.clock}})
	s.app = fiber.New(fiber.Config{DisableStartupMessage: true})
	ui.Mount(s.app)
	return s, close, nil
}

// browser is a visitor: it keeps cookies and reads CSRF tokens from
// pages, as a browser submitting forms would.
type browser struct {
	t       testing.TB
	s       *site
	cookies map[string]string
	csrf    string
	origin  string
}

func (s *site) browser(t testing.TB) *browser {
	return &browser{t: t, s: s, cookies: map[string]string{}}
}

type page struct {
	Status   int
	Body     string
	Location string
	Header   http.Header
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, "http://market.test"+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	res, err := b.s.app.Test(req, 30_000)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 || c.Value == "" {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	p := page{Status: res.StatusCode, Body: string(raw), Location: res.Header.Get("Location"), Header: res.Header}
	if m := csrfRE.FindStringSubmatch(p.Body); m != nil {
		b.csrf = m[1]
	}
	return p
}

func (b *browser) get(path string) page {
	b.t.Helper()
	return b.do("GET", path, nil)
}

// post submits a form with the CSRF token of the last page seen.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if form.Get("csrf") == "" {
		form.Set("csrf", b.csrf)
	}
	return b.do("POST", path, form)
}

// signup creates an org through the sign-up form and stays signed in.
func (b *browser) signup(org, email string) {
	b.t.Helper()
	b.get("/signup")
	p := b.post("/signup", url.Values{"org_name": {org}, "email": {email}, "password": {"correct horse battery"}})
	if p.Status != http.StatusSeeOther {
		b.t.Fatalf("signup %s: %d %s", email, p.Status, p.Body)
	}
	b.get("/")
}

func (b *browser) signinKey(key string) {
	b.t.Helper()
	b.get("/signin")
	if p := b.post("/signin/key", url.Values{"api_key": {key}}); p.Status != http.StatusSeeOther {
		b.t.Fatalf("sign in with key: %d %s", p.Status, p.Body)
	}
	b.get("/")
}

// actor returns the actor of an org's user, for seeding through services.
func (s *site) actor(tb testing.TB, email string) agentmarket.Actor {
	tb.Helper()
	a, err := s.accounts.Login(context.Background(), email, "correct horse battery")
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func (s *site) list(tb testing.TB, seller agentmarket.Actor, card string, pricing string) *listings.Listing {
	tb.Helper()
	l, err := s.catalog.Create(context.Background(), seller, listings.CreateInput{Card: json.RawMessage(storetest.Card(tb, card)), Pricing: json.RawMessage(pricing)})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func mustContain(t testing.TB, p page, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(p.Body, w) {
			t.Errorf("page (status %d) lacks %q:\n%s", p.Status, w, excerpt(p.Body))
		}
	}
}

func mustNotContain(t testing.TB, p page, bad ...string) {
	t.Helper()
	for _, w := range bad {
		if strings.Contains(p.Body, w) {
			t.Errorf("page has %q", w)
		}
	}
}

// excerpt is the page's main element, to keep failure output readable.
func excerpt(body string) string {
	if i := strings.Index(body, `<main`); i >= 0 {
		body = body[i:]
	}
	if len(body) > 4000 {
		body = body[:4000] + "…"
	}
	return body
}

// subscribe subscribes buyer to a listing, with an optional monthly budget.
func (s *site) subscribe(tb testing.TB, buyer agentmarket.Actor, listingID string, budget *int64) *contracts.Contract {
	tb.Helper()
	c, err := s.subs.Subscribe(context.Background(), buyer, contracts.SubscribeInput{ListingID: listingID, MonthlyBudgetMicros: budget})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func usageRow(id string, at time.Time, l *listings.Listing, buyer, key, contract string, cost int64) metering.Usage {
	return metering.Usage{ID: id, Time: at, TraceID: strings.Repeat("a", 32), TaskID: "task-" + id, ListingID: l.ID, SellerOrgID: l.SellerOrgID,
		BuyerOrgID: buyer, APIKeyID: key, ContractID: contract, Method: "message/send", ProtocolVersion: "0.3", State: "completed",
		InputTokens: 100, OutputTokens: 50, ComputeMs: 700, Tasks: 1, CostMicros: cost, Currency: "usd", CardHash: l.CardHash}
}

func fmtID(prefix string, i int) string { return fmt.Sprintf("%s-%07d", prefix, i) }
