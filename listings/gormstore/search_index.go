package gormstore

import (
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// Writing the search index: when a listing is stored, its listing_search
// row, its document (FTS5 or tsvector) and its words' typo variants.

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
