// Package sentlog keeps the records of sent messages (contracts.SentMessages,
// idempotent sends) for a meter that is the only one billing its listings'
// tasks (AGENTMARKET_METER_STATE=memory, the embedded default), without a
// relational row per send: every version of a record is appended to a log
// of segment files on the meter's disk, and an index in memory finds a
// key's latest version (the design of Bitcask). A write costs an append
// (one write(2) and one fdatasync per batch); a lookup costs a read at a
// known offset; at start the log is read once to rebuild the index. Segments
// go once every record in them is past its window.
//
// The records are the meter's own: one process at a time may open a
// directory, and several meters must share the database's store instead
// (contracts/gormstore).
package sentlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// A record is a frame (agentmarket.BeginFrame, EndFrame, NextFrame) whose
// payload is: version byte 1, the SentMessage's fields in declaration
// order (strings as uvarint length and bytes, Stage as a varint, Result as
// uvarint length+1 with 0 for none, times as varint Unix nanoseconds).
const (
	version1   = 1
	segmentExt = ".log"
	lockFile   = "LOCK"
	// SegmentSize is the size past which the next segment is started.
	SegmentSize = 64 << 20
)

// Store implements contracts.SentMessages over a directory of segments.
type Store struct {
	dir  string
	lock *os.File
	seed [2]maphash.Seed

	// mu guards everything below; writers hold it, readers read-lock it.
	mu       sync.RWMutex
	closed   bool
	index    map[[2]uint64]entry
	segs     map[uint32]*segment
	active   *segment
	nextSeg  uint32
	writeBuf []byte
}

var _ contracts.SentMessages = (*Store)(nil)

// entry is where a key's latest record is, and when its window ends.
type entry struct {
	seg     uint32
	off     uint32 // a segment stays below 4 GiB (SegmentSize)
	size    uint32
	expires int64 // Unix ns
}

type segment struct {
	num     uint32
	f       *os.File
	size    int64
	expires int64 // the latest window end among its records, Unix ns
}

// Open opens (creating it if needed) the log in dir and reads it to build
// the index; a torn record at the end of a segment (a crash mid-write) is
// cut off.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("sent log: %w", err)
	}
	lock, err := agentmarket.LockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("sent log %s: %w", dir, err)
	}
	s := &Store{dir: dir, lock: lock, seed: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		index: map[[2]uint64]entry{}, segs: map[uint32]*segment{}}
	if err := s.load(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// load reads every segment in order into the index and opens the last one
// (or a new one) for appends.
func (s *Store) load() error {
	names, err := filepath.Glob(filepath.Join(s.dir, "*"+segmentExt))
	if err != nil {
		return err
	}
	var nums []uint32
	for _, n := range names {
		v, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(n), segmentExt), 10, 32)
		if err == nil {
			nums = append(nums, uint32(v))
		}
	}
	slices.Sort(nums)
	for _, num := range nums {
		seg, err := s.loadSegment(num)
		if err != nil {
			return err
		}
		s.segs[num] = seg
		s.nextSeg = num + 1
	}
	if len(nums) > 0 {
		s.active = s.segs[nums[len(nums)-1]]
		return nil
	}
	return s.roll()
}

// loadSegment indexes the records of one segment, cutting a torn tail.
func (s *Store) loadSegment(num uint32) (*segment, error) {
	f, err := os.OpenFile(s.segPath(num), os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	seg := &segment{num: num, f: f}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	off := 0
	for off < len(data) {
		payload, n := nextRecord(data[off:])
		if n == 0 {
			break // a torn tail: cut below
		}
		m, err := decode(payload)
		if err != nil {
			break
		}
		e := entry{seg: num, off: uint32(off), size: uint32(n), expires: m.ExpiresAt.UnixNano()}
		s.index[s.key(m.SentKey)] = e
		seg.expires = max(seg.expires, e.expires)
		off += n
	}
	if off < len(data) {
		if err := f.Truncate(int64(off)); err != nil {
			f.Close()
			return nil, err
		}
	}
	seg.size = int64(off)
	return seg, nil
}

func (s *Store) segPath(num uint32) string {
	return filepath.Join(s.dir, fmt.Sprintf("%010d%s", num, segmentExt))
}

// roll starts the next segment; s.mu is held (or the store is not shared
// yet).
func (s *Store) roll() error {
	f, err := os.OpenFile(s.segPath(s.nextSeg), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if err := agentmarket.SyncDir(s.dir); err != nil {
		f.Close()
		return err
	}
	seg := &segment{num: s.nextSeg, f: f}
	s.segs[seg.num] = seg
	s.active = seg
	s.nextSeg++
	return nil
}

// key is the index's key of k: two independent 64-bit hashes, so that
// two keys share one only with a chance of 2^-128.
func (s *Store) key(k contracts.SentKey) [2]uint64 {
	var out [2]uint64
	for i := range out {
		var h maphash.Hash
		h.SetSeed(s.seed[i])
		h.WriteString(k.ListingID)
		h.WriteByte(0)
		h.WriteString(k.OrgID)
		h.WriteByte(0)
		h.WriteString(k.MessageID)
		out[i] = h.Sum64()
	}
	return out
}

// read returns the record e points to; s.mu is held (read or write).
func (s *Store) read(e entry) (*contracts.SentMessage, error) {
	seg := s.segs[e.seg]
	if seg == nil {
		return nil, nil // pruned
	}
	buf := make([]byte, e.size)
	if _, err := seg.f.ReadAt(buf, int64(e.off)); err != nil {
		return nil, fmt.Errorf("sent log: %w", err)
	}
	payload, n := nextRecord(buf)
	if n == 0 {
		return nil, errors.New("sent log: a record does not read back")
	}
	return decode(payload)
}

// lookup is the latest record of k, nil when there is none; s.mu is held.
func (s *Store) lookup(k contracts.SentKey) (*contracts.SentMessage, error) {
	e, ok := s.index[s.key(k)]
	if !ok {
		return nil, nil
	}
	m, err := s.read(e)
	if err != nil || m == nil || m.SentKey != k {
		return nil, err
	}
	return m, nil
}

// LocalLookups says that a lookup costs no round trip (a2aproxy makes them
// at once rather than in batches).
func (s *Store) LocalLookups() {}

// FindSent implements contracts.SentMessages.
func (s *Store) FindSent(_ context.Context, keys []contracts.SentKey, now time.Time) ([]*contracts.SentMessage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed
	}
	out := make([]*contracts.SentMessage, len(keys))
	for i, k := range keys {
		m, err := s.lookup(k)
		if err != nil {
			return nil, err
		}
		if m != nil && now.Before(m.ExpiresAt) && m.Stage != contracts.SentReleased {
			out[i] = m
		}
	}
	return out, nil
}

// RecordSent implements contracts.SentMessages: the same rules as the
// database's store (contracts/gormstore's upsert), the records of a call
// applied in order, all written with one append and one fdatasync.
func (s *Store) RecordSent(_ context.Context, recs []contracts.SentMessage, now time.Time) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	applied := make([]bool, len(recs))
	pending := map[contracts.SentKey]*contracts.SentMessage{} // this call's writes, by key
	var order []contracts.SentKey
	for i := range recs {
		r := &recs[i]
		old := pending[r.SentKey]
		if old == nil {
			var err error
			if old, err = s.lookup(r.SentKey); err != nil {
				return nil, err
			}
		}
		next, ok := merge(old, r, now)
		if !ok {
			continue
		}
		applied[i] = true
		if pending[r.SentKey] == nil {
			order = append(order, r.SentKey)
		}
		pending[r.SentKey] = next
	}
	if len(order) == 0 {
		return applied, nil
	}
	if err := s.append(order, pending); err != nil {
		return nil, err
	}
	return applied, nil
}

// merge is what the stored record old (nil: none) becomes when r is
// written at now, and whether r is written: a record of the same claim
// moves the stored one forward only; one of another claim replaces a
// replaceable record (contracts.SentMessage.Replaceable) and nothing else.
func merge(old *contracts.SentMessage, r *contracts.SentMessage, now time.Time) (*contracts.SentMessage, bool) {
	if old == nil {
		n := *r
		n.Result = slices.Clone(r.Result)
		return &n, true
	}
	same := old.ClaimID == r.ClaimID
	if !same && !old.Replaceable(now) {
		return nil, false
	}
	n := *old
	n.ContractID, n.Digest, n.ClaimID, n.ClaimedAt, n.ExpiresAt = r.ContractID, r.Digest, r.ClaimID, r.ClaimedAt, r.ExpiresAt
	forward := !same || r.Stage >= old.Stage
	if forward {
		n.Stage, n.HeldUntil = r.Stage, r.HeldUntil
	}
	if !same || r.TaskID != "" {
		n.TaskID = r.TaskID
	}
	if !same || r.ContextID != "" {
		n.ContextID = r.ContextID
	}
	if !same || (r.Stage >= old.Stage && r.State != "") {
		n.State = r.State
	}
	if !same || (r.Stage >= old.Stage && r.Result != nil) {
		n.Result, n.ResultVersion = slices.Clone(r.Result), r.ResultVersion
	}
	return &n, true
}

// append writes the records of keys (from recs) at the end of the active
// segment, syncs them and indexes them; s.mu is held.
func (s *Store) append(keys []contracts.SentKey, recs map[contracts.SentKey]*contracts.SentMessage) error {
	if s.active.size >= SegmentSize {
		if err := s.active.f.Sync(); err != nil {
			return err
		}
		if err := s.roll(); err != nil {
			return err
		}
	}
	b := s.writeBuf[:0]
	starts := make([]int, len(keys))
	for i, k := range keys {
		starts[i] = len(b)
		var err error
		if b, err = appendRecord(b, recs[k]); err != nil {
			return err
		}
	}
	seg := s.active
	// WriteAt at the end of what is known good: the bytes of a failed,
	// partial write are overwritten by the next one, and cut at open.
	if _, err := seg.f.WriteAt(b, seg.size); err != nil {
		return fmt.Errorf("sent log: %w", err)
	}
	if err := agentmarket.Fdatasync(seg.f); err != nil {
		return fmt.Errorf("sent log: %w", err)
	}
	for i, k := range keys {
		end := len(b)
		if i+1 < len(keys) {
			end = starts[i+1]
		}
		e := entry{seg: seg.num, off: uint32(seg.size) + uint32(starts[i]), size: uint32(end - starts[i]), expires: recs[k].ExpiresAt.UnixNano()}
		s.index[s.key(k)] = e
		seg.expires = max(seg.expires, e.expires)
	}
	seg.size += int64(len(b))
	if cap(b) <= 1<<20 {
		s.writeBuf = b
	}
	return nil
}

// PruneSent implements contracts.SentMessages: it forgets the records
// whose window ended before before, and removes the segments that hold no
// other.
func (s *Store) PruneSent(_ context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	b := before.UnixNano()
	var n int64
	for k, e := range s.index {
		if e.expires < b {
			delete(s.index, k)
			n++
		}
	}
	var gone []uint32
	for num, seg := range s.segs {
		if seg != s.active && seg.expires < b {
			gone = append(gone, num)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i] < gone[j] })
	for _, num := range gone {
		seg := s.segs[num]
		delete(s.segs, num)
		seg.f.Close()
		if err := os.Remove(s.segPath(num)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("sent log: %w", err)
		}
	}
	return n, nil
}

// Close closes the segments and releases the directory.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, seg := range s.segs {
		errs = append(errs, seg.f.Close())
	}
	if s.lock != nil {
		agentmarket.UnlockDir(s.lock)
	}
	return errors.Join(errs...)
}

var errClosed = errors.New("sent log: closed")

// appendRecord appends m's record to b.
func appendRecord(b []byte, m *contracts.SentMessage) ([]byte, error) {
	start := len(b)
	b = append(agentmarket.BeginFrame(b), version1)
	for _, v := range []string{m.ListingID, m.OrgID, m.MessageID, m.ContractID, m.Digest, m.ClaimID} {
		b = appendString(b, v)
	}
	b = binary.AppendVarint(b, int64(m.Stage))
	for _, v := range []string{m.TaskID, m.ContextID, m.State} {
		b = appendString(b, v)
	}
	if m.Result == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(m.Result))+1)
		b = append(b, m.Result...)
	}
	b = appendString(b, m.ResultVersion)
	for _, t := range []time.Time{m.ClaimedAt, m.HeldUntil, m.ExpiresAt} {
		b = binary.AppendVarint(b, t.UnixNano())
	}
	return agentmarket.EndFrame(b, start)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// nextRecord checks the record at the start of b and returns its payload
// and whole length; n == 0: b holds no whole, valid record there.
func nextRecord(b []byte) (payload []byte, n int) {
	payload, n, err := agentmarket.NextFrame(b)
	if err != nil {
		return nil, 0
	}
	return payload, n
}

// decode reads a record's payload.
func decode(p []byte) (*contracts.SentMessage, error) {
	if len(p) == 0 || p[0] != version1 {
		return nil, errors.New("sent log: unknown record version")
	}
	d := decoder{b: p[1:]}
	m := &contracts.SentMessage{}
	for _, v := range []*string{&m.ListingID, &m.OrgID, &m.MessageID, &m.ContractID, &m.Digest, &m.ClaimID} {
		*v = d.str()
	}
	m.Stage = contracts.SentStage(d.varint())
	for _, v := range []*string{&m.TaskID, &m.ContextID, &m.State} {
		*v = d.str()
	}
	if n := d.uvarint(); n > 0 {
		m.Result = d.bytes(int(n - 1))
	}
	m.ResultVersion = d.str()
	for _, t := range []*time.Time{&m.ClaimedAt, &m.HeldUntil, &m.ExpiresAt} {
		*t = time.Unix(0, d.varint()).UTC()
	}
	if d.bad || len(d.b) != 0 {
		return nil, errors.New("sent log: a corrupt record")
	}
	return m, nil
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	out := slices.Clone(d.b[:n])
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
