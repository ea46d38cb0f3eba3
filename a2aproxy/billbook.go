package a2aproxy

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// billBook is the meter's own ledger, in memory: what each task it carries
// has been billed so far. With it (Proxy.BillInMemory: this meter is the
// only one billing its listings' tasks, as in the embedded default), a
// call's bill is decided when its usage row is recorded, on the call path,
// without SQL: the row carries its final counters and cost, and the task's
// billed total after it (metering.Usage.Billed). The shipper then raises
// the task's stored total to it (contracts.TaskBilled, on the task's one
// row), which is idempotent; the row itself is billed once by its id, in
// the usage store. No row per call is written to the relational database
// for billing (task_usage and settled_bills are the shared-database path,
// Proxy.Ledger, for several meters).
//
// A task the book does not hold (bound before this meter started, or
// dropped from the book) is read from its stored row once, when the book
// is warm: every row the spool held when the meter started has been
// projected (Proxy.Warm), so the stored total is the task's whole bill.
// The book is bounded: past its capacity it drops the oldest entries whose
// rows have all been projected (projected == billed); an entry with rows
// still in the spool is never dropped, since its stored total is behind.
type billBook struct {
	store  contracts.TaskOwners
	warm   func() bool
	seed   maphash.Seed
	shards [billShards]billShard
}

const billShards = 64

type billShard struct {
	mu   sync.Mutex
	m    map[ownerKey]*billEntry
	ring []ownerKey
	next int
	cap  int
}

// billEntry is one task's bill.
type billEntry struct {
	billed metering.Counters
	// at is when the task was first billed; zero while it never was.
	at time.Time
	// projected is the largest total this meter's projections stored for
	// the task (or that a row that could not be recorded carried): while
	// it is below billed, the stored total is behind, and the entry stays.
	projected metering.Counters
	// deferred counts the task's rows spooled pending (their bills left to
	// the shipper: the task's stored bill could not be read); while there
	// are any, the task's later rows are deferred too, and once they are
	// settled the entry is dropped, so the next bill reads the stored one,
	// which then holds them. Guarded by the shard's lock.
	deferred int32
}

// errDeferred is a bill left to the shipper (billEntry.deferred).
var errDeferred = errors.New("the task's earlier rows wait to be billed by the shipper")

func newBillBook(store contracts.TaskOwners, capacity int, warm func() bool) *billBook {
	b := &billBook{store: store, warm: warm, seed: maphash.MakeSeed()}
	per := max(capacity/billShards, 16)
	for i := range b.shards {
		b.shards[i].m = make(map[ownerKey]*billEntry)
		b.shards[i].cap = per
	}
	return b
}

func (b *billBook) shard(k ownerKey) *billShard {
	return &b.shards[maphash.String(b.seed, k.task)%billShards]
}

// warmWait bounds how long a bill of a task the book does not hold waits
// for the spool's backlog to be projected after a start.
const warmWait = 30 * time.Second

// entry returns the task's entry, reading its stored total when the book
// does not hold it; fresh says the call bound the task just now (nothing
// can have been billed for it before). When the stored total cannot be
// read, the entry returned defers the task's bills (deferredEntry), with
// the reason.
func (b *billBook) entry(ctx context.Context, k ownerKey, fresh bool) (*billEntry, error) {
	sh := b.shard(k)
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil && fresh {
		e = &billEntry{}
		sh.put(k, e)
	}
	sh.mu.Unlock()
	if e != nil {
		return e, nil
	}
	if err := b.awaitWarm(ctx); err != nil {
		return b.deferredEntry(k), err
	}
	got := &billEntry{}
	tb, err := b.store.TaskOwner(ctx, k.listing, k.task)
	switch {
	case isNotFound(err):
		// Not stored yet nor held: never billed.
	case err != nil:
		return b.deferredEntry(k), err
	case tb.Billed != nil:
		got.billed = metering.Counters{InputTokens: tb.Billed.InputTokens, OutputTokens: tb.Billed.OutputTokens, ComputeMs: tb.Billed.ComputeMs}
		got.at = tb.Billed.At
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[k]; e != nil {
		return e, nil // read meanwhile by another call
	}
	sh.put(k, got)
	return got, nil
}

// deferredEntry holds k's bills for the shipper: the task's stored bill
// could not be read, so this meter bills it no more itself until the rows
// it defers are settled.
func (b *billBook) deferredEntry(k ownerKey) *billEntry {
	sh := b.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[k]; e != nil {
		return e
	}
	e := &billEntry{deferred: -1}
	sh.put(k, e)
	return e
}

func (b *billBook) awaitWarm(ctx context.Context) error {
	if b.warm == nil || b.warm() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, warmWait)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !b.warm() {
		select {
		case <-ctx.Done():
			return rpcErr(CodeMeterBusy, 503, "the meter is still applying the usage it recorded before it started; retry shortly")
		case <-t.C:
		}
	}
	return nil
}

// put adds e under k, dropping the oldest projected entry past the
// shard's capacity; sh.mu is held.
func (sh *billShard) put(k ownerKey, e *billEntry) {
	sh.m[k] = e
	if len(sh.ring) < sh.cap {
		sh.ring = append(sh.ring, k)
		return
	}
	old := sh.ring[sh.next]
	if oe := sh.m[old]; oe != nil && (oe.projected != oe.billed || oe.deferred != 0) {
		// Its rows are not projected yet: keep it, and grow.
		sh.ring = append(sh.ring, k)
		return
	}
	delete(sh.m, old)
	sh.ring[sh.next] = k
	sh.next = (sh.next + 1) % len(sh.ring)
}

// bill raises the task's bill: each counter becomes max(billed, cum) +
// add. It returns the increase, whether this is the task's first bill,
// and the task's total after it, which the caller hands to done once its
// row is projected (or could not be recorded).
func (b *billBook) bill(ctx context.Context, listingID, taskID string, fresh bool, cum, add metering.Counters, at time.Time) (delta, total metering.Counters, first bool, err error) {
	k := ownerKey{listingID, taskID}
	e, why := b.entry(ctx, k, fresh)
	sh := b.shard(k)
	sh.mu.Lock()
	if e.deferred != 0 {
		e.deferred = max(e.deferred, 0) + 1
		sh.mu.Unlock()
		if why == nil {
			why = errDeferred
		}
		return metering.Counters{}, metering.Counters{}, false, why
	}
	old := e.billed
	total = old.Raise(cum, add)
	e.billed = total
	first = e.at.IsZero()
	if first {
		e.at = at
	}
	sh.mu.Unlock()
	return total.Sub(old), total, first, nil
}

// settled releases one deferred row of the task, billed by the shipper
// (or not recorded); with the last, the entry goes.
func (b *billBook) settled(listingID, taskID string) {
	k := ownerKey{listingID, taskID}
	sh := b.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil || e.deferred <= 0 {
		return
	}
	if e.deferred--; e.deferred == 0 {
		delete(sh.m, k) // its place in the ring stays; evicting a key no longer held deletes nothing
	}
}

// done notes that a row carrying the task's total was projected (or
// could not be recorded): idempotent, as projections may run twice.
func (b *billBook) done(listingID, taskID string, total metering.Counters) {
	k := ownerKey{listingID, taskID}
	sh := b.shard(k)
	sh.mu.Lock()
	if e := sh.m[k]; e != nil {
		e.projected = metering.Counters{InputTokens: max(e.projected.InputTokens, total.InputTokens),
			OutputTokens: max(e.projected.OutputTokens, total.OutputTokens), ComputeMs: max(e.projected.ComputeMs, total.ComputeMs)}
	}
	sh.mu.Unlock()
}
