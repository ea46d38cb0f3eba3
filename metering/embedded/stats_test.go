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
// each a placeholder), the rules' lists inlined, the minimums of buyer
// orgs and tasks of error-free buyer calls in HAVING, the percentiles by
// 0-based rank floor(p × n / 100).
func TestStatsSQL(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(metering.StatsWindow)
	tests := []struct {
		name      string
		q         metering.StatsQuery
		wantWhere string
		wantArgs  []any
	}{
		{"every listing", metering.StatsQuery{From: from, To: to, MinBuyerOrgs: 3, MinTasks: 20},
			" WHERE time_ms >= ? AND time_ms < ? AND buyer_org_id <> seller_org_id", []any{from.UnixMilli(), to.UnixMilli(), int64(3), int64(20)}},
		{"two listings", metering.StatsQuery{From: from, To: to, MinBuyerOrgs: 1, MinTasks: 2, ListingIDs: []string{"lst_b", "lst_a"}},
			" WHERE time_ms >= ? AND time_ms < ? AND listing_id IN (?, ?) AND buyer_org_id <> seller_org_id", []any{from.UnixMilli(), to.UnixMilli(), "lst_b", "lst_a", int64(1), int64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := embedded.StatsSQL(tt.q)
			if want := "WITH w AS (SELECT listing_id, task_id, buyer_org_id, method, state, error_code, latency_ms, cost_micros, currency, estimated FROM usage" +
				tt.wantWhere + "),"; !strings.HasPrefix(sql, want) {
				t.Errorf("sql starts\n %s\nwant\n %s", sql[:min(len(sql), len(want))], want)
			}
			for _, part := range []string{
				"SUM(method NOT IN ('push', 'sweep')) AS calls",
				"SUM(error_code IN (-32603, -32006, -32050, -32051, -32052, -32054, -32055, -32056)) AS errors",
				"MAX(state IN ('failed', 'rejected')) AS failed",
				"crowd AS (SELECT listing_id FROM w WHERE task_id <> '' AND error_code = 0 AND method NOT IN ('push', 'sweep')\n" +
					"  GROUP BY listing_id HAVING COUNT(DISTINCT buyer_org_id) >= ? AND COUNT(DISTINCT task_id) >= ?)",
				"FROM per_task WHERE listing_id IN (SELECT listing_id FROM crowd) GROUP BY listing_id",
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
