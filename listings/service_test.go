package listings_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

func TestCreateFromURL(t *testing.T) {
	e := newEnv(t, false)
	raw := card(t, "translator-v1.0.json")
	e.fetcher.serve(agentURL, raw, `"v1"`)

	l := e.mustCreate(t, seller, listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(`{"currency": "usd", "per_task_micros": 2500}`)})

	if got, want := e.fetcher.calls, []string{agentURL}; !slices.Equal(got, want) {
		t.Errorf("fetches = %q, want %q", got, want)
	}
	got := e.stored(t, l.ID)
	checks := []struct {
		name      string
		got, want any
	}{
		{"seller", got.SellerOrgID, seller.OrgID},
		{"status", got.Status, listings.StatusPendingReview},
		{"health", got.Health, listings.HealthHealthy},
		{"card url", got.CardURL, agentURL},
		{"etag", got.CardETag, `"v1"`},
		{"card hash", got.CardHash, listings.Hash(raw)},
		{"card name", got.Card.Name, "Translator"},
		{"plan", fmt.Sprintf("%d %s %d", got.Plan.Version, got.Plan.Currency, got.Plan.PerTaskMicros), "1 usd 2500"},
		{"refresh interval", got.RefreshInterval, listings.DefaultRefreshInterval},
		{"next refresh", got.NextRefreshAt, t0.Add(listings.DefaultRefreshInterval)},
		{"fetched at", got.CardFetchedAt, t0},
	}
	for _, c := range checks {
		same := c.got == c.want
		if gt, ok := c.got.(time.Time); ok {
			same = gt.Equal(c.want.(time.Time))
		}
		if !same {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	vs := e.versions(t, l.ID)
	if len(vs) != 1 || vs[0].CardHash != listings.Hash(raw) || vs[0].SourceURL != agentURL {
		t.Errorf("versions = %+v, want the fetched card from %s", vs, agentURL)
	}
}

func TestCreateRefreshSeconds(t *testing.T) {
	secs := func(n int) *int { return &n }
	cases := []struct {
		name      string
		pasted    bool
		seconds   *int
		wantEvery time.Duration
		wantErr   string
	}{
		{"default", false, nil, listings.DefaultRefreshInterval, ""},
		{"two minutes", false, secs(120), 2 * time.Minute, ""},
		{"the minimum", false, secs(60), time.Minute, ""},
		{"zero disables", false, secs(0), 0, ""},
		{"a pasted card is never refreshed", true, secs(120), 0, ""},
		{"below the minimum", false, secs(59), 0, "refresh_seconds:range"},
		{"negative", false, secs(-1), 0, "refresh_seconds:range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			e.fetcher.serve(agentURL, card(t, "translator-v1.0.json"), "")
			in := listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(pricing), RefreshSeconds: tc.seconds}
			if tc.pasted {
				in.CardURL, in.Card = "", card(t, "translator-v1.0.json")
			}
			l, err := e.svc.Create(context.Background(), seller, in)
			if tc.wantErr != "" {
				wantErr(t, err, agentmarket.Invalid, "invalid_listing", tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := e.stored(t, l.ID)
			wantNext := time.Time{}
			if tc.wantEvery > 0 {
				wantNext = t0.Add(tc.wantEvery)
			}
			if got.RefreshInterval != tc.wantEvery || !got.NextRefreshAt.Equal(wantNext) {
				t.Errorf("refresh = every %v next %v, want every %v next %v", got.RefreshInterval, got.NextRefreshAt, tc.wantEvery, wantNext)
			}
		})
	}
}

func TestCreatePastedStatus(t *testing.T) {
	cases := []struct {
		name  string
		auto  bool
		draft bool
		want  listings.Status
	}{
		{"auto-approve on", true, false, listings.StatusPublished},
		{"auto-approve off", false, false, listings.StatusPendingReview},
		{"draft, auto-approve on", true, true, listings.StatusDraft},
		{"draft, auto-approve off", false, true, listings.StatusDraft},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.auto)
			raw := card(t, "summarizer-v0.3.json")
			l := e.mustCreate(t, seller, listings.CreateInput{Card: raw, Draft: tc.draft})
			got := e.stored(t, l.ID)
			if got.Status != tc.want {
				t.Errorf("status = %s, want %s", got.Status, tc.want)
			}
			if got.CardURL != "" || got.CardHash != listings.Hash(raw) || got.Card.Name != "Summarizer" {
				t.Errorf("card = %q %s %q, want the pasted card", got.CardURL, got.CardHash, got.Card.Name)
			}
			if len(e.fetcher.calls) != 0 {
				t.Errorf("a pasted card was fetched: %q", e.fetcher.calls)
			}
		})
	}
}

// padded returns a valid card padded with trailing spaces to n bytes.
func padded(t *testing.T, n int) json.RawMessage {
	raw := card(t, "translator-v1.0.json")
	return append(bytes.Clone(raw), bytes.Repeat([]byte(" "), n-len(raw))...)
}

func TestCreateInvalid(t *testing.T) {
	bad := &listings.UpstreamAuth{Header: "Bad Header", Value: "two\nlines"}
	cases := []struct {
		name   string
		in     func(t *testing.T) listings.CreateInput
		code   string
		fields string
	}{
		{"neither card nor URL", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:required"},
		{"card null", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: json.RawMessage("null"), Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:required"},
		{"both card and URL", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: agentURL, Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card:exclusive"},
		{"no pricing", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json")}
		}, "invalid_listing", "pricing:required"},
		{"bad pricing", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(`{"currency": "USD", "per_task_micros": -3}`)}
		}, "invalid_listing", "pricing.currency:format pricing.per_task_micros:non_negative"},
		{"bad credentials", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing), UpstreamAuth: bad}
		}, "invalid_listing", "upstream_auth.header:format upstream_auth.value:control_character"},
		{"credentials with NUL, and a megabyte long", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing),
				UpstreamAuth: &listings.UpstreamAuth{Header: "X-Key\x00", Value: strings.Repeat("k", 1<<20)}}
		}, "invalid_listing", "upstream_auth.header:control_character upstream_auth.value:max_length"},
		{"empty credentials", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing), UpstreamAuth: &listings.UpstreamAuth{}}
		}, "invalid_listing", "upstream_auth.header:format upstream_auth.value:format"},
		{"card URL over 2048 characters", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: agentURL + "?" + strings.Repeat("q", 2048), Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:max_length"},
		{"card URL with a line break", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: agentURL + "\n", Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:control_character"},
		{"every input problem at once", func(t *testing.T) listings.CreateInput {
			secs := 5
			return listings.CreateInput{CardURL: agentURL, Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(`{"monthly_fee_micros": 1.5}`),
				UpstreamAuth: bad, RefreshSeconds: &secs}
		}, "invalid_listing", "card:exclusive pricing.monthly_fee_micros:integer pricing.currency:required " +
			"upstream_auth.header:format upstream_auth.value:control_character refresh_seconds:range"},
		{"pasted card over 64 KiB", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: padded(t, listings.MaxCardBytes+1), Pricing: json.RawMessage(pricing)}
		}, "card_too_large", "card:max_size"},
		{"pasted card without a name", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: cardWithout(t, "translator-v1.0.json", "name"), Pricing: json.RawMessage(pricing)}
		}, "card_invalid", "card.name:required"},
		{"pasted card without name and description", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: cardWithout(t, "translator-v1.0.json", "name", "description"), Pricing: json.RawMessage(pricing)}
		}, "card_invalid", "card.name:required card.description:required"},
		{"pasted card that is not JSON", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: json.RawMessage(`{"name": `), Pricing: json.RawMessage(pricing)}
		}, "card_not_json", "card:json"},
		{"fetched card without a name", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: "https://nameless.example/card.json", Pricing: json.RawMessage(pricing)}
		}, "card_invalid", "card.name:required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.fetcher.serve("https://nameless.example/card.json", cardWithout(t, "translator-v1.0.json", "name"), "")
			_, err := e.svc.Create(context.Background(), seller, tc.in(t))
			wantErr(t, err, agentmarket.Invalid, tc.code, tc.fields)
			if n := countListings(t, e); n != 0 {
				t.Errorf("%d listings stored after a refused create", n)
			}
		})
	}
}

func countListings(t *testing.T, e *env) int {
	t.Helper()
	q := listings.Query{SellerOrgID: seller.OrgID}
	if err := q.Normalize(); err != nil {
		t.Fatal(err)
	}
	_, n, err := e.store.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateCardAtTheSizeLimit(t *testing.T) {
	e := newEnv(t, true)
	raw := padded(t, listings.MaxCardBytes)
	l := e.mustCreate(t, seller, listings.CreateInput{Card: raw})
	if got := len(e.stored(t, l.ID).CardJSON); got != listings.MaxCardBytes {
		t.Errorf("stored card is %d bytes, want %d", got, listings.MaxCardBytes)
	}
}

func TestCreateFetchError(t *testing.T) {
	e := newEnv(t, true)
	fetchErr := agentmarket.Errorf(agentmarket.Invalid, "card_fetch_failed", "could not fetch the card from agent.example")
	e.fetcher.err[agentURL] = fetchErr
	_, err := e.svc.Create(context.Background(), seller, listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(pricing)})
	if !errors.Is(err, fetchErr) {
		t.Errorf("Create = %v, want the fetch error", err)
	}
	if n := countListings(t, e); n != 0 {
		t.Errorf("%d listings stored after a failed fetch", n)
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

func TestRefresh(t *testing.T) {
	ctx := context.Background()
	v1, v2 := card(t, "translator-v1.0.json"), card(t, "summarizer-v0.3.json")

	// newListing lists the agent at agentURL, serving v1 with ETag "1".
	newListing := func(t *testing.T) (*env, *listings.Listing) {
		e := newEnv(t, true)
		e.fetcher.serve(agentURL, v1, `"1"`)
		l := e.mustCreate(t, seller, listings.CreateInput{CardURL: agentURL})
		e.fetcher.calls = nil
		e.clock.Advance(10 * time.Minute)
		return e, l
	}

	t.Run("a changed card becomes a new version", func(t *testing.T) {
		e, l := newListing(t)
		e.fetcher.serve(agentURL, v2, `"2"`)
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Health != listings.HealthHealthy || got.CardHash != listings.Hash(v2) {
			t.Errorf("Refresh = %s %s, want healthy with the new card", got.Health, got.CardHash)
		}
		if want := []string{agentURL + ` "1"`}; !slices.Equal(e.fetcher.calls, want) {
			t.Errorf("fetches = %q, want %q (the stored ETag sent)", e.fetcher.calls, want)
		}
		stored := e.stored(t, l.ID)
		now := t0.Add(10 * time.Minute)
		if stored.CardHash != listings.Hash(v2) || stored.Card.Name != "Summarizer" || stored.CardETag != `"2"` ||
			!stored.CardFetchedAt.Equal(now) || !stored.NextRefreshAt.Equal(now.Add(listings.DefaultRefreshInterval)) {
			t.Errorf("stored = %s %q %q fetched %v next %v", stored.CardHash, stored.Card.Name, stored.CardETag, stored.CardFetchedAt, stored.NextRefreshAt)
		}
		vs := e.versions(t, l.ID)
		if len(vs) != 2 || vs[0].CardHash != listings.Hash(v2) || vs[1].CardHash != listings.Hash(v1) {
			t.Errorf("versions = %d, want v2 then v1", len(vs))
		}
	})

	t.Run("a fetch error marks the listing unhealthy and keeps it", func(t *testing.T) {
		e, l := newListing(t)
		fetchErr := agentmarket.Errorf(agentmarket.Invalid, "card_status", "agent.example answered 503")
		e.fetcher.err[agentURL] = fetchErr
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		if !errors.Is(err, fetchErr) {
			t.Fatalf("Refresh error = %v, want the fetch error", err)
		}
		if got == nil || got.Health != listings.HealthUnhealthy {
			t.Fatalf("Refresh listing = %+v, want it returned unhealthy", got)
		}
		stored := e.stored(t, l.ID)
		if stored.Health != listings.HealthUnhealthy || !strings.Contains(stored.HealthDetail, "503") {
			t.Errorf("stored health = %s %q, want unhealthy saying why", stored.Health, stored.HealthDetail)
		}
		if stored.Status != listings.StatusPublished || stored.CardHash != listings.Hash(v1) || !stored.CardFetchedAt.Equal(t0) {
			t.Errorf("stored = %s %s fetched %v, want the listing and its card unchanged", stored.Status, stored.CardHash, stored.CardFetchedAt)
		}
		if n := len(e.versions(t, l.ID)); n != 1 {
			t.Errorf("%d versions, want 1", n)
		}

		// Once the agent answers again the listing is healthy again.
		delete(e.fetcher.err, agentURL)
		got, err = e.svc.Refresh(ctx, seller, l.ID)
		if err != nil || got.Health != listings.HealthHealthy || got.HealthDetail != "" {
			t.Errorf("Refresh after recovery = %s %q, %v; want healthy", got.Health, got.HealthDetail, err)
		}
	})

	t.Run("the health detail does not show an error's internal cause", func(t *testing.T) {
		e, l := newListing(t)
		cause := errors.New("dial tcp 10.20.30.40:443: connect: connection refused")
		e.fetcher.err[agentURL] = agentmarket.Wrap(agentmarket.Invalid, "card_fetch_failed", cause, "could not fetch the card from agent.example")
		if _, err := e.svc.Refresh(ctx, seller, l.ID); err == nil {
			t.Fatal("Refresh succeeded, want the fetch error")
		}
		stored := e.stored(t, l.ID)
		if !strings.Contains(stored.HealthDetail, "could not fetch the card") {
			t.Errorf("health detail = %q, want the public message", stored.HealthDetail)
		}
		if strings.Contains(stored.HealthDetail, "10.20.30.40") {
			t.Errorf("health detail = %q, shows the internal cause (Error.Err must be logged, never shown)", stored.HealthDetail)
		}
	})

	t.Run("a fetched card that became invalid marks the listing unhealthy", func(t *testing.T) {
		e, l := newListing(t)
		e.fetcher.serve(agentURL, cardWithout(t, "translator-v1.0.json", "name"), `"3"`)
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		wantErr(t, err, agentmarket.Invalid, "card_invalid", "card.name:required")
		if got.Health != listings.HealthUnhealthy || e.stored(t, l.ID).CardHash != listings.Hash(v1) {
			t.Errorf("after an invalid card: %s, card %s; want unhealthy with the old card", got.Health, e.stored(t, l.ID).CardHash)
		}
	})

	t.Run("not modified keeps the card and makes no version", func(t *testing.T) {
		e, l := newListing(t)
		stale := e.stored(t, l.ID)
		stale.Health, stale.HealthDetail = listings.HealthUnhealthy, "earlier failure"
		if err := e.store.UpdateListing(ctx, stale, nil); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		now := t0.Add(10 * time.Minute)
		stored := e.stored(t, l.ID)
		if got.Health != listings.HealthHealthy || stored.Health != listings.HealthHealthy || stored.HealthDetail != "" {
			t.Errorf("health = %s (stored %s %q), want healthy", got.Health, stored.Health, stored.HealthDetail)
		}
		if stored.CardHash != listings.Hash(v1) || stored.CardETag != `"1"` || !stored.CardFetchedAt.Equal(now) {
			t.Errorf("stored = %s %q fetched %v, want the same card checked at %v", stored.CardHash, stored.CardETag, stored.CardFetchedAt, now)
		}
		if n := len(e.versions(t, l.ID)); n != 1 {
			t.Errorf("%d versions, want 1", n)
		}
	})

	t.Run("who may refresh", func(t *testing.T) {
		e, l := newListing(t)
		if _, err := e.svc.Refresh(ctx, operator, l.ID); err != nil {
			t.Errorf("operator: %v", err)
		}
		_, err := e.svc.Refresh(ctx, other, l.ID)
		wantErr(t, err, agentmarket.Forbidden, "not_listing_owner", "")
	})

	t.Run("a pasted card cannot be refreshed", func(t *testing.T) {
		e := newEnv(t, true)
		l := e.mustCreate(t, seller, listings.CreateInput{Card: v1})
		_, err := e.svc.Refresh(ctx, seller, l.ID)
		wantErr(t, err, agentmarket.Invalid, "not_refreshable", "card_url:required")
		if len(e.fetcher.calls) != 0 {
			t.Errorf("fetches = %q, want none", e.fetcher.calls)
		}
	})
}

func TestRefreshDue(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	secs := func(n int) *int { return &n }
	urls := map[string]string{}
	for _, a := range []struct {
		name string
		secs *int
	}{{"minutely", secs(60)}, {"hourly", nil}, {"never", secs(0)}} {
		u := "https://" + a.name + ".example/card.json"
		e.fetcher.serve(u, card(t, "translator-v1.0.json"), `"1"`)
		urls[a.name] = u
		e.mustCreate(t, seller, listings.CreateInput{CardURL: u, RefreshSeconds: a.secs})
	}
	e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "summarizer-v0.3.json")})
	e.fetcher.calls = nil

	steps := []struct {
		advance time.Duration
		fail    string // a URL whose fetch fails during this step
		want    []string
	}{
		{30 * time.Second, "", nil},
		{90 * time.Second, "", []string{urls["minutely"]}},
		{0, "", nil}, // the minutely listing is next due a minute later
		{time.Hour, urls["minutely"], []string{urls["minutely"], urls["hourly"]}},
		{time.Minute, "", []string{urls["minutely"]}},
	}
	for i, s := range steps {
		e.clock.Advance(s.advance)
		e.fetcher.calls = nil
		if s.fail != "" {
			e.fetcher.err[s.fail] = agentmarket.Errorf(agentmarket.Invalid, "card_fetch_failed", "could not fetch")
		}
		n, err := e.svc.RefreshDue(ctx)
		if err != nil {
			t.Fatalf("step %d: RefreshDue: %v", i, err)
		}
		var got []string
		for _, c := range e.fetcher.calls {
			got = append(got, strings.Fields(c)[0])
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(s.want))
		if n != len(s.want) || !slices.Equal(got, want) {
			t.Errorf("step %d (at +%v): refreshed %d, fetched %q; want %q", i, e.clock.Now().Sub(t0), n, got, want)
		}
		delete(e.fetcher.err, s.fail)
	}
}
