package spool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/spool"
)

func mustOpenStore(tb testing.TB) *embedded.Store {
	tb.Helper()
	s, err := embedded.Open(filepath.Join(tb.TempDir(), "usage.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// recordingStore passes inserts to a real store after failing the first
// fail calls (before or after the real insert), and records every batch
// it was given.
type recordingStore struct {
	metering.Store
	fail        atomic.Int64
	failAfter   bool // fail after inserting: the reply was lost, the rows were stored
	mu          sync.Mutex
	batches     [][]string
	insertedIDs []string
}

var errDown = errors.New("usage store down")

func (r *recordingStore) Insert(ctx context.Context, rows []metering.Usage) error {
	r.mu.Lock()
	r.batches = append(r.batches, idsOf(rows))
	r.mu.Unlock()
	fail := r.fail.Add(-1) >= 0
	if fail && !r.failAfter {
		return errDown
	}
	if err := r.Store.Insert(ctx, rows); err != nil {
		return err
	}
	r.mu.Lock()
	r.insertedIDs = append(r.insertedIDs, idsOf(rows)...)
	r.mu.Unlock()
	if fail {
		return errDown
	}
	return nil
}

// checkStored fails unless the store holds exactly the rows named, once
// each.
func checkStored(t *testing.T, s metering.Store, want []string) {
	t.Helper()
	got, err := s.Rows(context.Background(), metering.Query{})
	if err != nil {
		t.Fatal(err)
	}
	ids := idsOf(got)
	slices.Sort(ids)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("store holds %d rows, want %d (first got %v, first want %v)", len(ids), len(want), ids[:min(5, len(ids))], want[:min(5, len(want))])
	}
	tot, err := s.Totals(context.Background(), metering.Query{GroupBy: metering.ByListing})
	if err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, x := range tot {
		calls += x.Calls
	}
	if calls != int64(len(want)) {
		t.Fatalf("totals count %d calls, want %d", calls, len(want))
	}
}

func fastShipper(sp *spool.Spool, st metering.Store) *spool.Shipper {
	return spool.NewShipper(sp, st, spool.ShipperOptions{
		BatchRows: 500, BatchWait: 20 * time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
}

func TestShipperManyAppendersExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{SegmentSize: 32 << 10})
	store := &recordingStore{Store: mustOpenStore(t)}
	sh := fastShipper(sp, store)
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()

	const writers, each = 8, 400
	var want []string
	var wg sync.WaitGroup
	for w := range writers {
		for i := range each {
			want = append(want, row(w*each+i).ID)
		}
		wg.Go(func() {
			for i := range each {
				if err := sp.Append(row(w*each + i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	checkStored(t, store, want)
	if n := len(store.insertedIDs); n != len(want) {
		t.Errorf("%d rows sent to the store, want each of %d once", n, len(want))
	}
	for _, b := range store.batches {
		if len(b) > 500 {
			t.Errorf("a batch of %d rows, above BatchRows", len(b))
		}
	}
	st := sh.Stats()
	if st.ShippedRows != uint64(len(want)) || st.SpoolRows != 0 || st.SpoolBytes != 0 || st.Failures != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestShipperRetriesAFailingStore(t *testing.T) {
	for _, after := range []bool{false, true} {
		name := "store refuses"
		if after {
			name = "store stores but the reply is lost"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
			store := &recordingStore{Store: mustOpenStore(t), failAfter: after}
			store.fail.Store(3)
			var heard atomic.Int64
			sh := spool.NewShipper(sp, store, spool.ShipperOptions{
				BatchRows: 40, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
				OnError: func(err error, n int) { heard.Add(1) },
			})
			var want []string
			for i := range 100 {
				if err := sp.Append(row(i)); err != nil {
					t.Fatal(err)
				}
				want = append(want, row(i).ID)
			}
			if err := sh.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			checkStored(t, store, want)
			st := sh.Stats()
			if st.Failures != 3 || heard.Load() != 3 || st.Consecutive != 0 || st.SpoolRows != 0 {
				t.Errorf("stats = %+v, OnError heard %d; want 3 failures, all shipped", st, heard.Load())
			}
			if !errors.Is(st.LastError, errDown) {
				t.Errorf("LastError = %v", st.LastError)
			}
			// The same first batch was offered four times.
			if len(store.batches) < 4 || !slices.Equal(store.batches[0], store.batches[3]) {
				t.Errorf("batches = %v", store.batches)
			}
		})
	}
}

func TestShipperStoreDownKeepsAppending(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	store := &recordingStore{Store: mustOpenStore(t)}
	store.fail.Store(1 << 40) // down until told otherwise
	sh := fastShipper(sp, store)
	go sh.Run(ctx)
	var want []string
	for i := range 300 {
		if err := sp.Append(row(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, row(i).ID)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sh.Stats().Failures < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the shipper did not try the store")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := sh.Stats(); st.SpoolRows != 300 || st.ShippedRows != 0 || st.Consecutive < 5 {
		t.Errorf("while the store is down: %+v", st)
	}
	// Flush gives up when its context does, and loses nothing.
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Millisecond)
	if err := sh.Flush(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush with the store down: %v", err)
	}
	fcancel()
	store.fail.Store(0)
	deadline = time.Now().Add(10 * time.Second) // its own bound: the first wait may have used most of the last one
	for sh.Stats().SpoolRows != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not shipped after the store came back: %+v", sh.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	checkStored(t, store, want)
}

func TestShipperShipsAPartialBatchAfterBatchWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	store := &recordingStore{Store: mustOpenStore(t)}
	sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchWait: 30 * time.Millisecond})
	go sh.Run(ctx)
	start := time.Now()
	if err := sp.Append(row(1), row(2)); err != nil {
		t.Fatal(err)
	}
	for sh.Stats().ShippedRows != 2 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("a partial batch was never shipped")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("shipped after %v, before BatchWait", d)
	}
	checkStored(t, store, []string{"r_1", "r_2"})
}

// A crash between a successful Insert and the Ack: the next run sends the
// rows again, cut into other batches, and the store counts each once.
func TestShipperCrashBetweenInsertAndAck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := &recordingStore{Store: mustOpenStore(t)}

	sp, err := spool.Open(dir, spool.Options{SegmentSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 250 {
		if err := sp.Append(row(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, row(i).ID)
	}
	// A first run ships one batch properly, then inserts a second and dies.
	rows, c, err := sp.Read(sp.Acked(), 70, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := sp.Ack(c); err != nil {
		t.Fatal(err)
	}
	rows, _, err = sp.Read(c, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Insert(ctx, rows); err != nil { // ... no Ack: the process dies here
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}

	// The next run, from what is on disk, with another batch size.
	sp = MustOpenSpool(t, dir, spool.Options{SegmentSize: 8 << 10})
	if st := sp.Stats(); st.Rows != 180 {
		t.Errorf("after the crash %d rows pending, want 180", st.Rows)
	}
	sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: 33})
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkStored(t, store, want)
	if n := len(store.insertedIDs); n != 350 {
		t.Errorf("%d rows went to the store, want 350 (100 of them twice)", n)
	}
	if st := sh.Stats(); st.ShippedRows != 180 || st.SpoolRows != 0 {
		t.Errorf("stats = %+v", st)
	}
	// And a third run has nothing to send.
	before := len(store.batches)
	if err := spool.NewShipper(sp, store, spool.ShipperOptions{}).Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(store.batches) != before {
		t.Errorf("a run after everything was acknowledged sent %d batches", len(store.batches)-before)
	}
}

// settleCounter is a Settle that bills every row and counts how often
// each was settled.
type settleCounter struct {
	mu      sync.Mutex
	settled map[string]int
}

func (c *settleCounter) settle(_ context.Context, rows []metering.Usage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settled == nil {
		c.settled = map[string]int{}
	}
	for i := range rows {
		c.settled[rows[i].ID]++
		rows[i].Pending = nil
	}
	return nil
}

// rows is how many distinct rows were settled.
func (c *settleCounter) rows() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.settled)
}

// appendPending appends rows from to to-1, each with usage to bill, and
// returns their ids.
func appendPending(t *testing.T, sp *spool.Spool, from, to int) []string {
	t.Helper()
	var ids []string
	for i := from; i < to; i++ {
		u := row(i)
		u.Pending = &metering.PendingBill{Key: u.TaskID}
		if err := sp.Append(u); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	return ids
}

// runShipper runs sh until the test ends.
func runShipper(t *testing.T, sh *spool.Shipper) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestShipperSettlesAheadOfAFailingStore: with SettleAhead, rows are
// settled (their projections applied) as soon as they are read, and rows
// appended while the store is down are settled too, before the store comes
// back; every row is still stored once, settled.
func TestShipperSettlesAheadOfAFailingStore(t *testing.T) {
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	st := &recordingStore{Store: mustOpenStore(t)}
	st.fail.Store(1 << 30) // down until told otherwise
	var settled settleCounter
	sh := spool.NewShipper(sp, st, spool.ShipperOptions{BatchRows: 10, BatchWait: time.Hour, MinBackoff: time.Millisecond,
		MaxBackoff: 5 * time.Millisecond, Settle: settled.settle, SettleAhead: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()

	ids := appendPending(t, sp, 0, 35)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := settled.rows()
		if n == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows settled while the store is down", n, len(ids))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := sh.Stats().ShippedRows; got != 0 {
		t.Fatalf("%d rows shipped to a store that is down", got)
	}
	st.fail.Store(0)
	flushCtx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer fcancel()
	if err := sh.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	checkStored(t, st.Store, ids)
}

// TestShipperSettlesThroughALongOutage: while the store stays down and the
// batch waits a long backoff for its next attempt, rows appended meanwhile
// are still settled within moments, so the lag that backpressure holds
// calls on stays near zero through a ClickHouse outage.
func TestShipperSettlesThroughALongOutage(t *testing.T) {
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	st := &recordingStore{Store: mustOpenStore(t)}
	st.fail.Store(1 << 30)
	var settled settleCounter
	sh := spool.NewShipper(sp, st, spool.ShipperOptions{BatchRows: 10, BatchWait: time.Millisecond, MinBackoff: time.Hour,
		MaxBackoff: time.Hour, Settle: settled.settle, SettleAhead: true, SettleWait: time.Millisecond})
	runShipper(t, sh)
	waitSettled := func(n int, what string) {
		deadline := time.Now().Add(10 * time.Second)
		for sh.Unsettled() > 0 || settled.rows() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d rows unsettled after 10 s", what, sh.Unsettled())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	appendPending(t, sp, 0, 10)
	waitSettled(10, "the first batch")
	// The first insert failed: the batch now waits an hour for its next try.
	for st.fail.Load() == 1<<30 {
		time.Sleep(time.Millisecond)
	}
	for round := 1; round <= 3; round++ {
		appendPending(t, sp, round*100, round*100+50)
		waitSettled(10+round*50, fmt.Sprintf("rows appended during the outage, round %d", round))
	}
	if got := sh.Stats().ShippedRows; got != 0 {
		t.Fatalf("%d rows shipped to a store that is down", got)
	}
}

// TestShipperBackpressure: the lag that slows calls down is none while
// settling fails (the database is down: calls go on, rows wait in the
// spool), none for the backlog the outage left while the projections work
// it off, and every row when the database is merely slow.
func TestShipperBackpressure(t *testing.T) {
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	st := &recordingStore{Store: mustOpenStore(t)}
	var down atomic.Bool
	var gate atomic.Pointer[chan struct{}] // while slow, each settling takes a token from it
	g1 := make(chan struct{})
	gate.Store(&g1)
	var slow atomic.Bool
	settle := func(ctx context.Context, rows []metering.Usage) error {
		if down.Load() {
			return errors.New("database down")
		}
		if slow.Load() {
			select {
			case <-*gate.Load():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i := range rows {
			rows[i].Pending = nil
		}
		return nil
	}
	sh := spool.NewShipper(sp, st, spool.ShipperOptions{BatchRows: 10, BatchWait: time.Millisecond, MinBackoff: time.Millisecond,
		MaxBackoff: 5 * time.Millisecond, Settle: settle, SettleAhead: true, SettleWait: time.Millisecond})
	runShipper(t, sh)
	next := 0
	appendRows := func(n int) {
		appendPending(t, sp, next, next+n)
		next += n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10 s (unsettled %d, backpressure %d)", what, sh.Unsettled(), sh.Backpressure())
			}
			time.Sleep(time.Millisecond)
		}
	}

	down.Store(true)
	appendRows(30)
	waitFor("a failed settling", func() bool { return sh.Stats().Failures > 0 })
	if u, b := sh.Unsettled(), sh.Backpressure(); u != 30 || b != 0 {
		t.Fatalf("database down: unsettled %d, backpressure %d; want 30 and 0", u, b)
	}
	// Back, slowly: one settling at a time. The backlog left is allowed
	// for; rows appended beyond it count.
	slow.Store(true)
	down.Store(false)
	g1 <- struct{}{}
	waitFor("the first settling after the outage", func() bool { return sh.Unsettled() < 30 })
	u := sh.Unsettled()
	if b := sh.Backpressure(); b != 0 {
		t.Fatalf("working the outage's backlog off (%d rows left): backpressure %d, want 0", u, b)
	}
	appendRows(5)
	if b := sh.Backpressure(); b != 5 {
		t.Fatalf("5 rows appended past the backlog (%d rows): backpressure %d, want 5", u, b)
	}
	slow.Store(false)
	close(g1)
	waitFor("the backlog settled", func() bool { return sh.Unsettled() == 0 && sh.Backpressure() == 0 })

	// A database merely slower than the calls: every row counts.
	g2 := make(chan struct{})
	gate.Store(&g2)
	slow.Store(true)
	appendRows(20)
	waitFor("a slow database's lag counted", func() bool { return sh.Backpressure() == 20 })
	slow.Store(false)
	close(g2)
	waitFor("the slow rows settled", func() bool { return sh.Unsettled() == 0 && sh.Backpressure() == 0 })
}

// TestShipperUnsettled: Unsettled counts the rows appended and not yet
// settled (settled ahead, or shipped), from a shipper's start.
func TestShipperUnsettled(t *testing.T) {
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	st := &recordingStore{Store: mustOpenStore(t)}
	gate := make(chan struct{})
	settle := func(ctx context.Context, rows []metering.Usage) error {
		<-gate
		for i := range rows {
			rows[i].Pending = nil
		}
		return nil
	}
	sh := spool.NewShipper(sp, st, spool.ShipperOptions{BatchRows: 1000, BatchWait: time.Hour, Settle: settle, SettleAhead: true, SettleWait: time.Millisecond})
	for i := range 40 {
		u := row(i)
		u.Pending = &metering.PendingBill{Key: u.TaskID}
		if err := sp.Append(u); err != nil {
			t.Fatal(err)
		}
	}
	if n := sh.Unsettled(); n != 40 {
		t.Fatalf("Unsettled before the shipper ran = %d, want 40", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sh.Run(ctx)
	close(gate)
	deadline := time.Now().Add(10 * time.Second)
	for sh.Unsettled() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Unsettled = %d after 10s, want 0", sh.Unsettled())
		}
		time.Sleep(time.Millisecond)
	}
	if got := sh.Stats().ShippedRows; got != 0 {
		t.Fatalf("%d rows shipped: settling ahead must not wait for the batch", got)
	}
}

// TestLogFailures: the first failure of a run is logged, then every 20th.
func TestLogFailures(t *testing.T) {
	var buf bytes.Buffer
	onError := spool.LogFailures(slog.New(slog.NewTextHandler(&buf, nil)))
	for n := 1; n <= 41; n++ {
		onError(errDown, n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "consecutive=1") || !strings.Contains(lines[1], "consecutive=20") || !strings.Contains(lines[2], "consecutive=40") {
		t.Errorf("logged:\n%s\nwant failures 1, 20 and 40", buf.String())
	}
}
