package listings

import (
	"encoding/hex"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How the catalog search reads text. Every store matches the same words
// the same way, because the words are cut here, in Go, and handed to the
// database ready-made (SQLite FTS5 and PostgreSQL tsvector alike): a word
// is a run of letters and digits, lower-cased; a few English words too
// common to mean anything are dropped.
//
// A query word matches a listing's word when it is a prefix of it
// ("summ" finds "summarize"), or, for words of MinFuzzyLen characters or
// more, when the listing's word is one edit away (one character added,
// removed or changed, or two neighbours swapped: "sumarize" finds
// "summarize"). Every word of the query must match (AND). Relevance weighs
// where a word matched: the name most, then skills and tags, then the
// description.

const (
	// MaxSearchWords bounds the words of a query that are searched; more
	// are ignored.
	MaxSearchWords = 8
	// MaxWordLen bounds a searched word, in characters.
	MaxWordLen = 40
	// MinFuzzyLen is the shortest query word that matches words one edit
	// away: shorter ones would match too much ("pdf" and "pdg").
	MinFuzzyLen = 5
	// MaxVariantLen is the longest listing word indexed for typo matching.
	MaxVariantLen = 24
)

var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true, "for": true,
	"from": true, "in": true, "into": true, "is": true, "it": true, "of": true, "on": true, "or": true, "that": true,
	"the": true, "this": true, "to": true, "with": true, "your": true, "you": true,
}

// SearchWords cuts text into the words search matches, in order, with
// repeats: lower-case runs of letters and digits, stop words dropped, each
// at most MaxWordLen characters.
func SearchWords(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	}) {
		if stopWords[w] {
			continue
		}
		if utf8.RuneCountInString(w) > MaxWordLen {
			w = string([]rune(w)[:MaxWordLen])
		}
		out = append(out, w)
	}
	return out
}

// SearchDoc is what a store indexes for one listing: its words by field,
// and the facet tokens its filters match (see Facet).
type SearchDoc struct {
	Name        []string // the agent's name
	Skills      []string // skill ids, names and tags
	Description []string // the agent's description and its skills'
	Facets      []string
}

// Terms returns the distinct words of every field, sorted: what the
// vocabulary for typo matching needs.
func (d SearchDoc) Terms() []string {
	all := slices.Concat(d.Name, d.Skills, d.Description)
	slices.Sort(all)
	return slices.Compact(all)
}

// Facet kinds: one letter each, so a facet token cannot be mistaken for
// another kind's.
const (
	FacetStatus     = 's'
	FacetSkill      = 'k' // a skill id or name, lower-cased
	FacetTag        = 't'
	FacetInputMode  = 'i'
	FacetOutputMode = 'o'
	FacetStreaming  = 'm'
	FacetPush       = 'p'
	FacetCurrency   = 'c'
)

// Facet is the token a store indexes for one filterable value of a
// listing: "z", the kind, and the lower-cased value's bytes in hex, so any
// value (a media type, a skill name with spaces) is one alphanumeric word.
// Stores keep facets apart from the text fields, so a text word that
// happened to spell one is never taken for it.
func Facet(kind byte, value string) string {
	return "z" + string(kind) + hex.EncodeToString([]byte(strings.ToLower(strings.TrimSpace(value))))
}

func boolFacet(kind byte, b bool) string {
	if b {
		return Facet(kind, "1")
	}
	return Facet(kind, "0")
}

// SearchDoc returns what a store indexes for l.
func (l *Listing) SearchDoc() SearchDoc {
	d := SearchDoc{Facets: []string{Facet(FacetStatus, string(l.Status)), Facet(FacetCurrency, l.Plan.Currency)}}
	if l.Card == nil {
		return d
	}
	c := l.Card
	d.Name = SearchWords(c.Name)
	d.Description = SearchWords(c.Description)
	var facets []string
	for _, s := range c.Skills {
		d.Skills = append(d.Skills, SearchWords(s.ID)...)
		d.Skills = append(d.Skills, SearchWords(s.Name)...)
		for _, t := range s.Tags {
			d.Skills = append(d.Skills, SearchWords(t)...)
		}
		d.Description = append(d.Description, SearchWords(s.Description)...)
		facets = append(facets, Facet(FacetSkill, s.ID), Facet(FacetSkill, s.Name))
	}
	for _, t := range c.Tags() {
		facets = append(facets, Facet(FacetTag, t))
	}
	for _, m := range c.InputModes() {
		facets = append(facets, Facet(FacetInputMode, m))
	}
	for _, m := range c.OutputModes() {
		facets = append(facets, Facet(FacetOutputMode, m))
	}
	facets = append(facets, boolFacet(FacetStreaming, c.Capabilities.Streaming), boolFacet(FacetPush, c.Capabilities.PushNotifications))
	slices.Sort(facets)
	d.Facets = append(d.Facets, slices.Compact(facets)...)
	return d
}

// FacetGroups returns the facets q filters on: a listing matches when it
// has at least one token of every group. Statuses form one group (any of
// them); every other filter is a group of one.
func (q *Query) FacetGroups() [][]string {
	var g [][]string
	if len(q.Statuses) > 0 {
		var st []string
		for _, s := range q.Statuses {
			st = append(st, Facet(FacetStatus, string(s)))
		}
		slices.Sort(st)
		g = append(g, slices.Compact(st))
	}
	one := func(kind byte, v string) {
		if v != "" {
			g = append(g, []string{Facet(kind, v)})
		}
	}
	one(FacetSkill, q.Skill)
	one(FacetTag, q.Tag)
	one(FacetInputMode, q.InputMode)
	one(FacetOutputMode, q.OutputMode)
	one(FacetCurrency, q.Currency)
	if q.Streaming != nil {
		g = append(g, []string{boolFacet(FacetStreaming, *q.Streaming)})
	}
	if q.Push != nil {
		g = append(g, []string{boolFacet(FacetPush, *q.Push)})
	}
	return g
}

// Variants returns the keys a word is found by for typo matching: the word
// itself and every string one character shorter (the "deletion
// neighbourhood"). Two words are at most one edit apart only if their
// variants share a key, so a store keeps every listing word's variants
// and looks up a query word's ones; OneEdit then keeps the true matches.
// Words longer than MaxVariantLen have none.
func Variants(w string) []string {
	r := []rune(w)
	if len(r) > MaxVariantLen {
		return nil
	}
	out := []string{w}
	for i := range r {
		out = append(out, string(r[:i])+string(r[i+1:]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// OneEdit reports whether a and b differ by exactly one edit: a character
// inserted, deleted or substituted, or two adjacent characters swapped.
func OneEdit(a, b string) bool {
	x, y := []rune(a), []rune(b)
	if len(x) < len(y) {
		x, y = y, x
	}
	switch len(x) - len(y) {
	case 0:
		i := 0
		for i < len(x) && x[i] == y[i] {
			i++
		}
		if i == len(x) {
			return false // equal
		}
		if slices.Equal(x[i+1:], y[i+1:]) {
			return true // substituted
		}
		return i+1 < len(x) && x[i] == y[i+1] && x[i+1] == y[i] && slices.Equal(x[i+2:], y[i+2:]) // swapped
	case 1:
		i := 0
		for i < len(y) && x[i] == y[i] {
			i++
		}
		return slices.Equal(x[i+1:], y[i:])
	}
	return false
}
