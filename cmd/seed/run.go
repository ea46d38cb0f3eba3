package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"
)

// Bounds on what one run may do.
const (
	maxListings   = 1_000_000
	maxUsage      = 200_000_000
	maxDays       = 366
	maxIngestRate = 1_000_000
	maxIngestFor  = 10 * time.Minute
)

// options are seed's flags.
type options struct {
	listings      int
	seed          uint64
	dataDir       string
	databaseURL   string
	usage         int
	usageFrom     int
	days          int
	usageEnd      time.Time
	clickhouseURL string
	ingestRate    int
	ingestFor     time.Duration
	cpuProfile    string
	batchRows     int
	serverPID     int
}

func parseOptions(args []string, getenv func(string) string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.listings, "listings", 0, fmt.Sprintf("make the catalog hold this many synthetic listings (at most %d); listings of the same -seed already there count", maxListings))
	fs.Uint64Var(&o.seed, "seed", 1, "the synthetic data's seed: the same seed makes the same data")
	fs.StringVar(&o.dataDir, "data-dir", getenv("AGENTMARKET_DATA_DIR"), "the embedded default's data dir (agentmarket.db, usage.db), as cmd/marketplace uses it; default $AGENTMARKET_DATA_DIR or ./agentmarket-data")
	fs.StringVar(&o.databaseURL, "database-url", getenv("AGENTMARKET_DATABASE_URL"), "PostgreSQL `DSN` (postgres://user@127.0.0.1:5432/db) for the catalog instead of the SQLite file; loopback only")
	fs.IntVar(&o.usage, "usage", 0, fmt.Sprintf("store this many synthetic usage rows (at most %d) through the usage store's Insert, rollups and all", maxUsage))
	fs.IntVar(&o.usageFrom, "usage-from", 0, "start at this row of the synthetic usage (to continue an interrupted run; rows stored again count once anyway)")
	fs.IntVar(&o.days, "days", 30, fmt.Sprintf("spread the usage over this many days (1-%d) before -usage-end", maxDays))
	end := fs.String("usage-end", "2026-12-01T00:00:00Z", "the end of the usage's time range (RFC 3339), fixed so that runs on any machine store the same rows")
	fs.StringVar(&o.clickhouseURL, "clickhouse-url", getenv("AGENTMARKET_CLICKHOUSE_URL"), "ClickHouse `DSN` (clickhouse://127.0.0.1:9000/db, native protocol) instead of the embedded usage store; loopback only")
	fs.IntVar(&o.ingestRate, "ingest-rate", 0, fmt.Sprintf("measure the usage pipeline: append this many rows a second (at most %d) to a spool while a shipper ships them to the usage store", maxIngestRate))
	fs.DurationVar(&o.ingestFor, "ingest-for", 30*time.Second, fmt.Sprintf("how long -ingest-rate appends (at most %s)", maxIngestFor))
	fs.IntVar(&o.batchRows, "batch-rows", 0, "with -ingest-rate, the shipper's batch size; 0: the store's preferred size, as the meter uses")
	fs.IntVar(&o.serverPID, "server-pid", 0, "with -ingest-rate, the `pid` of the usage store's server (clickhouse-server) whose CPU time to report per row")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `file`")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.dataDir == "" {
		o.dataDir = "agentmarket-data"
	}
	var errs []error
	if o.listings < 0 || o.listings > maxListings {
		errs = append(errs, fmt.Errorf("-listings must be between 0 and %d", maxListings))
	}
	if o.databaseURL != "" {
		if err := loopbackURL(o.databaseURL, "postgres", "postgresql"); err != nil {
			errs = append(errs, fmt.Errorf("-database-url: %w", err))
		}
	}
	if o.usage < 0 || o.usage > maxUsage {
		errs = append(errs, fmt.Errorf("-usage must be between 0 and %d", maxUsage))
	}
	if o.usageFrom < 0 || o.usageFrom > o.usage {
		errs = append(errs, errors.New("-usage-from must be between 0 and -usage"))
	}
	if o.days < 1 || o.days > maxDays {
		errs = append(errs, fmt.Errorf("-days must be between 1 and %d", maxDays))
	}
	var err error
	if o.usageEnd, err = time.Parse(time.RFC3339, *end); err != nil {
		errs = append(errs, fmt.Errorf("-usage-end: %w", err))
	}
	if o.clickhouseURL != "" {
		if err := loopbackURL(o.clickhouseURL, "clickhouse"); err != nil {
			errs = append(errs, fmt.Errorf("-clickhouse-url: %w", err))
		}
	}
	if o.ingestRate < 0 || o.ingestRate > maxIngestRate {
		errs = append(errs, fmt.Errorf("-ingest-rate must be between 0 and %d", maxIngestRate))
	}
	if o.batchRows < 0 || o.batchRows > 1_000_000 {
		errs = append(errs, errors.New("-batch-rows must be between 0 and 1000000"))
	}
	if o.ingestFor <= 0 || o.ingestFor > maxIngestFor {
		errs = append(errs, fmt.Errorf("-ingest-for must be more than 0 and at most %s", maxIngestFor))
	}
	if len(errs) == 0 && o.listings == 0 && o.usage == 0 && o.ingestRate == 0 {
		errs = append(errs, errors.New("nothing to do: give -listings, -usage or -ingest-rate"))
	}
	return o, errors.Join(errs...)
}

// loopbackURL checks that dsn is a URL of one of schemes whose host is a
// literal loopback address or localhost: this tool writes nowhere else.
func loopbackURL(dsn string, schemes ...string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		return fmt.Errorf("want a %s:// URL", schemes[0])
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address: seed only writes to databases on 127.0.0.0/8 or ::1", host)
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseOptions(args, getenv, out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.listings > 0 {
		start := time.Now()
		n, err := seedCatalog(ctx, o, out)
		if err != nil {
			return err
		}
		where := "SQLite " + filepath.Join(o.dataDir, "agentmarket.db")
		if o.databaseURL != "" {
			where = "PostgreSQL"
		}
		fmt.Fprintf(out, "catalog: %d listings (%d new) in %s, %s\n", o.listings, n, where, time.Since(start).Round(time.Millisecond))
	}
	if o.usage > 0 {
		if err := seedUsage(ctx, o, out); err != nil {
			return err
		}
	}
	if o.ingestRate > 0 {
		rep, err := measureIngest(ctx, o, out)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "ingest: offered %.0f rows/s for %s, shipped %.0f rows/s meanwhile (batches of up to %d), largest backlog %d rows, %d at the end, drained %s after the generator stopped: %s\n",
			rep.Offered, o.ingestFor, rep.Shipped, rep.BatchRows, rep.MaxBacklog, rep.EndBacklog, rep.Drain.Round(time.Millisecond),
			map[bool]string{true: "kept up", false: "fell behind"}[rep.Sustained])
		if rep.CPUPerRow > 0 {
			fmt.Fprintf(out, "ingest: CPU per shipped row: %s in this process (generator, spool, shipper)", rep.CPUPerRow)
			if rep.ServerCPUPerRow > 0 {
				fmt.Fprintf(out, ", %s in the server; %.0f rows/s would fill %d idle cores", rep.ServerCPUPerRow,
					float64(runtime.NumCPU())*float64(time.Second)/float64(rep.CPUPerRow+rep.ServerCPUPerRow), runtime.NumCPU())
			}
			fmt.Fprintln(out)
		}
	}
	return nil
}
