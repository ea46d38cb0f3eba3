package clickhouse

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket/metering"
)

// For the external tests: the rows' own sums, an insert that skips the
// rollups (a meter from before them), and when the rollups began.

func (s *Store) TotalsFromRows(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	return s.totalsFromRows(ctx, q)
}

func (s *Store) InsertRowsOnly(ctx context.Context, rows []metering.Usage) error {
	return s.insertRows(ctx, rows)
}

func (s *Store) SetComplete(t time.Time) { s.complete = t }

const (
	KindHour   = kindHour
	KindDay    = kindDay
	SourceRows = sourceRows
)

// RecreateDistributed is what a migration that ALTERs table runs on a
// cluster after the ALTER.
func (s *Store) RecreateDistributed(ctx context.Context, table string) error {
	return s.recreateDistributed(ctx, table)
}
