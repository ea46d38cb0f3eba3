package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmarket/agentmarket"
)

// Segments are prepared ahead of the records: created, zero-filled to a
// little more than SegmentSize and fdatasync'd, so that the records are
// written over blocks the file system has already allocated and
// recorded. An fdatasync of records written there flushes data only; one
// of records that grow the file must also commit the file's new size and
// extents to the file system's journal, which here cost about 14 µs of
// CPU a call more at the meter's rate (the lean peer's measurement,
// shared/bench, and BenchmarkSpoolAppendParallel). The next segment is
// prepared in the background while the active one fills, under its own
// name (prepExt), and renamed when the spool rolls to it.

// prepExt names a segment being prepared: not a segment yet for Open.
const prepExt = ".prep"

// closedSegment is a segment the spool rolled away from, waiting for its
// final fsync: size is where its records end.
type closedSegment struct {
	f    *os.File
	size int64
}

// prepareSize is how much of a segment is zero-filled: SegmentSize, and
// room for the round that crosses it (a round's records are written at
// once, so a segment ends a little past SegmentSize).
func (s *Spool) prepareSize() int64 {
	return s.opts.SegmentSize + max(s.opts.SegmentSize/16, 4<<10)
}

// prepareSegment creates the file at path (replacing one a crash left
// half prepared) holding size zero bytes, fdatasync'd.
func prepareSegment(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err = f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			break
		}
	}
	if err == nil {
		err = agentmarket.Fdatasync(f)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("spool: prepare segment %s: %w", path, err)
	}
	return f, nil
}

// kickPrepare wakes the preparer unless it is awake already.
func (s *Spool) kickPrepare() {
	select {
	case s.prepKick <- struct{}{}:
	default:
	}
}

// prepareLoop prepares the segment after the active one whenever it is
// missing, until the spool closes. A failure is not the spool's: roll
// then creates the segment as it goes, and the next roll tries again.
func (s *Spool) prepareLoop() {
	defer close(s.prepDone)
	for {
		select {
		case <-s.done:
			return
		case <-s.prepKick:
		}
		s.mu.Lock()
		num := s.segs[len(s.segs)-1].num + 1
		ready := s.closed || (s.next != nil && s.nextNum == num)
		s.mu.Unlock()
		if ready {
			continue
		}
		f, err := prepareSegment(s.segPath(num)+prepExt, s.prepareSize())
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.closed || s.next != nil || s.segs[len(s.segs)-1].num+1 != num {
			// Closed, or the spool rolled past it meanwhile.
			s.mu.Unlock()
			f.Close()
			os.Remove(s.segPath(num) + prepExt)
			continue
		}
		s.next, s.nextNum = f, num
		s.mu.Unlock()
	}
}

// takePrepared returns segment num, renamed from its prepared file, when
// the preparer has it ready; nil otherwise. s.mu is held. The rename
// reaches the disk with the directory's sync in the next sync round,
// before any record written to it is acknowledged.
func (s *Spool) takePrepared(num uint64) *os.File {
	if s.next == nil {
		return nil
	}
	f, fnum := s.next, s.nextNum
	s.next = nil
	if fnum == num && os.Rename(s.segPath(num)+prepExt, s.segPath(num)) == nil {
		return f
	}
	f.Close()
	os.Remove(s.segPath(fnum) + prepExt)
	return nil
}

// dropPrepared removes the prepared segment the spool did not use; s.mu
// is held.
func (s *Spool) dropPrepared() {
	if s.next != nil {
		s.next.Close()
		os.Remove(s.segPath(s.nextNum) + prepExt)
		s.next = nil
	}
}

// recoverPrepared deals with prepared segments a crash left: one the
// spool had renamed holds records and is a segment (its rename was
// synced before any of them was acknowledged, so this only happens when
// the directory's entry is older than its data); the others are zeros and
// go.
func (s *Spool) recoverPrepared() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, segmentExt+prepExt) {
			continue
		}
		path := filepath.Join(s.dir, name)
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		fi, err := f.Stat()
		var zeros bool
		if err == nil {
			zeros, err = allZero(f, 0, fi.Size())
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("spool: read %s: %w", path, err)
		}
		seg := strings.TrimSuffix(path, prepExt)
		if _, serr := os.Stat(seg); !zeros && errors.Is(serr, os.ErrNotExist) {
			err = os.Rename(path, seg)
		} else {
			err = os.Remove(path)
		}
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
	}
	return nil
}

// allZero reports whether f holds only zero bytes from off to end.
func allZero(f *os.File, off, end int64) (bool, error) {
	buf := make([]byte, min(max(end-off, 0), readChunk))
	for off < end {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(n)
		if err != nil {
			if err == io.EOF {
				return true, nil
			}
			return false, err
		}
	}
	return true, nil
}
