// Command seed fills a catalog and a usage store with realistic synthetic
// data, so that anyone can reproduce the figures in BENCHMARKS.md on their
// own machine: listings (listings/synth) into the embedded SQLite file or
// PostgreSQL, usage rows into the embedded usage store or ClickHouse, and,
// with -ingest-rate, a measurement of the usage pipeline (a generator
// appending to a spool at that rate while the shipper ships it). It talks
// only to databases on the loopback, and every amount and duration it
// takes is bounded.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}
