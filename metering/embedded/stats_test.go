package embedded_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

func TestListingStats(t *testing.T) {
	storetest.RunStats(t, func(t *testing.T) storetest.StatsStore { return MustOpen(t) })
}

// TestStatsSQL: the rows of the window (and of the listings asked for,
// each a placeholder), the rules' lists inlined, the minimum of calls in
// HAVING, the percentiles by 0-based rank floor(p × n / 100).
func TestStatsSQL(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(metering.StatsWindow)
	tests := []struct {
		name      string
		q         metering.StatsQuery
		wantWhere string
		wantArgs  []any
	}{
		{"every listing", metering.StatsQuery{From: from, To: to, MinCalls: 20},
			" WHERE time_ms >= ? AND time_ms < ? AND buyer_org_id <> seller_org_id", []any{from.UnixMilli(), to.UnixMilli(), int64(20)}},
		{"two listings", metering.StatsQuery{From: from, To: to, MinCalls: 1, ListingIDs: []string{"lst_b", "lst_a"}},
			" WHERE time_ms >= ? AND time_ms < ? AND listing_id IN (?, ?) AND buyer_org_id <> seller_org_id", []any{from.UnixMilli(), to.UnixMilli(), "lst_b", "lst_a", int64(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := embedded.StatsSQL(tt.q)
			if want := "WITH w AS (SELECT listing_id, task_id, method, state, error_code, latency_ms, cost_micros, currency, estimated FROM usage" +
				tt.wantWhere + "),"; !strings.HasPrefix(sql, want) {
				t.Errorf("sql starts\n %s\nwant\n %s", sql[:min(len(sql), len(want))], want)
			}
			for _, part := range []string{
				"SUM(method NOT IN ('push', 'sweep')) AS calls",
				"SUM(error_code IN (-32603, -32006, -32050, -32051, -32052, -32054, -32055, -32056)) AS errors",
				"MAX(state IN ('failed', 'rejected')) AS failed",
				"FROM per_task GROUP BY listing_id HAVING SUM(calls) >= ?",
				"FROM w WHERE method IN ('message/send', 'SendMessage') AND error_code = 0",
				"MAX(CASE WHEN r = n * 50 / 100 THEN latency_ms END) AS p50",
				"MAX(CASE WHEN r = n * 95 / 100 THEN latency_ms END) AS p95",
				"MAX(CASE WHEN r = n / 2 THEN cost END) AS median",
				"ORDER BY l.listing_id",
			} {
				if !strings.Contains(sql, part) {
					t.Errorf("the query lacks %q:\n%s", part, sql)
				}
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("args = %#v, want %#v", args, tt.wantArgs)
			}
		})
	}
}
