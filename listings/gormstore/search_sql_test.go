package gormstore_test

import (
	"reflect"
	"testing"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/gormstore"
)

// TestSearchSQL pins the statements a search runs on each database.
func TestSearchSQL(t *testing.T) {
	pub := []listings.Status{listings.StatusPublished}
	tr := true
	fee := int64(5)
	const (
		ftsJoin  = "SELECT COUNT(*) FROM listing_fts JOIN listing_search s ON s.doc_id = listing_fts.rowid WHERE listing_fts MATCH ?"
		ftsAlone = "SELECT COUNT(*) FROM listing_fts WHERE listing_fts MATCH ?"
		pgCount  = "SELECT COUNT(*) FROM listing_documents d WHERE d.document @@ CAST(? AS tsquery)"
		pgDocs   = "FROM listing_documents d WHERE d.document @@ CAST(? AS tsquery)"
		// A PostgreSQL query with words counts and reads its page in one
		// statement: the matches once, then their count and the page.
		pgCTE     = "WITH m AS MATERIALIZED (SELECT d.listing_id, d.name_key"
		pgRank    = ", -ts_rank('{0, 0.1, 0.5, 1}', d.document, CAST(? AS tsquery)) AS rank"
		pgCounted = " SELECT c.total, pg.listing_id FROM (SELECT COUNT(*) AS total FROM m) c LEFT JOIN LATERAL (SELECT m.listing_id FROM m ORDER BY "
		pubFacet  = `"zs7075626c6973686564"`
		pubLex    = `'~spublished'`
	)
	cases := []struct {
		name       string
		q          listings.Query
		words      []gormstore.WordMatch
		walk       bool
		dialect    string
		count      string
		countArgs  []any
		page       string
		pageArgs   []any
		wantedSort string
	}{
		{
			name: "browsing reads the columns alone", q: listings.Query{Statuses: pub}, dialect: "sqlite",
			count: "SELECT COUNT(*) FROM listing_search s WHERE s.status IN (?)", countArgs: []any{"published"},
			page:     "SELECT s.listing_id FROM listing_search s WHERE s.status IN (?) ORDER BY s.name_key ASC, s.listing_id ASC LIMIT 20 OFFSET 0",
			pageArgs: []any{"published"},
		},
		{
			name: "browsing, postgres, newest first, page 3", q: listings.Query{Statuses: pub, Sort: "-created", Page: 3, PageSize: 10}, dialect: "postgres",
			count: "SELECT COUNT(*) FROM listing_search s WHERE s.status IN (?)", countArgs: []any{"published"},
			page:     "SELECT s.listing_id FROM listing_search s WHERE s.status IN (?) ORDER BY s.created_at DESC, s.listing_id DESC LIMIT 10 OFFSET 20",
			pageArgs: []any{"published"},
		},
		{
			name: "words with a typo expansion, seller and price, sqlite", dialect: "sqlite",
			q:     listings.Query{Statuses: pub, Text: "legal sumarize", SellerOrgID: "org_b", MaxMonthlyFeeMicros: &fee},
			words: []gormstore.WordMatch{{Word: "legal"}, {Word: "sumarize", Expanded: []string{"summarize", "sumerize"}}},
			count: ftsJoin + " AND listing_fts.rowid > 0 AND s.seller_org_id = ? AND s.monthly_fee_micros <= ?",
			countArgs: []any{`{name skills description}: ("legal"*) AND {name skills description}: ("sumarize"* OR "summarize" OR "sumerize")`,
				"org_b", int64(5)},
			page: "SELECT s.listing_id FROM listing_fts JOIN listing_search s ON s.doc_id = listing_fts.rowid WHERE listing_fts MATCH ? AND listing_fts.rowid > 0" +
				" AND s.seller_org_id = ? AND s.monthly_fee_micros <= ? ORDER BY bm25(listing_fts, 1, 0.5, 0.1, 0), s.name_key ASC, s.listing_id ASC LIMIT 20 OFFSET 0",
			pageArgs: []any{`{name skills description}: ("legal"*) AND {name skills description}: ("sumarize"* OR "summarize" OR "sumerize")`,
				"org_b", int64(5)},
		},
		{
			name: "the same on postgres: facets as marked lexemes, no weights; column filters on the documents' copies", dialect: "postgres",
			q:     listings.Query{Statuses: pub, Text: "legal sumarize", SellerOrgID: "org_b", MaxMonthlyFeeMicros: &fee},
			words: []gormstore.WordMatch{{Word: "legal"}, {Word: "sumarize", Expanded: []string{"summarize", "sumerize"}}},
			page: pgCTE + pgRank + " " + pgDocs + " AND d.seller_org_id = ? AND d.monthly_fee_micros <= ?)" +
				pgCounted + "m.rank, m.name_key ASC, m.listing_id ASC LIMIT 20 OFFSET 0) pg ON true",
			pageArgs: []any{"('legal':*) | ('sumarize':* | 'summarize' | 'sumerize')",
				"('legal':*) & ('sumarize':* | 'summarize' | 'sumerize') & (" + pubLex + ")", "org_b", int64(5)},
		},
		{
			name: "words alone on postgres, page 3: counted and ranked from the documents", dialect: "postgres",
			q:     listings.Query{Statuses: pub, Text: "agent", Page: 3},
			words: []gormstore.WordMatch{{Word: "agent"}},
			page: pgCTE + pgRank + " " + pgDocs + ")" +
				pgCounted + "m.rank, m.name_key ASC, m.listing_id ASC LIMIT 20 OFFSET 40) pg ON true",
			pageArgs: []any{"('agent':*)", "('agent':*) & (" + pubLex + ")"},
		},
		{
			name: "facets by name on postgres, page 2: the documents' name keys", dialect: "postgres",
			q:         listings.Query{Statuses: pub, Tag: "legal", Sort: "-name", Page: 2},
			count:     pgCount,
			countArgs: []any{"(" + pubLex + ") & ('~tlegal')"},
			page:      "SELECT d.listing_id FROM listing_documents d WHERE d.document @@ CAST(? AS tsquery) ORDER BY d.name_key DESC, d.listing_id DESC LIMIT 20 OFFSET 20",
			pageArgs:  []any{"(" + pubLex + ") & ('~tlegal')"},
		},
		{
			name: "facets counted in the published part of the index alone; a walk checks each row", dialect: "sqlite", walk: true,
			q:     listings.Query{Statuses: pub, Tag: "Legal", Streaming: &tr, Skill: "Sum Up", InputMode: "application/pdf", OutputMode: "text/csv", Push: new(bool), Currency: "EUR", Sort: "-price", Page: 3},
			count: ftsAlone + " AND listing_fts.rowid > 0",
			countArgs: []any{`{facets}: ("zk73756d207570") AND {facets}: ("zt6c6567616c") AND {facets}: ("zi6170706c69636174696f6e2f706466")` +
				` AND {facets}: ("zo746578742f637376") AND {facets}: ("zc657572") AND {facets}: ("zm31") AND {facets}: ("zp30")`},
			page: "SELECT s.listing_id FROM listing_search s WHERE s.status IN (?) AND s.currency = ? AND s.streaming = ? AND s.push_notifications = ?" +
				" AND EXISTS (SELECT 1 FROM listing_skills k WHERE k.listing_id = s.listing_id AND (LOWER(k.skill_id) = ? OR LOWER(k.name) = ?))" +
				" AND EXISTS (SELECT 1 FROM listing_tags t WHERE t.listing_id = s.listing_id AND t.tag = ?)" +
				" AND EXISTS (SELECT 1 FROM listing_modes m WHERE m.listing_id = s.listing_id AND m.direction = 'in' AND m.media_type = ?)" +
				" AND EXISTS (SELECT 1 FROM listing_modes m WHERE m.listing_id = s.listing_id AND m.direction = 'out' AND m.media_type = ?)" +
				" ORDER BY s.monthly_fee_micros DESC, s.name_key ASC, s.listing_id ASC LIMIT 20 OFFSET 40",
			pageArgs: []any{"published", "eur", true, false, "sum up", "sum up", "legal", "application/pdf", "text/csv"},
		},
		{
			name: "the same collected from the index, on postgres", dialect: "postgres",
			q:         listings.Query{Statuses: pub, Tag: "legal", Streaming: &tr, Sort: "price"},
			count:     pgCount,
			countArgs: []any{"(" + pubLex + ") & ('~tlegal') & ('~m1')"},
			page:      "SELECT d.listing_id " + pgDocs + " ORDER BY d.monthly_fee_micros ASC, d.name_key ASC, d.listing_id ASC LIMIT 20 OFFSET 0",
			pageArgs:  []any{"(" + pubLex + ") & ('~tlegal') & ('~m1')"},
		},
		{
			name: "any of several statuses, words sorted by name", dialect: "sqlite",
			q:         listings.Query{Statuses: []listings.Status{listings.StatusDraft, listings.StatusPublished}, Text: `say "hi"`, Sort: "-name"},
			words:     []gormstore.WordMatch{{Word: "say"}, {Word: `hi"`}},
			count:     ftsAlone,
			countArgs: []any{`{name skills description}: ("say"*) AND {name skills description}: ("hi"""*) AND {facets}: ("zs6472616674" OR ` + pubFacet + `)`},
			page:      "SELECT s.listing_id FROM listing_fts JOIN listing_search s ON s.doc_id = listing_fts.rowid WHERE listing_fts MATCH ? ORDER BY s.name_key DESC, s.listing_id DESC LIMIT 20 OFFSET 0",
			pageArgs:  []any{`{name skills description}: ("say"*) AND {name skills description}: ("hi"""*) AND {facets}: ("zs6472616674" OR ` + pubFacet + `)`},
		},
		{
			name: "drafts and suspended listings: the negative rowids, with the status facets", dialect: "sqlite",
			q:         listings.Query{Statuses: []listings.Status{listings.StatusDraft, listings.StatusSuspended}, Tag: "legal"},
			count:     ftsAlone + " AND listing_fts.rowid < 0",
			countArgs: []any{`{facets}: ("zs6472616674" OR "zs73757370656e646564") AND {facets}: ("zt6c6567616c")`},
			page:      "SELECT s.listing_id FROM listing_fts JOIN listing_search s ON s.doc_id = listing_fts.rowid WHERE listing_fts MATCH ? AND listing_fts.rowid < 0 ORDER BY s.name_key ASC, s.listing_id ASC LIMIT 20 OFFSET 0",
			pageArgs:  []any{`{facets}: ("zs6472616674" OR "zs73757370656e646564") AND {facets}: ("zt6c6567616c")`},
		},
		{
			name: "no status at all (an operator): no status group", dialect: "postgres",
			q:     listings.Query{Text: "it's", Sort: "created"},
			words: []gormstore.WordMatch{{Word: `it's\`}},
			page: "WITH m AS MATERIALIZED (SELECT d.listing_id, d.created_at " + pgDocs + ")" +
				pgCounted + "m.created_at ASC, m.listing_id ASC LIMIT 20 OFFSET 0) pg ON true",
			pageArgs: []any{`('it''s\\':*)`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			if err := q.Normalize(); err != nil {
				t.Fatal(err)
			}
			count, countArgs, page, pageArgs := gormstore.SearchSQL(tc.dialect, q, tc.words, tc.walk)
			if count != tc.count || !reflect.DeepEqual(countArgs, tc.countArgs) {
				t.Errorf("count\n got  %s %#v\n want %s %#v", count, countArgs, tc.count, tc.countArgs)
			}
			if page != tc.page || !reflect.DeepEqual(pageArgs, tc.pageArgs) {
				t.Errorf("page\n got  %s %#v\n want %s %#v", page, pageArgs, tc.page, tc.pageArgs)
			}
		})
	}
}

func TestTSVector(t *testing.T) {
	d := listings.SearchDoc{Name: []string{"brief", "writer"}, Skills: []string{"write"}, Description: []string{"brief", `it's\`}, Facets: []string{
		listings.Facet(listings.FacetStreaming, "1"), listings.Facet(listings.FacetSkill, "It's Summed Up"), listings.Facet(listings.FacetTag, "café"), "zt"}}
	// Facets: the value itself when printable ASCII, else the token in hex
	// behind "~z" (no kind is "z"); an empty value is the kind alone.
	if got, want := gormstore.TSVector(d), `'brief':1A 'writer':2A 'write':3B 'brief':4C 'it''s\\':5C '~m1' '~kit''s summed up' '~zt636166c3a9' '~t'`; got != want {
		t.Errorf("TSVector = %s, want %s", got, want)
	}
}
