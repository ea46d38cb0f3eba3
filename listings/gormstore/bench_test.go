package gormstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/synth"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// BenchmarkSearch measures catalog searches over a synthetic catalog
// (listings/synth, seed 1) of AGENTMARKET_BENCH_LISTINGS listings (default
// 10,000), one sub-benchmark per kind of query, each reporting the p50
// and p95 of its calls besides the mean.
//
// SQLite: the catalog is seeded into AGENTMARKET_BENCH_SQLITE (a file,
// kept and reused; default a temporary one). PostgreSQL: into the database
// AGENTMARKET_BENCH_DATABASE_URL names, if set (seeded when empty, reused
// after). cmd/seed fills the same catalogs.
//
//	AGENTMARKET_BENCH_LISTINGS=100000 AGENTMARKET_BENCH_SQLITE=/tmp/cat100k.db \
//	  go test -run '^$' -bench Search -benchtime 200x ./listings/gormstore/
func BenchmarkSearch(b *testing.B) {
	n := 10_000
	if v := os.Getenv("AGENTMARKET_BENCH_LISTINGS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	type backend struct {
		name string
		open func() (*relational.DB, error)
	}
	path := os.Getenv("AGENTMARKET_BENCH_SQLITE")
	if path == "" {
		path = filepath.Join(b.TempDir(), "catalog.db")
	}
	backends := []backend{{"sqlite", func() (*relational.DB, error) { return relational.OpenSQLite(ctx, path) }}}
	if dsn := os.Getenv("AGENTMARKET_BENCH_DATABASE_URL"); dsn != "" {
		backends = append(backends, backend{"postgres", func() (*relational.DB, error) { return relational.OpenPostgres(ctx, dsn) }})
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db, err := be.open()
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			store := gormstore.New(db.DB)
			if err := SeedCatalog(ctx, db, store, n); err != nil {
				b.Fatal(err)
			}
			// PostgreSQL does its work in its own process: one connection,
			// whose server process's CPU time is read from /proc, plus that
			// of the parallel workers it started (serverCPU).
			backend := 0
			if be.name == "postgres" {
				sqlDB, err := db.DB.DB()
				if err != nil {
					b.Fatal(err)
				}
				sqlDB.SetMaxOpenConns(1)
				if err := db.Raw("SELECT pg_backend_pid()").Scan(&backend).Error; err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range BenchQueries {
				b.Run(c.Name, func(b *testing.B) {
					var times []time.Duration
					total := 0
					cpu0, db0 := cpuTime(), serverCPU(backend)
					for b.Loop() {
						q := c.Query
						q.Statuses = []listings.Status{listings.StatusPublished} // what buyers search
						if err := q.Normalize(); err != nil {
							b.Fatal(err)
						}
						start := time.Now()
						_, t, err := store.Search(ctx, q)
						times = append(times, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						total = t
					}
					b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(times)), "cpu-ms/op")
					if backend > 0 {
						b.ReportMetric(float64((serverCPU(backend)-db0).Microseconds())/1000/float64(len(times)), "db-cpu-ms/op")
					}
					slices.Sort(times)
					at := func(p float64) float64 {
						return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
					}
					b.ReportMetric(at(0.5), "p50-ms")
					b.ReportMetric(at(0.95), "p95-ms")
					b.ReportMetric(float64(total), "matches")
				})
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// serverCPU is the CPU time PostgreSQL spent for the backend pid so far:
// the backend's own, and that of the parallel workers a query may start,
// which are the postmaster's children and count, once they exited and it
// reaped them, in its children's time. (Any other child that ends
// meanwhile, an autovacuum worker, counts too: on the benchmark's own
// cluster, rare.) 0 when /proc cannot be read.
func serverCPU(pid int) time.Duration {
	backend := procStat(pid)
	return backend.cpu + procStat(backend.ppid).children
}

type stat struct {
	ppid     int
	cpu      time.Duration // the process's own
	children time.Duration // its exited and reaped children's
}

// procStat reads /proc/PID/stat (zero when it cannot).
func procStat(pid int) stat {
	if pid <= 0 {
		return stat{}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 15 {
		return stat{}
	}
	ticks := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(v) * 10 * time.Millisecond // USER_HZ is 100
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{ppid: ppid, cpu: ticks(11) + ticks(12), children: ticks(13) + ticks(14)}
}

// cpuTime is the CPU time this process used so far: what a query costs
// whatever else the machine runs, where its wall time also counts the
// waits for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchQueries is the benchmark's mix: what buyers type and click, from
// broad to narrow, on their own and combined.
var BenchQueries = []struct {
	Name  string
	Query listings.Query
}{
	{"browse", listings.Query{}},
	{"browse-page-50", listings.Query{Page: 50}},
	{"newest", listings.Query{Sort: "-created"}},
	{"text-broad", listings.Query{Text: "agent"}},
	{"text-common", listings.Query{Text: "summarize"}},
	{"text-rare", listings.Query{Text: "hipaa"}},
	{"text-two-words", listings.Query{Text: "legal contracts"}},
	{"text-three-words", listings.Query{Text: "invoice extractor finance"}},
	{"prefix", listings.Query{Text: "transl"}},
	{"typo", listings.Query{Text: "sumarize"}},
	{"typo-two-words", listings.Query{Text: "fruad detecton"}},
	{"filter-tag", listings.Query{Tag: "legal"}},
	{"filter-skill", listings.Query{Skill: "summarize-contracts"}},
	{"filter-modes", listings.Query{InputMode: "application/pdf", OutputMode: "application/json"}},
	{"filter-streaming-price", listings.Query{Streaming: ptr(true), MaxMonthlyFeeMicros: ptr(int64(20_000_000)), Sort: "price"}},
	{"filter-all", listings.Query{Tag: "writing", InputMode: "text/plain", Streaming: ptr(true), Push: ptr(false), Currency: "usd",
		MaxMonthlyFeeMicros: ptr(int64(50_000_000)), Sort: "-price"}},
	{"text-and-filters", listings.Query{Text: "contract", Tag: "legal", Streaming: ptr(true)}},
	{"broad-text-and-filters", listings.Query{Text: "agent", InputMode: "application/pdf", MaxMonthlyFeeMicros: ptr(int64(30_000_000))}},
	{"text-sorted-by-price", listings.Query{Text: "translate", Sort: "price"}},
}

// SeedCatalog fills an empty store with n synthetic listings (seed 1) over
// n/20 sellers, and does nothing when the store holds them already.
func SeedCatalog(ctx context.Context, db *relational.DB, store *gormstore.Store, n int) error {
	var have int64
	if err := db.Raw("SELECT COUNT(*) FROM listings WHERE id LIKE 'lst_synth_1_%'").Scan(&have).Error; err != nil {
		return err
	}
	if have >= int64(n) {
		return nil
	}
	accounts := contractsgorm.New(db.DB)
	var sellers []string
	for i := range max(1, n/20) {
		id := fmt.Sprintf("org_synth_%d", i)
		sellers = append(sellers, id)
		err := accounts.CreateOrg(ctx, &contracts.Org{ID: id, Name: fmt.Sprintf("Seller %d", i), CreatedAt: time.Now()}, nil, nil)
		if err != nil && !isConflict(err) {
			return err
		}
	}
	c := synth.Catalog{Seed: 1, Sellers: sellers}
	start := time.Now()
	if err := c.Fill(ctx, int(have), n, 500, store.CreateListings); err != nil {
		return err
	}
	if err := store.OptimizeSearch(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "seeded %d listings in %s\n", n-int(have), time.Since(start).Round(time.Millisecond))
	return nil
}

func isConflict(err error) bool { return agentmarket.KindOf(err) == agentmarket.Conflict }
