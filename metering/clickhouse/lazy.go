package clickhouse

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// Lazy is a Store that opens ClickHouse on first use: the meter must start
// (and spool) while ClickHouse is down.
type Lazy struct {
	dsn  string
	opts []Option
	mu   sync.Mutex
	s    *Store
}

var (
	_ metering.Store      = (*Lazy)(nil)
	_ metering.BatchSizer = (*Lazy)(nil)
)

// NewLazy returns a Lazy for dsn and opts (Open's); nothing is opened yet.
func NewLazy(dsn string, opts ...Option) *Lazy { return &Lazy{dsn: dsn, opts: opts} }

// OpenOrLazy opens the store at dsn (Open), giving the server timeout to
// answer. A server that is unavailable, or does not answer in time, is
// opened later instead, on first use (a Lazy): the process must start
// without it. It returns the store and what closes it.
func OpenOrLazy(ctx context.Context, dsn string, timeout time.Duration, opts ...Option) (metering.Store, func() error, error) {
	octx, cancel := context.WithTimeout(ctx, timeout)
	s, err := Open(octx, dsn, opts...)
	cancel()
	if agentmarket.KindOf(err) == agentmarket.Unavailable || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		l := NewLazy(dsn, opts...)
		return l, l.Close, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

func (l *Lazy) get(ctx context.Context) (*Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s, nil
	}
	s, err := Open(ctx, l.dsn, l.opts...)
	if err != nil {
		return nil, err
	}
	l.s = s
	return s, nil
}

func (l *Lazy) Insert(ctx context.Context, rows []metering.Usage) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Insert(ctx, rows)
}

func (l *Lazy) Totals(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Totals(ctx, q)
}

func (l *Lazy) Rows(ctx context.Context, q metering.Query) ([]metering.Usage, error) {
	s, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Rows(ctx, q)
}

// Ping opens the store if it is not open yet, and asks for its version.
func (l *Lazy) Ping(ctx context.Context) (string, error) {
	s, err := l.get(ctx)
	if err != nil {
		return "", err
	}
	return s.Ping(ctx)
}

// PreferredBatchRows is ClickHouse's, whether or not it is open yet: the
// shipper reads it once, when it starts.
func (l *Lazy) PreferredBatchRows() int { return PreferredBatchRows }

// Close closes the store if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s.Close()
	}
	return nil
}
