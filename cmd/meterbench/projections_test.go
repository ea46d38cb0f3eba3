package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// fakeMarket serves /metrics with a spool that drains by one row a
// request, and the usage API with fixed totals.
func fakeMarket(t *testing.T, rows int64, totals string) *usageAPI {
	var left atomic.Int64
	left.Store(rows)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		n := max(left.Add(-1), 0)
		fmt.Fprintf(w, "# HELP %s Usage rows.\n# TYPE %s gauge\n%s %d\nagentmarket_meter_spool_bytes 12\n", spoolRowsMetric, spoolRowsMetric, spoolRowsMetric, n)
	})
	mux.HandleFunc("GET /api/v1/usage", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer amk_buyer" || r.URL.Query().Get("group_by") != "listing" {
			http.Error(w, "bad query", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, totals)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &usageAPI{base: srv.URL, key: "amk_buyer", since: time.Now()}
}

func counted(answered, unknown int64) *callCount {
	c := &callCount{}
	c.answered.Store(answered)
	c.unknown.Store(unknown)
	return c
}

func TestCheckProjections(t *testing.T) {
	totals := `{"group_by":"listing","items":[{"key":"l10","calls":3,"input_tokens":540,"output_tokens":480},{"key":"l03","calls":2,"input_tokens":360,"output_tokens":320}]}`
	listings := func(l03 int64) []meteredListing {
		return []meteredListing{{id: "l10", targets: []string{meter10}, calls: counted(3, 0)}, {id: "l03", targets: []string{meter03}, calls: counted(l03, 1)}}
	}

	p := checkProjections(t.Context(), fakeMarket(t, 5, totals), listings(2), 5*time.Second)
	if p.Unavailable != "" || p.SpoolRows != 4 || p.DrainSeconds < 0 || p.DrainSeconds > 2 || !allEqual(p.Usage) || p.Usage[1].Unknown != 1 {
		t.Errorf("drained and equal: %+v", p)
	}

	// One call more answered than billed: reported as it stands when the wait ends.
	began := time.Now()
	p = checkProjections(t.Context(), fakeMarket(t, 1, totals), listings(3), 300*time.Millisecond)
	if took := time.Since(began); took > 3*time.Second || took < 300*time.Millisecond {
		t.Errorf("the check took %s for a wait of 300ms", took)
	}
	if p.DrainSeconds < 0 || allEqual(p.Usage) || !p.Usage[0].Equal() || p.Usage[1].Equal() {
		t.Errorf("one call unbilled: %+v", p)
	}

	// A spool that never drains.
	p = checkProjections(t.Context(), fakeMarket(t, 1<<40, totals), listings(2), 200*time.Millisecond)
	if p.DrainSeconds >= 0 || p.RowsLeft == 0 {
		t.Errorf("never drained: %+v", p)
	}

	// No metric: the check says so.
	api := fakeMarket(t, 1, totals)
	api.base += "/nothing-here"
	if p = checkProjections(t.Context(), api, listings(2), 200*time.Millisecond); p.Unavailable == "" {
		t.Errorf("no metrics: %+v", p)
	}
}
