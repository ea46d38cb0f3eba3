// Package embedded is the embedded default's usage store: a SQLite file
// (pure-Go driver, no cgo) with the same query semantics as the ClickHouse
// store. A row's ID is its primary key and an insert of a stored ID does
// nothing, so a row inserted again has no effect.
package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "github.com/glebarez/go-sqlite" // registers the "sqlite" driver

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// schemaVersion is kept in PRAGMA user_version; migrations[v] lists the
// statements that bring a file from version v to v+1.
const schemaVersion = 5

var schema = []string{
	`CREATE TABLE IF NOT EXISTS usage (
		id               TEXT PRIMARY KEY,
		time_ms          INTEGER NOT NULL,
		trace_id         TEXT NOT NULL,
		task_id          TEXT NOT NULL,
		context_id       TEXT NOT NULL,
		parent_task_id   TEXT NOT NULL,
		listing_id       TEXT NOT NULL,
		seller_org_id    TEXT NOT NULL,
		buyer_org_id     TEXT NOT NULL,
		api_key_id       TEXT NOT NULL,
		contract_id      TEXT NOT NULL,
		method           TEXT NOT NULL,
		protocol_version TEXT NOT NULL,
		state            TEXT NOT NULL,
		error_code       INTEGER NOT NULL,
		bytes_in         INTEGER NOT NULL,
		bytes_out        INTEGER NOT NULL,
		latency_ms       INTEGER NOT NULL,
		input_tokens     INTEGER NOT NULL,
		output_tokens    INTEGER NOT NULL,
		compute_ms       INTEGER NOT NULL,
		tasks            INTEGER NOT NULL,
		cost_micros      INTEGER NOT NULL,
		currency         TEXT NOT NULL,
		estimated        INTEGER NOT NULL,
		card_hash        TEXT NOT NULL,
		model            TEXT NOT NULL
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS usage_time ON usage (time_ms)`,
	`CREATE INDEX IF NOT EXISTS usage_buyer_time ON usage (buyer_org_id, time_ms)`,
	`CREATE INDEX IF NOT EXISTS usage_seller_time ON usage (seller_org_id, time_ms)`,
}

// rollup is the daily rollup: per UTC day and attribution, the sums the
// finance views read, so a month over a million rows reads a few thousand.
// It is fed in the same transaction as the rows it sums, and only by rows
// newly stored, so a row inserted again counts once here too.
var rollup = []string{
	`CREATE TABLE IF NOT EXISTS usage_daily (
		day            INTEGER NOT NULL,
		buyer_org_id   TEXT NOT NULL,
		seller_org_id  TEXT NOT NULL,
		listing_id     TEXT NOT NULL,
		api_key_id     TEXT NOT NULL,
		contract_id    TEXT NOT NULL,
		calls          INTEGER NOT NULL,
		tasks          INTEGER NOT NULL,
		input_tokens   INTEGER NOT NULL,
		output_tokens  INTEGER NOT NULL,
		compute_ms     INTEGER NOT NULL,
		cost_micros    INTEGER NOT NULL,
		estimated      INTEGER NOT NULL,
		PRIMARY KEY (day, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id)
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS usage_daily_seller ON usage_daily (seller_org_id, day)`,
	`CREATE INDEX IF NOT EXISTS usage_daily_buyer ON usage_daily (buyer_org_id, day)`,
	`INSERT INTO usage_daily (day, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id,
		calls, tasks, input_tokens, output_tokens, compute_ms, cost_micros, estimated)
	 SELECT time_ms / 86400000, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id,
		COUNT(*), ` + sums("tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated") + `
	 FROM usage GROUP BY 1, 2, 3, 4, 5, 6`,
}

// saturated repairs rollup cells that summed past int64 before sums
// saturated: SQLite turned them into REALs (its rule for an integer
// operation that overflows), which no reader could scan. Such a cell's
// true value is past int64, so it becomes the saturated value.
var saturated = func() []string {
	var out []string
	for _, c := range []string{"calls", "tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated"} {
		out = append(out, fmt.Sprintf("UPDATE usage_daily SET %[1]s = %[2]d WHERE typeof(%[1]s) = 'real'", c, int64(math.MaxInt64)))
	}
	return out
}()

// tags: each row's cost allocation tags (a JSON object, ” for none). The
// daily rollup has none: grouping by a tag reads the rows.
var tags = []string{`ALTER TABLE usage ADD COLUMN tags TEXT NOT NULL DEFAULT ''`}

// leaner drops the rows' index by listing: each insert dirtied a page
// of it at a place of its own, much of a row's CPU in a file of a million
// rows. The finance views read the rollup, which has its own; what still
// reads rows (a range not on whole days, the rows themselves, listing
// stats) reads them by time. The indexes by buyer and by seller stay: an
// org's totals per task and per tag (its console, its CSV exports) read
// its own rows, which by time alone would be a range of every org's
// (about 200 ms a day of 100,000 rows, BenchmarkQueries), and any seller
// could have the meter read the whole table.
var leaner = []string{
	`DROP INDEX IF EXISTS usage_listing_time`,
}

var migrations = [][]string{schema, rollup, saturated, tags, leaner}

// satSum is the SQL of a sum that cannot overflow. SQLite's SUM fails
// ("integer overflow") past int64, so each value is summed in two parts,
// its whole multiples of 2^32 and the rest, whose sums cannot overflow
// below 2^31 rows a group; recombining them past int64 gives a REAL
// (SQLite's rule for integer arithmetic that overflows), which MIN brings
// back to the largest int64. The result is exact up to 2^63-1 and
// saturates there, like agentmarket.AddSat.
func satSum(col string) string {
	return fmt.Sprintf("MIN(SUM(%[1]s / 4294967296) * 4294967296 + SUM(%[1]s %% 4294967296), %[2]d)", col, int64(math.MaxInt64))
}

// sums is satSum of each column, comma separated.
func sums(cols ...string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = satSum(c)
	}
	return strings.Join(out, ", ")
}

// rollupUpsert adds a batch's sums to a day's cell (the writer runs it
// with one VALUES row). Each addition saturates at the largest int64 (an
// overflowing + gives a REAL, which MIN brings back), as satSum does.
const rollupUpsert = `INSERT INTO usage_daily (day, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id,
		calls, tasks, input_tokens, output_tokens, compute_ms, cost_micros, estimated)
	VALUES %s
	ON CONFLICT (day, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id) DO UPDATE SET
		calls = MIN(calls + excluded.calls, 9223372036854775807), tasks = MIN(tasks + excluded.tasks, 9223372036854775807),
		input_tokens = MIN(input_tokens + excluded.input_tokens, 9223372036854775807),
		output_tokens = MIN(output_tokens + excluded.output_tokens, 9223372036854775807),
		compute_ms = MIN(compute_ms + excluded.compute_ms, 9223372036854775807),
		cost_micros = MIN(cost_micros + excluded.cost_micros, 9223372036854775807),
		estimated = MIN(estimated + excluded.estimated, 9223372036854775807)`

const columns = `id, time_ms, trace_id, task_id, context_id, parent_task_id,
	listing_id, seller_org_id, buyer_org_id, api_key_id, contract_id,
	method, protocol_version, state, error_code, bytes_in, bytes_out, latency_ms,
	input_tokens, output_tokens, compute_ms, tasks, cost_micros, currency, estimated,
	card_hash, model, tags`

// pragmas set every connection to the file, the driver's and the
// writer's: writes are durable at COMMIT (synchronous=FULL in WAL mode).
// The WAL is copied into the file every 10,000 pages (40 MiB), not
// SQLite's 1,000: an index page that several batches changed is written
// back once (BenchmarkInsert sortable-ids/empty, alternating: 20.7, 21.1
// -> 18.6, 18.2 us of CPU a row).
var pragmas = []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "temp_store(MEMORY)", "cache_size(-32768)", "mmap_size(1073741824)",
	"wal_autocheckpoint(10000)"}

// Store implements metering.Store over a SQLite file. Reads go through
// database/sql; Insert through its own connection (writer).
type Store struct {
	db *sql.DB
	// mu serializes writers in this process, so they queue here instead of
	// failing on SQLite's single-writer lock, and guards w.
	mu sync.Mutex
	w  *writer // nil once closed
}

var _ metering.Store = (*Store)(nil)

// PreferredBatchRows is how many rows one Insert should carry: a batch
// appends to the same pages of the table and its time index and adds
// into the same rollup cells, so larger ones write fewer pages a row
// (BenchmarkInsert sortable-ids/1M-rows, alternating: 13.3, 14.5 µs of
// CPU a row in batches of 5,000; 10.6, 10.6 in batches of 20,000).
const PreferredBatchRows = 20_000

var _ metering.BatchSizer = (*Store)(nil)

// PreferredBatchRows implements metering.BatchSizer.
func (s *Store) PreferredBatchRows() int { return PreferredBatchRows }

// Open opens (creating it if needed) the usage store in the SQLite file at
// path. Writes are durable when Insert returns (synchronous=FULL): the
// shipper deletes spooled rows right after.
func Open(path string) (*Store, error) {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("embedded usage store: path %q must not contain '?'", path)
	}
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("embedded usage store: %w", err)
	}
	s := &Store{db: db}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	if s.w, err = openWriter(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded usage store: %w", err)
	}
	return s, nil
}

func (s *Store) migrate() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("embedded usage store: %w", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("embedded usage store: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("embedded usage store: schema version %d is newer than this binary's %d", v, schemaVersion)
	}
	if v == schemaVersion {
		return nil
	}
	for ; v < schemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if has, err := hasColumn(ctx, tx, stmt); err != nil || has {
				if err != nil {
					return fmt.Errorf("embedded usage store: migrate to %d: %w", v+1, err)
				}
				continue // added already: SQLite has no ADD COLUMN IF NOT EXISTS
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("embedded usage store: migrate to %d: %w", v+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("embedded usage store: %w", err)
	}
	return tx.Commit()
}

// hasColumn reports whether stmt adds a column (ALTER TABLE t ADD COLUMN
// c …) that t has already.
func hasColumn(ctx context.Context, tx *sql.Tx, stmt string) (bool, error) {
	f := strings.Fields(stmt)
	if len(f) < 6 || !strings.EqualFold(f[0]+" "+f[1], "ALTER TABLE") || !strings.EqualFold(f[3]+" "+f[4], "ADD COLUMN") {
		return false, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?", f[2], f[5]).Scan(&n)
	return n > 0, err
}

// Close closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	var err error
	if s.w != nil {
		err = s.w.close()
		s.w = nil
	}
	s.mu.Unlock()
	return errors.Join(err, s.db.Close())
}

var errClosed = errors.New("the usage store is closed")

// Insert stores rows in one transaction; rows whose ID is stored already
// are ignored. The rows it did store are summed into their days' rollup
// cells in the same transaction, so a row inserted again counts once there
// too (writer.insert).
func (s *Store) Insert(ctx context.Context, rows []metering.Usage) error {
	for i := range rows {
		if err := rows[i].Validate(); err != nil {
			return err
		}
	}
	if len(rows) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return unavailable(errClosed)
	}
	if err := s.w.insert(ctx, rows); err != nil {
		return unavailable(err)
	}
	return nil
}

// dayCell is a cell of the daily rollup.
type dayCell struct {
	day                                      int64
	buyer, seller, listing, apiKey, contract string
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// keyExpr is the grouping expression of each dimension. Days are UTC day
// numbers, formatted by metering.DayKey.
var keyExpr = map[metering.GroupBy]string{
	metering.ByListing: "listing_id",
	metering.BySeller:  "seller_org_id",
	metering.ByBuyer:   "buyer_org_id",
	metering.ByAPIKey:  "api_key_id",
	metering.ByTask:    "listing_id || '/' || task_id",
	// Floor division: time_ms is never negative (see Usage.Validate).
	metering.ByDay: "time_ms / 86400000",
}

// where renders q's filters.
func where(q metering.Query) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		conds = append(conds, cond)
		args = append(args, arg)
	}
	if !q.From.IsZero() {
		add("time_ms >= ?", q.From.UnixMilli())
	}
	if !q.To.IsZero() {
		add("time_ms < ?", q.To.UnixMilli())
	}
	for _, f := range []struct{ col, val string }{
		{"buyer_org_id", q.BuyerOrgID},
		{"seller_org_id", q.SellerOrgID},
		{"listing_id", q.ListingID},
		{"api_key_id", q.APIKeyID},
		{"contract_id", q.ContractID},
	} {
		if f.val != "" {
			add(f.col+" = ?", f.val)
		}
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

const dayMs = 86_400_000

// onDays reports whether t is open (zero) or a UTC midnight.
func onDays(t time.Time) bool { return t.IsZero() || t.UnixMilli()%dayMs == 0 }

// Totals sums usage per key of q.GroupBy, ordered by key (TotalsSQL).
func (s *Store) Totals(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	if err := q.ValidateTotals(); err != nil {
		return nil, err
	}
	return s.totals(ctx, q, TotalsSQL)
}

// TotalsSQL returns the query Totals runs for q, and its arguments.
// Queries over whole UTC days (what the finance views ask) read the daily
// rollup; a range with a partial day at either end reads its whole days
// from the rollup and only the partial days from the rows (splitSQL);
// per-task and per-tag totals read the rows. Every sum saturates
// (satSum).
func TotalsSQL(q metering.Query) (string, []any) {
	if _, tag := q.GroupBy.TagKey(); tag || q.GroupBy == metering.ByTask {
		return rowsTotalsSQL(q)
	}
	if onDays(q.From) && onDays(q.To) {
		return rollupTotalsSQL(q)
	}
	return splitSQL(q)
}

// rollupSums are the rollup's summed columns, in Total's order.
var rollupSums = []string{"calls", "tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated"}

func rollupTotalsSQL(q metering.Query) (string, []any) {
	w, args := rollupWhere(q)
	return `SELECT ` + rollupKey(q.GroupBy) + ` AS k, ` + sums(rollupSums...) +
		` FROM usage_daily` + w + ` GROUP BY k ORDER BY k`, args
}

// rollupKey is g's grouping expression over the rollup.
func rollupKey(g metering.GroupBy) string {
	if g == metering.ByDay {
		return "day"
	}
	return keyExpr[g]
}

// rollupWhere renders q's filters over the rollup, q's range being on
// whole days.
func rollupWhere(q metering.Query) (string, []any) {
	day := q
	day.From, day.To = time.Time{}, time.Time{}
	w, args := where(day)
	var conds []string
	if !q.From.IsZero() {
		conds = append(conds, "day >= ?")
		args = append(args, q.From.UnixMilli()/dayMs)
	}
	if !q.To.IsZero() {
		conds = append(conds, "day < ?")
		args = append(args, q.To.UnixMilli()/dayMs)
	}
	if len(conds) > 0 {
		if w == "" {
			w = " WHERE " + strings.Join(conds, " AND ")
		} else {
			w += " AND " + strings.Join(conds, " AND ")
		}
	}
	return w, args
}

// splitSQL sums q's whole days from the rollup and its partial first and
// last days from the rows, so a month up to now reads the rows of at most
// two days, by time: the rows have no index per attribution (they would
// cost most of an insert's CPU). A range within one day reads the rows.
func splitSQL(q metering.Query) (string, []any) {
	from, to := max(q.From.UnixMilli(), 0), q.To.UnixMilli()
	firstDay, endDay := (from+dayMs-1)/dayMs, to/dayMs // whole days [firstDay, endDay)
	if !q.From.IsZero() && !q.To.IsZero() && firstDay >= endDay {
		return rowsTotalsSQL(q)
	}
	days, head, tail := q, q, q
	parts := []string{}
	var args []any
	if !q.From.IsZero() {
		days.From = time.UnixMilli(firstDay * dayMs)
		head.To = days.From
	}
	if !q.To.IsZero() {
		days.To = time.UnixMilli(endDay * dayMs)
		tail.From = days.To
	}
	w, a := rollupWhere(days)
	parts = append(parts, `SELECT `+rollupKey(q.GroupBy)+` AS k, `+strings.Join(rollupSums, ", ")+` FROM usage_daily`+w)
	args = append(args, a...)
	for _, edge := range []struct {
		q  metering.Query
		on bool
	}{{head, !onDays(q.From)}, {tail, !onDays(q.To)}} {
		if edge.on {
			w, a := where(edge.q)
			parts = append(parts, `SELECT `+keyExpr[q.GroupBy]+` AS k, 1, tasks, input_tokens, output_tokens, compute_ms, cost_micros, estimated FROM usage`+w)
			args = append(args, a...)
		}
	}
	return `SELECT k, ` + sums(rollupSums...) + ` FROM (` + strings.Join(parts, " UNION ALL ") + `) GROUP BY k ORDER BY k`, args
}

// groupExpr is the grouping expression of g over the rows: keyExpr's, or
// for a tag key its value in the row's tags (” when the row has none:
// untagged). The key is inlined in the JSON path, TagKey having checked
// it is letters, digits, '_', '.' and '-' only.
func groupExpr(g metering.GroupBy) string {
	if key, ok := g.TagKey(); ok {
		return `COALESCE(json_extract(NULLIF(tags, ''), '$."` + key + `"'), '')`
	}
	return keyExpr[g]
}

func rowsTotalsSQL(q metering.Query) (string, []any) {
	w, args := where(q)
	task := ""
	if q.GroupBy == metering.ByTask {
		task = ", MAX(context_id)"
	}
	return `SELECT ` + groupExpr(q.GroupBy) + ` AS k, COUNT(*), ` + sums("tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated") +
		task + ` FROM usage` + w + ` GROUP BY k ORDER BY k`, args
}

func (s *Store) totalsFromRollup(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	return s.totals(ctx, q, rollupTotalsSQL)
}

func (s *Store) totalsFromRows(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	return s.totals(ctx, q, rowsTotalsSQL)
}

func (s *Store) totals(ctx context.Context, q metering.Query, build func(metering.Query) (string, []any)) ([]metering.Total, error) {
	query, args := build(q)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	out, err := metering.ReadTotals(rows, q.GroupBy)
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// Rows returns the stored rows matching q, ordered by time then id.
func (s *Store) Rows(ctx context.Context, q metering.Query) ([]metering.Usage, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	w, args := where(q)
	rows, err := s.db.QueryContext(ctx, "SELECT "+columns+" FROM usage"+w+" ORDER BY time_ms, id", args...)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	out := []metering.Usage{}
	for rows.Next() {
		var u metering.Usage
		var ms, est int64
		var tags string
		if err := rows.Scan(&u.ID, &ms, &u.TraceID, &u.TaskID, &u.ContextID, &u.ParentTaskID,
			&u.ListingID, &u.SellerOrgID, &u.BuyerOrgID, &u.APIKeyID, &u.ContractID,
			&u.Method, &u.ProtocolVersion, &u.State, &u.ErrorCode, &u.BytesIn, &u.BytesOut, &u.LatencyMs,
			&u.InputTokens, &u.OutputTokens, &u.ComputeMs, &u.Tasks, &u.CostMicros, &u.Currency, &est,
			&u.CardHash, &u.Model, &tags); err != nil {
			return nil, unavailable(err)
		}
		u.Tags = agentmarket.Tags(tags)
		u.Time = time.UnixMilli(ms).UTC()
		u.Estimated = est != 0
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

func unavailable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return agentmarket.Wrap(agentmarket.Unavailable, "usage_store", err, "the usage store failed")
}
