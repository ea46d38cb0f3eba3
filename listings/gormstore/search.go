package gormstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

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

type searchRow struct {
	DocID             int64 `gorm:"column:doc_id"`
	ListingID         string
	Status            string
	SellerOrgID       string
	NameKey           string
	CreatedAt         time.Time
	Currency          string
	MonthlyFeeMicros  int64
	Streaming         bool
	PushNotifications bool
}

func (searchRow) TableName() string { return "listing_search" }

// knownTerms remembers words whose variants this process has written, so
// indexing a catalog does not write the same rows again and again. It is
// only a shortcut: the insert ignores rows that exist.
type knownTerms struct {
	mu sync.Mutex
	m  map[string]struct{}
}

const maxKnownTerms = 1 << 18

func (k *knownTerms) unknown(terms []string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) > maxKnownTerms {
		k.m = map[string]struct{}{}
	}
	var out []string
	for _, t := range terms {
		if _, ok := k.m[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

func (k *knownTerms) add(terms []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range terms {
		k.m[t] = struct{}{}
	}
}

// index writes l's search row and document, and returns its words, whose
// variants the caller writes (writeVariants).
func (s *Store) index(tx *gorm.DB, l *listings.Listing) ([]string, error) {
	doc := l.SearchDoc()
	name := ""
	var streaming, push bool
	if l.Card != nil {
		name, streaming, push = l.Card.Name, l.Card.Capabilities.Streaming, l.Card.Capabilities.PushNotifications
	}
	args := []any{l.ID, string(l.Status), l.SellerOrgID, strings.ToLower(name), l.CreatedAt.UTC(), l.Plan.Currency, l.Plan.MonthlyFeeMicros, streaming, push}
	const cols = `listing_id, status, seller_org_id, name_key, created_at, currency, monthly_fee_micros, streaming, push_notifications`
	const set = `status = excluded.status, seller_org_id = excluded.seller_org_id, name_key = excluded.name_key,
		created_at = excluded.created_at, currency = excluded.currency, monthly_fee_micros = excluded.monthly_fee_micros,
		streaming = excluded.streaming, push_notifications = excluded.push_notifications`
	switch s.dialect() {
	case dialectPostgres:
		err := tx.Exec(`INSERT INTO listing_search (`+cols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (listing_id) DO UPDATE SET `+set, args...).Error
		if err == nil {
			err = tx.Exec(`INSERT INTO listing_documents (doc_id, listing_id, seller_org_id, name_key, created_at, monthly_fee_micros, document)
				SELECT doc_id, listing_id, seller_org_id, name_key, created_at, monthly_fee_micros, CAST(? AS tsvector) FROM listing_search WHERE listing_id = ?
				ON CONFLICT (doc_id) DO UPDATE SET seller_org_id = excluded.seller_org_id, name_key = excluded.name_key,
					created_at = excluded.created_at, monthly_fee_micros = excluded.monthly_fee_micros, document = excluded.document`, TSVector(doc), l.ID).Error
		}
		if err != nil {
			return nil, err
		}
	default:
		// A published listing's document has a positive rowid, any other a
		// negative one, so a public search reads the published part of the
		// full-text index alone (rowid > 0) and no status facet. A status
		// change moves the document to the other side.
		var old []int64
		if err := tx.Raw(`SELECT doc_id FROM listing_search WHERE listing_id = ?`, l.ID).Scan(&old).Error; err != nil {
			return nil, err
		}
		public := l.Status == listings.StatusPublished
		var docID int64
		if len(old) == 1 && (old[0] > 0) == public {
			docID = old[0]
		} else {
			next := `SELECT COALESCE(MAX(doc_id), 0) + 1 FROM listing_search`
			if !public {
				next = `SELECT COALESCE(MIN(doc_id), 0) - 1 FROM listing_search`
			}
			if err := tx.Raw(next).Scan(&docID).Error; err != nil {
				return nil, err
			}
		}
		if len(old) == 1 {
			// The table is contentless: a document is deleted with the
			// words it was inserted with (listing_fts_doc).
			err := tx.Exec(`INSERT INTO listing_fts (listing_fts, rowid, name, skills, description, facets)
				SELECT 'delete', doc_id, name, skills, description, facets FROM listing_fts_doc WHERE doc_id = ?`, old[0]).Error
			if err == nil {
				err = tx.Exec(`DELETE FROM listing_fts_doc WHERE doc_id = ?`, old[0]).Error
			}
			if err != nil {
				return nil, err
			}
		}
		err := tx.Exec(`INSERT INTO listing_search (doc_id, `+cols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (listing_id) DO UPDATE SET doc_id = excluded.doc_id, `+set, append([]any{docID}, args...)...).Error
		if err != nil {
			return nil, err
		}
		fields := []any{docID, strings.Join(doc.Name, " "), strings.Join(doc.Skills, " "), strings.Join(doc.Description, " "), strings.Join(doc.Facets, " ")}
		err = tx.Exec(`INSERT INTO listing_fts (rowid, name, skills, description, facets) VALUES (?, ?, ?, ?, ?)`, fields...).Error
		if err == nil {
			err = tx.Exec(`INSERT INTO listing_fts_doc (doc_id, name, skills, description, facets) VALUES (?, ?, ?, ?, ?)`, fields...).Error
		}
		if err != nil {
			return nil, err
		}
	}
	return doc.Terms(), nil
}

// writeVariants writes the variants of the words this process has not
// written yet, and returns those words: the caller adds them to known once
// the transaction commits.
func (s *Store) writeVariants(tx *gorm.DB, words []string) ([]string, error) {
	slices.Sort(words)
	terms := s.known.unknown(slices.Compact(words))
	return terms, addVariants(tx, terms)
}

func addVariants(tx *gorm.DB, terms []string) error {
	var ph []string
	var args []any
	flush := func() error {
		if len(ph) == 0 {
			return nil
		}
		err := tx.Exec(`INSERT INTO search_term_variants (variant, term) VALUES `+strings.Join(ph, ", ")+` ON CONFLICT DO NOTHING`, args...).Error
		ph, args = ph[:0], args[:0]
		return err
	}
	for _, t := range terms {
		for _, v := range listings.Variants(t) {
			ph = append(ph, "(?, ?)")
			args = append(args, v, t)
			if len(ph) == 400 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

func (s *Store) dialect() string { return s.db.Dialector.Name() }

// IndexMissing indexes for search the listings that have no search row
// yet (those stored before migration 0030), and returns how many it did.
func (s *Store) IndexMissing(ctx context.Context) (int, error) {
	n := 0
	for {
		var ids []string
		err := s.db.WithContext(ctx).Raw(`SELECT id FROM listings WHERE NOT EXISTS
			(SELECT 1 FROM listing_search WHERE listing_search.listing_id = listings.id) ORDER BY id LIMIT 200`).Scan(&ids).Error
		if err != nil {
			return n, relational.Translate(err, "listing")
		}
		if len(ids) == 0 {
			return n, nil
		}
		for _, id := range ids {
			l, err := s.GetListing(ctx, id)
			if err != nil {
				return n, err
			}
			var terms []string
			err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				words, err := s.index(tx, l)
				if err != nil {
					return err
				}
				terms, err = s.writeVariants(tx, words)
				return err
			})
			if err != nil {
				return n, relational.Translate(err, "listing")
			}
			s.known.add(terms)
			n++
		}
	}
}

// TSVector renders a search document as a PostgreSQL tsvector literal:
// each word at its position, weighted by field (A name, B skills, C
// description), then each facet token as a lexeme without position
// (facetLexeme). The literal is read by tsvector's input function,
// which keeps every lexeme exactly as written. Migration 0031 converts the
// documents of 0030 (facets at weight D) to this form.
func TSVector(d listings.SearchDoc) string {
	var b strings.Builder
	pos := 0
	for i, words := range [][]string{d.Name, d.Skills, d.Description} {
		for _, w := range words {
			pos = min(pos+1, 16383) // tsvector's largest position
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(quoteLexeme(w))
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(pos))
			b.WriteByte("ABC"[i])
		}
	}
	for _, f := range d.Facets {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteLexeme(facetLexeme(f)))
	}
	return b.String()
}

// facetLexeme is a facet token (listings.Facet: "z", the kind, the
// value's bytes in hex) as PostgreSQL documents and queries spell it:
// facetMark, the kind, and the value itself when it is printable ASCII
// (media types, tags, skill names mostly are), else facetMark and the
// whole token, hex and all ("~zt636166c3a9": no kind is "z", so the two
// forms never meet; a lexeme must not hold a NUL or invalid UTF-8). The plain value halves what
// facets take: they were almost half of a document's bytes, and a search
// reads every match's document. Migration 0031 spells them the same way.
func facetLexeme(f string) string {
	if len(f) >= 2 {
		if v, err := hex.DecodeString(f[2:]); err == nil && !slices.ContainsFunc(v, func(c byte) bool { return c < 0x20 || c > 0x7e }) {
			return facetMark + f[1:2] + string(v)
		}
	}
	return facetMark + f
}

// facetMark starts every facet lexeme of a PostgreSQL document: no word
// starts with it (words are letters and digits), so a word, even as a
// prefix, never matches a facet, and a query needs no weight restriction
// to keep them apart. That matters for speed: the GIN index does not store
// weights, so a restricted query makes PostgreSQL recheck every
// candidate's document in the table.
const facetMark = "~"

func quoteLexeme(w string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(w) + "'"
}

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
