package gormstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentmarket/agentmarket/listings"
)

// The SQL of a search: a query's plan and the count and page statements
// it gives on each dialect.

// SearchSQL returns the statements Search runs for q (normalized) on a
// dialect ("sqlite" or "postgres"), given its words with their typo
// expansions: the count, and the page, read by walking the order's index
// (walk) or by collecting the matches. When count is empty, the page
// counts too (countsPage).
func SearchSQL(dialect string, q listings.Query, words []WordMatch, walk bool) (count string, countArgs []any, page string, pageArgs []any) {
	p := newPlan(dialect, q, words)
	count, countArgs = p.countSQL()
	page, pageArgs = p.pageSQL(walk)
	return count, countArgs, page, pageArgs
}

// plan is how a search is run: its match expression, its column filters,
// and how its page is read.
type plan struct {
	dialect string
	q       listings.Query
	words   []WordMatch
	// facets are the facet groups the full-text index must match: every
	// filter but statuses (see statusFacet).
	facets [][]string
}

func newPlan(dialect string, q listings.Query, words []WordMatch) plan {
	p := plan{dialect: dialect, q: q, words: words}
	for _, g := range q.FacetGroups() {
		if !strings.HasPrefix(g[0], "z"+string(rune(listings.FacetStatus))) {
			p.facets = append(p.facets, g)
		}
	}
	return p
}

// fullText reports whether the plan reads the full-text index: for words,
// or for many-valued filters.
func (p plan) fullText() bool { return len(p.words) > 0 || len(p.facets) > 0 }

// onlyPublished reports whether the query is the public one: published
// listings alone.
func (p plan) onlyPublished() bool {
	return len(p.q.Statuses) > 0 && !slices.ContainsFunc(p.q.Statuses, func(st listings.Status) bool { return st != listings.StatusPublished })
}

// statusFacet reports whether the full-text match carries the statuses:
// on PostgreSQL always when it is read (the GIN index then selects by
// status too, and a count needs no join with listing_search: status is a
// facet of the document);
// on SQLite for any statuses but published alone, which the rowid range
// selects. Otherwise the statuses are a column filter, or none.
func (p plan) statusFacet() bool {
	return p.fullText() && len(p.q.Statuses) > 0 && (p.dialect == dialectPostgres || !p.onlyPublished())
}

// rowidRange is SQLite's condition on the document's rowid: positive for
// published listings, negative for the others (see index).
func (p plan) rowidRange() string {
	if p.dialect == dialectPostgres || !p.fullText() || len(p.q.Statuses) == 0 {
		return ""
	}
	if p.onlyPublished() {
		return "listing_fts.rowid > 0"
	}
	if !slices.Contains(p.q.Statuses, listings.StatusPublished) {
		return "listing_fts.rowid < 0"
	}
	return ""
}

// ftsMatch is the FTS5 MATCH expression: every word, as a prefix or one of
// its expansions, in the text fields; one token of every facet group in
// the facets field.
func (p plan) ftsMatch() string {
	var parts []string
	for _, w := range p.words {
		alts := []string{ftsString(w.Word) + "*"}
		for _, e := range w.Expanded {
			alts = append(alts, ftsString(e))
		}
		parts = append(parts, "{name skills description}: ("+strings.Join(alts, " OR ")+")")
	}
	groups := p.facets
	if p.statusFacet() {
		groups = p.q.FacetGroups()
	}
	for _, g := range groups {
		var alts []string
		for _, f := range g {
			alts = append(alts, ftsString(f))
		}
		parts = append(parts, "{facets}: ("+strings.Join(alts, " OR ")+")")
	}
	return strings.Join(parts, " AND ")
}

func ftsString(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// tsQuery is the PostgreSQL tsquery literal of the same expression: words
// as prefixes or expansions, facets as their marked lexemes (facetMark).
func (p plan) tsQuery() string {
	parts := p.tsWords()
	groups := p.facets
	if p.statusFacet() {
		groups = p.q.FacetGroups()
	}
	for _, g := range groups {
		var alts []string
		for _, f := range g {
			alts = append(alts, quoteLexeme(facetLexeme(f)))
		}
		parts = append(parts, "("+strings.Join(alts, " | ")+")")
	}
	return strings.Join(parts, " & ")
}

// tsRankQuery is the tsquery ts_rank scores with: the words alone, any of
// them, so the score adds up what each word found, weighted by field, as
// bm25 does (an AND would score by the words' distance from each other,
// and facets would weigh in).
func (p plan) tsRankQuery() string { return strings.Join(p.tsWords(), " | ") }

func (p plan) tsWords() []string {
	var parts []string
	for _, w := range p.words {
		alts := []string{quoteLexeme(w.Word) + ":*"}
		for _, e := range w.Expanded {
			alts = append(alts, quoteLexeme(e))
		}
		parts = append(parts, "("+strings.Join(alts, " | ")+")")
	}
	return parts
}

// alias names the table whose columns a search filters and sorts on:
// listing_search (s), or on PostgreSQL, when the documents are read, their
// copies of those columns in listing_documents (d).
func (p plan) alias() string {
	if p.dialect == dialectPostgres && p.fullText() {
		return "d"
	}
	return "s"
}

// columnWhere renders the filters read from listing_search's columns
// (or the documents' copies: alias): seller and price always, statuses when
// the full-text index is not read (it carries them otherwise:
// statusFacet, rowidRange).
func (p plan) columnWhere() ([]string, []any) {
	var conds []string
	var args []any
	q := p.q
	if len(q.Statuses) > 0 && !p.fullText() {
		ph := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			ph[i] = "?"
			args = append(args, string(st))
		}
		conds = append(conds, "s.status IN ("+strings.Join(ph, ", ")+")")
	}
	if q.SellerOrgID != "" {
		conds = append(conds, p.alias()+".seller_org_id = ?")
		args = append(args, q.SellerOrgID)
	}
	if q.MaxMonthlyFeeMicros != nil {
		conds = append(conds, p.alias()+".monthly_fee_micros <= ?")
		args = append(args, *q.MaxMonthlyFeeMicros)
	}
	return conds, args
}

// ftsWhere is SQLite's condition on the full-text index: the match, and
// the rowid range when there is one.
func (p plan) ftsWhere() ([]string, []any) {
	conds, args := []string{"listing_fts MATCH ?"}, []any{p.ftsMatch()}
	if r := p.rowidRange(); r != "" {
		conds = append(conds, r)
	}
	return conds, args
}

// from renders the FROM and WHERE of the matches: the full-text index
// joined to listing_search, or listing_search alone; on PostgreSQL the
// documents alone (they carry the columns a search needs).
func (p plan) from() (string, []any) {
	conds, args := p.columnWhere()
	var from string
	switch {
	case !p.fullText():
		from = "listing_search s"
	case p.dialect == dialectPostgres:
		from = "listing_documents d"
		conds = append([]string{"d.document @@ CAST(? AS tsquery)"}, conds...)
		args = append([]any{p.tsQuery()}, args...)
	default:
		from = "listing_fts JOIN listing_search s ON s.doc_id = listing_fts.rowid"
		fc, fa := p.ftsWhere()
		conds = append(fc, conds...)
		args = append(fa, args...)
	}
	if len(conds) == 0 {
		return from, args
	}
	return from + " WHERE " + strings.Join(conds, " AND "), args
}

// countSQL counts the matches. On SQLite, the full-text index alone
// counts them when no column filters. Empty when the page counts them
// (countsPage).
func (p plan) countSQL() (string, []any) {
	if p.countsPage() {
		return "", nil
	}
	if conds, _ := p.columnWhere(); p.dialect != dialectPostgres && p.fullText() && len(conds) == 0 {
		fc, fa := p.ftsWhere()
		return "SELECT COUNT(*) FROM listing_fts WHERE " + strings.Join(fc, " AND "), fa
	}
	from, args := p.from()
	return "SELECT COUNT(*) FROM " + from, args
}

// order is the ORDER BY of a sort (tie-broken so pages never overlap).
func order(sort string) string {
	switch sort {
	case "-name":
		return "s.name_key DESC, s.listing_id DESC"
	case "created":
		return "s.created_at ASC, s.listing_id ASC"
	case "-created":
		return "s.created_at DESC, s.listing_id DESC"
	case "price":
		return "s.monthly_fee_micros ASC, s.name_key ASC, s.listing_id ASC"
	case "-price":
		return "s.monthly_fee_micros DESC, s.name_key ASC, s.listing_id ASC"
	default:
		return "s.name_key ASC, s.listing_id ASC"
	}
}

// pageOrder is the ORDER BY of a sort on the columns of alias.
func (p plan) pageOrder(sort string) string {
	if a := p.alias(); a != "s" {
		return strings.ReplaceAll(order(sort), "s.", a+".")
	}
	return order(sort)
}

// relevance is the rank expression, smaller first (bm25 is negative, the
// better the lower; ts_rank is negated to match).
func (p plan) relevance() (string, []any) {
	w := fieldWeights
	if p.dialect == dialectPostgres {
		return fmt.Sprintf("-ts_rank('{0, %g, %g, %g}', d.document, CAST(? AS tsquery))", w[2], w[1], w[0]), []any{p.tsRankQuery()}
	}
	return fmt.Sprintf("bm25(listing_fts, %g, %g, %g, 0)", w[0], w[1], w[2]), nil
}

// walks reports whether the page is read by walking the sort order's
// index rather than by collecting every match: worth it when the matches
// are a large share of the catalog, so the page's rows come early in the
// order. total is the number of matches, size an upper bound on the rows
// the walk may pass over (the catalog's size).
func (p plan) walks(total, size int) bool {
	if len(p.words) > 0 || total == 0 {
		return false
	}
	end := p.q.Page * p.q.PageSize
	// A walk passes about end*size/total rows and checks each (a few index
	// probes); collecting reads and sorts total rows.
	return int64(end)*int64(size)*4 < int64(total)*int64(total)
}

// pageSQL reads one page of listing ids in order. walk selects the index
// walk (see walks); it applies only to queries without words.
func (p plan) pageSQL(walk bool) (string, []any) {
	var sql string
	var args []any
	limit := fmt.Sprintf(" LIMIT %d OFFSET %d", p.q.PageSize, (p.q.Page-1)*p.q.PageSize)
	switch {
	case p.countsPage():
		return p.countedPageSQL(limit)
	case walk || !p.fullText():
		conds, cargs := p.walkWhere()
		sql = "SELECT s.listing_id FROM listing_search s"
		if len(conds) > 0 {
			sql += " WHERE " + strings.Join(conds, " AND ")
		}
		sql += " ORDER BY " + order(p.q.Sort)
		args = cargs
	case p.q.Sort == "relevance" && len(p.words) > 0:
		from, fargs := p.from()
		rank, rargs := p.relevance()
		sql = "SELECT " + p.idColumn() + " FROM " + from + " ORDER BY " + rank + ", " + p.pageOrder("name")
		args = append(fargs, rargs...)
	default:
		from, fargs := p.from()
		sql = "SELECT " + p.idColumn() + " FROM " + from + " ORDER BY " + p.pageOrder(p.q.Sort)
		args = fargs
	}
	return sql + limit, args
}

// countsPage reports whether one statement counts the matches and reads
// the page: on PostgreSQL, for a query with words. Such a query always
// collects its matches (walks), and reading each match's document once
// rather than twice (a count, then the page) is what a broad word costs
// most: PostgreSQL visits every match's row in the table, for a count too.
func (p plan) countsPage() bool { return p.dialect == dialectPostgres && len(p.words) > 0 }

// countedPageSQL is that statement: the matches, with the columns their
// order needs, are read once into a materialized CTE, then counted and
// sorted. Every row carries the count; a page past the end is one row
// whose listing id is NULL.
func (p plan) countedPageSQL(limit string) (string, []any) {
	from, args := p.from()
	orderBy := order(p.q.Sort)
	if p.q.Sort == "relevance" {
		orderBy = order("name")
	}
	cols := "d.listing_id"
	for _, c := range []string{"name_key", "created_at", "monthly_fee_micros"} {
		if strings.Contains(orderBy, "s."+c) {
			cols += ", d." + c
		}
	}
	if p.q.Sort == "relevance" {
		rank, rargs := p.relevance()
		cols += ", " + rank + " AS rank"
		args = append(rargs, args...) // the rank's argument comes first, in the select list
		orderBy = "s.rank, " + orderBy
	}
	return "WITH m AS MATERIALIZED (SELECT " + cols + " FROM " + from + ")" +
		" SELECT c.total, pg.listing_id FROM (SELECT COUNT(*) AS total FROM m) c" +
		" LEFT JOIN LATERAL (SELECT m.listing_id FROM m ORDER BY " + strings.ReplaceAll(orderBy, "s.", "m.") + limit + ") pg ON true", args
}

// idColumn is the listing id a page of matches selects.
func (p plan) idColumn() string { return p.alias() + ".listing_id" }

// walkWhere renders every filter of a query without words on
// listing_search's columns, and the many-valued ones (skills, tags, media
// types) as probes of their index tables.
func (p plan) walkWhere() ([]string, []any) {
	q := p.q
	var conds []string
	var args []any
	if len(q.Statuses) > 0 {
		ph := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			ph[i] = "?"
			args = append(args, string(st))
		}
		conds = append(conds, "s.status IN ("+strings.Join(ph, ", ")+")")
	}
	add := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	if q.SellerOrgID != "" {
		add("s.seller_org_id = ?", q.SellerOrgID)
	}
	if q.MaxMonthlyFeeMicros != nil {
		add("s.monthly_fee_micros <= ?", *q.MaxMonthlyFeeMicros)
	}
	if q.Currency != "" {
		add("s.currency = ?", strings.ToLower(q.Currency))
	}
	if q.Streaming != nil {
		add("s.streaming = ?", *q.Streaming)
	}
	if q.Push != nil {
		add("s.push_notifications = ?", *q.Push)
	}
	if q.Skill != "" {
		add("EXISTS (SELECT 1 FROM listing_skills k WHERE k.listing_id = s.listing_id AND (LOWER(k.skill_id) = ? OR LOWER(k.name) = ?))", q.Skill, q.Skill)
	}
	if q.Tag != "" {
		add("EXISTS (SELECT 1 FROM listing_tags t WHERE t.listing_id = s.listing_id AND t.tag = ?)", q.Tag)
	}
	if q.InputMode != "" {
		add("EXISTS (SELECT 1 FROM listing_modes m WHERE m.listing_id = s.listing_id AND m.direction = 'in' AND m.media_type = ?)", q.InputMode)
	}
	if q.OutputMode != "" {
		add("EXISTS (SELECT 1 FROM listing_modes m WHERE m.listing_id = s.listing_id AND m.direction = 'out' AND m.media_type = ?)", q.OutputMode)
	}
	return conds, args
}
