// Package spool is the meter's local, durable queue of usage rows: a Spool
// of segment files on disk that holds each metering.Usage row from the
// moment its call is metered, and a Shipper that moves the rows in batches
// to a metering.Store and acknowledges them only once the store took them.
package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// Durability of the spool.
//
// The rows are written with write(2) into the current segment before
// Append returns. From then on they survive a crash of the process
// (SIGKILL, panic, OOM kill): they are in the kernel's page cache, which
// the kernel writes out whatever happens to the process.
//
// A power loss or kernel crash is different: only rows the file system was
// told to keep (fdatasync) survive it. The syncs are group-committed: one
// fdatasync covers every row appended since the last one started. Two
// modes (Options.Durability):
//
//   - SyncEach (the default): Append returns once an fdatasync that covers
//     its rows has returned. A row whose Append returned survives a power
//     loss. Appends that arrive while a sync runs wait for the next one,
//     which covers them all: under load one sync serves many calls. The
//     rows of a round are written by the sync too, with one write(2) for
//     them all just before its fdatasync (no Append returns earlier, so
//     none of them is visible earlier either).
//   - SyncInterval: Append returns after its own write(2); the first Append after
//     a sync wakes a background loop that waits SyncInterval (default
//     5 ms), then syncs once for every row appended meanwhile. A power loss
//     can cost the rows appended in roughly the last SyncInterval plus one
//     sync's duration (a few ms on an SSD): 5–10 ms at the default.
//
// Sync closes the window on demand (shutdown, tests).
//
// A segment is zero-filled and synced before the records go into it
// (prepare.go), as a database's write-ahead log preallocates its
// segments: writing over those zeros changes neither the file's size nor
// its blocks, so each fdatasync flushes the records alone, with no journal
// commit of the file's metadata. A segment on disk is its records, then
// zeros; Open cuts the zeros.
//
// A write cut short by a crash leaves a torn record at the end of a
// segment; its length or CRC gives it away and Open truncates it.
// If a sync fails, the kernel may have dropped the dirty pages, so the
// spool can no longer promise anything: it keeps the error and refuses
// every later Append (see Stats.Err).

// Durability is when Append returns (see above).
type Durability int

const (
	// SyncEach returns once a group-committed fdatasync covers the rows.
	SyncEach Durability = iota
	// SyncInterval returns after write(2), and syncs every SyncInterval.
	SyncInterval
)

// Options tune a Spool; zero values take the defaults.
type Options struct {
	// Durability is when Append returns; default SyncEach.
	Durability Durability
	// SyncInterval is, with Durability SyncInterval, the group-commit
	// period, the power-loss window (see above). Default 5 ms.
	SyncInterval time.Duration
	// SegmentSize is the size at which the current segment is closed and
	// the next one started. Default 8 MiB.
	SegmentSize int64
}

const (
	DefaultSyncInterval = 5 * time.Millisecond
	DefaultSegmentSize  = 8 << 20
)

// Cursor is a position in the spool: the byte offset of a record in a
// segment. Seq counts the rows before it since the spool was created; it
// only feeds the depth counters.
type Cursor struct {
	Segment uint64 `json:"segment"`
	Offset  int64  `json:"offset"`
	Seq     uint64 `json:"seq"`
}

// Before reports whether c is an earlier position than d.
func (c Cursor) Before(d Cursor) bool {
	return c.Segment < d.Segment || (c.Segment == d.Segment && c.Offset < d.Offset)
}

// Stats is a snapshot of the spool's counters, for metrics.
type Stats struct {
	Rows     int64  // appended and not yet acknowledged: the shipping backlog
	Bytes    int64  // the size of that backlog on disk
	Segments int    // segment files on disk
	Appended uint64 // rows appended over the spool's life (the end's Cursor.Seq)
	// TruncatedBytes is what Open cut from torn segment tails, and
	// CorruptBytes what Read skipped in a segment damaged after opening.
	TruncatedBytes int64
	CorruptBytes   int64
	// SyncedRows is how many of the Appended rows are synced (survive a
	// power loss); Syncs counts the syncs, each covering every row appended
	// before it (group commit).
	SyncedRows uint64
	Syncs      uint64
	// Writes counts the write(2)s of records: one per Append with
	// SyncInterval, one per sync round with SyncEach.
	Writes uint64
	// Err is the failure that stopped the spool (an fsync error), if any.
	Err error
}

// ErrClosed is returned by calls on a closed Spool.
var ErrClosed = agentmarket.Errorf(agentmarket.Unavailable, "spool_closed", "the usage spool is closed")

const (
	segmentExt = ".seg"
	cursorFile = "cursor.json"
	lockFile   = "LOCK"
	// readChunk is how much Read and Open read from a segment at once.
	readChunk = 1 << 20
	// maxPooledBuf keeps a rare huge batch's buffer out of the pool.
	maxPooledBuf = 1 << 20
)

// syncRound is one group-committed sync that Appends wait for.
type syncRound struct {
	done chan struct{}
	err  error
}

type segment struct {
	num  uint64
	size int64 // bytes of complete records
}

// Spool is a local, append-only directory of segment files holding usage
// rows until they are shipped to a metering.Store. Many goroutines may Append at
// once; one consumer (the Shipper) reads with Read and acknowledges with
// Ack. One process at a time may open a directory.
type Spool struct {
	dir  string
	opts Options
	lock *os.File

	bufs sync.Pool // *[]byte for encoding outside the lock

	mu          sync.Mutex
	closed      bool
	err         error    // sticky: an fsync failed
	active      *os.File // the last segment, open for writing
	segs        []segment
	seq         uint64          // rows appended over the spool's life
	gen         uint64          // bumped by every Append, read by Sync
	unsynced    []closedSegment // closed segments awaiting their final fsync
	dirDirty    bool            // a segment file was created since the last Sync
	syncPending bool            // the sync loop has been kicked
	acked       Cursor
	truncated   int64
	corrupt     int64

	syncMu     sync.Mutex // serializes Sync; guards syncedGen
	syncedGen  uint64
	syncedRows atomic.Uint64
	syncs      atomic.Uint64
	writes     atomic.Uint64

	// round is, with SyncEach, the sync the Appends since the last one
	// started wait for; nil when none waits. Guarded by mu.
	round *syncRound
	// pending is, with SyncEach, the records of that round not written
	// yet, pendingRows their rows: the group commit writes them with one
	// write(2) before its fdatasync, where each Append wrote its own
	// before. Nothing of them is visible (size, seq, Read) until then.
	// Guarded by mu.
	pending     []byte
	pendingRows int

	kick     chan struct{}
	appended chan struct{}
	done     chan struct{}
	loopDone chan struct{}

	// next is the segment after the active one, zero-filled ahead by the
	// preparer (prepare.go), nextNum its number; nil until it is ready.
	// Guarded by mu.
	next     *os.File
	nextNum  uint64
	prepKick chan struct{}
	prepDone chan struct{}

	readMu   sync.Mutex // guards the reader's open file and buffer
	readNum  uint64
	readFile *os.File
	readBuf  []byte

	ackMu sync.Mutex

	appendedRows atomic.Uint64 // s.seq, readable without the lock
}

// AppendedRows is the number of rows appended over the spool's life (the
// end's Cursor.Seq), read without taking the spool's lock.
func (s *Spool) AppendedRows() uint64 { return s.appendedRows.Load() }

// Open opens (creating it if needed) the spool in dir. It truncates
// torn records at the end of segments, removes segments that an earlier
// run acknowledged, and starts a new segment for this run's appends.
func Open(dir string, opts Options) (*Spool, error) {
	if opts.SyncInterval == 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	var f agentmarket.Fields
	if opts.SyncInterval < 0 {
		f.Add("sync_interval", "positive", "the spool sync interval must be positive, not %s", opts.SyncInterval)
	}
	if opts.Durability != SyncEach && opts.Durability != SyncInterval {
		f.Add("durability", "one_of", "the spool durability must be SyncEach or SyncInterval, not %d", opts.Durability)
	}
	if opts.SegmentSize < 0 {
		f.Add("segment_size", "positive", "the spool segment size must be positive, not %d", opts.SegmentSize)
	}
	if err := f.Err("invalid_spool_options", "invalid spool options"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	lock, err := agentmarket.LockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	s := &Spool{
		dir:      dir,
		opts:     opts,
		lock:     lock,
		kick:     make(chan struct{}, 1),
		appended: make(chan struct{}, 1),
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
		prepKick: make(chan struct{}, 1),
		prepDone: make(chan struct{}),
	}
	s.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	if err := s.recover(); err != nil {
		agentmarket.UnlockDir(lock)
		return nil, err
	}
	s.syncedRows.Store(s.seq) // what survived is on disk
	go s.loop()
	go s.prepareLoop()
	s.kickPrepare()
	return s, nil
}

// Append stores rows in the spool. When it returns nil the rows are in the
// operating system's hands: a crash of this process no longer loses them;
// with SyncEach, nor does a power loss (they are synced); with
// SyncInterval a power loss may, within the sync interval (see the package
// comment on durability). Rows must pass metering.Usage.Validate. Append
// is safe for concurrent use.
func (s *Spool) Append(rows ...metering.Usage) error {
	if len(rows) == 0 {
		return nil
	}
	bp := s.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	var err error
	for i := range rows {
		u := &rows[i]
		if u.ID == "" || !metering.TimeInRange(u.Time) {
			err = u.Validate()
			break
		}
		if b, err = appendRecord(b, u); err != nil {
			err = agentmarket.Wrap(agentmarket.Invalid, "usage_row_too_large", err, "usage row %s is too large to spool", u.ID)
			break
		}
	}
	var r *syncRound
	if err == nil {
		r, err = s.write(b, len(rows))
	}
	if cap(b) <= maxPooledBuf {
		*bp = b
		s.bufs.Put(bp)
	}
	if r != nil {
		<-r.done
		err = r.err
	}
	return err
}

// Record appends u, as the meter records each call's row: a Spool is the
// meter's recorder (a2aproxy.Recorder), and Err says when it refuses rows.
func (s *Spool) Record(_ context.Context, u metering.Usage) error { return s.Append(u) }

// write appends b (rows records) to the current segment, or, with
// SyncEach, to the records the next sync writes; with SyncEach it returns
// the sync round that will cover them.
func (s *Spool) write(b []byte, rows int) (*syncRound, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.opts.Durability == SyncEach {
		// The caller waits for the round's fdatasync anyway: its write(2)
		// is the round's, one for every Append of the round.
		s.pending = append(s.pending, b...)
		s.pendingRows += rows
		s.kickSync()
		if s.round == nil {
			s.round = &syncRound{done: make(chan struct{})}
		}
		return s.round, nil
	}
	if err := s.writeRecords(b, rows); err != nil {
		return nil, err
	}
	s.kickSync()
	return nil, nil
}

// kickSync wakes the sync loop unless it is awake already; s.mu is held.
func (s *Spool) kickSync() {
	if !s.syncPending {
		s.syncPending = true
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// writeRecords writes b (rows records) at the end of the current segment
// and makes them visible: counted, readable, announced; s.mu is held.
func (s *Spool) writeRecords(b []byte, rows int) error {
	seg := &s.segs[len(s.segs)-1]
	// WriteAt at the end of what is known good: bytes of a failed, partial
	// write are overwritten by the next write, never read, and cut on open.
	if _, err := s.active.WriteAt(b, seg.size); err != nil {
		return agentmarket.Wrap(agentmarket.Unavailable, "spool_write", err, "usage spool write failed")
	}
	s.writes.Add(1)
	seg.size += int64(len(b))
	s.seq += uint64(rows)
	s.appendedRows.Store(s.seq)
	s.gen++
	select {
	case s.appended <- struct{}{}:
	default:
	}
	if seg.size >= s.opts.SegmentSize {
		// A failed roll only delays it: the rows are written, and the next
		// Append tries again.
		s.roll()
	}
	return nil
}

// writePending writes the records the Appends of the round left to the
// sync (SyncEach); s.mu is held. A failed write fails the round's Appends
// (their rows are not stored) but not the spool: the next round writes
// over the torn bytes, as a failed Append's write did.
func (s *Spool) writePending() error {
	if len(s.pending) == 0 {
		return nil
	}
	err := s.writeRecords(s.pending, s.pendingRows)
	if cap(s.pending) > maxPooledBuf {
		s.pending = nil // a rare huge round's buffer is not kept
	} else {
		s.pending = s.pending[:0]
	}
	s.pendingRows = 0
	return err
}

// roll starts the next segment, the one the preparer zero-filled when it
// is ready; s.mu is held.
func (s *Spool) roll() {
	cur := s.segs[len(s.segs)-1]
	num := cur.num + 1
	f := s.takePrepared(num)
	if f == nil {
		var err error
		if f, err = createSegment(s.segPath(num)); err != nil {
			return
		}
	}
	s.kickPrepare()
	s.unsynced = append(s.unsynced, closedSegment{f: s.active, size: cur.size})
	s.active = f
	s.segs = append(s.segs, segment{num: num})
	s.dirDirty = true
}

// loop is the group commit: it sleeps until rows are appended, lets more
// gather for one sync interval, and fsyncs them all at once.
func (s *Spool) loop() {
	defer close(s.loopDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.kick:
		}
		if s.opts.Durability == SyncEach {
			// At once: the Appends wait. Those arriving during the sync
			// wait for the next round, which covers them all.
			s.sync()
			continue
		}
		t.Reset(s.opts.SyncInterval)
		select {
		case <-s.done:
			t.Stop()
			return
		case <-t.C:
		}
		s.sync() // a failure is kept in s.err and reported by Append and Stats
	}
}

// Sync makes every row appended before the call durable (fsync), without
// waiting for the group commit.
func (s *Spool) Sync() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return s.sync()
}

// sync makes every row appended so far durable, and releases the Appends
// waiting for it (the round it takes: every row of that round was
// appended before, so this sync covers it).
func (s *Spool) sync() (err error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	r := s.round
	s.round = nil
	if r != nil {
		defer func() {
			r.err = err
			close(r.done)
		}()
	}
	if s.err != nil || s.active == nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if err := s.writePending(); err != nil {
		s.syncPending = false
		s.mu.Unlock()
		return err
	}
	f, files, dir, gen, rows := s.active, s.unsynced, s.dirDirty, s.gen, s.seq
	s.unsynced, s.dirDirty, s.syncPending = nil, false, false
	s.mu.Unlock()

	var errs []error
	for _, g := range files {
		// The zeros past its records go: a closed segment is its records.
		errs = append(errs, g.f.Truncate(g.size), g.f.Sync(), g.f.Close())
	}
	if dir {
		errs = append(errs, agentmarket.SyncDir(s.dir))
	}
	if gen != s.syncedGen || len(files) > 0 {
		errs = append(errs, agentmarket.Fdatasync(f))
	}
	if err := errors.Join(errs...); err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err == nil {
			s.err = agentmarket.Wrap(agentmarket.Unavailable, "spool_fsync", err,
				"usage spool fsync failed: rows written since the last fsync may not survive a power loss; the spool refuses appends")
		}
		return s.err
	}
	s.syncedGen = gen
	s.syncedRows.Store(rows)
	s.syncs.Add(1)
	return nil
}

// Err is the failure that stopped the spool (an fsync error: it refuses
// every Append from then on), nil while it works.
func (s *Spool) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Appended returns a channel that receives after rows are appended (at
// most one pending signal: a wake-up for the one consumer).
func (s *Spool) Appended() <-chan struct{} { return s.appended }

// Acked returns the acknowledged position: where shipping resumes after a
// restart.
func (s *Spool) Acked() Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// Read appends to dst up to limit rows stored at c and after, and returns
// dst and the position after the rows it read. Rows are readable as soon
// as Append has returned. With nothing more to read it returns no rows and
// a cursor that a later Read continues from.
func (s *Spool) Read(c Cursor, limit int, dst []metering.Usage) ([]metering.Usage, Cursor, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	for n := 0; n < limit; {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return dst, c, ErrClosed
		}
		i, _ := slices.BinarySearchFunc(s.segs, c.Segment, func(g segment, num uint64) int {
			switch {
			case g.num < num:
				return -1
			case g.num > num:
				return 1
			}
			return 0
		})
		if i == len(s.segs) {
			s.mu.Unlock()
			return dst, c, nil
		}
		seg, last := s.segs[i], i == len(s.segs)-1
		s.mu.Unlock()

		if seg.num != c.Segment {
			// c's segment is gone (shipped, or empty and removed).
			c = Cursor{Segment: seg.num, Seq: c.Seq}
		}
		if c.Offset >= seg.size {
			if last {
				return dst, c, nil
			}
			c = Cursor{Segment: seg.num + 1, Seq: c.Seq}
			continue
		}
		var got int
		var err error
		dst, got, c, err = s.readSegment(seg, c, limit-n, dst)
		n += got
		if errors.Is(err, errTorn) && !last {
			// Damaged after it was checked at open: skip the rest of this
			// closed segment rather than stall shipping forever.
			s.mu.Lock()
			s.corrupt += seg.size - c.Offset
			s.mu.Unlock()
			c = Cursor{Segment: seg.num + 1, Seq: c.Seq}
			continue
		}
		if err != nil {
			return dst, c, fmt.Errorf("spool: read segment %d at %d: %w", c.Segment, c.Offset, err)
		}
	}
	return dst, c, nil
}

// readSegment reads up to limit records of seg from c.
func (s *Spool) readSegment(seg segment, c Cursor, limit int, dst []metering.Usage) ([]metering.Usage, int, Cursor, error) {
	if s.readFile == nil || s.readNum != seg.num {
		if s.readFile != nil {
			s.readFile.Close()
			s.readFile = nil
		}
		f, err := os.Open(s.segPath(seg.num))
		if err != nil {
			return dst, 0, c, err
		}
		s.readFile, s.readNum = f, seg.num
	}
	if s.readBuf == nil {
		s.readBuf = make([]byte, readChunk)
	}
	got := 0
	for got < limit && c.Offset < seg.size {
		want := min(int64(len(s.readBuf)), seg.size-c.Offset)
		k, err := s.readFile.ReadAt(s.readBuf[:want], c.Offset)
		if int64(k) < want {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return dst, got, c, err
		}
		chunk := s.readBuf[:k]
		used := 0
		for got < limit {
			p, rn, err := nextRecord(chunk[used:])
			if err != nil {
				return dst, got, c, err
			}
			if rn == 0 {
				break
			}
			dst = append(dst, metering.Usage{})
			if err := decodePayload(p, &dst[len(dst)-1]); err != nil {
				dst = dst[:len(dst)-1]
				return dst, got, c, err
			}
			used += rn
			got++
			c.Offset += int64(rn)
			c.Seq++
		}
		if used == 0 && got < limit {
			if int64(k) == seg.size-(c.Offset) {
				// seg.size always ends on a record boundary.
				return dst, got, c, errTorn
			}
			// A record bigger than the buffer.
			s.readBuf = make([]byte, 2*len(s.readBuf))
		}
	}
	return dst, got, c, nil
}

// Ack records that every row before c is shipped: the cursor is saved
// (write, fsync, rename) and segments wholly before it are removed. An
// older cursor than the current one is ignored.
func (s *Spool) Ack(c Cursor) error {
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if !s.acked.Before(c) {
		s.mu.Unlock()
		return nil
	}
	if c.Seq > s.seq {
		s.mu.Unlock()
		return fmt.Errorf("spool: ack of row %d beyond the %d appended", c.Seq, s.seq)
	}
	s.mu.Unlock()

	if err := s.saveCursor(c); err != nil {
		return err
	}

	s.mu.Lock()
	s.acked = c
	var drop []uint64
	k := 0
	for k < len(s.segs)-1 { // never the active segment
		g := s.segs[k]
		if g.num > c.Segment || (g.num == c.Segment && c.Offset < g.size) {
			break
		}
		drop = append(drop, g.num)
		k++
	}
	s.segs = s.segs[k:]
	s.mu.Unlock()

	var errs []error
	for _, num := range drop {
		if err := os.Remove(s.segPath(num)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// The cursor is saved; Open removes what is left.
		return fmt.Errorf("spool: remove shipped segments: %w", err)
	}
	return nil
}

func (s *Spool) saveCursor(c Cursor) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, cursorFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("spool: save cursor: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, cursorFile))
	}
	if err == nil {
		err = agentmarket.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("spool: save cursor: %w", err)
	}
	return nil
}

// Stats returns the spool's counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Rows:           int64(s.seq - s.acked.Seq),
		Segments:       len(s.segs),
		Appended:       s.seq,
		TruncatedBytes: s.truncated,
		CorruptBytes:   s.corrupt,
		SyncedRows:     s.syncedRows.Load(),
		Syncs:          s.syncs.Load(),
		Writes:         s.writes.Load(),
		Err:            s.err,
	}
	for _, g := range s.segs {
		switch {
		case g.num > s.acked.Segment:
			st.Bytes += g.size
		case g.num == s.acked.Segment:
			st.Bytes += max(0, g.size-s.acked.Offset)
		}
	}
	return st
}

// Close fsyncs what is pending, stops the sync loop and releases the
// directory. Rows not yet shipped stay in the spool for the next run.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	<-s.loopDone
	<-s.prepDone
	err := s.sync()

	s.syncMu.Lock()
	s.mu.Lock()
	for _, g := range s.unsynced {
		g.f.Close()
	}
	s.unsynced = nil
	if s.active != nil {
		// The zeros past the records go; a crash instead leaves them to
		// Open, which cuts them.
		seg := s.segs[len(s.segs)-1]
		if err == nil {
			err = errors.Join(s.active.Truncate(seg.size), s.active.Sync())
		}
		if cerr := s.active.Close(); err == nil {
			err = cerr
		}
		s.active = nil
	}
	s.dropPrepared()
	s.mu.Unlock()
	s.syncMu.Unlock()

	s.readMu.Lock()
	if s.readFile != nil {
		s.readFile.Close()
		s.readFile = nil
	}
	s.readMu.Unlock()
	agentmarket.UnlockDir(s.lock)
	return err
}
