package clickhouse_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
	"github.com/agentmarket/agentmarket/metering/synth"
)

// BenchmarkTotals measures the finance queries over a month of usage:
// cost per agent, seller, buyer, key and day, for one buyer, one seller
// and the platform, over 30 whole days and over the 30 days up to a time
// in the middle of an hour (whose edges read rows), from the rollups, and
// for comparison from the rows alone (FINAL), as Totals did before them.
//
// The rows are metering/synth's (seed 1, 30 days to 2026-12-01). With
// AGENTMARKET_BENCH_CLICKHOUSE_DSN the benchmark reads the database it
// names, filled beforehand by cmd/seed (the 100-million-row figures in
// BENCHMARKS.md); otherwise it stores AGENTMARKET_BENCH_USAGE_ROWS rows
// (default one million) through Insert into a fresh test database.
//
//	go run ./cmd/seed -usage 100000000 -clickhouse-url clickhouse://127.0.0.1:PORT/bench
//	AGENTMARKET_BENCH_CLICKHOUSE_DSN=clickhouse://127.0.0.1:PORT/bench \
//	  go test -run '^$' -bench Totals -benchtime 20x ./metering/clickhouse/
func BenchmarkTotals(b *testing.B) {
	ctx := context.Background()
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	g := synth.Usage{Seed: 1, Rows: 1_000_000, From: end.AddDate(0, 0, -30), To: end}
	var store *clickhouse.Store
	if dsn := os.Getenv("AGENTMARKET_BENCH_CLICKHOUSE_DSN"); dsn != "" {
		var err error
		if store, err = clickhouse.Open(ctx, dsn); err != nil {
			b.Fatal(err)
		}
		defer store.Close()
	} else {
		if v := os.Getenv("AGENTMARKET_BENCH_USAGE_ROWS"); v != "" {
			var err error
			if g.Rows, err = strconv.Atoi(v); err != nil {
				b.Fatalf("AGENTMARKET_BENCH_USAGE_ROWS: %v", err)
			}
		}
		store = clickhousetest.Open(b)
		start := time.Now()
		if err := g.Fill(0, g.Rows, clickhouse.PreferredBatchRows, 2, func(rows []metering.Usage) error { return store.Insert(ctx, rows) }); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d rows stored in %v", g.Rows, time.Since(start).Round(time.Millisecond))
	}
	// The busiest buyer and seller of the synthetic usage (Zipf's first).
	buyer, seller := g.Row(0).BuyerOrgID, "org_s0"
	midHour := end.Add(-37*time.Minute - 1234*time.Millisecond)
	for _, rc := range []struct {
		name     string
		from, to time.Time
	}{
		{"30-days", end.AddDate(0, 0, -30), end},
		{"30-days-to-now", midHour.AddDate(0, 0, -30), midHour},
	} {
		for _, sc := range []struct {
			name string
			q    metering.Query
			by   []metering.GroupBy
		}{
			{"buyer", metering.Query{BuyerOrgID: buyer}, []metering.GroupBy{metering.ByListing, metering.BySeller, metering.ByAPIKey, metering.ByDay}},
			{"seller", metering.Query{SellerOrgID: seller}, []metering.GroupBy{metering.ByListing, metering.ByBuyer, metering.ByDay}},
			{"platform", metering.Query{}, []metering.GroupBy{metering.ByListing, metering.BySeller, metering.ByBuyer, metering.ByAPIKey, metering.ByDay}},
		} {
			for _, by := range sc.by {
				q := sc.q
				q.GroupBy, q.From, q.To = by, rc.from, rc.to
				for _, src := range []struct {
					name   string
					totals func(context.Context, metering.Query) ([]metering.Total, error)
				}{{"rollups", store.Totals}, {"rows", store.TotalsFromRows}} {
					b.Run(rc.name+"/"+sc.name+"/"+string(by)+"/"+src.name, func(b *testing.B) {
						var times []time.Duration
						for b.Loop() {
							start := time.Now()
							if _, err := src.totals(ctx, q); err != nil {
								b.Fatal(err)
							}
							times = append(times, time.Since(start))
						}
						slices.Sort(times)
						b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
						b.ReportMetric(float64(times[min(len(times)-1, len(times)*95/100)].Microseconds())/1000, "p95-ms")
					})
				}
			}
		}
	}
}

// BenchmarkShip measures the pipeline's sustained rate into ClickHouse:
// rows already in the spool, shipped by Flush in batches of the given
// size (the default is spool.DefaultBatchRows). The target is 100,000
// rows per second. Each op is 100,000 rows.
func BenchmarkShip(b *testing.B) {
	for _, rows := range []int{spool.DefaultBatchRows, 20_000, 50_000} {
		b.Run(fmt.Sprintf("batch-%d", rows), func(b *testing.B) {
			ctx := context.Background()
			store := clickhousetest.Open(b)
			sp, err := spool.Open(b.TempDir(), spool.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer sp.Close()
			sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: rows})
			const perOp = 100_000
			t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			seq := 0
			var shipping time.Duration
			for b.Loop() {
				b.StopTimer()
				for range perOp {
					u := storetest.Row(seq, t0.Add(time.Duration(seq)*time.Millisecond))
					if err := sp.Append(u); err != nil {
						b.Fatal(err)
					}
					seq++
				}
				b.StartTimer()
				start := time.Now()
				if err := sh.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				shipping += time.Since(start)
			}
			b.ReportMetric(float64(seq)/shipping.Seconds(), "rows/s")
		})
	}
}
