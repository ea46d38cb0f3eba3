package spool_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering/spool"
)

// The records go into segments prepared ahead: the file already holds
// zeros past them, so an append changes no file's size (its fdatasync
// flushes data only); a closed segment is cut to its records; a reopened
// spool reads every row and counts no torn bytes.
func TestSpoolWritesIntoPreparedSegments(t *testing.T) {
	dir := t.TempDir()
	const segSize = 64 << 10
	s, err := spool.Open(dir, spool.Options{SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	active := lastSegment(t, dir)
	before := fileSize(t, active)
	if before < segSize {
		t.Fatalf("the active segment holds %d bytes before any append, want it prepared to at least %d", before, segSize)
	}
	if err := s.Append(row(0)); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, active); got != before {
		t.Errorf("an append grew the segment from %d to %d bytes", before, got)
	}
	// The next segment is prepared while this one fills.
	waitFor(t, func() bool { return len(prepared(t, dir)) == 1 })

	var want []string
	want = append(want, "r_0")
	for i := 1; len(segments(t, dir)) < 4; i++ {
		if err := s.Append(row(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, "r_"+strconv.Itoa(i))
	}
	segs := segments(t, dir)
	for _, seg := range segs[:len(segs)-1] {
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		// A closed segment is cut to its records: shorter than prepared.
		if got := fileSize(t, seg); got >= before {
			t.Errorf("closed segment %s holds %d bytes, as prepared: its zeros were not cut", filepath.Base(seg), got)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if p := prepared(t, dir); len(p) != 0 {
		t.Errorf("prepared segments left after Close: %v", p)
	}

	s = MustOpenSpool(t, dir, spool.Options{SegmentSize: segSize})
	got, _ := readAll(t, s)
	if ids := idsOf(got); !slices.Equal(ids, want) {
		t.Fatalf("reopened spool read %d rows, want %d", len(ids), len(want))
	}
	if st := s.Stats(); st.TruncatedBytes != 0 || st.CorruptBytes != 0 {
		t.Errorf("stats = %+v, want no truncated or corrupt bytes", st)
	}
}

// A prepared segment the spool had renamed into place and written to,
// left under its prepared name by a crash before the directory reached
// the disk, is a segment: its rows are read. One that is zeros goes.
func TestSpoolRecoversPreparedSegments(t *testing.T) {
	dir := t.TempDir()
	var rec []byte
	for i := range 3 {
		rec = append(rec, spool.EncodeRecord(row(i))...)
	}
	rec = append(rec, make([]byte, 8192)...)
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.seg.prep"), rec, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000002.seg.prep"), make([]byte, 8192), 0o640); err != nil {
		t.Fatal(err)
	}
	s := MustOpenSpool(t, dir, spool.Options{})
	got, _ := readAll(t, s)
	if ids := idsOf(got); !slices.Equal(ids, []string{"r_0", "r_1", "r_2"}) {
		t.Fatalf("read %v, want the prepared segment's three rows", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000002.seg.prep")); !os.IsNotExist(err) {
		t.Errorf("a prepared segment of zeros is still there: %v", err)
	}
}

func lastSegment(tb testing.TB, dir string) string {
	tb.Helper()
	segs := segments(tb, dir)
	if len(segs) == 0 {
		tb.Fatal("no segment")
	}
	return segs[len(segs)-1]
}

// prepared lists the segments being prepared in dir.
func prepared(tb testing.TB, dir string) []string { return globIn(tb, dir, "*.seg.prep") }

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

func waitFor(tb testing.TB, ok func() bool) {
	tb.Helper()
	for end := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(end) {
			tb.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
