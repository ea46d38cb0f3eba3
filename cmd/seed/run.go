package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"time"
)

// Bounds on what one run may do.
const (
	maxListings = 1_000_000
)

// options are seed's flags.
type options struct {
	listings    int
	seed        uint64
	dataDir     string
	databaseURL string
}

func parseOptions(args []string, getenv func(string) string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.listings, "listings", 0, fmt.Sprintf("make the catalog hold this many synthetic listings (at most %d); listings of the same -seed already there count", maxListings))
	fs.Uint64Var(&o.seed, "seed", 1, "the synthetic data's seed: the same seed makes the same data")
	fs.StringVar(&o.dataDir, "data-dir", getenv("AGENTMARKET_DATA_DIR"), "the embedded default's data dir (agentmarket.db, usage.db), as cmd/marketplace uses it; default $AGENTMARKET_DATA_DIR or ./agentmarket-data")
	fs.StringVar(&o.databaseURL, "database-url", getenv("AGENTMARKET_DATABASE_URL"), "PostgreSQL `DSN` (postgres://user@127.0.0.1:5432/db) for the catalog instead of the SQLite file; loopback only")
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
	if len(errs) == 0 && o.listings == 0 {
		errs = append(errs, errors.New("nothing to do: give -listings"))
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
	return nil
}
