package gormstore

import (
	"context"
	"slices"
	"strings"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// Catalog search (migrations 0030_catalog_search, 0031_search_documents).
// Each listing has a narrow listing_search row (the columns filters and
// orders read) and a document of its words by field plus its facet tokens:
// an FTS5 row in SQLite, a listing_documents row (a tsvector) in
// PostgreSQL. Both are built from the same listings.SearchDoc, so both
// databases match the same words.
//
// A search runs in two steps: a count, then one page. Which SQL serves the
// page is chosen from the count (searchPlan): relevance needs every match
// scored, so it reads the matches from the full-text index; an order by
// name, price or date with few matches reads them there too and sorts
// them, but with many matches it walks the order's index and stops after
// the page, checking each row's filters on the way.

// Dialects, by GORM's dialector name.
const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// Relevance weights by field (name, skills and tags, description); facets
// weigh nothing. FTS5's bm25 takes them as given, PostgreSQL's ts_rank as
// its weights for A, B and C.
var fieldWeights = [3]float64{1.0, 0.5, 0.1}

// maxExpansions bounds the words one query word may match by typo: the
// closest (then alphabetically first) are kept.
const maxExpansions = 16

// WordMatch is one query word and the listing words it may match besides
// those it is a prefix of: its typo expansions.
type WordMatch struct {
	Word     string
	Expanded []string
}

// expand finds each query word's typo expansions (listings.OneEdit) among
// the catalog's words.
func (s *Store) expand(ctx context.Context, words []string) ([]WordMatch, error) {
	out := make([]WordMatch, len(words))
	for i, w := range words {
		out[i].Word = w
		if len([]rune(w)) < listings.MinFuzzyLen {
			continue
		}
		vs := listings.Variants(w)
		if len(vs) == 0 {
			continue
		}
		var terms []string
		err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT term FROM search_term_variants WHERE variant IN ?`, vs).Scan(&terms).Error
		if err != nil {
			return nil, relational.Translate(err, "listing")
		}
		out[i].Expanded = closest(w, terms)
	}
	return out, nil
}

// closest keeps the terms one edit from w that w is not a prefix of (those
// match anyway), sorted, at most maxExpansions.
func closest(w string, terms []string) []string {
	var out []string
	for _, t := range terms {
		if !strings.HasPrefix(t, w) && listings.OneEdit(w, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxExpansions)]
}

// Search implements listings.Store.
func (s *Store) Search(ctx context.Context, q listings.Query) ([]*listings.Listing, int, error) {
	words, err := s.expand(ctx, q.Words())
	if err != nil {
		return nil, 0, err
	}
	p := newPlan(s.dialect(), q, words)
	db := s.db.WithContext(ctx)
	if p.countsPage() {
		return s.searchCounted(ctx, p)
	}
	var total int64
	query, args := p.countSQL()
	if err := db.Raw(query, args...).Scan(&total).Error; err != nil {
		return nil, 0, relational.Translate(err, "listing")
	}
	if total == 0 || (q.Page-1)*q.PageSize >= int(total) {
		return []*listings.Listing{}, int(total), nil
	}
	walk := false
	if p.fullText() {
		var size int64
		if err := db.Raw("SELECT COALESCE(MAX(doc_id), 0) FROM listing_search").Scan(&size).Error; err != nil {
			return nil, 0, relational.Translate(err, "listing")
		}
		walk = p.walks(int(total), int(size))
	}
	query, args = p.pageSQL(walk)
	var ids []string
	if err := db.Raw(query, args...).Scan(&ids).Error; err != nil {
		return nil, 0, relational.Translate(err, "listing")
	}
	out, err := s.listingsByID(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	return out, int(total), nil
}

// searchCounted runs a search whose page statement counts too
// (countsPage).
func (s *Store) searchCounted(ctx context.Context, p plan) ([]*listings.Listing, int, error) {
	query, args := p.pageSQL(false)
	var rows []struct {
		Total     int64
		ListingID *string
	}
	if err := s.db.WithContext(ctx).Raw(query, args...).Scan(&rows).Error; err != nil {
		return nil, 0, relational.Translate(err, "listing")
	}
	total := 0
	var ids []string
	for _, r := range rows {
		total = int(r.Total)
		if r.ListingID != nil {
			ids = append(ids, *r.ListingID)
		}
	}
	if len(ids) == 0 {
		return []*listings.Listing{}, total, nil
	}
	out, err := s.listingsByID(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// listingsByID reads listings with their plans, in the order of ids.
func (s *Store) listingsByID(ctx context.Context, ids []string) ([]*listings.Listing, error) {
	var rows []listingRow
	if len(ids) > 0 {
		if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
			return nil, relational.Translate(err, "listing")
		}
	}
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	slices.SortFunc(rows, func(a, b listingRow) int { return pos[a.ID] - pos[b.ID] })
	return s.withPlans(ctx, rows)
}

// OptimizeSearch compacts the full-text index after a bulk load (SQLite:
// FTS5 merges its segments into one, which the many small ones of a load
// slow down; PostgreSQL: fresh planner statistics for listing_search and
// listing_documents).
// Searches are correct without it.
func (s *Store) OptimizeSearch(ctx context.Context) error {
	stmt := `INSERT INTO listing_fts (listing_fts) VALUES ('optimize')`
	if s.dialect() == dialectPostgres {
		stmt = `ANALYZE listing_search, listing_documents`
	}
	return relational.Translate(s.db.WithContext(ctx).Exec(stmt).Error, "listing")
}
