package embedded

import (
	"context"

	"github.com/agentmarket/agentmarket/metering"
)

// StatsSQL returns the query ListingStats runs for q, and its arguments:
// the window's rows (w); the listings whose distinct tasks and buyer orgs
// of error-free buyer calls reach q's minimums (crowd); per task (the
// empty task id holding the calls without one) its calls, errors,
// terminal outcome and summed cost (per_task); per listing of the crowd
// the sums (listings); and the
// percentiles by rank, 0-based floor(p × n / 100) of the sorted values
// (lat, lats for message/send latencies; costs, medians for task costs).
// The rules are metering's (see StatsStore).
func StatsSQL(q metering.StatsQuery) (string, []any) {
	meter, send, failed, codes := metering.StatsSQLLists()
	w, args := where(metering.Query{From: q.From, To: q.To})
	if cond, ids := q.ListingFilter(); cond != "" {
		w, args = w+" AND "+cond, append(args, ids...)
	}
	w += " AND " + metering.SelfTrafficSQL
	args = append(args, q.MinBuyerOrgs, q.MinTasks)
	return `WITH w AS (SELECT listing_id, task_id, buyer_org_id, method, state, error_code, latency_ms, cost_micros, currency, estimated FROM usage` + w + `),
crowd AS (SELECT listing_id FROM w WHERE task_id <> '' AND error_code = 0 AND method NOT IN ` + meter + `
  GROUP BY listing_id HAVING COUNT(DISTINCT buyer_org_id) >= ? AND COUNT(DISTINCT task_id) >= ?),
per_task AS (SELECT listing_id, task_id, SUM(method NOT IN ` + meter + `) AS calls,
  SUM(method NOT IN ` + meter + ` AND estimated <> 0) AS estimated, SUM(error_code IN ` + codes + `) AS errors,
  MAX(state = 'completed') AS completed, MAX(state IN ` + failed + `) AS failed, ` + satSum("cost_micros") + ` AS cost,
  MAX(currency) AS currency
  FROM w GROUP BY listing_id, task_id),
listings AS (SELECT listing_id, SUM(calls) AS calls, SUM(estimated) AS estimated, SUM(task_id <> '' AND completed) AS completed,
  SUM(task_id <> '' AND failed) + SUM(errors) AS failed, SUM(task_id <> '') AS tasks, MAX(currency) AS currency
  FROM per_task WHERE listing_id IN (SELECT listing_id FROM crowd) GROUP BY listing_id),
lat AS (SELECT listing_id, latency_ms, ROW_NUMBER() OVER (PARTITION BY listing_id ORDER BY latency_ms) - 1 AS r,
  COUNT(*) OVER (PARTITION BY listing_id) AS n
  FROM w WHERE method IN ` + send + ` AND error_code = 0),
lats AS (SELECT listing_id, MAX(n) AS n, MAX(CASE WHEN r = n * 50 / 100 THEN latency_ms END) AS p50,
  MAX(CASE WHEN r = n * 95 / 100 THEN latency_ms END) AS p95
  FROM lat GROUP BY listing_id),
costs AS (SELECT listing_id, cost, ROW_NUMBER() OVER (PARTITION BY listing_id ORDER BY cost) - 1 AS r,
  COUNT(*) OVER (PARTITION BY listing_id) AS n
  FROM per_task WHERE task_id <> ''),
medians AS (SELECT listing_id, MAX(CASE WHEN r = n / 2 THEN cost END) AS median FROM costs GROUP BY listing_id)
SELECT l.listing_id, l.calls, l.completed, l.failed, COALESCE(t.n, 0), COALESCE(t.p50, 0), COALESCE(t.p95, 0),
  l.tasks, COALESCE(m.median, 0), l.currency, l.estimated
FROM listings l LEFT JOIN lats t ON t.listing_id = l.listing_id LEFT JOIN medians m ON m.listing_id = l.listing_id
ORDER BY l.listing_id`, args
}

// ListingStats computes verified listing stats (StatsSQL).
func (s *Store) ListingStats(ctx context.Context, q metering.StatsQuery) ([]metering.ListingStats, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	query, args := StatsSQL(q)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	out, err := metering.ReadListingStats(rows)
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}
