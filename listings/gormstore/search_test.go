package gormstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/synth"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func synthStore(t *testing.T, db *relational.DB, n int) (*gormstore.Store, synth.Catalog) {
	t.Helper()
	ctx := context.Background()
	orgs := contractsgorm.New(db.DB)
	var sellers []string
	for i := range 7 {
		id := fmt.Sprintf("org_s%d", i)
		if err := orgs.CreateOrg(ctx, &contracts.Org{ID: id, Name: id, CreatedAt: time.Now()}, nil, nil); err != nil {
			t.Fatal(err)
		}
		sellers = append(sellers, id)
	}
	store := gormstore.New(db.DB)
	c := synth.Catalog{Seed: 42, Sellers: sellers}
	if err := c.Fill(ctx, 0, n, 97, store.CreateListings); err != nil {
		t.Fatal(err)
	}
	return store, c
}

// all pages through q and returns every id in order, and the total.
func all(t *testing.T, s listings.Store, q listings.Query) ([]string, int) {
	t.Helper()
	var out []string
	total := -1
	for page := 1; ; page++ {
		q.Page, q.PageSize = page, 50
		if err := q.Normalize(); err != nil {
			t.Fatal(err)
		}
		items, n, err := s.Search(context.Background(), q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if total >= 0 && n != total {
			t.Fatalf("%+v: total moved from %d to %d between pages", q, total, n)
		}
		total = n
		for _, l := range items {
			out = append(out, l.ID)
		}
		if len(items) < q.PageSize {
			return out, total
		}
	}
}

// TestSearchParity runs the benchmark's queries, and more, over the same
// synthetic catalog on SQLite and PostgreSQL: both find the same listings
// for every query, in the same order for every order but relevance (whose
// scores are each database's own: bm25 and ts_rank), with the same
// totals; and paging through a query never repeats or skips a listing.
func TestSearchParity(t *testing.T) {
	pgDB := relationaltest.Postgres(t) // skips first when there is no PostgreSQL
	lite, _ := synthStore(t, relationaltest.SQLite(t), 600)
	pg, _ := synthStore(t, pgDB, 600)
	var queries []listings.Query
	for _, bq := range BenchQueries {
		queries = append(queries, bq.Query)
	}
	for _, sort := range listings.Sorts {
		queries = append(queries, listings.Query{Sort: sort, Text: "contract"}, listings.Query{Sort: sort, Tag: "finance"})
	}
	queries = append(queries,
		listings.Query{Text: "summ legal", InputMode: "application/pdf"},
		listings.Query{Text: "extractr invioce"},
		listings.Query{Text: "Réport, W-2!"},
		listings.Query{SellerOrgID: "org_s3", Statuses: []listings.Status{listings.StatusDraft, listings.StatusSuspended}},
		listings.Query{Text: "agent", Statuses: []listings.Status{listings.StatusRetired, listings.StatusPublished}, Sort: "-created"},
		listings.Query{Currency: "gbp", Push: ptr(true)},
	)
	for i, q := range queries {
		if q.Statuses == nil {
			q.Statuses = []listings.Status{listings.StatusPublished}
		}
		t.Run(fmt.Sprintf("%d %s", i, q.Text), func(t *testing.T) {
			a, an := all(t, lite, q)
			b, bn := all(t, pg, q)
			if an != len(a) || bn != len(b) {
				t.Fatalf("totals %d and %d for %d and %d listings", an, bn, len(a), len(b))
			}
			if len(slices.Compact(slices.Sorted(slices.Values(a)))) != len(a) {
				t.Fatalf("sqlite repeats a listing across pages: %v", a)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(b)))) != len(b) {
				t.Fatalf("postgres repeats a listing across pages: %v", b)
			}
			if q.Normalize(); q.Sort == "relevance" {
				a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
			}
			if !slices.Equal(a, b) {
				t.Fatalf("sqlite and postgres differ for %+v:\n sqlite   %d %v\n postgres %d %v", q, len(a), a, len(b), b)
			}
		})
	}
}

// TestIndexMissing: a listing stored before the search index existed is
// found once IndexMissing ran, and only then.
func TestIndexMissing(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		store, c := synthStore(t, db, 30)
		l, _, err := c.Listing(3)
		if err != nil {
			t.Fatal(err)
		}
		q := listings.Query{Text: l.Card.Name, Statuses: []listings.Status{l.Status}, Sort: "name"}
		if err := q.Normalize(); err != nil {
			t.Fatal(err)
		}
		found := func() bool {
			items, _, err := store.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(items, func(x *listings.Listing) bool { return x.ID == l.ID })
		}
		if !found() {
			t.Fatalf("%s not found by its name %q", l.ID, l.Card.Name)
		}
		// As before migration 0030: no search row, no document.
		stmts := []string{"DELETE FROM listing_search WHERE listing_id = ?"}
		if db.Dialect == "sqlite" {
			stmts = []string{
				`INSERT INTO listing_fts (listing_fts, rowid, name, skills, description, facets) SELECT 'delete', doc_id, name, skills, description, facets
					FROM listing_fts_doc WHERE doc_id = (SELECT doc_id FROM listing_search WHERE listing_id = ?)`,
				"DELETE FROM listing_fts_doc WHERE doc_id = (SELECT doc_id FROM listing_search WHERE listing_id = ?)",
				stmts[0],
			}
		}
		for _, stmt := range stmts {
			if err := db.Exec(stmt, l.ID).Error; err != nil {
				t.Fatal(err)
			}
		}
		if found() {
			t.Fatal("found without a search row")
		}
		if n, err := store.IndexMissing(ctx); err != nil || n != 1 {
			t.Fatalf("IndexMissing = %d, %v; want 1", n, err)
		}
		if !found() {
			t.Fatal("not found after IndexMissing")
		}
		if n, err := store.IndexMissing(ctx); err != nil || n != 0 {
			t.Fatalf("IndexMissing again = %d, %v; want 0", n, err)
		}
	})
}

func TestCreateListingsRefusesUnpairedVersions(t *testing.T) {
	store := gormstore.New(relationaltest.SQLite(t).DB)
	if err := store.CreateListings(context.Background(), []*listings.Listing{{ID: "lst_x"}}, nil); err == nil {
		t.Fatal("CreateListings with a listing and no card version succeeded")
	}
}
