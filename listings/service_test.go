package listings_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
	"github.com/agentmarket/agentmarket/listings/storetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

var t0 = time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)

var (
	seller   = agentmarket.Actor{OrgID: "org_seller", Role: agentmarket.RoleSeller}
	other    = agentmarket.Actor{OrgID: "org_other", Role: agentmarket.RoleSeller}
	third    = agentmarket.Actor{OrgID: "org_third", Role: agentmarket.RoleBuyer}
	operator = agentmarket.Actor{OrgID: "org_platform", Role: agentmarket.RoleAdmin, Operator: true}
)

const (
	agentURL = "https://agent.example/.well-known/agent-card.json"
	pricing  = `{"currency": "usd", "monthly_fee_micros": 5000000}`
)

// fakeFetcher serves cards from memory. A request whose etag matches the
// card's current ETag is answered NotModified, as a server would.
type fakeFetcher struct {
	body  map[string][]byte
	etag  map[string]string
	err   map[string]error
	calls []string // "url etag", in order
}

func newFakeFetcher() *fakeFetcher {
	return &fakeFetcher{body: map[string][]byte{}, etag: map[string]string{}, err: map[string]error{}}
}

func (f *fakeFetcher) serve(url string, body []byte, etag string) {
	f.body[url], f.etag[url] = body, etag
	delete(f.err, url)
}

func (f *fakeFetcher) FetchCard(_ context.Context, url, etag string) (*listings.FetchedCard, error) {
	f.calls = append(f.calls, strings.TrimSpace(url+" "+etag))
	if err := f.err[url]; err != nil {
		return nil, err
	}
	body, ok := f.body[url]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.Invalid, "card_status", "no card at %s", url)
	}
	if etag != "" && etag == f.etag[url] {
		return &listings.FetchedCard{URL: url, NotModified: true, ETag: etag}, nil
	}
	return &listings.FetchedCard{URL: url, Body: body, ETag: f.etag[url]}, nil
}

type env struct {
	svc     *listings.Service
	store   *gormstore.Store
	clock   *agentmarket.ManualClock
	fetcher *fakeFetcher
	dns     *httpfetchtest.DNS // answers the endpoint checks
}

// newEnv returns a service over a fresh SQLite database holding the seller,
// other, third and platform orgs.
func newEnv(t *testing.T, autoApprove bool) *env {
	t.Helper()
	db := relationaltest.SQLite(t)
	orgs := contractsgorm.New(db.DB)
	for _, a := range []agentmarket.Actor{seller, other, third, operator} {
		o := &contracts.Org{ID: a.OrgID, Name: a.OrgID, Platform: a.Operator, CreatedAt: t0}
		if err := orgs.CreateOrg(context.Background(), o, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	sealer, err := aesgcm.New(bytes.Repeat([]byte{7}, aesgcm.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: gormstore.New(db.DB), clock: agentmarket.NewManualClock(t0), fetcher: newFakeFetcher(), dns: httpfetchtest.NewDNS(nil)}
	e.svc = &listings.Service{
		Store: e.store, Fetcher: e.fetcher, Endpoints: httpfetchtest.Loopback(e.dns), Sealer: sealer, Clock: e.clock,
		AutoApprove: autoApprove, DefaultRefresh: listings.DefaultRefreshInterval,
	}
	return e
}

func card(t *testing.T, name string) json.RawMessage { return storetest.Card(t, name) }

// cardWithout returns a fixture card with some top-level members removed.
func cardWithout(t *testing.T, name string, drop ...string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(card(t, name), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range drop {
		delete(m, k)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) mustCreate(t *testing.T, actor agentmarket.Actor, in listings.CreateInput) *listings.Listing {
	t.Helper()
	if in.Pricing == nil {
		in.Pricing = json.RawMessage(pricing)
	}
	l, err := e.svc.Create(context.Background(), actor, in)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return l
}

func (e *env) stored(t *testing.T, id string) *listings.Listing {
	t.Helper()
	l, err := e.store.GetListing(context.Background(), id)
	if err != nil {
		t.Fatalf("GetListing(%s): %v", id, err)
	}
	return l
}

// setStatus puts a listing in a state directly through the store, to
// arrange a case.
func (e *env) setStatus(t *testing.T, id string, s listings.Status) {
	t.Helper()
	l := e.stored(t, id)
	l.Status = s
	if err := e.store.UpdateListing(context.Background(), l, nil); err != nil {
		t.Fatal(err)
	}
}

func (e *env) versions(t *testing.T, id string) []listings.CardVersion {
	t.Helper()
	vs, err := e.store.CardVersions(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// wantErr checks an error's kind, code and field:rule pairs (fields "" to
// skip that check).
func wantErr(t *testing.T, err error, kind agentmarket.Kind, code, fields string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %s %s", kind, code)
	}
	if agentmarket.KindOf(err) != kind || agentmarket.CodeOf(err) != code {
		t.Fatalf("err = %v (kind %s), want %s %s", err, agentmarket.KindOf(err), kind, code)
	}
	if fields != "" {
		if got := fieldRules(t, err); got != fields {
			t.Errorf("fields = %q, want %q", got, fields)
		}
	}
}

func status(s listings.Status) *listings.Status { return &s }

func TestUpdateStatus(t *testing.T) {
	const (
		draft     = listings.StatusDraft
		pending   = listings.StatusPendingReview
		published = listings.StatusPublished
		suspended = listings.StatusSuspended
		retired   = listings.StatusRetired
	)
	type want struct {
		status listings.Status // on success
		kind   agentmarket.Kind
		code   string
		fields string
	}
	operatorOnly := want{kind: agentmarket.Forbidden, code: "operator_only"}
	badMove := want{kind: agentmarket.Invalid, code: "invalid_listing", fields: "status:transition"}
	cases := []struct {
		name  string
		auto  bool
		from  listings.Status
		actor agentmarket.Actor
		to    listings.Status
		want  want
	}{
		{"seller submits a draft", false, draft, seller, pending, want{status: pending}},
		{"seller submits a draft, auto-approve on", true, draft, seller, pending, want{status: published}},
		{"seller withdraws from review", false, pending, seller, draft, want{status: draft}},
		{"seller retires a draft", false, draft, seller, retired, want{status: retired}},
		{"seller retires a published listing", false, published, seller, retired, want{status: retired}},
		{"seller retires a suspended listing", false, suspended, seller, retired, want{status: retired}},
		{"seller keeps the status", false, draft, seller, draft, want{status: draft}},
		{"seller cannot approve", false, pending, seller, published, operatorOnly},
		{"seller cannot approve, auto-approve on", true, pending, seller, published, operatorOnly},
		{"seller cannot suspend", false, published, seller, suspended, operatorOnly},
		{"seller cannot reinstate", false, suspended, seller, published, operatorOnly},
		{"seller cannot publish a draft directly", false, draft, seller, published, badMove},
		{"seller publishes a draft directly, auto-approve on", true, draft, seller, published, want{status: published}},
		{"seller cannot take back a published listing", false, published, seller, draft, badMove},
		{"seller cannot leave suspension through review", true, suspended, seller, pending, badMove},
		{"operator approves", false, pending, operator, published, want{status: published}},
		{"operator rejects", false, pending, operator, draft, want{status: draft}},
		{"operator suspends", false, published, operator, suspended, want{status: suspended}},
		{"operator reinstates", false, suspended, operator, published, want{status: published}},
		{"operator retires", false, published, operator, retired, want{status: retired}},
		{"operator cannot submit for the seller", false, draft, operator, pending, badMove},
		{"retired is final for the seller", false, retired, seller, draft, badMove},
		{"retired is final for the seller, auto-approve on", true, retired, seller, pending, badMove},
		{"retired is final for the operator", false, retired, operator, published, badMove},
		{"unknown status", false, draft, seller, "archived", want{kind: agentmarket.Invalid, code: "invalid_listing", fields: "status:enum"}},
		{"another org's published listing", false, published, other, retired, want{kind: agentmarket.Forbidden, code: "not_listing_owner"}},
		{"another org's draft does not exist", false, draft, third, pending, want{kind: agentmarket.NotFound, code: "listing_not_found"}},
		{"another org's listing in review does not exist", false, pending, third, retired, want{kind: agentmarket.NotFound, code: "listing_not_found"}},
		{"another org's suspended listing does not exist", false, suspended, other, retired, want{kind: agentmarket.NotFound, code: "listing_not_found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.auto)
			l := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "translator-v1.0.json"), Draft: true})
			e.setStatus(t, l.ID, tc.from)
			e.clock.Advance(time.Minute)

			got, err := e.svc.Update(context.Background(), tc.actor, l.ID, listings.UpdateInput{Status: status(tc.to)})
			if tc.want.kind != "" {
				wantErr(t, err, tc.want.kind, tc.want.code, tc.want.fields)
				if s := e.stored(t, l.ID).Status; s != tc.from {
					t.Errorf("stored status = %s after a refused change, want %s", s, tc.from)
				}
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if got.Status != tc.want.status || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
				t.Errorf("Update = %s at %v, want %s at %v", got.Status, got.UpdatedAt, tc.want.status, t0.Add(time.Minute))
			}
			if s := e.stored(t, l.ID).Status; s != tc.want.status {
				t.Errorf("stored status = %s, want %s", s, tc.want.status)
			}
		})
	}
}

func TestUpdateByOthers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	l := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "translator-v1.0.json")})
	secs := 120
	changes := []struct {
		name string
		in   listings.UpdateInput
	}{
		{"pricing", listings.UpdateInput{Pricing: json.RawMessage(`{"currency": "usd"}`)}},
		{"credentials", listings.UpdateInput{UpstreamAuth: &listings.UpstreamAuth{Header: "Authorization", Value: "Bearer x"}}},
		{"refresh", listings.UpdateInput{RefreshSeconds: &secs}},
	}
	for _, c := range changes {
		for _, a := range []agentmarket.Actor{operator, other} {
			t.Run(c.name+" by "+a.OrgID, func(t *testing.T) {
				_, err := e.svc.Update(ctx, a, l.ID, c.in)
				wantErr(t, err, agentmarket.Forbidden, "not_listing_owner", "")
			})
		}
	}
	if _, err := e.svc.Update(ctx, seller, "lst_nope", listings.UpdateInput{Status: status(listings.StatusRetired)}); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("Update of an unknown listing: %v, want not found", err)
	}
}

func TestUpstreamAuthIsSealed(t *testing.T) {
	e := newEnv(t, true)
	want := listings.UpstreamAuth{Header: "Authorization", Value: "Bearer s3cret-token"}
	l := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "translator-v1.0.json"), UpstreamAuth: &want})
	got := e.stored(t, l.ID)
	if !got.HasUpstreamAuth() || bytes.Contains(got.UpstreamAuth, []byte("s3cret")) {
		t.Fatalf("stored credentials = %q, want sealed", got.UpstreamAuth)
	}
	opened, err := e.svc.OpenUpstreamAuth(got)
	if err != nil {
		t.Fatal(err)
	}
	if *opened != want {
		t.Errorf("OpenUpstreamAuth = %+v, want %+v", *opened, want)
	}
	none := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "summarizer-v0.3.json")})
	if a, err := e.svc.OpenUpstreamAuth(e.stored(t, none.ID)); a != nil || err != nil {
		t.Errorf("OpenUpstreamAuth without credentials = %+v, %v; want nil, nil", a, err)
	}
}

// Someone who can write the database but has no key must not be able to
// move a seller's sealed credentials onto a listing of their own (whose
// agent would then receive them from the meter): aesgcm promises that "a
// row moved between listings ... fails to open".
func TestUpstreamAuthIsBoundToItsListing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	victim := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "translator-v1.0.json"),
		UpstreamAuth: &listings.UpstreamAuth{Header: "Authorization", Value: "Bearer victim-token"}})
	thief := e.mustCreate(t, other, listings.CreateInput{Card: card(t, "summarizer-v0.3.json")})

	moved := e.stored(t, thief.ID)
	moved.UpstreamAuth = e.stored(t, victim.ID).UpstreamAuth
	if err := e.store.UpdateListing(ctx, moved, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.OpenUpstreamAuth(e.stored(t, thief.ID)); err == nil {
		t.Errorf("credentials moved to another listing opened as %+v, want an error", got)
	}
}

func TestUpdatePricingVersions(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	l := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "translator-v1.0.json"),
		Pricing: json.RawMessage(`{"currency": "usd", "monthly_fee_micros": 5000000}`)})

	steps := []struct {
		name        string
		pricing     string
		wantVersion int
		wantFee     int64
	}{
		{"same prices, other order, version echoed", `{"monthly_fee_micros": 5000000, "version": 1, "currency": "usd", "per_task_micros": 0}`, 1, 5_000_000},
		{"new fee", `{"currency": "usd", "monthly_fee_micros": 7000000}`, 2, 7_000_000},
		{"the new fee again", `{"currency": "usd", "monthly_fee_micros": 7000000}`, 2, 7_000_000},
		{"back to the first fee", `{"currency": "usd", "monthly_fee_micros": 5000000}`, 3, 5_000_000},
		{"new currency", `{"currency": "eur", "monthly_fee_micros": 5000000}`, 4, 5_000_000},
	}
	for _, s := range steps {
		e.clock.Advance(time.Minute)
		got, err := e.svc.Update(ctx, seller, l.ID, listings.UpdateInput{Pricing: json.RawMessage(s.pricing)})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		stored := e.stored(t, l.ID)
		if got.Plan.Version != s.wantVersion || stored.Plan.Version != s.wantVersion || stored.Plan.MonthlyFeeMicros != s.wantFee {
			t.Errorf("%s: plan = v%d (stored v%d, fee %d), want v%d fee %d", s.name, got.Plan.Version, stored.Plan.Version,
				stored.Plan.MonthlyFeeMicros, s.wantVersion, s.wantFee)
		}
	}
	// Every version is kept as first written.
	wantFees := map[int]int64{1: 5_000_000, 2: 7_000_000, 3: 5_000_000, 4: 5_000_000}
	for v, fee := range wantFees {
		p, err := e.store.Plan(ctx, l.ID, v)
		if err != nil || p.MonthlyFeeMicros != fee {
			t.Errorf("plan v%d = %+v, %v; want fee %d", v, p, err, fee)
		}
	}
	if p, err := e.store.Plan(ctx, l.ID, 2); err == nil && !p.CreatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("plan v2 created %v, want %v", p.CreatedAt, t0.Add(2*time.Minute))
	}
	if _, err := e.store.Plan(ctx, l.ID, 5); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("plan v5: %v, want not found", err)
	}

	_, err := e.svc.Update(ctx, seller, l.ID, listings.UpdateInput{Pricing: json.RawMessage(`{"currency": "usd", "monthly_fee_micros": "9"}`)})
	wantErr(t, err, agentmarket.Invalid, "invalid_listing", "pricing.monthly_fee_micros:type")
	if v := e.stored(t, l.ID).Plan.Version; v != 4 {
		t.Errorf("plan version after a refused change = %d, want 4", v)
	}
}

// TestUpdateRefusesBadText: a change's card URL and credentials follow the
// same text rule as on creation, and a refused change stores nothing.
func TestUpdateRefusesBadText(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	e.fetcher.serve(agentURL, card(t, "translator-v1.0.json"), "")
	l := e.mustCreate(t, seller, listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(pricing)})
	bad := agentURL + "\x00"
	_, err := e.svc.Update(ctx, seller, l.ID, listings.UpdateInput{CardURL: &bad,
		UpstreamAuth: &listings.UpstreamAuth{Header: "Authorization", Value: "Bearer \xff"}})
	wantErr(t, err, agentmarket.Invalid, "invalid_listing", "card_url:control_character upstream_auth.value:utf8")
	if got := e.stored(t, l.ID); got.CardURL != l.CardURL {
		t.Errorf("card URL after a refused change = %q, want %q", got.CardURL, l.CardURL)
	}
}
