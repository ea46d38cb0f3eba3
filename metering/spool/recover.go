package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentmarket/agentmarket"
)

// recover loads the cursor, checks the segments and opens a new one.
func (s *Spool) recover() error {
	os.Remove(filepath.Join(s.dir, cursorFile+".tmp"))
	b, err := os.ReadFile(filepath.Join(s.dir, cursorFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("spool: read cursor: %w", err)
	default:
		if err := json.Unmarshal(b, &s.acked); err != nil {
			return fmt.Errorf("spool: cursor %s is unreadable: %w", filepath.Join(s.dir, cursorFile), err)
		}
	}
	if err := s.recoverPrepared(); err != nil {
		return err
	}
	nums, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	var unshipped uint64
	last := s.acked.Segment
	for _, num := range nums {
		last = max(last, num)
		path := s.segPath(num)
		if num < s.acked.Segment {
			// Acknowledged, but the run that did it stopped before removing it.
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("spool: %w", err)
			}
			continue
		}
		from := int64(0)
		if num == s.acked.Segment {
			from = s.acked.Offset
		}
		rows, size, cut, err := scanSegment(path, from)
		if err != nil {
			return err
		}
		s.truncated += cut
		if size == 0 {
			// Nothing in it ever (a run that appended nothing): Read skips
			// missing segments, so drop it rather than ship around it.
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("spool: %w", err)
			}
			continue
		}
		unshipped += rows
		s.segs = append(s.segs, segment{num: num, size: size})
	}
	s.seq = s.acked.Seq + unshipped
	s.appendedRows.Store(s.seq)
	f, err := prepareSegment(s.segPath(last+1), s.prepareSize())
	if err != nil {
		return err
	}
	s.active = f
	s.segs = append(s.segs, segment{num: last + 1})
	if err := agentmarket.SyncDir(s.dir); err != nil {
		f.Close()
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// scanSegment validates the records of a segment from offset from on,
// truncates a torn tail, and returns the number of records after from, the
// segment's size and how many bytes it cut.
func scanSegment(path string, from int64) (rows uint64, size int64, cut int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("spool: %w", err)
	}
	fileSize := fi.Size()
	if from >= fileSize {
		// Everything here was shipped (a power loss may even have taken
		// shipped bytes back): nothing to check.
		return 0, fileSize, 0, nil
	}
	buf := make([]byte, readChunk)
	off := from
	for off < fileSize {
		want := min(int64(len(buf)), fileSize-off)
		n, err := f.ReadAt(buf[:want], off)
		if int64(n) < want {
			return 0, 0, 0, fmt.Errorf("spool: read %s: %w", path, err)
		}
		chunk := buf[:n]
		used, bad := 0, false
		for {
			_, rn, err := nextRecord(chunk[used:])
			if err != nil {
				bad = true
				break
			}
			if rn == 0 {
				break
			}
			used += rn
			rows++
		}
		off += int64(used)
		if bad {
			break
		}
		if used == 0 {
			if want == fileSize-off {
				break // the file ends inside this record: a torn write
			}
			buf = make([]byte, 2*len(buf)) // a record bigger than the buffer
		}
	}
	var zeros bool
	if off < fileSize {
		if zeros, err = allZero(f, off, fileSize); err != nil {
			return 0, 0, 0, fmt.Errorf("spool: read %s: %w", path, err)
		}
		if err := f.Truncate(off); err != nil {
			return 0, 0, 0, fmt.Errorf("spool: truncate torn tail of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return 0, 0, 0, fmt.Errorf("spool: %w", err)
		}
	}
	if zeros {
		return rows, off, 0, nil // the segment's preallocated tail, not a torn record
	}
	return rows, off, fileSize - off, nil
}

func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var nums []uint64
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, segmentExt) {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(name, segmentExt), 10, 64)
		if err != nil {
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, nil
}

func (s *Spool) segPath(num uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", num, segmentExt))
}

func createSegment(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return f, nil
}
