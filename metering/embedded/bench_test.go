package embedded_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// BenchmarkShip measures the pipeline's rate into the embedded store: rows
// already in the spool, shipped by Flush in batches of the given size (0:
// the default). Each op is 100,000 rows.
//
//	go test -run '^$' -bench Ship -benchtime 3x ./metering/embedded/
func BenchmarkShip(b *testing.B) {
	for _, rows := range []int{0, 20_000, 50_000} {
		b.Run(fmt.Sprintf("batch-%d", rows), func(b *testing.B) {
			ctx := context.Background()
			store := MustOpen(b)
			sp, err := spool.Open(b.TempDir(), spool.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer sp.Close()
			sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: rows})
			const perOp = 100_000
			t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			seq := 0
			var shipping, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				for range perOp {
					u := storetest.Row(seq, t0.Add(time.Duration(seq)*time.Millisecond))
					u.APIKeyID = fmt.Sprintf("key_%d", seq%50)
					if err := sp.Append(u); err != nil {
						b.Fatal(err)
					}
					seq++
				}
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				if err := sh.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				shipping += time.Since(start)
				cpu += cpuTime() - cpu0
			}
			b.ReportMetric(float64(seq)/shipping.Seconds(), "rows/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(seq), "cpu-µs/row")
		})
	}
}

// benchTraffic is the rows BenchmarkInsert inserts (storetest's), with the
// meter's ids in place of synth's.
var benchTraffic = storetest.BenchTraffic

const (
	benchBatch    = embedded.PreferredBatchRows // what the shipper gives this store's Insert
	prefilledRows = 1_000_000                   // rows in the file of the "1M-rows" runs
	maxBenchRows  = 60 * benchBatch
)

// benchIDs are the two ways a meter can name its rows: NewID's 80 random
// bits, which land anywhere in the primary key, and NewSortableID's time
// order, which appends.
var benchIDs = map[string]func() string{
	"random-ids":   func() string { return agentmarket.NewID("use") },
	"sortable-ids": func() string { return agentmarket.NewSortableID("use") },
}

// benchRows returns n rows of benchTraffic from row first on, named by id
// in row order.
func benchRows(first, n int, id func() string) []metering.Usage {
	rows := make([]metering.Usage, n)
	for i := range rows {
		rows[i] = benchTraffic.Row(first + i)
		rows[i].ID = id()
	}
	return rows
}

// BenchmarkInsert measures Insert alone, in the shipper's batches, into an
// empty file and into a copy of a file already holding prefilledRows rows
// named the same way, with either kind of id. cpu-µs/row is the process's
// user and system CPU time per row (getrusage): SQLite's page writes and
// fsyncs are system time, and both matter on a shared machine. After the
// timed part the last batch goes in again and the daily rollup must count
// every row once.
//
// The 1M-rows runs need EMBEDDED_BENCH_DIR, where the files are built on
// first use (about a minute each) and kept:
//
//	EMBEDDED_BENCH_DIR=/tmp/embedded-bench go test -run '^$' -bench Insert -benchtime 20x ./metering/embedded/
func BenchmarkInsert(b *testing.B) {
	for _, ids := range []string{"random-ids", "sortable-ids"} {
		for _, file := range []string{"empty", "1M-rows"} {
			b.Run(ids+"/"+file, func(b *testing.B) {
				if b.N*benchBatch > maxBenchRows {
					b.Fatalf("%d batches: more than %d rows (use -benchtime Nx)", b.N, maxBenchRows)
				}
				ctx := context.Background()
				path := filepath.Join(b.TempDir(), "usage.db")
				first := 0
				if file == "1M-rows" {
					copyFile(b, prefilled(b, ids), path)
					first = prefilledRows
				}
				rows := benchRows(first, b.N*benchBatch, benchIDs[ids])
				s, err := embedded.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				runtime.GC()
				b.ResetTimer()
				user0, sys0 := userSys()
				start := time.Now()
				for i := range b.N {
					if err := s.Insert(ctx, rows[i*benchBatch:(i+1)*benchBatch]); err != nil {
						b.Fatal(err)
					}
				}
				wall := time.Since(start)
				user1, sys1 := userSys()
				b.StopTimer()
				n := float64(len(rows))
				perRow := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / n }
				b.ReportMetric(perRow(user1-user0+sys1-sys0), "cpu-µs/row")
				b.ReportMetric(perRow(user1-user0), "user-µs/row")
				b.ReportMetric(perRow(sys1-sys0), "sys-µs/row")
				b.ReportMetric(perRow(wall), "wall-µs/row")
				b.ReportMetric(0, "ns/op")
				if err := s.Insert(ctx, rows[len(rows)-benchBatch:]); err != nil {
					b.Fatal(err)
				}
				if calls := storedCalls(b, s); calls != int64(first+len(rows)) {
					b.Fatalf("the rollup counts %d calls, want %d", calls, first+len(rows))
				}
			})
		}
	}
}

// BenchmarkQueries times the product's queries (storetest.BenchQueries)
// on a copy of the file of prefilledRows rows (EMBEDDED_BENCH_DIR, as
// BenchmarkInsert's).
//
//	EMBEDDED_BENCH_DIR=/tmp/embedded-bench go test -run '^$' -bench Queries -benchtime 10x ./metering/embedded/
func BenchmarkQueries(b *testing.B) {
	path := filepath.Join(b.TempDir(), "usage.db")
	copyFile(b, prefilled(b, "sortable-ids"), path)
	s, err := embedded.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchQueries(b, s)
}

// prefilled returns the file of prefilledRows rows of benchTraffic named by
// ids, building it in EMBEDDED_BENCH_DIR if it is not there yet.
func prefilled(b *testing.B, ids string) string {
	dir := os.Getenv("EMBEDDED_BENCH_DIR")
	if dir == "" {
		b.Skip("EMBEDDED_BENCH_DIR not set")
	}
	path := filepath.Join(dir, fmt.Sprintf("usage-%d-%s.db", prefilledRows, ids))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	tmp := path + ".building"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		os.Remove(f)
	}
	s, err := embedded.Open(tmp)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start, cpu0 := time.Now(), cpuTime()
	const chunk = 100_000
	for from := 0; from < prefilledRows; from += chunk {
		rows := benchRows(from, chunk, benchIDs[ids])
		for i := 0; i < chunk; i += benchBatch {
			if err := s.Insert(ctx, rows[i:i+benchBatch]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("built %s: %d rows in %v, %v CPU (rows made included)", path, prefilledRows, time.Since(start).Round(time.Second), (cpuTime() - cpu0).Round(time.Second))
	if calls := storedCalls(b, s); calls != prefilledRows {
		b.Fatalf("built %d rows, want %d", calls, prefilledRows)
	}
	if err := s.Close(); err != nil { // the last connection out checkpoints the WAL into the file
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// storedCalls is how many rows the daily rollup counts.
func storedCalls(b *testing.B, s *embedded.Store) int64 {
	t, err := s.Totals(context.Background(), metering.Query{GroupBy: metering.ByDay})
	if err != nil {
		b.Fatal(err)
	}
	return metering.Sum(t).Calls
}

func copyFile(b *testing.B, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// userSys is the user and system CPU time this process used so far.
func userSys() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func cpuTime() time.Duration {
	user, sys := userSys()
	return user + sys
}
