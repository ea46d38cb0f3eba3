package main

import (
	"slices"
	"testing"
)

// TestPeriodsAreBounded: a well-formed period or time outside what the
// stores hold is refused as invalid (422 naming the field), never a 500;
// the last month that can be rated answers (issue 23: /alerts?period=9999-12
// answered 500, and so did /invoices and /reconciliation).
func TestPeriodsAreBounded(t *testing.T) {
	m := startMarketplace(t, map[string]string{})
	api := client{t: t, base: m.URL}
	_, key := signup(t, api, "Bounded Co", "fin@bounded.example")
	a := api.with(key)
	for _, path := range []string{"/api/v1/alerts", "/api/v1/invoices", "/api/v1/reconciliation", "/api/v1/exports/focus"} {
		for _, p := range []string{"9999-12", "2106-01", "1969-12", "0000-01"} {
			r := a.do("GET", path+"?period="+p, nil)
			if r.Status != 422 || !slices.Contains(r.errorFields(), "period:format") {
				t.Errorf("%s?period=%s: %d %s, want 422 on period", path, p, r.Status, r.Body)
			}
		}
		for _, p := range []string{"2105-12", "1970-01"} {
			if r := a.do("GET", path+"?period="+p, nil); r.Status != 200 {
				t.Errorf("%s?period=%s: %d %s, want 200", path, p, r.Status, r.Body)
			}
		}
	}
	for _, q := range []string{"from=9999-12-31", "to=9999-12-31T23:59:59Z", "from=1969-01-01"} {
		if r := a.do("GET", "/api/v1/usage?group_by=listing&"+q, nil); r.Status != 422 {
			t.Errorf("usage?%s: %d %s, want 422", q, r.Status, r.Body)
		}
	}
	if r := a.do("GET", "/api/v1/usage?group_by=day&from=2105-12-01&to=2106-01-01", nil); r.Status != 200 {
		t.Errorf("usage in December 2105: %d %s", r.Status, r.Body)
	}
}
