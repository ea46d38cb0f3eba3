package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/synth"
)

// openUsage opens the usage store the options name: ClickHouse, else the
// embedded store in the data dir, as cmd/marketplace does.
func openUsage(ctx context.Context, o *options) (metering.Store, func() error, error) {
	if o.clickhouseURL != "" {
		s, err := clickhouse.Open(ctx, o.clickhouseURL)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return nil, nil, err
	}
	s, err := embedded.Open(filepath.Join(o.dataDir, "usage.db"))
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

// batchRows is the batch a shipper would send the store.
func batchRows(s metering.Store) int {
	if bs, ok := s.(metering.BatchSizer); ok {
		return bs.PreferredBatchRows()
	}
	return spool.DefaultBatchRows
}

// usageRange is the synthetic usage the options describe.
func (o *options) usageRange() synth.Usage {
	return synth.Usage{Seed: o.seed, Rows: o.usage, From: o.usageEnd.Add(-time.Duration(o.days) * 24 * time.Hour), To: o.usageEnd}
}

// seedUsage stores rows [o.usageFrom, o.usage) of the synthetic usage
// through the store's Insert, the path the shipper takes, so the rollups
// are the ones shipping maintains. Rows stored already count once (Insert
// is idempotent), so a rerun from 0 only costs time.
func seedUsage(ctx context.Context, o *options, out io.Writer) error {
	s, closeStore, err := openUsage(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	g := o.usageRange()
	start, last := time.Now(), time.Now()
	done := o.usageFrom
	err = g.Fill(o.usageFrom, o.usage, batchRows(s), runtime.NumCPU(), func(rows []metering.Usage) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.Insert(ctx, rows); err != nil {
			return err
		}
		done += len(rows)
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			fmt.Fprintf(out, "usage: %d of %d rows, %.0f a second\n", done, o.usage, float64(done-o.usageFrom)/time.Since(start).Seconds())
		}
		return nil
	})
	if err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(out, "usage: %d rows from %s to %s stored in %s, %.0f rows a second\n", done-o.usageFrom,
		g.From.Format(time.RFC3339), g.To.Format(time.RFC3339), el.Round(time.Millisecond), float64(done-o.usageFrom)/el.Seconds())
	return nil
}
