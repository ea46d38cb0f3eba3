package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentmarket/agentmarket/metering"
)

// ShipperOptions tune a Shipper; zero values take the defaults.
type ShipperOptions struct {
	// BatchRows is the most rows one metering.Store.Insert gets. Default: the
	// store's PreferredBatchRows (metering.BatchSizer), else 5000.
	BatchRows int
	// BatchWait is how long the first row of a partial batch waits for
	// more before the batch is shipped anyway. Default 200 ms.
	BatchWait time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed inserts: it
	// starts at MinBackoff and doubles up to MaxBackoff. Defaults 100 ms
	// and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// InsertTimeout bounds one metering.Store.Insert attempt. Default 30 s.
	InsertTimeout time.Duration
	// OnError, when set, hears of every failed attempt (to log it); the
	// shipper retries regardless.
	OnError func(err error, consecutive int)
	// Settle, when set, bills the rows' pending usage (see metering.Settle) before
	// a batch is stored; an error is a failed attempt, retried. Without it
	// a batch holding pending usage is refused (never stored unbilled).
	Settle func(ctx context.Context, rows []metering.Usage) error
	// SettleAhead settles rows as soon as they are read, without waiting
	// for their batch to fill or for the store to take it; while the store
	// fails, rows appended meanwhile are settled too (and read again, and
	// settled again, when their batch goes). For a Settle that is
	// idempotent (settling a row twice gives the same row and the same
	// state) and whose side effects others wait for: the meter's task
	// bindings and ledger are projections of the spool that other meters
	// read, and must not lag a slow usage store.
	SettleAhead bool
	// SettleWait is how long, with SettleAhead, the first row read waits
	// for more (up to SettleRows) before they are settled together: fewer,
	// larger transactions for a little latency. Default 5 ms.
	SettleWait time.Duration
	// SettleRows settles rows at once, without waiting, when this many
	// are read and unsettled. Default 256.
	SettleRows int
	// Stored, when set, hears of every batch the store took (settled), for
	// counters of what was billed.
	Stored func(rows []metering.Usage)
	// Tracer, when set, makes a span of every batch inserted and settled
	// (trace.go).
	Tracer trace.Tracer
}

// LogFailures is an OnError that warns through log of the first failure
// of a run and of every 20th after it: an outage is told without a line
// per retry.
func LogFailures(log *slog.Logger) func(err error, consecutive int) {
	return func(err error, n int) {
		if n == 1 || n%20 == 0 {
			log.Warn("usage shipping failed; rows stay in the spool and are retried", "err", err, "consecutive", n)
		}
	}
}

// Shipper defaults.
const (
	DefaultBatchRows     = 5000
	DefaultBatchWait     = 200 * time.Millisecond
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultInsertTimeout = 30 * time.Second
	DefaultSettleWait    = 5 * time.Millisecond
	DefaultSettleRows    = 256
)

// ShipperStats is a snapshot of a Shipper's counters, for metrics.
type ShipperStats struct {
	SpoolRows  int64 // rows waiting in the spool (appended, not acknowledged)
	SpoolBytes int64 // their size on disk

	ShippedRows    uint64 // rows acknowledged after a successful insert (a row re-sent after a crash counts again)
	ShippedBatches uint64
	Failures       uint64 // failed insert or acknowledge attempts
	// Consecutive is the current run of failures, 0 once a batch went through.
	Consecutive int
	LastError   error
}

// Shipper moves rows from a Spool to a metering.Store in batches, and acknowledges
// them in the spool only after the store took them. When the store fails
// it keeps the batch and retries, with capped exponential backoff, forever:
// rows wait in the spool, nothing is dropped, and appending goes on.
//
// Exactly once: a crash between a successful Insert and the Ack makes the
// next run send those rows again, possibly cut into other batches. That is
// harmless because metering.Store.Insert is idempotent by row ID.
//
// A store that refuses a batch for good (a bug, a schema mismatch) stalls
// shipping; Failures and Consecutive grow, which is what to alert on.
type Shipper struct {
	spool *Spool
	store metering.Store
	opts  ShipperOptions

	// turn is held by whoever reads and ships (Run or Flush): one at a
	// time, and each can give up waiting for it when its context ends.
	turn       chan struct{}
	pos        Cursor // read position, at or after the spool's Acked
	started    bool
	batch      []metering.Usage
	batchStart time.Time
	settled    int       // with SettleAhead: rows of batch settled already
	unsettled  time.Time // with SettleAhead: when the oldest unsettled row of batch was read
	ahead      Cursor    // with SettleAhead: rows before it, past pos, are settled
	scratch    []metering.Usage

	// settledSeq is the spool position (Cursor.Seq) up to which every row
	// is settled: acknowledged, or settled ahead.
	settledSeq atomic.Uint64
	// settleDown is set while settling fails (the projections' database
	// is down); allowance is the lag an outage left when settling came
	// back, lowered as the projections work it off (Backpressure).
	settleDown     atomic.Bool
	allowance      atomic.Int64
	shippedRows    atomic.Uint64
	shippedBatches atomic.Uint64
	failures       atomic.Uint64

	mu          sync.Mutex
	consecutive int
	lastErr     error
}

// NewShipper returns a Shipper from spool to store.
func NewShipper(spool *Spool, store metering.Store, opts ShipperOptions) *Shipper {
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBatchRows
		if bs, ok := store.(metering.BatchSizer); ok && bs.PreferredBatchRows() > 0 {
			opts.BatchRows = bs.PreferredBatchRows()
		}
	}
	if opts.BatchWait <= 0 {
		opts.BatchWait = DefaultBatchWait
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.InsertTimeout <= 0 {
		opts.InsertTimeout = DefaultInsertTimeout
	}
	if opts.SettleWait <= 0 {
		opts.SettleWait = DefaultSettleWait
	}
	if opts.SettleRows <= 0 {
		opts.SettleRows = DefaultSettleRows
	}
	if opts.Tracer != nil {
		store, opts.Settle = tracedBatches(opts.Tracer, store, opts.Settle)
	}
	s := &Shipper{spool: spool, store: store, opts: opts, turn: make(chan struct{}, 1)}
	s.settledSeq.Store(spool.Acked().Seq)
	return s
}

// Run ships rows as they are appended until ctx ends, and returns ctx's
// error (or ErrClosed if the spool is closed under it). Rows read but
// not yet shipped then stay in the spool. For a clean stop: end Run, Flush
// with a deadline, then close the spool.
func (s *Shipper) Run(ctx context.Context) error {
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		if err := s.acquire(ctx); err != nil {
			return err
		}
		d, err := s.step(ctx)
		s.release()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrClosed) {
				return err
			}
			// A spool read error: count it and retry after a while.
			s.fail(err)
			d = s.backoff()
		}
		if d == 0 {
			continue
		}
		wait.Reset(d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.spool.Appended():
		case <-wait.C:
		}
		wait.Stop()
	}
}

// step reads what the spool holds and ships the batch when it is full or
// old enough. It returns how long Run may sleep (0: go again at once; an
// hour: nothing buffered, so only an append ends the sleep).
func (s *Shipper) step(ctx context.Context) (time.Duration, error) {
	s.start()
	if err := s.fill(); err != nil {
		return 0, err
	}
	if len(s.batch) == 0 {
		return time.Hour, nil
	}
	settleIn, err := s.settleDue(ctx)
	if err != nil {
		s.fail(err)
		return s.backoff(), nil
	}
	if s.batchStart.IsZero() {
		s.batchStart = time.Now()
	}
	age := time.Since(s.batchStart)
	if len(s.batch) < s.opts.BatchRows && age < s.opts.BatchWait {
		d := s.opts.BatchWait - age
		if settleIn > 0 && settleIn < d {
			d = settleIn
		}
		return d, nil
	}
	if err := s.ship(ctx); err != nil {
		return 0, err
	}
	return 0, nil
}

// Flush ships every row appended before the call, in full batches,
// retrying failures until ctx ends: for shutdown and tests. It may run
// while Run does.
func (s *Shipper) Flush(ctx context.Context) error {
	target := s.spool.Stats().Appended
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	s.start()
	for {
		if err := s.fill(); err != nil {
			return err
		}
		if len(s.batch) == 0 {
			return nil
		}
		if err := s.ship(ctx); err != nil {
			return err
		}
		if s.pos.Seq >= target {
			return nil
		}
	}
}

func (s *Shipper) acquire(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Shipper) release() { <-s.turn }

// start positions the reader at the spool's acknowledged cursor, once.
func (s *Shipper) start() {
	if !s.started {
		s.pos = s.spool.Acked()
		s.noteSettled(s.pos.Seq)
		s.started = true
	}
}

// fill tops the batch up from the spool.
func (s *Shipper) fill() error {
	room := s.opts.BatchRows - len(s.batch)
	if room <= 0 {
		return nil
	}
	batch, pos, err := s.spool.Read(s.pos, room, s.batch)
	s.batch, s.pos = batch, pos
	return err
}

// settleDue settles the unsettled rows of the batch when they are many
// enough or the oldest has waited SettleWait (SettleAhead); otherwise it
// returns how long until it is due.
func (s *Shipper) settleDue(ctx context.Context) (time.Duration, error) {
	if !s.opts.SettleAhead || s.opts.Settle == nil || s.settled >= len(s.batch) {
		return 0, nil
	}
	if s.unsettled.IsZero() {
		s.unsettled = time.Now()
	}
	if age := time.Since(s.unsettled); age < s.opts.SettleWait && len(s.batch)-s.settled < s.opts.SettleRows {
		return s.opts.SettleWait - age, nil
	}
	return 0, s.settleAhead(ctx)
}

// settleAhead settles the rows of the batch not settled yet (SettleAhead).
func (s *Shipper) settleAhead(ctx context.Context) error {
	if !s.opts.SettleAhead || s.opts.Settle == nil || s.settled >= len(s.batch) {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, s.opts.InsertTimeout)
	defer cancel()
	if err := s.settleRest(sctx); err != nil {
		return fmt.Errorf("settling usage ahead of shipping: %w", err)
	}
	return nil
}

// settleRest settles the rows of the batch not settled yet and counts them
// settled, whatever the store answers the batch later: a batch waiting for
// a store that is down must not count as the projections' lag (calls would
// be held back for the whole outage).
func (s *Shipper) settleRest(ctx context.Context) error {
	if err := s.settle(ctx, s.batch[s.settled:]); err != nil {
		return err
	}
	s.settled = len(s.batch)
	s.unsettled = time.Time{}
	s.noteSettled(s.pos.Seq)
	return nil
}

// noteSettled raises the settled position to seq.
func (s *Shipper) noteSettled(seq uint64) {
	for {
		old := s.settledSeq.Load()
		if seq <= old || s.settledSeq.CompareAndSwap(old, seq) {
			break
		}
	}
	s.Backpressure() // lowers the allowance to the lag now
}

// SettledThrough is the spool position (Cursor.Seq, as AppendedRows
// counts) up to which every row is settled: acknowledged, or settled
// ahead.
func (s *Shipper) SettledThrough() uint64 { return s.settledSeq.Load() }

// Unsettled is how many rows appended to the spool are not settled yet:
// the lag of the projections that settling applies (bindings, ledger).
func (s *Shipper) Unsettled() int {
	appended, settled := s.spool.AppendedRows(), s.settledSeq.Load()
	if settled >= appended {
		return 0
	}
	return int(appended - settled)
}

// settle applies opts.Settle to rows, following whether settling works
// (Backpressure).
func (s *Shipper) settle(ctx context.Context, rows []metering.Usage) error {
	if err := s.opts.Settle(ctx, rows); err != nil {
		s.settleDown.Store(true)
		return err
	}
	if s.settleDown.Swap(false) {
		// Back after an outage: what piled up meanwhile is the outage's,
		// not a sign that calls come faster than the database takes them.
		s.allowance.Store(int64(s.Unsettled()))
	}
	return nil
}

// Backpressure is the lag that should slow calls down: the rows waiting
// for their projections beyond what an outage of the projections'
// database left (that allowance shrinks to the lowest lag seen since, so
// the projections must be working it off), and none while settling fails.
// A database that is down is not one that calls outpace: the calls go on
// and their rows wait in the spool (its disk bounds them), as they do
// for a usage store that is down; a database that is merely slower than
// the calls makes this grow, and the meter paces and then holds them.
func (s *Shipper) Backpressure() int {
	if s.settleDown.Load() {
		return 0
	}
	n := int64(s.Unsettled())
	for {
		a := s.allowance.Load()
		if a <= 0 {
			return int(n)
		}
		if n >= a {
			return int(n - a)
		}
		if s.allowance.CompareAndSwap(a, n) {
			return 0
		}
	}
}

// settleBeyond settles rows appended after the batch, while the batch
// waits for the store (SettleAhead): they are read into a scratch buffer,
// settled, and let go; their batch reads them again later. It reports
// false when settling failed (the batch's own attempt reports why).
func (s *Shipper) settleBeyond(ctx context.Context) bool {
	if !s.opts.SettleAhead || s.opts.Settle == nil {
		return true
	}
	if s.ahead.Before(s.pos) {
		s.ahead = s.pos
	}
	for range 20 { // bounded work between two attempts of the batch
		rows, next, err := s.spool.Read(s.ahead, s.opts.BatchRows, s.scratch[:0])
		s.scratch = rows
		if err != nil || len(rows) == 0 {
			return true
		}
		sctx, cancel := context.WithTimeout(ctx, s.opts.InsertTimeout)
		err = s.settle(sctx, rows)
		cancel()
		clear(s.scratch)
		if err != nil {
			return false
		}
		s.ahead = next
		s.noteSettled(next.Seq)
	}
	return true
}

// ship inserts the batch, retrying until it succeeds or ctx ends, then
// acknowledges it. On return with an error the batch is kept for the next
// attempt.
func (s *Shipper) ship(ctx context.Context) error {
	for {
		err := s.insert(ctx)
		if err == nil {
			err = s.spool.Ack(s.pos)
		}
		if err == nil {
			s.noteSettled(s.pos.Seq)
			if s.opts.Stored != nil {
				s.opts.Stored(s.batch)
			}
			s.shippedRows.Add(uint64(len(s.batch)))
			s.shippedBatches.Add(1)
			clear(s.batch) // drop references to the rows' strings
			s.batch = s.batch[:0]
			s.settled, s.unsettled = 0, time.Time{}
			s.batchStart = time.Time{}
			s.mu.Lock()
			s.consecutive = 0
			s.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		s.fail(err)
		if err := s.waitSettling(ctx, s.backoff()); err != nil {
			return err
		}
	}
}

// waitSettling waits d before the batch's next attempt, settling the rows
// appended meanwhile every SettleWait (SettleAhead): the store may be down
// for minutes (the backoff grows to MaxBackoff), and the projections, with
// the calls that backpressure would hold, must not wait for it. Settling
// once per attempt, as before, left a meter under load refusing calls
// (-32058) a few seconds into a ClickHouse outage.
func (s *Shipper) waitSettling(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		settling := s.settleBeyond(ctx)
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		if settling && s.opts.SettleAhead && s.opts.Settle != nil {
			// Settling works (the store alone is down): again soon. When
			// it fails too (the database is down), at the next attempt.
			left = min(left, s.opts.SettleWait)
		}
		t.Reset(left)
	}
}

func (s *Shipper) insert(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(ctx, s.opts.InsertTimeout)
	defer cancel()
	if s.opts.Settle != nil {
		if err := s.settleRest(ictx); err != nil {
			return fmt.Errorf("billing pending usage: %w", err)
		}
	}
	for i := range s.batch {
		if s.batch[i].Pending != nil {
			return fmt.Errorf("usage row %s holds usage not billed yet, and the shipper has no Settle", s.batch[i].ID)
		}
	}
	return s.store.Insert(ictx, s.batch)
}

func (s *Shipper) fail(err error) {
	s.failures.Add(1)
	s.mu.Lock()
	s.consecutive++
	n := s.consecutive
	s.lastErr = err
	s.mu.Unlock()
	if s.opts.OnError != nil {
		s.opts.OnError(err, n)
	}
}

// backoff is the wait after the current run of failures: MinBackoff
// doubled per earlier failure, capped at MaxBackoff.
func (s *Shipper) backoff() time.Duration {
	s.mu.Lock()
	n := s.consecutive
	s.mu.Unlock()
	d := s.opts.MinBackoff
	for i := 1; i < n && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.opts.MaxBackoff)
}

// Stats returns the shipper's counters and the spool's depth.
func (s *Shipper) Stats() ShipperStats {
	sp := s.spool.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	return ShipperStats{
		SpoolRows:      sp.Rows,
		SpoolBytes:     sp.Bytes,
		ShippedRows:    s.shippedRows.Load(),
		ShippedBatches: s.shippedBatches.Load(),
		Failures:       s.failures.Load(),
		Consecutive:    s.consecutive,
		LastError:      s.lastErr,
	}
}
