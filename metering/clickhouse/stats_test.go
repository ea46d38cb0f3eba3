package clickhouse_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

func TestListingStats(t *testing.T) {
	clickhousetest.AdminDSN(t)
	storetest.RunStats(t, func(t *testing.T) storetest.StatsStore { return clickhousetest.Open(t) })
}

// TestStatsSQL: the rows of the window read with FINAL (each row once),
// bounded twice like every read, and of the listings asked for; the
// rules' lists inlined; the minimums of buyer orgs and tasks of
// error-free buyer calls in HAVING; the percentiles by 0-based rank
// floor(p × n / 100).
func TestStatsSQL(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(metering.StatsWindow)
	bounds := "\n    WHERE time >= toDateTime(?)\n      AND (toUInt64(toUInt32(time)) * 1000 + time_ms) >= ?" +
		"\n      AND time <= toDateTime(?)\n      AND (toUInt64(toUInt32(time)) * 1000 + time_ms) < ?"
	tests := []struct {
		name      string
		q         metering.StatsQuery
		wantWhere string
		wantArgs  []any
	}{
		{"every listing", metering.StatsQuery{From: from, To: to, MinBuyerOrgs: 3, MinTasks: 20}, bounds + "\n      AND buyer_org_id <> seller_org_id",
			[]any{uint64(from.Unix()), uint64(from.UnixMilli()), uint64(to.Unix()), uint64(to.UnixMilli()), int64(3), int64(20)}},
		{"two listings", metering.StatsQuery{From: from, To: to, MinBuyerOrgs: 1, MinTasks: 2, ListingIDs: []string{"lst_b", "lst_a"}},
			bounds + "\n      AND listing_id IN (?, ?)\n      AND buyer_org_id <> seller_org_id",
			[]any{uint64(from.Unix()), uint64(from.UnixMilli()), uint64(to.Unix()), uint64(to.UnixMilli()), "lst_b", "lst_a", int64(1), int64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := clickhouse.StatsSQL(tt.q)
			if want := "FROM usage FINAL" + tt.wantWhere + "\n    GROUP BY listing_id, task_id\n"; !strings.Contains(sql, want) {
				t.Errorf("the query lacks\n%s\nin\n%s", want, sql)
			}
			for _, part := range []string{
				"countIf(method NOT IN ('push', 'sweep')) AS t_calls",
				"countIf(error_code IN (-32603, -32006, -32050, -32051, -32052, -32054, -32055, -32056)) AS t_errors",
				"max(state IN ('failed', 'rejected')) AS t_failed",
				"groupArrayIf(latency_ms, method IN ('message/send', 'SendMessage') AND error_code = 0) AS t_lat",
				"toInt64(arrayElement(lats, intDiv(length(lats) * 50, 100) + 1))",
				"toInt64(arrayElement(lats, intDiv(length(lats) * 95, 100) + 1))",
				"toInt64(arrayElement(costs, intDiv(length(costs), 2) + 1))",
				"groupUniqArrayIf(buyer_org_id, task_id != '' AND error_code = 0 AND method NOT IN ('push', 'sweep')) AS t_orgs",
				"toInt64(countIf(task_id != '' AND length(t_orgs) > 0)) AS n_crowd_tasks, toInt64(uniqExactArray(t_orgs)) AS n_crowd_orgs",
				"HAVING n_crowd_orgs >= ? AND n_crowd_tasks >= ?",
			} {
				if !strings.Contains(sql, part) {
					t.Errorf("the query lacks %q:\n%s", part, sql)
				}
			}
			if !strings.HasSuffix(sql, "\nORDER BY listing_id") {
				t.Errorf("not ordered by listing: %s", sql)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("args = %#v, want %#v", args, tt.wantArgs)
			}
		})
	}
}
