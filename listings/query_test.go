package listings_test

import (
	"math"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

// TestQueryPaging: pages and page sizes are bounded, so no page asks the
// store for an absurd or overflowing offset.
func TestQueryPaging(t *testing.T) {
	cases := []struct {
		name               string
		page, size         int
		want               string // field:rule, "" for none
		wantPage, wantSize int
	}{
		{"defaults", 0, 0, "", 1, listings.DefaultPageSize},
		{"the last page", listings.MaxPage, listings.MaxPageSize, "", listings.MaxPage, listings.MaxPageSize},
		{"past the last page", listings.MaxPage + 1, 0, "page:range", 0, 0},
		{"the largest integer", math.MaxInt64, 0, "page:range", 0, 0},
		{"the largest integer with the largest size", math.MaxInt64, listings.MaxPageSize, "page:range", 0, 0},
		{"negative", -1, 0, "page:range", 0, 0},
		{"the smallest integer", math.MinInt64, 0, "page:range", 0, 0},
		{"size too large", 1, listings.MaxPageSize + 1, "page_size:range", 0, 0},
		{"size the largest integer", 1, math.MaxInt64, "page_size:range", 0, 0},
		{"size negative", 1, -5, "page_size:range", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := listings.Query{Page: tc.page, PageSize: tc.size}
			err := q.Normalize()
			got := ""
			if ae, ok := err.(*agentmarket.Error); ok && len(ae.Fields) == 1 {
				got = ae.Fields[0].Field + ":" + ae.Fields[0].Rule
			} else if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Normalize: %v, want %q", err, tc.want)
			}
			if tc.want == "" && (q.Page != tc.wantPage || q.PageSize != tc.wantSize) {
				t.Errorf("page, size = %d, %d; want %d, %d", q.Page, q.PageSize, tc.wantPage, tc.wantSize)
			}
		})
	}
}
