// Package clickhouse is the production usage store: metering.Store over
// ClickHouse, through clickhouse-go's native protocol (the HTTP protocol
// does not work against ClickHouse 18.16). It is the only package that
// imports clickhouse-go.
//
// The schema (migrations/clickhouse) and the SQL here keep to what
// ClickHouse 18.16 and current releases share. Inserts go through
// PrepareBatch with an explicit column list only: INSERT ... VALUES
// through Exec hangs on 18.16.
//
// Idempotency of the rows: FINAL. The usage table is a ReplacingMergeTree
// whose sorting key ends with the row id, so a row inserted twice (a batch
// re-sent after a crash, or a retry whose first attempt did commit) is
// stored twice until a background merge collapses the copies. Every read
// of the rows therefore says FINAL, which merges the selected parts at
// read time and yields each key once.
//
// FINAL is what made seller- and platform-wide reports slow: on 18.16 with
// 2 cores, Totals by listing over 10 million rows and 30 days took 62 ms
// scoped to one buyer (the key's prefix) but 3.3 s for one seller and 2.9 s
// unscoped (0.3 and 0.4 s without FINAL); FINAL is single-threaded on 18.16.
// So Totals read rollups (rollup.go, migrations/clickhouse/0002): hourly and
// daily sums that Insert maintains itself, counting each row once whatever
// is re-sent (a row's marker decides, not a materialized view, which would
// count a re-sent batch twice), and read the rows, with FINAL, only for the
// parts of a range that are not whole hours, and for per-task totals.
//
// On a cluster (WithCluster) the same migrations create replicated tables
// on every node behind Distributed ones under the same names, and the SQL
// above runs unchanged: see cluster.go.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/migrations"
)

// Store implements metering.Store over ClickHouse.
type Store struct {
	conn driver.Conn
	// cluster is the cluster the tables live on (cluster.go); empty on a
	// single server. db is the database the DSN names.
	cluster, db string
	// complete is when the rollups began holding every row (see
	// usage_rollup_state): Totals reads rollups only from then on.
	complete time.Time
	// mu makes this store's Inserts one at a time: a batch's rollup looks
	// its rows' markers up, then adds the rows without one, and two
	// Inserts of the same rows at once would both find none. (Different
	// processes never insert the same rows: each ships its own spool.)
	mu sync.Mutex
}

var (
	_ metering.Store      = (*Store)(nil)
	_ metering.BatchSizer = (*Store)(nil)
)

// PreferredBatchRows is how many rows the shipper should give one Insert
// (metering.BatchSizer). Every INSERT writes a new part per partition, two
// with the rollups, so the cost per insert dominates small batches: on
// ClickHouse 18.16 with 2 cores, 5,000-row batches shipped about 25,000
// rows a second, 50,000-row ones four times that (BENCHMARKS.md). At low
// rates batches stay small: the shipper sends what a BatchWait gathered.
const PreferredBatchRows = 50_000

// PreferredBatchRows implements metering.BatchSizer.
func (s *Store) PreferredBatchRows() int { return PreferredBatchRows }

// Option adjusts Open.
type Option func(*Store)

// WithCluster makes the store a cluster's (cluster.go): name is a cluster
// of the servers' remote_servers, whose nodes have the {shard} and
// {replica} macros and distributed DDL configured.
func WithCluster(name string) Option { return func(s *Store) { s.cluster = name } }

// Open connects to the database named by dsn (clickhouse://host:9000/db,
// native protocol), which must exist, and brings its schema up to date.
func Open(ctx context.Context, dsn string, extra ...Option) (*Store, error) {
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, agentmarket.Wrap(agentmarket.Invalid, "invalid_clickhouse_url", err, "the ClickHouse URL is not valid")
	}
	if opts.Protocol != ch.Native {
		return nil, agentmarket.Errorf(agentmarket.Invalid, "invalid_clickhouse_url", "the ClickHouse URL must use the native protocol (clickhouse://host:9000/db)")
	}
	s := &Store{db: opts.Auth.Database}
	for _, o := range extra {
		o(s)
	}
	if s.db == "" {
		s.db = "default"
	}
	if s.cluster != "" && !ValidCluster(s.cluster) {
		return nil, agentmarket.Errorf(agentmarket.Invalid, "invalid_clickhouse_cluster", "the ClickHouse cluster name must be a plain identifier")
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, unavailable(err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, unavailable(err)
	}
	s.conn = conn
	if err := s.migrate(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	if s.complete, err = s.completeFrom(ctx); err != nil {
		conn.Close()
		return nil, unavailable(err)
	}
	return s, nil
}

// Close closes the connections.
func (s *Store) Close() error { return s.conn.Close() }

// migrate applies the files of migrations/clickhouse that schema_migrations
// does not list. ClickHouse has no transactions and no locks: two
// processes starting at once may both apply a file, which is why the files
// are idempotent; the version is then recorded twice, which is harmless.
func (s *Store) migrate(ctx context.Context) error {
	tracked, err := s.checkMode(ctx)
	if err != nil {
		return err
	}
	// On a cluster every DDL statement is a round through ZooKeeper and
	// every node: a database already set up costs none.
	if s.cluster != "" && !tracked {
		// The database the DSN names exists here; the other nodes may lack it.
		if err := s.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+s.db+" ON CLUSTER "+s.cluster); err != nil {
			return fmt.Errorf("clickhouse: create database %s on cluster %s: %w", s.db, s.cluster, err)
		}
	}
	if !tracked {
		if err := s.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version String, applied_at DateTime) ENGINE = ReplacingMergeTree ORDER BY version`); err != nil {
			return fmt.Errorf("clickhouse: create schema_migrations: %w", err)
		}
	}
	ms, err := migrations.List(migrations.ClickHouse)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("clickhouse: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		done[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		for _, stmt := range Statements(m.SQL) {
			if has, err := s.hasColumn(ctx, "", stmt); err != nil || has {
				if err != nil {
					return fmt.Errorf("clickhouse: migration %s: %w", m.Version, err)
				}
				continue // added already (18.16 has no ADD COLUMN IF NOT EXISTS)
			}
			if err := s.exec(ctx, stmt); err != nil {
				// Another process starting at the same moment may have
				// added the column between the check and the ALTER.
				if has, herr := s.hasColumn(ctx, "", stmt); herr == nil && has {
					continue
				}
				return fmt.Errorf("clickhouse: migration %s: %w\n%s", m.Version, err, stmt)
			}
		}
		b, err := s.conn.PrepareBatch(s.insertCtx(ctx), "INSERT INTO schema_migrations (version, applied_at)")
		if err != nil {
			return fmt.Errorf("clickhouse: record %s: %w", m.Version, err)
		}
		if err := b.Append(m.Version, time.Now().UTC().Truncate(time.Second)); err != nil {
			b.Abort()
			return fmt.Errorf("clickhouse: record %s: %w", m.Version, err)
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("clickhouse: record %s: %w", m.Version, err)
		}
	}
	if s.cluster != "" {
		return s.repairFronts(ctx)
	}
	return nil
}

// exec runs one statement of the schema: as it is on a single server, or
// rewritten for the cluster (ClusterStatements), where an ALTER of a table
// alters the replicated local table (unless this node's has the added
// column already: a migration that stopped half way) and then recreates
// the Distributed table in front.
func (s *Store) exec(ctx context.Context, stmt string) error {
	if s.cluster == "" {
		return s.conn.Exec(s.insertCtx(ctx), stmt)
	}
	stmts, err := ClusterStatements(stmt, s.cluster, s.db)
	if err != nil {
		return err
	}
	alter := alterTable.FindStringSubmatch(strings.TrimSpace(stmt))
	if alter != nil {
		if has, err := s.hasColumn(ctx, alter[1]+"_local", stmt); err != nil {
			return err
		} else if has {
			stmts = nil
		}
	}
	for _, st := range stmts {
		if err := s.conn.Exec(s.insertCtx(ctx), st); err != nil {
			return err
		}
	}
	if alter != nil {
		return s.recreateDistributed(ctx, alter[1])
	}
	return nil
}

// insertCtx is ctx for an INSERT: on a cluster, the insert into the
// Distributed table returns once every shard has its rows (not once they
// are queued on this node), so an acknowledged batch is stored.
func (s *Store) insertCtx(ctx context.Context) context.Context {
	if s.cluster == "" {
		return ctx
	}
	return ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_distributed_sync": 1}))
}

// addColumn is the form of a statement that adds a column.
var addColumn = regexp.MustCompile(`(?is)^ALTER TABLE (\w+)\s+ADD COLUMN (\w+)\s`)

// hasColumn reports whether stmt adds a column its table has already: two
// processes may apply a file at once, and ClickHouse 18.16 has no ADD
// COLUMN IF NOT EXISTS.
// On a cluster, table is the Distributed table the statement names, or
// its local table.
func (s *Store) hasColumn(ctx context.Context, table, stmt string) (bool, error) {
	m := addColumn.FindStringSubmatch(stmt)
	if m == nil {
		return false, nil
	}
	if table == "" {
		table = m[1]
	}
	var n uint64
	err := s.conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND name = ?", table, m[2]).Scan(&n)
	return n > 0, err
}

// Statements cuts a migration file at semicolons that end a line, dropping
// whole-line comments: the same form as the SQL dialects' files.
func Statements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sqlText, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// insertSQL names every column: on 18.16 a batch without a column list
// fails to append.
const insertSQL = `INSERT INTO usage (id, time, time_ms, trace_id, task_id, context_id, parent_task_id,
	listing_id, seller_org_id, buyer_org_id, api_key_id, contract_id,
	method, protocol_version, state, error_code, bytes_in, bytes_out, latency_ms,
	input_tokens, output_tokens, compute_ms, tasks, cost_micros, currency, estimated,
	card_hash, model, tags)`

// Insert sends rows as one batch (one INSERT, one new part), then adds the
// rows not counted yet to the rollups (rollup.go). A row whose id is stored
// already is stored again and collapses with it (see the package comment),
// and is not added to the rollups again: reads count it once.
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
	// The rows are stored first, the cells after: the cells never count a
	// row that the rows lack (a report by tag or by task, which reads the
	// rows, then agrees with one by listing, which reads the cells, as soon
	// as the cells have it), and a batch whose rows failed adds nothing to
	// them. What the rollup needs first, the lookup of the batch's markers
	// and the layout of its cells, runs meanwhile on another connection.
	raw := make(chan error, 1)
	go func() { raw <- s.insertRows(ctx, rows) }()
	pending, errPrep := s.prepareRollup(ctx, rows)
	if err := <-raw; err != nil {
		return err
	}
	if errPrep != nil {
		return errPrep
	}
	return s.writeRollup(ctx, pending)
}

func (s *Store) insertRows(ctx context.Context, rows []metering.Usage) error {
	b, err := s.conn.PrepareBatch(s.insertCtx(ctx), insertSQL)
	if err != nil {
		return unavailable(err)
	}
	cols := toColumns(rows)
	for i, c := range cols {
		if err := b.Column(i).Append(c); err != nil {
			b.Abort()
			return agentmarket.Wrap(agentmarket.Internal, "usage_store", err, "the usage store refused a column")
		}
	}
	if err := b.Send(); err != nil {
		return unavailable(err)
	}
	return nil
}

// toColumns lays rows out column by column, in insertSQL's order: one
// Append per column is much cheaper than one per row.
func toColumns(rows []metering.Usage) []any {
	n := len(rows)
	str := func(f func(*metering.Usage) string) []string {
		c := make([]string, n)
		for i := range rows {
			c[i] = f(&rows[i])
		}
		return c
	}
	i64 := func(f func(*metering.Usage) int64) []int64 {
		c := make([]int64, n)
		for i := range rows {
			c[i] = f(&rows[i])
		}
		return c
	}
	secs, ms := make([]time.Time, n), make([]uint16, n)
	errCodes, estimated := make([]int32, n), make([]uint8, n)
	for i := range rows {
		u := &rows[i]
		m := u.Time.UnixMilli()
		secs[i], ms[i] = time.Unix(m/1000, 0).UTC(), uint16(m%1000)
		errCodes[i] = int32(u.ErrorCode)
		if u.Estimated {
			estimated[i] = 1
		}
	}
	return []any{
		str(func(u *metering.Usage) string { return u.ID }),
		secs, ms,
		str(func(u *metering.Usage) string { return u.TraceID }),
		str(func(u *metering.Usage) string { return u.TaskID }),
		str(func(u *metering.Usage) string { return u.ContextID }),
		str(func(u *metering.Usage) string { return u.ParentTaskID }),
		str(func(u *metering.Usage) string { return u.ListingID }),
		str(func(u *metering.Usage) string { return u.SellerOrgID }),
		str(func(u *metering.Usage) string { return u.BuyerOrgID }),
		str(func(u *metering.Usage) string { return u.APIKeyID }),
		str(func(u *metering.Usage) string { return u.ContractID }),
		str(func(u *metering.Usage) string { return u.Method }),
		str(func(u *metering.Usage) string { return u.ProtocolVersion }),
		str(func(u *metering.Usage) string { return u.State }),
		errCodes,
		i64(func(u *metering.Usage) int64 { return u.BytesIn }),
		i64(func(u *metering.Usage) int64 { return u.BytesOut }),
		i64(func(u *metering.Usage) int64 { return u.LatencyMs }),
		i64(func(u *metering.Usage) int64 { return u.InputTokens }),
		i64(func(u *metering.Usage) int64 { return u.OutputTokens }),
		i64(func(u *metering.Usage) int64 { return u.ComputeMs }),
		i64(func(u *metering.Usage) int64 { return u.Tasks }),
		i64(func(u *metering.Usage) int64 { return u.CostMicros }),
		str(func(u *metering.Usage) string { return u.Currency }),
		estimated,
		str(func(u *metering.Usage) string { return u.CardHash }),
		str(func(u *metering.Usage) string { return u.Model }),
		str(func(u *metering.Usage) string { return string(u.Tags) }),
	}
}

// keyExpr is the grouping expression of each dimension. Days are UTC day
// numbers computed from the stored epoch seconds (toDate would use the
// server's time zone) and formatted by metering.DayKey.
var keyExpr = map[metering.GroupBy]string{
	metering.ByListing: "listing_id",
	metering.BySeller:  "seller_org_id",
	metering.ByBuyer:   "buyer_org_id",
	metering.ByAPIKey:  "api_key_id",
	metering.ByTask:    "concat(listing_id, '/', task_id)",
	metering.ByDay:     "toInt64(intDiv(toUInt32(time), 86400))",
}

// groupExpr is the grouping expression of g: keyExpr's, or for a tag key
// its value in the row's tags (” when the row has none: untagged). Tags
// are a flat JSON object, which visitParamExtractString reads on 18.16 and
// current releases alike; the key is inlined, TagKey having checked it is
// letters, digits, '_', '.' and '-' only.
func groupExpr(g metering.GroupBy) string {
	if key, ok := g.TagKey(); ok {
		return "visitParamExtractString(tags, '" + key + "')"
	}
	return keyExpr[g]
}

// msExpr is a row's time in epoch milliseconds.
const msExpr = "(toUInt64(toUInt32(time)) * 1000 + time_ms)"

// where renders q's filters. A time bound is given twice: on the DateTime
// column in whole seconds, which prunes partitions and uses the index, and
// exactly in milliseconds.
func where(q metering.Query) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	if !q.From.IsZero() {
		from := clampMs(q.From)
		add("time >= toDateTime(?)", from/1000)
		add(msExpr+" >= ?", from)
	}
	if !q.To.IsZero() {
		to := clampMs(q.To)
		add("time <= toDateTime(?)", to/1000)
		add(msExpr+" < ?", to)
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
	return "\nWHERE " + strings.Join(conds, "\n  AND "), args
}

// clampMs maps t into the range DateTime holds, in epoch milliseconds:
// bounds outside it select the same rows as the nearest bound inside.
func clampMs(t time.Time) uint64 {
	ms := t.UnixMilli()
	switch {
	case ms < 0:
		return 0
	case ms > math.MaxUint32*1000+999:
		return math.MaxUint32*1000 + 999
	}
	return uint64(ms)
}

// satSum is the SQL of a sum that cannot overflow. ClickHouse's sum of an
// Int64 column wraps silently past int64, so values are summed as
// Decimal(38, 0) (exact for any realistic number of rows: 10^38 is 10^19
// times the int64 range) and the sum is brought back to Int64, saturated
// at its largest value, like agentmarket.AddSat. ClickHouse 18.16 and
// current releases run it alike.
func satSum(col string) string {
	return "toInt64(least(sum(toDecimal128(" + col + ", 0)), toDecimal128(9223372036854775807, 0)))"
}

// TotalsSQL returns the query Totals runs for q, and its arguments.
func TotalsSQL(q metering.Query) (string, []any) {
	w, args := where(q)
	task := ""
	if q.GroupBy == metering.ByTask {
		task = ", max(context_id)"
	}
	return `SELECT ` + groupExpr(q.GroupBy) + ` AS k, toInt64(count()), ` + satSum("tasks") + `,
  ` + satSum("input_tokens") + `, ` + satSum("output_tokens") + `, ` + satSum("compute_ms") + `,
  ` + satSum("cost_micros") + `, toInt64(sum(estimated))` + task + `
FROM usage FINAL` + w + `
GROUP BY k
ORDER BY k`, args
}

// RowsSQL returns the query Rows runs for q, and its arguments.
func RowsSQL(q metering.Query) (string, []any) {
	w, args := where(q)
	return `SELECT id, time, time_ms, trace_id, task_id, context_id, parent_task_id,
  listing_id, seller_org_id, buyer_org_id, api_key_id, contract_id,
  method, protocol_version, state, error_code, bytes_in, bytes_out, latency_ms,
  input_tokens, output_tokens, compute_ms, tasks, cost_micros, currency, estimated,
  card_hash, model, tags
FROM usage FINAL` + w + `
ORDER BY time, time_ms, id`, args
}

// Totals sums usage per key of q.GroupBy, ordered by key: from the
// rollups for whole hours and days (RollupTotalsSQL), from the rows for
// the rest and for per-task totals.
func (s *Store) Totals(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	if err := q.ValidateTotals(); err != nil {
		return nil, err
	}
	// The rollups have neither tasks nor tags: those groupings read the rows.
	if _, tag := q.GroupBy.TagKey(); tag || q.GroupBy == metering.ByTask {
		return s.totals(ctx, q, TotalsSQL)
	}
	return s.totals(ctx, q, func(q metering.Query) (string, []any) { return RollupTotalsSQL(q, s.complete) })
}

// totalsFromRows sums the rows alone, as Totals did before rollups: the
// reference the rollups are tested against.
func (s *Store) totalsFromRows(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	return s.totals(ctx, q, TotalsSQL)
}

func (s *Store) totals(ctx context.Context, q metering.Query, build func(metering.Query) (string, []any)) ([]metering.Total, error) {
	query, args := build(q)
	rows, err := s.conn.Query(ctx, query, args...)
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

// Rows returns the stored rows matching q, each once, ordered by time then
// id.
func (s *Store) Rows(ctx context.Context, q metering.Query) ([]metering.Usage, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	query, args := RowsSQL(q)
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	out := []metering.Usage{}
	for rows.Next() {
		var (
			u       metering.Usage
			sec     time.Time
			ms      uint16
			errCode int32
			est     uint8
			tags    string
		)
		if err := rows.Scan(&u.ID, &sec, &ms, &u.TraceID, &u.TaskID, &u.ContextID, &u.ParentTaskID,
			&u.ListingID, &u.SellerOrgID, &u.BuyerOrgID, &u.APIKeyID, &u.ContractID,
			&u.Method, &u.ProtocolVersion, &u.State, &errCode, &u.BytesIn, &u.BytesOut, &u.LatencyMs,
			&u.InputTokens, &u.OutputTokens, &u.ComputeMs, &u.Tasks, &u.CostMicros, &u.Currency, &est,
			&u.CardHash, &u.Model, &tags); err != nil {
			return nil, unavailable(err)
		}
		u.Tags = agentmarket.Tags(tags)
		u.Time = time.UnixMilli(sec.Unix()*1000 + int64(ms)).UTC()
		u.ErrorCode = int(errCode)
		u.Estimated = est != 0
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// unavailable wraps a driver or server error. Callers cannot tell a server
// that is down from one that refuses: the shipper retries both, and its
// failure counter is what alerts. The message names the cause where it is
// safe to show (cause).
func unavailable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if c := cause(err); c != "" {
		return agentmarket.Wrap(agentmarket.Unavailable, "usage_store", err, "the usage store (ClickHouse) failed: %s", c)
	}
	return agentmarket.Wrap(agentmarket.Unavailable, "usage_store", err, "the usage store (ClickHouse) failed")
}
