package metering

import (
	"context"
	"time"
)

// Pinger is a usage store that can say whether it answers, and with which
// version (ClickHouse's).
type Pinger interface {
	Ping(ctx context.Context) (string, error)
}

// PingOf is how to ask s whether it answers: its own Ping, or, for a store
// without one, an empty total (which proves it answers), named "embedded".
func PingOf(s Store) func(context.Context) (string, error) {
	if p, ok := s.(Pinger); ok {
		return p.Ping
	}
	return func(ctx context.Context) (string, error) {
		now := time.Now().UTC()
		if _, err := s.Totals(ctx, Query{GroupBy: ByListing, From: now, To: now.Add(time.Millisecond)}); err != nil {
			return "", err
		}
		return "embedded", nil
	}
}
