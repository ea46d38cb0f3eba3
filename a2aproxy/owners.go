package a2aproxy

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// ownerIndex is the meter's own view of who owns which task: every binding
// this meter made, and every one it read from the database. Steady-state
// calls decide ownership here, without SQL; the database is a projection
// that the shipper fills from the spool (a binding is durable once the
// usage row that carries it is appended).
//
// A task this meter never saw is read from the state the meters share
// (Proxy.Shared, Redis), where every meter's bindings are as soon as its
// call made them, then from the database; when neither knows it, the lookup waits (up to missWait) for
// another meter's projection before answering "not found", so a task
// created on one meter is found for its owner on another right after its
// creation.
//
// The index is bounded: each shard keeps at most its capacity of entries,
// dropping the oldest first; a dropped entry is read from the database
// again (where its projection is by then).
type ownerIndex struct {
	store contracts.TaskOwners
	// shared, when set, is read before the database: the bindings every
	// meter of the deployment made (Proxy.Shared). fallback is told when
	// it fails (the database answers then).
	shared   contracts.TaskOwners
	fallback func(error)
	missWait time.Duration
	poll     time.Duration
	seed     maphash.Seed
	shards   [ownerShards]ownerShard
}

const ownerShards = 64

// A shard holds every binding of a task id (on any listing): the shard is
// chosen by the task id alone, so ByTask looks in one shard. Its map is
// keyed by the task id, each entry the task's binding on one listing and,
// rarely, a chain of its bindings on others: one map write and no
// allocation of the meter's own per new task.
type ownerShard struct {
	mu   sync.RWMutex
	m    map[string]ownerEntry
	ring []ringSlot // insertion order, for eviction
	next int        // where the next key goes in ring, once it is full
	cap  int
	gen  uint32 // the last entry's generation
}

// ringSlot is a binding's place in the eviction order: its key and the
// generation of the entry it placed, so that evicting a slot whose key
// was forgotten and bound again (a newer entry, with a place of its own)
// drops nothing.
type ringSlot struct {
	k   ownerKey
	gen uint32
}

type ownerKey struct{ listing, task string }

// ownerEntry is a task's binding on one listing; more, its bindings on
// other listings (an id two agents both gave, or a reused one).
type ownerEntry struct {
	listing string
	gen     uint32
	b       *contracts.TaskBinding
	more    *ownerEntry
}

func newOwnerIndex(store contracts.TaskOwners, capacity int, missWait time.Duration) *ownerIndex {
	x := &ownerIndex{store: store, missWait: missWait, poll: 20 * time.Millisecond, seed: maphash.MakeSeed()}
	per := max(capacity/ownerShards, 16)
	for i := range x.shards {
		x.shards[i].m = make(map[string]ownerEntry)
		x.shards[i].cap = per
	}
	return x
}

func (x *ownerIndex) shard(k ownerKey) *ownerShard {
	return &x.shards[maphash.String(x.seed, k.task)%ownerShards]
}

// find is k's binding (s.mu held).
func (s *ownerShard) find(k ownerKey) *contracts.TaskBinding {
	e, ok := s.m[k.task]
	if !ok {
		return nil
	}
	if e.listing == k.listing {
		return e.b
	}
	for o := e.more; o != nil; o = o.more {
		if o.listing == k.listing {
			return o.b
		}
	}
	return nil
}

// set stores b as k's binding, over the one it held (s.mu held); it
// returns the generation of k's entry and whether k was bound before (an
// entry keeps its generation when its binding is replaced).
func (s *ownerShard) set(k ownerKey, b *contracts.TaskBinding) (uint32, bool) {
	e, ok := s.m[k.task]
	switch {
	case !ok:
		g := s.nextGen()
		s.m[k.task] = ownerEntry{listing: k.listing, gen: g, b: b}
		return g, false
	case e.listing == k.listing:
		e.b = b
		s.m[k.task] = e
		return e.gen, true
	}
	for o := e.more; o != nil; o = o.more {
		if o.listing == k.listing {
			o.b = b
			return o.gen, true
		}
	}
	g := s.nextGen()
	e.more = &ownerEntry{listing: k.listing, gen: g, b: b, more: e.more}
	s.m[k.task] = e
	return g, false
}

// nextGen is a new entry's generation, never 0 (drop's "whichever").
func (s *ownerShard) nextGen() uint32 {
	if s.gen++; s.gen == 0 {
		s.gen = 1
	}
	return s.gen
}

// drop deletes k's binding (s.mu held) when its entry is of generation gen
// (0: whichever); it reports whether it did.
func (s *ownerShard) drop(k ownerKey, gen uint32) bool {
	e, ok := s.m[k.task]
	if !ok {
		return false
	}
	if e.listing == k.listing {
		if gen != 0 && e.gen != gen {
			return false
		}
		if e.more == nil {
			delete(s.m, k.task)
		} else {
			s.m[k.task] = *e.more
		}
		return true
	}
	for p := &e; p.more != nil; p = p.more {
		if p.more.listing == k.listing {
			if gen != 0 && p.more.gen != gen {
				return false
			}
			p.more = p.more.more
			s.m[k.task] = e
			return true
		}
	}
	return false
}

func (s *ownerShard) get(k ownerKey) *contracts.TaskBinding {
	s.mu.RLock()
	b := s.find(k)
	s.mu.RUnlock()
	return b
}

// putIfAbsent stores b unless the key is bound, and returns the binding
// now recorded (b itself when it was new).
func (s *ownerShard) putIfAbsent(k ownerKey, b *contracts.TaskBinding) (*contracts.TaskBinding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.find(k); old != nil {
		return old, false
	}
	gen, _ := s.set(k, b)
	if len(s.ring) < s.cap {
		s.ring = append(s.ring, ringSlot{k, gen})
		return b, true
	}
	old := s.ring[s.next]
	s.drop(old.k, old.gen)
	s.ring[s.next] = ringSlot{k, gen}
	s.next = (s.next + 1) % s.cap
	return b, true
}

// byTaskID returns the bindings of a task id on every listing.
func (s *ownerShard) byTaskID(task string) []*contracts.TaskBinding {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.m[task]
	if !ok {
		return nil
	}
	out := []*contracts.TaskBinding{e.b}
	for o := e.more; o != nil; o = o.more {
		out = append(out, o.b)
	}
	return out
}

// replace stores b over whatever the key held (a newer reading of the
// same binding: a reused mark).
func (s *ownerShard) replace(k ownerKey, b *contracts.TaskBinding) {
	s.mu.Lock()
	if s.find(k) != nil {
		s.set(k, b)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.putIfAbsent(k, b)
}

// Bind records b's org as the owner of its task unless the task is bound
// (here, or in the database as this meter last read it), and returns the
// binding in force and whether it is b. It takes no lock beyond its
// shard's and writes no database: the caller makes the binding durable by
// spooling its usage row.
func (x *ownerIndex) Bind(b contracts.TaskBinding) (*contracts.TaskBinding, bool) {
	k := ownerKey{b.ListingID, b.TaskID}
	return x.shard(k).putIfAbsent(k, &b)
}

// ByTask returns the bindings of a task id this meter holds, on any
// listing, reading no database.
func (x *ownerIndex) ByTask(taskID string) []*contracts.TaskBinding {
	return x.shard(ownerKey{task: taskID}).byTaskID(taskID)
}

// Peek returns the binding this meter holds for the task, reading no
// database; nil when it holds none.
func (x *ownerIndex) Peek(listingID, taskID string) *contracts.TaskBinding {
	k := ownerKey{listingID, taskID}
	return x.shard(k).get(k)
}

// Known returns the task's binding from the index or, without waiting,
// from the database: for readers that must not wait for a projection (a
// task list, a notification about a task bound long ago).
func (x *ownerIndex) Known(ctx context.Context, listingID, taskID string) (*contracts.TaskBinding, error) {
	k := ownerKey{listingID, taskID}
	sh := x.shard(k)
	if b := sh.get(k); b != nil {
		return b, nil
	}
	b, err := x.read(ctx, listingID, taskID)
	if err != nil {
		return nil, err
	}
	got, _ := sh.putIfAbsent(k, b)
	return got, nil
}

// read is the task's binding from the shared state, else the database.
func (x *ownerIndex) read(ctx context.Context, listingID, taskID string) (*contracts.TaskBinding, error) {
	if x.shared != nil {
		b, err := x.shared.TaskOwner(ctx, listingID, taskID)
		switch {
		case err == nil:
			return b, nil
		case !isNotFound(err):
			x.fallback(err)
		}
	}
	return x.store.TaskOwner(ctx, listingID, taskID)
}

// Lookup returns the task's binding, or a NotFound error once neither
// this meter nor the database (given up to missWait for another meter's
// projection) knows the task.
func (x *ownerIndex) Lookup(ctx context.Context, listingID, taskID string) (*contracts.TaskBinding, error) {
	k := ownerKey{listingID, taskID}
	sh := x.shard(k)
	if b := sh.get(k); b != nil {
		return b, nil
	}
	// The wait is a bound on this call, not a business time: the
	// context's own timer measures it.
	wait, cancel := context.WithTimeout(ctx, x.missWait)
	defer cancel()
	for {
		b, err := x.read(ctx, listingID, taskID)
		if err == nil {
			got, _ := sh.putIfAbsent(k, b)
			return got, nil
		}
		if !isNotFound(err) {
			return nil, err
		}
		// Bound here meanwhile (this meter's own call)?
		if b := sh.get(k); b != nil {
			return b, nil
		}
		t := time.NewTimer(x.poll)
		select {
		case <-wait.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// Forget drops the task's binding from the index (a binding that could
// not be stored).
func (x *ownerIndex) Forget(listingID, taskID string) {
	k := ownerKey{listingID, taskID}
	sh := x.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Its place in the ring stays; its eviction deletes nothing, even once
	// the key is bound again (a new entry, of another generation).
	sh.drop(k, 0)
}

// MarkEnded records in the index that the task's end is recorded, so the
// projection does not record it again for every later call that sees it.
func (x *ownerIndex) MarkEnded(listingID, taskID string) {
	k := ownerKey{listingID, taskID}
	sh := x.shard(k)
	sh.mu.Lock()
	if b := sh.find(k); b != nil && b.Ended == nil {
		c := *b
		c.Ended = &contracts.TaskEvent{Kind: contracts.TaskEnded}
		sh.set(k, &c)
	}
	sh.mu.Unlock()
}

// EndedKnown reports whether the index knows the task's end is recorded.
func (x *ownerIndex) EndedKnown(listingID, taskID string) bool {
	b := x.Peek(listingID, taskID)
	return b != nil && b.Ended != nil
}

// MarkReused records in the index that the task's id was reused for
// another org (the database is told by the caller).
func (x *ownerIndex) MarkReused(listingID, taskID string, at time.Time) {
	k := ownerKey{listingID, taskID}
	sh := x.shard(k)
	b := sh.get(k)
	if b == nil {
		return
	}
	if b.ReusedAt != nil {
		return
	}
	c := *b
	c.ReusedAt = &at
	sh.replace(k, &c)
}
