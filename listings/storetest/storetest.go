// Package storetest is the contract every listings.Store must meet. Each
// implementation's tests call Run; the same assertions then hold on SQLite
// and on PostgreSQL alike.
package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Factory returns a fresh, empty store and a function that creates an org
// (listings reference their seller org).
type Factory func(t *testing.T) (listings.Store, func(orgID string))

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Card reads a fixture card of this package's testdata by file name.
func Card(tb testing.TB, name string) []byte {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func newListing(t *testing.T, id, org, cardFile string, fee int64, status listings.Status, created time.Time) (*listings.Listing, *listings.CardVersion) {
	t.Helper()
	raw := Card(t, cardFile)
	c, err := agentcard.Parse(raw)
	if err != nil {
		t.Fatalf("fixture %s: %v", cardFile, err)
	}
	l := &listings.Listing{
		ID: id, SellerOrgID: org, Status: status, Health: listings.HealthHealthy,
		CardURL: "http://127.0.0.1:1/" + cardFile, Card: c, CardJSON: raw, CardHash: listings.Hash(raw), CardFetchedAt: created,
		Plan:            listings.Plan{Version: 1, Currency: "usd", MonthlyFeeMicros: fee, InputTokensPerMillionMicros: 3_000_000, CreatedAt: created},
		UpstreamAuth:    []byte{1, 2, 3, 0, 255},
		RefreshInterval: time.Hour, NextRefreshAt: created.Add(time.Hour),
		Limits: listings.Limits{RequestTimeout: 5 * time.Second, MaxResultBytes: 4096, IdempotencyWindow: time.Hour,
			StallAfter: 90 * time.Second},
		CreatedAt: created, UpdatedAt: created,
	}
	return l, &listings.CardVersion{ListingID: id, CardHash: l.CardHash, CardJSON: raw, SourceURL: l.CardURL, FetchedAt: created}
}

// Run runs the contract suite.
func Run(t *testing.T, newStore Factory) {
	ctx := context.Background()

	t.Run("an incident is set and cleared on its own, and an update keeps it", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		l, v := newListing(t, "lst_1", "org_a", "translator-v1.0.json", 5_000_000, listings.StatusPublished, t0)
		if err := s.CreateListing(ctx, l, v); err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 11, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
		if err := s.SetIncident(ctx, "lst_1", &listings.Incident{At: at, Detail: "reused a task id"}); err != nil {
			t.Fatal(err)
		}
		l.HealthDetail = "refreshed" // an update of a listing read before the incident
		if err := s.UpdateListing(ctx, l, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetListing(ctx, "lst_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Incident == nil || !got.Incident.At.Equal(at) || got.Incident.At.Location() != time.UTC || got.Incident.Detail != "reused a task id" || got.Healthy() {
			t.Fatalf("incident = %+v, healthy %v", got.Incident, got.Healthy())
		}
		if err := s.SetIncident(ctx, "lst_1", nil); err != nil {
			t.Fatal(err)
		}
		if got, err = s.GetListing(ctx, "lst_1"); err != nil || got.Incident != nil || !got.Healthy() {
			t.Fatalf("after clearing: %+v, %v", got, err)
		}
		if err := s.SetIncident(ctx, "lst_none", nil); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("unknown listing: %v", err)
		}
	})

	t.Run("lost tasks are counted, and an update keeps the count", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		l, v := newListing(t, "lst_1", "org_a", "translator-v1.0.json", 5_000_000, listings.StatusPublished, t0)
		if err := s.CreateListing(ctx, l, v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetListing(ctx, "lst_1"); err != nil || got.LostTasks != nil {
			t.Fatalf("a new listing's lost tasks = %+v, %v", got.LostTasks, err)
		}
		at := time.Date(2026, 11, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
		for i := range 2 {
			if err := s.CountLostTask(ctx, "lst_1", at.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		l.HealthDetail = "refreshed"
		if err := s.UpdateListing(ctx, l, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetListing(ctx, "lst_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.LostTasks == nil || got.LostTasks.Count != 2 || !got.LostTasks.LastAt.Equal(at.Add(time.Minute)) || got.LostTasks.LastAt.Location() != time.UTC || !got.Healthy() {
			t.Fatalf("lost tasks = %+v, healthy %v", got.LostTasks, got.Healthy())
		}
		if err := s.CountLostTask(ctx, "lst_none", at); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("unknown listing: %v", err)
		}
	})

	t.Run("create and get round trip", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		l, v := newListing(t, "lst_1", "org_a", "translator-v1.0.json", 5_000_000, listings.StatusPublished, t0)
		if err := s.CreateListing(ctx, l, v); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetListing(ctx, "lst_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Card == nil || got.Card.Name != l.Card.Name || got.CardHash != l.CardHash || string(got.CardJSON) != string(l.CardJSON) {
			t.Fatalf("card not kept: %+v", got)
		}
		if !got.Plan.SamePrices(l.Plan) || got.Plan.Version != 1 {
			t.Fatalf("plan = %+v, want %+v", got.Plan, l.Plan)
		}
		if string(got.UpstreamAuth) != string(l.UpstreamAuth) {
			t.Fatalf("sealed auth = %v, want %v", got.UpstreamAuth, l.UpstreamAuth)
		}
		if got.Limits != l.Limits {
			t.Fatalf("limits = %+v, want %+v", got.Limits, l.Limits)
		}
		if !got.CreatedAt.Equal(t0) || !got.NextRefreshAt.Equal(t0.Add(time.Hour)) || got.RefreshInterval != time.Hour {
			t.Fatalf("times = %v %v %v", got.CreatedAt, got.NextRefreshAt, got.RefreshInterval)
		}
		vs, err := s.CardVersions(ctx, "lst_1")
		if err != nil || len(vs) != 1 || vs[0].CardHash != l.CardHash {
			t.Fatalf("versions = %+v, %v", vs, err)
		}
	})

	t.Run("unknown listing is not found", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.GetListing(ctx, "lst_nope")
		if agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("err = %v, want not found", err)
		}
	})

	t.Run("update keeps plan versions and card history", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		l, v := newListing(t, "lst_1", "org_a", "translator-v1.0.json", 5_000_000, listings.StatusPublished, t0)
		if err := s.CreateListing(ctx, l, v); err != nil {
			t.Fatal(err)
		}
		l.Plan = listings.Plan{Version: 2, Currency: "usd", MonthlyFeeMicros: 9_000_000, TrialDays: 14, TrialTokens: 2_000_000,
			TrialCapMicros: 5_000_000, CreatedAt: t0.Add(time.Minute)}
		raw := Card(t, "summarizer-v0.3.json")
		c, _ := agentcard.Parse(raw)
		l.Card, l.CardJSON, l.CardHash = c, raw, listings.Hash(raw)
		l.Health, l.HealthDetail = listings.HealthUnhealthy, "boom"
		nv := &listings.CardVersion{ListingID: "lst_1", CardHash: l.CardHash, CardJSON: raw, FetchedAt: t0.Add(time.Minute)}
		if err := s.UpdateListing(ctx, l, nv); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetListing(ctx, "lst_1")
		if err != nil {
			t.Fatal(err)
		}
		if want := l.Plan; !got.Plan.SamePrices(want) || got.Plan.Version != 2 {
			t.Fatalf("plan after update = %+v, want %+v", got.Plan, want)
		}
		if got.Plan.Version != 2 || got.Plan.MonthlyFeeMicros != 9_000_000 || got.Health != listings.HealthUnhealthy || got.Card.Name != c.Name {
			t.Fatalf("after update: %+v", got)
		}
		p1, err := s.Plan(ctx, "lst_1", 1)
		if err != nil || p1.MonthlyFeeMicros != 5_000_000 {
			t.Fatalf("plan v1 = %+v, %v (plan versions must be kept)", p1, err)
		}
		// Writing version 2 again with other prices must not rewrite it.
		l.Plan.MonthlyFeeMicros = 1
		if err := s.UpdateListing(ctx, l, nil); err != nil {
			t.Fatal(err)
		}
		p2, _ := s.Plan(ctx, "lst_1", 2)
		if p2.MonthlyFeeMicros != 9_000_000 {
			t.Fatalf("plan v2 rewritten to %d", p2.MonthlyFeeMicros)
		}
		vs, _ := s.CardVersions(ctx, "lst_1")
		if len(vs) != 2 || vs[0].CardHash != l.CardHash {
			t.Fatalf("versions newest first = %+v", vs)
		}
		// The search index follows the card in force.
		items, total, err := s.Search(ctx, query(listings.Query{Skill: "summarize"}))
		if err != nil || total != 1 || items[0].ID != "lst_1" {
			t.Fatalf("search after card change = %d, %v", total, err)
		}
		_, total, _ = s.Search(ctx, query(listings.Query{Skill: "translate"}))
		if total != 0 {
			t.Fatalf("old skill still indexed")
		}
	})

	t.Run("update of an unknown listing is not found", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		l, _ := newListing(t, "lst_x", "org_a", "translator-v1.0.json", 0, listings.StatusPublished, t0)
		if err := s.UpdateListing(ctx, l, nil); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("search", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		org("org_b")
		seed := []struct {
			id, org, card string
			fee           int64
			status        listings.Status
		}{
			{"lst_tr", "org_a", "translator-v1.0.json", 5_000_000, listings.StatusPublished},
			{"lst_su", "org_b", "summarizer-v0.3.json", 20_000_000, listings.StatusPublished},
			{"lst_ex", "org_a", "extractor-v1.0.json", 0, listings.StatusPublished},
			{"lst_dr", "org_b", "translator-v1.0.json", 1_000_000, listings.StatusDraft},
		}
		for i, sd := range seed {
			l, v := newListing(t, sd.id, sd.org, sd.card, sd.fee, sd.status, t0.Add(time.Duration(i)*time.Minute))
			if err := s.CreateListing(ctx, l, v); err != nil {
				t.Fatal(err)
			}
		}
		pub := []listings.Status{listings.StatusPublished}
		tr, fa := true, false
		fee := int64(5_000_000)
		cases := []struct {
			name string
			q    listings.Query
			want []string
		}{
			{"all published by name", listings.Query{Statuses: pub}, []string{"lst_ex", "lst_su", "lst_tr"}},
			{"free text in description", listings.Query{Text: "LEGAL contracts", Statuses: pub}, []string{"lst_ex"}},
			{"free text in skill name", listings.Query{Text: "summar", Statuses: pub}, []string{"lst_su"}},
			{"free text wildcard characters are not wildcards", listings.Query{Text: "su%ize", Statuses: pub}, nil},
			{"free text without a word filters nothing", listings.Query{Text: "% -- ", Statuses: pub}, []string{"lst_ex", "lst_su", "lst_tr"}},
			{"skill by id", listings.Query{Skill: "translate", Statuses: pub}, []string{"lst_tr"}},
			{"skill by name, any case", listings.Query{Skill: "Summarize Document", Statuses: pub}, []string{"lst_su"}},
			{"tag", listings.Query{Tag: "legal", Statuses: pub}, []string{"lst_ex"}},
			{"input mode", listings.Query{InputMode: "application/pdf", Statuses: pub}, []string{"lst_ex", "lst_su"}},
			{"output mode", listings.Query{OutputMode: "application/json", Statuses: pub}, []string{"lst_ex"}},
			{"streaming", listings.Query{Streaming: &tr, Statuses: pub}, []string{"lst_su", "lst_tr"}},
			{"no push", listings.Query{Push: &fa, Statuses: pub}, []string{"lst_ex", "lst_su"}},
			{"price ceiling", listings.Query{MaxMonthlyFeeMicros: &fee, Statuses: pub}, []string{"lst_ex", "lst_tr"}},
			{"seller, any status", listings.Query{SellerOrgID: "org_b"}, []string{"lst_su", "lst_dr"}},
			{"price descending", listings.Query{Sort: "-price", Statuses: pub}, []string{"lst_su", "lst_tr", "lst_ex"}},
			{"newest first", listings.Query{Sort: "-created", Statuses: pub}, []string{"lst_ex", "lst_su", "lst_tr"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				items, total, err := s.Search(ctx, query(tc.q))
				if err != nil {
					t.Fatal(err)
				}
				got, want := ids(items), tc.want
				if want == nil {
					want = []string{}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || total != len(want) {
					t.Fatalf("got %v (total %d), want %v", got, total, want)
				}
			})
		}
		t.Run("paging", func(t *testing.T) {
			q := query(listings.Query{Statuses: pub, PageSize: 2, Page: 2})
			items, total, err := s.Search(ctx, q)
			if err != nil || total != 3 || fmt.Sprint(ids(items)) != "[lst_tr]" {
				t.Fatalf("page 2 = %v total %d err %v", ids(items), total, err)
			}
		})
	})

	t.Run("text search", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		org("org_b")
		seed := []struct {
			id, org, card, currency string
			fee                     int64
			status                  listings.Status
		}{
			{"lst_tr", "org_a", "translator-v1.0.json", "usd", 5_000_000, listings.StatusPublished},
			{"lst_su", "org_b", "summarizer-v0.3.json", "usd", 20_000_000, listings.StatusPublished},
			{"lst_ex", "org_a", "extractor-v1.0.json", "usd", 0, listings.StatusPublished},
			{"lst_cd", "org_b", "contract-drafter-v0.3.json", "eur", 10_000_000, listings.StatusPublished},
			{"lst_bw", "org_a", "report-writer-v1.0.json", "usd", 15_000_000, listings.StatusPublished},
			{"lst_dr", "org_b", "translator-v1.0.json", "usd", 1_000_000, listings.StatusDraft},
		}
		byID := map[string]*listings.Listing{}
		for i, sd := range seed {
			l, v := newListing(t, sd.id, sd.org, sd.card, sd.fee, sd.status, t0.Add(time.Duration(i)*time.Minute))
			l.Plan.Currency = sd.currency
			if err := s.CreateListing(ctx, l, v); err != nil {
				t.Fatal(err)
			}
			byID[sd.id] = l
		}
		pub := []listings.Status{listings.StatusPublished}
		tr, fa := true, false
		fee15 := int64(15_000_000)
		cases := []struct {
			name string
			q    listings.Query
			// want is the exact order; when first is set, want is the set
			// of results and first the one that must lead (the ranks of
			// the others are the databases' own: bm25 or ts_rank).
			want  []string
			first string
		}{
			{"a name match outranks description matches", listings.Query{Text: "contract"}, []string{"lst_cd", "lst_ex"}, ""},
			{"every word must match", listings.Query{Text: "legal contract"}, []string{"lst_ex"}, ""},
			{"words match as prefixes", listings.Query{Text: "writ"}, []string{"lst_bw", "lst_cd", "lst_su"}, "lst_bw"},
			{"case does not matter", listings.Query{Text: "SUMMARIZE"}, []string{"lst_su"}, ""},
			{"a letter missing", listings.Query{Text: "sumarize"}, []string{"lst_su"}, ""},
			{"a letter added", listings.Query{Text: "contracts legall"}, []string{"lst_ex"}, ""},
			{"two letters swapped", listings.Query{Text: "trnaslate"}, []string{"lst_tr"}, ""},
			{"a letter changed", listings.Query{Text: "translatpr"}, []string{"lst_tr"}, ""},
			{"five letters allow a typo", listings.Query{Text: "brisf"}, []string{"lst_bw", "lst_cd", "lst_su"}, "lst_bw"},
			{"four letters do not", listings.Query{Text: "brif"}, nil, ""},
			{"shorter words must match exactly or as a prefix", listings.Query{Text: "pdg"}, nil, ""},
			{"two edits are too many", listings.Query{Text: "smmarise"}, nil, ""},
			{"stop words are ignored", listings.Query{Text: "the brief"}, []string{"lst_bw", "lst_cd", "lst_su"}, "lst_bw"},
			{"drafts are not found", listings.Query{Text: "translator"}, []string{"lst_tr"}, ""},
			{"text and streaming", listings.Query{Text: "brief", Streaming: &tr}, []string{"lst_bw", "lst_su"}, "lst_bw"},
			{"text and no streaming", listings.Query{Text: "brief", Streaming: &fa}, []string{"lst_cd"}, ""},
			{"text and push", listings.Query{Text: "brief", Push: &tr}, []string{"lst_cd"}, ""},
			{"text and input mode", listings.Query{Text: "brief", InputMode: "application/pdf"}, []string{"lst_bw", "lst_su"}, "lst_bw"},
			{"text and output mode", listings.Query{Text: "brief", OutputMode: "application/json"}, []string{"lst_cd"}, ""},
			{"text and skill", listings.Query{Text: "brief", Skill: "Write Reports"}, []string{"lst_bw"}, ""},
			{"text, tag and price ceiling", listings.Query{Text: "brief", Tag: "writing", MaxMonthlyFeeMicros: &fee15}, []string{"lst_bw", "lst_cd"}, "lst_bw"},
			{"text and currency", listings.Query{Text: "brief", Currency: "EUR"}, []string{"lst_cd"}, ""},
			{"text and seller", listings.Query{Text: "brief", SellerOrgID: "org_b"}, []string{"lst_cd", "lst_su"}, "lst_su"},
			{"text and every filter", listings.Query{Text: "reports", Tag: "writing", Skill: "summarize", InputMode: "application/pdf",
				OutputMode: "text/markdown", Streaming: &tr, Push: &fa, MaxMonthlyFeeMicros: ptr(int64(20_000_000)), Currency: "usd", SellerOrgID: "org_b"},
				[]string{"lst_su"}, ""},
			{"text sorted by name", listings.Query{Text: "brief", Sort: "name"}, []string{"lst_bw", "lst_cd", "lst_su"}, ""},
			{"text sorted by price, highest first", listings.Query{Text: "brief", Sort: "-price"}, []string{"lst_su", "lst_bw", "lst_cd"}, ""},
			{"text sorted by date", listings.Query{Text: "brief", Sort: "created"}, []string{"lst_su", "lst_cd", "lst_bw"}, ""},
			{"filters without text, by name", listings.Query{Tag: "writing", Streaming: &tr, OutputMode: "text/markdown"}, []string{"lst_bw", "lst_su"}, ""},
			{"filters without text, by price", listings.Query{Tag: "writing", Sort: "price"}, []string{"lst_cd", "lst_bw", "lst_su"}, ""},
			{"currency without text", listings.Query{Currency: "eur"}, []string{"lst_cd"}, ""},
			{"relevance without text is by name", listings.Query{Sort: "relevance", Push: &tr}, []string{"lst_cd", "lst_tr"}, ""},
			{"the draft, for its seller", listings.Query{Text: "translator", SellerOrgID: "org_b", Statuses: []listings.Status{listings.StatusDraft, listings.StatusPublished}}, []string{"lst_dr"}, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.q.Statuses == nil {
					tc.q.Statuses = pub
				}
				items, total, err := s.Search(ctx, query(tc.q))
				if err != nil {
					t.Fatal(err)
				}
				got, want := ids(items), tc.want
				if want == nil {
					want = []string{}
				}
				if tc.first != "" {
					if len(got) == 0 || got[0] != tc.first {
						t.Errorf("got %v, want %s first", got, tc.first)
					}
					got = slices.Sorted(slices.Values(got))
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || total != len(want) {
					t.Fatalf("got %v (total %d), want %v", got, total, want)
				}
			})
		}
		t.Run("relevance is the default with text, and pages follow it", func(t *testing.T) {
			items, total, err := s.Search(ctx, query(listings.Query{Text: "contract", Statuses: pub, PageSize: 1, Page: 2}))
			if err != nil || total != 2 || fmt.Sprint(ids(items)) != "[lst_ex]" {
				t.Fatalf("page 2 = %v total %d err %v", ids(items), total, err)
			}
		})
		t.Run("a page past the end is empty, with the total", func(t *testing.T) {
			items, total, err := s.Search(ctx, query(listings.Query{Text: "contract", Statuses: pub, PageSize: 2, Page: 2}))
			if err != nil || total != 2 || len(items) != 0 {
				t.Fatalf("page 2 = %v total %d err %v", ids(items), total, err)
			}
		})
		t.Run("an update moves the listing in search", func(t *testing.T) {
			l := byID["lst_bw"]
			l.Status = listings.StatusSuspended
			if err := s.UpdateListing(ctx, l, nil); err != nil {
				t.Fatal(err)
			}
			defer func() {
				l.Status = listings.StatusPublished
				if err := s.UpdateListing(ctx, l, nil); err != nil {
					t.Fatal(err)
				}
			}()
			items, _, err := s.Search(ctx, query(listings.Query{Text: "brief", Statuses: pub, Sort: "name"}))
			if err != nil || fmt.Sprint(ids(items)) != "[lst_cd lst_su]" {
				t.Fatalf("after suspending: %v, %v", ids(items), err)
			}
			c := byID["lst_cd"]
			c.Plan = listings.Plan{Version: 2, Currency: "usd", MonthlyFeeMicros: 1, CreatedAt: t0.Add(time.Hour)}
			if err := s.UpdateListing(ctx, c, nil); err != nil {
				t.Fatal(err)
			}
			items, _, err = s.Search(ctx, query(listings.Query{Text: "brief", Statuses: pub, Currency: "usd", MaxMonthlyFeeMicros: ptr(int64(1))}))
			if err != nil || fmt.Sprint(ids(items)) != "[lst_cd]" {
				t.Fatalf("after the plan changed: %v, %v", ids(items), err)
			}
		})
	})

	t.Run("due for refresh", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		a, va := newListing(t, "lst_a", "org_a", "translator-v1.0.json", 0, listings.StatusPublished, t0)
		b, vb := newListing(t, "lst_b", "org_a", "summarizer-v0.3.json", 0, listings.StatusPublished, t0.Add(2*time.Hour))
		c, vc := newListing(t, "lst_c", "org_a", "extractor-v1.0.json", 0, listings.StatusPublished, t0)
		c.RefreshInterval, c.NextRefreshAt = 0, time.Time{}
		for _, p := range []struct {
			l *listings.Listing
			v *listings.CardVersion
		}{{a, va}, {b, vb}, {c, vc}} {
			if err := s.CreateListing(ctx, p.l, p.v); err != nil {
				t.Fatal(err)
			}
		}
		due, err := s.DueForRefresh(ctx, t0.Add(90*time.Minute), 10)
		if err != nil || fmt.Sprint(ids(due)) != "[lst_a]" {
			t.Fatalf("due = %v, %v", ids(due), err)
		}
	})
}

func query(q listings.Query) listings.Query {
	if err := q.Normalize(); err != nil {
		panic(err)
	}
	return q
}

func ptr[T any](v T) *T { return &v }

func ids(ls []*listings.Listing) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

// RunOffers runs the contract suite of private offers on a store that
// keeps them beside listings.
func RunOffers(t *testing.T, newStore func(t *testing.T) (interface {
	listings.Store
	listings.OfferStore
}, func(orgID string))) {
	ctx := context.Background()
	setup := func(t *testing.T) (interface {
		listings.Store
		listings.OfferStore
	}, *listings.Listing) {
		s, org := newStore(t)
		for _, o := range []string{"org_s", "org_b", "org_c"} {
			org(o)
		}
		l, v := newListing(t, "lst_1", "org_s", "translator-v1.0.json", 5_000_000, listings.StatusPublished, t0)
		if err := s.CreateListing(ctx, l, v); err != nil {
			t.Fatal(err)
		}
		return s, l
	}
	offer := func(id, buyer string, version int, at time.Time) *listings.Offer {
		return &listings.Offer{ID: id, ListingID: "lst_1", SellerOrgID: "org_s", BuyerOrgID: buyer,
			Plan: listings.Plan{Version: version, Currency: "usd", MonthlyFeeMicros: 1_000_000, MinCommitMicros: 20_000_000, TrialDays: 7,
				MaxCallInputTokens: 500, MaxCallOutputTokens: 700, MaxCallComputeMs: 9_000, BuyerOrgID: buyer, CreatedAt: at},
			ExpiresAt: at.Add(30 * 24 * time.Hour), Status: listings.OfferOpen, CreatedAt: at}
	}

	t.Run("offers: a private plan version, numbered after every other", func(t *testing.T) {
		s, l := setup(t)
		if v, err := s.NextPlanVersion(ctx, "lst_1"); err != nil || v != 2 {
			t.Fatalf("NextPlanVersion = %d, %v; want 2", v, err)
		}
		if v, err := s.NextPlanVersion(ctx, "lst_none"); err != nil || v != 1 {
			t.Fatalf("NextPlanVersion(no plans) = %d, %v; want 1", v, err)
		}
		o := offer("ofr_1", "org_b", 2, t0.Add(time.Hour))
		if err := s.CreateOffer(ctx, o); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetOffer(ctx, "ofr_1")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(*got) != fmt.Sprint(*o) {
			t.Fatalf("GetOffer =\n  %+v\nwant\n  %+v", *got, *o)
		}
		p, err := s.Plan(ctx, "lst_1", 2)
		if err != nil || p.BuyerOrgID != "org_b" || p.MinCommitMicros != 20_000_000 || p.TrialDays != 7 ||
			p.MaxCallInputTokens != 500 || p.MaxCallOutputTokens != 700 || p.MaxCallComputeMs != 9_000 {
			t.Fatalf("the offer's plan = %+v, %v", p, err)
		}
		if v, _ := s.NextPlanVersion(ctx, "lst_1"); v != 3 {
			t.Fatalf("NextPlanVersion after the offer = %d, want 3", v)
		}
		if got, _ := s.GetListing(ctx, "lst_1"); got.Plan.Version != 1 || got.Plan.BuyerOrgID != "" {
			t.Fatalf("the listing's plan became %+v", got.Plan)
		}
		// The same version twice is a Conflict; a public update onto the
		// private version is refused.
		if err := s.CreateOffer(ctx, offer("ofr_2", "org_c", 2, t0)); agentmarket.KindOf(err) != agentmarket.Conflict {
			t.Fatalf("an offer on a taken version: %v", err)
		}
		if _, err := s.GetOffer(ctx, "ofr_2"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("a refused offer was stored: %v", err)
		}
		l.Plan = listings.Plan{Version: 2, Currency: "usd", MonthlyFeeMicros: 1, CreatedAt: t0}
		if err := s.UpdateListing(ctx, l, nil); agentmarket.CodeOf(err) != "plan_version_taken" {
			t.Fatalf("a public plan on a private version: %v", err)
		}
	})

	t.Run("offers: listed by seller and by buyer, decided once", func(t *testing.T) {
		s, _ := setup(t)
		for i, o := range []*listings.Offer{offer("ofr_1", "org_b", 2, t0), offer("ofr_2", "org_c", 3, t0.Add(time.Minute)),
			offer("ofr_3", "org_b", 4, t0.Add(2*time.Minute))} {
			if err := s.CreateOffer(ctx, o); err != nil {
				t.Fatalf("offer %d: %v", i, err)
			}
		}
		ids := func(q listings.OfferQuery) string {
			os, err := s.ListOffers(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, o := range os {
				out = append(out, o.ID)
			}
			return fmt.Sprint(out)
		}
		for q, want := range map[listings.OfferQuery]string{
			{SellerOrgID: "org_s"}:                    "[ofr_3 ofr_2 ofr_1]",
			{BuyerOrgID: "org_b"}:                     "[ofr_3 ofr_1]",
			{BuyerOrgID: "org_c", ListingID: "lst_1"}: "[ofr_2]",
			{BuyerOrgID: "org_s"}:                     "[]",
			{SellerOrgID: "org_s", ListingID: "x"}:    "[]",
		} {
			if got := ids(q); got != want {
				t.Errorf("ListOffers(%+v) = %s, want %s", q, got, want)
			}
		}
		at := t0.Add(time.Hour)
		o, err := s.DecideOffer(ctx, "ofr_1", listings.OfferAccepted, "ctr_1", at)
		if err != nil || o.Status != listings.OfferAccepted || o.ContractID != "ctr_1" || !o.DecidedAt.Equal(at) {
			t.Fatalf("DecideOffer(accepted) = %+v, %v", o, err)
		}
		if _, err := s.DecideOffer(ctx, "ofr_1", listings.OfferWithdrawn, "", at); agentmarket.CodeOf(err) != "offer_not_open" {
			t.Fatalf("withdrawing an accepted offer: %v", err)
		}
		if _, err := s.DecideOffer(ctx, "ofr_none", listings.OfferWithdrawn, "", at); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("deciding an unknown offer: %v", err)
		}
		if o, _ := s.GetOffer(ctx, "ofr_1"); o.Status != listings.OfferAccepted || o.ContractID != "ctr_1" {
			t.Fatalf("after the refused withdrawal: %+v", o)
		}
		if o := offer("x", "org_b", 9, t0); o.StatusAt(o.ExpiresAt) != listings.OfferExpired || o.StatusAt(o.ExpiresAt.Add(-time.Second)) != listings.OfferOpen {
			t.Errorf("StatusAt around the expiry is wrong")
		}
	})
}
