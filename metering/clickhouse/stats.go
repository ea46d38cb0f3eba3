package clickhouse

import (
	"context"
	"strings"

	"github.com/agentmarket/agentmarket/metering"
)

// StatsSQL returns the query ListingStats runs for q, and its arguments:
// per task of the window's rows (the empty task id holding the calls without one)
// its calls, errors, terminal outcome, message/send latencies, summed
// cost, and the buyer orgs of its error-free buyer calls; then per listing
// the sums, kept when the tasks with such a call and their distinct buyer
// orgs reach q's minimums, and the percentiles by rank, 0-based floor(p × n / 100) of the sorted
// values (arrayElement is 1-based, and 0 past the end: no values). The
// rules are metering's (see StatsStore); ClickHouse 18.16 and current
// releases run it alike.
func StatsSQL(q metering.StatsQuery) (string, []any) {
	meter, send, failed, codes := metering.StatsSQLLists()
	w, args := where(metering.Query{From: q.From, To: q.To})
	if cond, ids := q.ListingFilter(); cond != "" {
		w, args = w+"\n  AND "+cond, append(args, ids...)
	}
	w += "\n  AND " + metering.SelfTrafficSQL
	args = append(args, q.MinBuyerOrgs, q.MinTasks)
	return `SELECT listing_id, n_calls, n_completed, n_failed,
  toInt64(length(lats)), toInt64(arrayElement(lats, intDiv(length(lats) * 50, 100) + 1)),
  toInt64(arrayElement(lats, intDiv(length(lats) * 95, 100) + 1)),
  toInt64(length(costs)), toInt64(arrayElement(costs, intDiv(length(costs), 2) + 1)), n_currency, n_est
FROM (
  SELECT listing_id, toInt64(sum(t_calls)) AS n_calls, toInt64(countIf(task_id != '' AND t_completed = 1)) AS n_completed,
    toInt64(countIf(task_id != '' AND t_failed = 1) + sum(t_errors)) AS n_failed, arraySort(groupArrayArray(t_lat)) AS lats,
    arraySort(groupArrayIf(t_cost, task_id != '')) AS costs, max(t_currency) AS n_currency, toInt64(sum(t_est)) AS n_est,
    toInt64(countIf(task_id != '' AND length(t_orgs) > 0)) AS n_crowd_tasks, toInt64(uniqExactArray(t_orgs)) AS n_crowd_orgs
  FROM (
    SELECT listing_id, task_id, countIf(method NOT IN ` + meter + `) AS t_calls,
      countIf(method NOT IN ` + meter + ` AND estimated != 0) AS t_est, countIf(error_code IN ` + codes + `) AS t_errors,
      max(state = 'completed') AS t_completed, max(state IN ` + failed + `) AS t_failed,
      groupArrayIf(latency_ms, method IN ` + send + ` AND error_code = 0) AS t_lat, ` + satSum("cost_micros") + ` AS t_cost,
      max(currency) AS t_currency,
      groupUniqArrayIf(buyer_org_id, task_id != '' AND error_code = 0 AND method NOT IN ` + meter + `) AS t_orgs
    FROM usage FINAL` + strings.ReplaceAll(w, "\n", "\n    ") + `
    GROUP BY listing_id, task_id
  )
  GROUP BY listing_id
  HAVING n_crowd_orgs >= ? AND n_crowd_tasks >= ?
)
ORDER BY listing_id`, args
}

// ListingStats computes verified listing stats (StatsSQL).
func (s *Store) ListingStats(ctx context.Context, q metering.StatsQuery) ([]metering.ListingStats, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	query, args := StatsSQL(q)
	rows, err := s.conn.Query(ctx, query, args...)
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
