package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// Rollups (migrations/clickhouse/0002_usage_rollup.sql). Insert stores the
// rows, then, in one INSERT into usage_rollup, a marker for each row not
// counted yet and what those rows add to their hourly and daily cells.
// Whether a row is counted is decided by its marker, so the rollups count
// each row once however often it is inserted, exactly like the rows read
// with FINAL. Totals reads whole days from the daily cells, whole hours
// from the hourly ones, and the rest (and every per-task total) from the
// rows.

// Kinds of usage_rollup rows. Listing cells (3, 4) are the hour and day
// cells summed over keys and contracts (those columns empty): most
// finance reports neither filter nor group by them, and read a third as
// many cells.
const (
	kindMarker     = 0
	kindHour       = 1
	kindDay        = 2
	kindListingHr  = 3
	kindListingDay = 4
)

// rollupInsertSQL names every column (18.16 needs the list to append).
const rollupInsertSQL = `INSERT INTO usage_rollup (kind, bucket, row_id, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id,
	calls, estimated, tasks_hi, tasks_lo, input_tokens_hi, input_tokens_lo, output_tokens_hi, output_tokens_lo,
	compute_ms_hi, compute_ms_lo, cost_micros_hi, cost_micros_lo)`

// The amounts a cell sums, in usage_rollup's column order.
var amountCols = []string{"tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros"}

// split is v as a high and a low 32-bit part: v = hi*2^32 + lo, with lo in
// [0, 2^32). Sums of either part cannot wrap below 2^31 rows.
func split(v int64) (hi, lo int64) { return v >> 32, v & 0xffffffff }

type cellKey struct {
	kind                                     uint8
	bucket                                   int64 // epoch seconds
	buyer, seller, listing, apiKey, contract string
}

type cell struct {
	calls, estimated int64
	parts            [10]int64 // hi, lo of each of amountCols
}

func (c *cell) merge(o *cell) {
	c.calls += o.calls
	c.estimated += o.estimated
	for i, p := range o.parts {
		c.parts[i] += p
	}
}

func (c *cell) add(u *metering.Usage) {
	c.calls++
	if u.Estimated {
		c.estimated++
	}
	for i, v := range []int64{u.Tasks, u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros} {
		hi, lo := split(v)
		c.parts[2*i] += hi
		c.parts[2*i+1] += lo
	}
}

// RollupColumns lays out what rows add to usage_rollup: a marker per row,
// then its hourly and daily cells, column by column in rollupInsertSQL's
// order. Rows must be new (not counted yet) and distinct.
func RollupColumns(rows []metering.Usage) []any {
	// Hours first, one map lookup a row; days are then folded from the
	// hours, a lookup an hour cell.
	cells := map[cellKey]*cell{}
	var order []cellKey
	for i := range rows {
		u := &rows[i]
		sec := u.Time.Unix()
		k := cellKey{kindHour, sec - sec%3600, u.BuyerOrgID, u.SellerOrgID, u.ListingID, u.APIKeyID, u.ContractID}
		c := cells[k]
		if c == nil {
			c = &cell{}
			cells[k] = c
			order = append(order, k)
		}
		c.add(u)
	}
	fold := func(into cellKey, from *cell) {
		d := cells[into]
		if d == nil {
			d = &cell{}
			cells[into] = d
			order = append(order, into)
		}
		d.merge(from)
	}
	for _, k := range order[:len(order):len(order)] {
		h := cells[k]
		day := k
		day.kind, day.bucket = kindDay, k.bucket-k.bucket%86400
		fold(day, h)
		lh := k
		lh.kind, lh.apiKey, lh.contract = kindListingHr, "", ""
		fold(lh, h)
		ld := lh
		ld.kind, ld.bucket = kindListingDay, day.bucket
		fold(ld, h)
	}
	n := len(rows) + len(order)
	kind := make([]uint8, 0, n)
	bucket := make([]time.Time, 0, n)
	strs := make([][]string, 6) // row_id, buyer, seller, listing, key, contract
	for i := range strs {
		strs[i] = make([]string, 0, n)
	}
	nums := make([][]int64, 12) // calls, estimated, then the parts
	for i := range nums {
		nums[i] = make([]int64, 0, n)
	}
	for i := range rows {
		u := &rows[i]
		kind = append(kind, kindMarker)
		bucket = append(bucket, time.Unix(u.Time.Unix(), 0).UTC())
		// The marker names its row's buyer: on a cluster usage_rollup is
		// sharded by buyer (ClusterStatements), so a row's marker and its
		// cells go to one shard, in one block, and a shard has both or
		// neither whatever happens to the others.
		strs[0] = append(strs[0], u.ID)
		strs[1] = append(strs[1], u.BuyerOrgID)
		for j := 2; j < 6; j++ {
			strs[j] = append(strs[j], "")
		}
		// calls = 1: SummingMergeTree drops rows whose sums are all zero.
		nums[0] = append(nums[0], 1)
		for j := 1; j < 12; j++ {
			nums[j] = append(nums[j], 0)
		}
	}
	for _, k := range order {
		c := cells[k]
		kind = append(kind, k.kind)
		bucket = append(bucket, time.Unix(k.bucket, 0).UTC())
		for j, s := range []string{"", k.buyer, k.seller, k.listing, k.apiKey, k.contract} {
			strs[j] = append(strs[j], s)
		}
		nums[0] = append(nums[0], c.calls)
		nums[1] = append(nums[1], c.estimated)
		for j, p := range c.parts {
			nums[2+j] = append(nums[2+j], p)
		}
	}
	out := []any{kind, bucket}
	for _, s := range strs {
		out = append(out, s)
	}
	for _, v := range nums {
		out = append(out, v)
	}
	return out
}

// counted returns the ids of rows whose markers are stored: rows counted in
// the cells already. The batch's (time, id) pairs go to the server as an
// external table, and the IN reads only the index ranges they name.
func (s *Store) counted(ctx context.Context, rows []metering.Usage) (map[string]bool, error) {
	tbl, err := ext.NewTable("batch_rows", ext.Column("bucket", "DateTime"), ext.Column("row_id", "String"))
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := tbl.Append(time.Unix(rows[i].Time.Unix(), 0).UTC(), rows[i].ID); err != nil {
			return nil, err
		}
	}
	res, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)),
		`SELECT row_id FROM usage_rollup WHERE kind = 0 AND (bucket, row_id) IN (SELECT bucket, row_id FROM batch_rows)`)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	seen := map[string]bool{}
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return nil, err
		}
		seen[id] = true
	}
	return seen, res.Err()
}

// pendingRollup is what a batch adds to the cells: its rows not counted
// yet, laid out as rollupInsertSQL's columns.
type pendingRollup struct {
	qid  string
	cols []any // nil: nothing to add
}

// prepareRollup finds the rows of a batch that the cells do not count yet
// and lays them out; writeRollup adds them to the cells, with their
// markers, in one INSERT. Its query id is derived from the batch's first
// row, so a batch sent again while the server still runs the first
// attempt's INSERT (a client that gave up waiting) waits here until that
// attempt ends, instead of both counting.
func (s *Store) prepareRollup(ctx context.Context, rows []metering.Usage) (pendingRollup, error) {
	r := pendingRollup{qid: "agentmarket-rollup-" + rows[0].ID}
	if err := s.waitQuery(ctx, r.qid); err != nil {
		return r, err
	}
	seen, err := s.counted(ctx, rows)
	if err != nil {
		return r, unavailable(err)
	}
	fresh := make([]metering.Usage, 0, len(rows))
	dup := make(map[string]bool, len(rows))
	for i := range rows {
		if id := rows[i].ID; !seen[id] && !dup[id] {
			dup[id] = true
			fresh = append(fresh, rows[i])
		}
	}
	if len(fresh) > 0 {
		r.cols = RollupColumns(fresh)
	}
	return r, nil
}

func (s *Store) writeRollup(ctx context.Context, r pendingRollup) error {
	if r.cols == nil {
		return nil
	}
	b, err := s.conn.PrepareBatch(ch.Context(s.insertCtx(ctx), ch.WithQueryID(r.qid)), rollupInsertSQL)
	if err != nil {
		return unavailable(err)
	}
	for i, c := range r.cols {
		if err := b.Column(i).Append(c); err != nil {
			b.Abort()
			return agentmarket.Wrap(agentmarket.Internal, "usage_store", err, "the usage store refused a rollup column")
		}
	}
	if err := b.Send(); err != nil {
		return unavailable(err)
	}
	return nil
}

// waitQuery waits while the server runs a query with this id.
func (s *Store) waitQuery(ctx context.Context, qid string) error {
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.processes WHERE query_id = ?", qid).Scan(&n); err != nil {
			return unavailable(err)
		}
		if n == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// completeFrom reads from when the rollups hold every row.
func (s *Store) completeFrom(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.conn.QueryRow(ctx, "SELECT max(value) FROM usage_rollup_state WHERE name = 'complete_from'").Scan(&t)
	if err != nil {
		return time.Time{}, fmt.Errorf("clickhouse: read usage_rollup_state: %w", err)
	}
	return t.UTC(), nil
}

// sourceRows marks a Span the rows answer.
const sourceRows = 255

// Spans cuts a query's range [from, to) (zero: open) into what each source
// answers: daily cells for whole UTC days, hourly cells for whole hours,
// the rows for the rest, and the rows for everything before complete (when
// the rollups began). Bounds are in milliseconds (a query's precision);
// cells start on whole seconds, so a bound that is not a whole second
// falls in a span of rows.
func Spans(from, to, complete time.Time) (out []Span) {
	const (
		minMs = 0
		maxMs = (1<<32-1)*1000 + 999 + 1
	)
	lo, hi := int64(minMs), int64(maxMs)
	if !from.IsZero() {
		lo = max(min(from.UnixMilli(), maxMs), minMs)
	}
	if !to.IsZero() {
		hi = max(min(to.UnixMilli(), maxMs), minMs)
	}
	add := func(src uint8, a, b int64) {
		if a >= b {
			return
		}
		if n := len(out); n > 0 && out[n-1].Source == src && out[n-1].ToMs == a {
			out[n-1].ToMs = b
			return
		}
		out = append(out, Span{src, a, b})
	}
	ceil := func(ms, unit int64) int64 { return (ms + unit - 1) / unit * unit }
	floor := func(ms, unit int64) int64 { return ms / unit * unit }
	const hour, day = 3600_000, 86400_000
	start := max(lo, min(ceil(complete.UnixMilli(), hour), hi))
	add(sourceRows, lo, start)
	h1, d1 := min(ceil(start, hour), hi), min(ceil(start, day), hi)
	d2, h2 := max(floor(hi, day), start), max(floor(hi, hour), start)
	defer func() {
		if len(out) == 0 { // an empty range: one empty span of rows
			out = []Span{{sourceRows, lo, lo}}
		}
	}()
	switch {
	case d1 < d2:
		add(sourceRows, start, h1)
		add(kindHour, h1, d1)
		add(kindDay, d1, d2)
		add(kindHour, d2, h2)
		add(sourceRows, h2, hi)
	case h1 < h2:
		add(sourceRows, start, h1)
		add(kindHour, h1, h2)
		add(sourceRows, h2, hi)
	default:
		add(sourceRows, start, hi)
	}
	return out
}

// Span is a half-open range of epoch milliseconds answered by one source:
// kindHour or kindDay cells, or the rows (255).
type Span struct {
	Source       uint8
	FromMs, ToMs int64
}

// cellKeyExpr is the grouping expression of each dimension over cells.
var cellKeyExpr = map[metering.GroupBy]string{
	metering.ByListing: "listing_id",
	metering.BySeller:  "seller_org_id",
	metering.ByBuyer:   "buyer_org_id",
	metering.ByAPIKey:  "api_key_id",
	metering.ByDay:     "toInt64(intDiv(toUInt32(bucket), 86400))",
}

// dimWhere renders q's attribution filters (not its time range).
func dimWhere(q metering.Query) ([]string, []any) {
	var conds []string
	var args []any
	for _, f := range []struct{ col, val string }{
		{"buyer_org_id", q.BuyerOrgID},
		{"seller_org_id", q.SellerOrgID},
		{"listing_id", q.ListingID},
		{"api_key_id", q.APIKeyID},
		{"contract_id", q.ContractID},
	} {
		if f.val != "" {
			conds = append(conds, f.col+" = ?")
			args = append(args, f.val)
		}
	}
	return conds, args
}

// rowsRange renders one span of rows: whole seconds on the DateTime column
// (which prunes partitions and uses the index) and exactly in ms.
func rowsRange(sp Span) (string, []any) {
	return "(time >= toDateTime(?) AND time <= toDateTime(?) AND " + msExpr + " >= ? AND " + msExpr + " < ?)",
		[]any{uint64(sp.FromMs / 1000), uint64((sp.ToMs - 1) / 1000), uint64(sp.FromMs), uint64(sp.ToMs)}
}

// decSum is a sum as Decimal(38, 0), for the outer query to add up and
// saturate.
func decSum(col string) string { return "sum(toDecimal128(" + col + ", 0))" }

// partsSum recombines a cell amount's parts as Decimal(38, 0).
func partsSum(col string) string {
	return "toDecimal128(sum(" + col + "_hi), 0) * 4294967296 + toDecimal128(sum(" + col + "_lo), 0)"
}

// RollupTotalsSQL returns the query Totals runs for q when it reads
// rollups: one branch per source (rows, hourly cells, daily cells), each
// summing its spans, added up by key and saturated at the largest Int64.
// The listing cells serve every query that neither filters nor groups by
// key or contract. complete is when the rollups began
// (usage_rollup_state).
func RollupTotalsSQL(q metering.Query, complete time.Time) (string, []any) {
	spans := Spans(q.From, q.To, complete)
	dims, dimArgs := dimWhere(q)
	hour, day := uint8(kindListingHr), uint8(kindListingDay)
	if q.APIKeyID != "" || q.ContractID != "" || q.GroupBy == metering.ByAPIKey {
		hour, day = kindHour, kindDay
	}
	var branches []string
	var args []any
	for _, src := range []uint8{sourceRows, kindHour, kindDay} {
		kind := map[uint8]uint8{kindHour: hour, kindDay: day}[src]
		var ranges []string
		var rargs []any
		for _, sp := range spans {
			if sp.Source != src {
				continue
			}
			if src == sourceRows {
				r, a := rowsRange(sp)
				ranges = append(ranges, r)
				rargs = append(rargs, a...)
			} else {
				ranges = append(ranges, "(bucket >= toDateTime(?) AND bucket < toDateTime(?))")
				rargs = append(rargs, uint64(sp.FromMs/1000), uint64(sp.ToMs/1000))
			}
		}
		if len(ranges) == 0 {
			continue
		}
		conds := []string{"(" + strings.Join(ranges, " OR ") + ")"}
		if src != sourceRows {
			conds = append([]string{fmt.Sprintf("kind = %d", kind)}, conds...)
		}
		conds = append(conds, dims...)
		var sel string
		if src == sourceRows {
			sel = "SELECT " + keyExpr[q.GroupBy] + " AS k, toDecimal128(count(), 0) AS calls, " + decSum("tasks") + " AS tasks, " +
				decSum("input_tokens") + " AS input_tokens, " + decSum("output_tokens") + " AS output_tokens, " +
				decSum("compute_ms") + " AS compute_ms, " + decSum("cost_micros") + " AS cost_micros, " + decSum("estimated") + " AS estimated\n" +
				"  FROM usage FINAL"
		} else {
			sel = "SELECT " + cellKeyExpr[q.GroupBy] + " AS k, " + decSum("calls") + " AS calls, " + partsSum("tasks") + " AS tasks, " +
				partsSum("input_tokens") + " AS input_tokens, " + partsSum("output_tokens") + " AS output_tokens, " +
				partsSum("compute_ms") + " AS compute_ms, " + partsSum("cost_micros") + " AS cost_micros, " + decSum("estimated") + " AS estimated\n" +
				"  FROM usage_rollup"
		}
		branches = append(branches, sel+"\n  WHERE "+strings.Join(conds, "\n    AND ")+"\n  GROUP BY k")
		args = append(append(args, rargs...), dimArgs...)
	}
	sat := func(c string) string {
		return "toInt64(least(sum(" + c + "), toDecimal128(9223372036854775807, 0)))"
	}
	return `SELECT k, ` + sat("calls") + `, ` + sat("tasks") + `, ` + sat("input_tokens") + `, ` + sat("output_tokens") + `,
  ` + sat("compute_ms") + `, ` + sat("cost_micros") + `, ` + sat("estimated") + `
FROM (
  ` + strings.Join(branches, "\n  UNION ALL\n  ") + `
)
GROUP BY k
ORDER BY k`, args
}
