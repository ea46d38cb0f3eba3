package listings

import (
	"slices"
	"strings"

	"github.com/agentmarket/agentmarket"
)

// Query is a catalog search. Empty fields do not filter.
type Query struct {
	Text       string // every word must match a word of the name, description, skills or tags (see SearchWords)
	Skill      string // a skill id or name, case-insensitive
	Tag        string // a skill tag, case-insensitive
	InputMode  string // a media type the agent accepts, e.g. "application/pdf"
	OutputMode string // a media type the agent produces
	Streaming  *bool
	Push       *bool
	// MaxMonthlyFeeMicros is the price ceiling on the flat monthly fee.
	MaxMonthlyFeeMicros *int64
	Currency            string
	SellerOrgID         string
	Statuses            []Status
	Sort                string // one of Sorts
	Page                int    // from 1
	PageSize            int    // 1..MaxPageSize
}

// Sorts are the accepted sort orders; a leading "-" means descending.
// "relevance" (the default when there is text to search) ranks by where
// the words matched (see SearchWords) and breaks ties by name; without
// text it is the order by name.
var Sorts = []string{"relevance", "name", "-name", "created", "-created", "price", "-price"}

const (
	DefaultPageSize = 20
	MaxPageSize     = 100
	// MaxPage bounds how deep paging goes (a million listings at the
	// largest page size), so the offset a page asks for is never absurd
	// and never overflows.
	MaxPage = 10_000
)

// Page is one page of search results.
type Page struct {
	Items    []*Listing
	Total    int
	Page     int
	PageSize int
}

// Normalize fills defaults and checks every field, reporting all problems.
func (q *Query) Normalize() error {
	var fe agentmarket.Fields
	q.Text = strings.TrimSpace(q.Text)
	q.Skill = strings.ToLower(strings.TrimSpace(q.Skill))
	q.Tag = strings.ToLower(strings.TrimSpace(q.Tag))
	q.InputMode = strings.ToLower(strings.TrimSpace(q.InputMode))
	q.OutputMode = strings.ToLower(strings.TrimSpace(q.OutputMode))
	if q.Sort == "" {
		q.Sort = "name"
		if len(q.Words()) > 0 {
			q.Sort = "relevance"
		}
	}
	ok := false
	for _, s := range Sorts {
		ok = ok || s == q.Sort
	}
	if !ok {
		fe.Add("sort", "enum", "sort must be one of %s", strings.Join(Sorts, ", "))
	}
	if q.Page == 0 {
		q.Page = 1
	}
	if q.Page < 1 || q.Page > MaxPage {
		fe.Add("page", "range", "page must be between 1 and %d", MaxPage)
	}
	if q.PageSize == 0 {
		q.PageSize = DefaultPageSize
	}
	if q.PageSize < 1 || q.PageSize > MaxPageSize {
		fe.Add("page_size", "range", "page_size must be between 1 and %d", MaxPageSize)
	}
	if q.MaxMonthlyFeeMicros != nil && *q.MaxMonthlyFeeMicros < 0 {
		fe.Add("max_monthly_fee_micros", "non_negative", "max_monthly_fee_micros must not be negative")
	}
	for _, s := range q.Statuses {
		if !s.Valid() {
			fe.Add("status", "enum", "unknown status %q", s)
		}
	}
	return fe.Err("invalid_query", "the search is not valid")
}

// Words returns the distinct words of the free text that search matches
// (SearchWords), at most MaxSearchWords, in the order typed.
func (q *Query) Words() []string {
	var out []string
	for _, w := range SearchWords(q.Text) {
		if !slices.Contains(out, w) && len(out) < MaxSearchWords {
			out = append(out, w)
		}
	}
	return out
}
