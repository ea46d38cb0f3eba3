package clickhouse_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
	"github.com/agentmarket/agentmarket/migrations"
)

func TestStore(t *testing.T) {
	t.Run("clickhouse", func(t *testing.T) {
		clickhousetest.AdminDSN(t)
		storetest.Run(t, func(t *testing.T) metering.Store { return clickhousetest.Open(t) })
	})
}

func TestOpenIsRepeatable(t *testing.T) {
	ctx := context.Background()
	dsn := clickhousetest.DSN(t)
	for i := range 3 {
		s, err := clickhouse.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		s.Close()
	}
}

func TestOpenRefusesHTTP(t *testing.T) {
	if _, err := clickhouse.Open(context.Background(), "http://127.0.0.1:1/default"); err == nil {
		t.Fatal("Open of an HTTP DSN succeeded")
	}
}

// TestShipToClickHouse runs the whole pipeline: spool, shipper, ClickHouse,
// with a crash between insert and acknowledge in the middle.
func TestShipToClickHouse(t *testing.T) {
	ctx := context.Background()
	store := clickhousetest.Open(t)
	dir := t.TempDir()
	sp, err := spool.Open(dir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	var all []metering.Usage
	for i := range 3000 {
		u := storetest.Row(i, t0.Add(time.Duration(i)*37*time.Millisecond))
		u.ListingID = []string{"lst_a", "lst_b", "lst_c"}[i%3]
		all = append(all, u)
	}
	if err := sp.Append(all...); err != nil {
		t.Fatal(err)
	}
	rows, _, err := sp.Read(sp.Acked(), 1200, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Insert(ctx, rows); err != nil { // and the process dies before Ack
		t.Fatal(err)
	}
	sp.Close()
	sp, err = spool.Open(dir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: 1000})
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range metering.GroupBys {
		q := metering.Query{GroupBy: g}
		got, err := store.Totals(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if want := storetest.Reference(all, q); !reflect.DeepEqual(got, want) {
			t.Errorf("Totals by %s\n got  %+v\n want %+v", g, got, want)
		}
	}
	if st := sh.Stats(); st.ShippedRows != 3000 || st.SpoolRows != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestTotalsSQL(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 250_000_000, time.UTC)
	to := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		q        metering.Query
		key      string
		where    []string
		wantArgs []any
	}{
		{"no filter", metering.Query{GroupBy: metering.ByListing}, "listing_id", nil, nil},
		{"day", metering.Query{GroupBy: metering.ByDay}, "toInt64(intDiv(toUInt32(time), 86400))", nil, nil},
		{"tag", metering.Query{GroupBy: metering.ByTag("cost-center.eu")}, "visitParamExtractString(tags, 'cost-center.eu')", nil, nil},
		{
			"range and filters",
			metering.Query{GroupBy: metering.BySeller, From: from, To: to, BuyerOrgID: "org_b", ContractID: "ctr_1"},
			"seller_org_id",
			[]string{
				"time >= toDateTime(?)", "(toUInt64(toUInt32(time)) * 1000 + time_ms) >= ?",
				"time <= toDateTime(?)", "(toUInt64(toUInt32(time)) * 1000 + time_ms) < ?",
				"buyer_org_id = ?", "contract_id = ?",
			},
			[]any{uint64(from.Unix()), uint64(from.UnixMilli()), uint64(to.Unix()), uint64(to.UnixMilli()), "org_b", "ctr_1"},
		},
		{
			"bounds outside DateTime are clamped",
			metering.Query{GroupBy: metering.ByTask, From: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)},
			"concat(listing_id, '/', task_id)",
			[]string{
				"time >= toDateTime(?)", "(toUInt64(toUInt32(time)) * 1000 + time_ms) >= ?",
				"time <= toDateTime(?)", "(toUInt64(toUInt32(time)) * 1000 + time_ms) < ?",
			},
			[]any{uint64(0), uint64(0), uint64(1<<32 - 1), uint64((1<<32-1)*1000 + 999)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := clickhouse.TotalsSQL(tt.q)
			if !strings.HasPrefix(sql, "SELECT "+tt.key+" AS k,") {
				t.Errorf("key: %s", sql)
			}
			if !strings.Contains(sql, "FROM usage FINAL") || !strings.HasSuffix(sql, "GROUP BY k\nORDER BY k") {
				t.Errorf("every read must dedup with FINAL and order by key: %s", sql)
			}
			// sum(Int64) wraps silently: every Int64 sum goes through
			// Decimal(38, 0) and saturates at the largest Int64.
			sat := func(c string) string {
				return "toInt64(least(sum(toDecimal128(" + c + ", 0)), toDecimal128(9223372036854775807, 0)))"
			}
			task := "" // by task, the task's context too
			if tt.q.GroupBy == metering.ByTask {
				task = ", max(context_id)"
			}
			cols := "toInt64(count()), " + sat("tasks") + ",\n  " + sat("input_tokens") + ", " + sat("output_tokens") + ", " +
				sat("compute_ms") + ",\n  " + sat("cost_micros") + ", toInt64(sum(estimated))" + task + "\nFROM usage FINAL"
			if !strings.Contains(sql, " AS k, "+cols) {
				t.Errorf("sums are not saturating:\n%s\nwant the columns\n%s", sql, cols)
			}
			_, rest, _ := strings.Cut(sql, "FROM usage FINAL")
			where, _, _ := strings.Cut(rest, "\nGROUP BY")
			wantWhere := ""
			if len(tt.where) > 0 {
				wantWhere = "\nWHERE " + strings.Join(tt.where, "\n  AND ")
			}
			if where != wantWhere {
				t.Errorf("where clause = %q, want %q", where, wantWhere)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("args = %#v, want %#v", args, tt.wantArgs)
			}
		})
	}
	sql, _ := clickhouse.RowsSQL(metering.Query{})
	if !strings.Contains(sql, "FROM usage FINAL") || !strings.HasSuffix(sql, "ORDER BY time, time_ms, id") {
		t.Errorf("rows query: %s", sql)
	}
}

// TestMigrationForm checks the ClickHouse files keep the form Statements
// relies on and avoid what ClickHouse 18.16 lacks.
func TestMigrationForm(t *testing.T) {
	ms, err := migrations.List(migrations.ClickHouse)
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations.List(clickhouse) = %v, %v", ms, err)
	}
	for _, m := range ms {
		if ok, _ := filepath.Match("[0-9][0-9][0-9][0-9]_*", m.Version); !ok {
			t.Errorf("%s is not named NNNN_description", m.Version)
		}
		for i, line := range strings.Split(m.SQL, "\n") {
			code := strings.TrimSpace(line)
			if strings.HasPrefix(code, "--") {
				continue
			}
			if strings.Contains(code, "--") || strings.Count(code, ";") > 1 || (strings.Contains(code, ";") && !strings.HasSuffix(code, ";")) {
				t.Errorf("%s line %d: comment after code or semicolon inside a line: %q", m.Version, i+1, line)
			}
			for _, missing := range []string{"DateTime64", "LowCardinality", "{"} {
				if strings.Contains(code, missing) {
					t.Errorf("%s line %d uses %s, which ClickHouse 18.16 lacks: %q", m.Version, i+1, missing, line)
				}
			}
		}
		for _, stmt := range clickhouse.Statements(m.SQL) {
			if strings.HasPrefix(strings.ToUpper(stmt), "CREATE") && !strings.Contains(strings.ToUpper(stmt), "IF NOT EXISTS") {
				t.Errorf("%s: a CREATE without IF NOT EXISTS is not idempotent: %.60s", m.Version, stmt)
			}
		}
	}
}

// TestShipperKilled: SIGKILLs of the shipper in the middle of batches and
// between insert and acknowledgement lose nothing and count nothing twice,
// in the rows and in the rollups (storetest.KillShipper).
func TestShipperKilled(t *testing.T) {
	storetest.KillShipper(t, func(t *testing.T) string { return clickhousetest.DSN(t) },
		func(ctx context.Context, dsn string) (metering.Store, error) { return clickhouse.Open(ctx, dsn) })
}
