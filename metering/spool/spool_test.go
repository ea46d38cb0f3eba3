package spool_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// row returns a realistic row (field sizes like the meter's) with id "r_<n>".
func row(n int) metering.Usage {
	u := storetest.Row(n, t0.Add(time.Duration(n)*time.Millisecond))
	u.ID = "r_" + strconv.Itoa(n)
	return u
}

// MustOpenSpool opens a spool in dir, closed after the test.
func MustOpenSpool(tb testing.TB, dir string, opts spool.Options) *spool.Spool {
	tb.Helper()
	s, err := spool.Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// readAll reads every row from the acknowledged cursor on.
func readAll(tb testing.TB, s *spool.Spool) ([]metering.Usage, spool.Cursor) {
	tb.Helper()
	var all []metering.Usage
	c := s.Acked()
	for {
		n := len(all)
		var err error
		all, c, err = s.Read(c, 97, all)
		if err != nil {
			tb.Fatal(err)
		}
		if len(all) == n {
			return all, c
		}
	}
}

func idsOf(rows []metering.Usage) []string {
	var out []string
	for _, u := range rows {
		out = append(out, u.ID)
	}
	return out
}

func segments(tb testing.TB, dir string) []string { return globIn(tb, dir, "*.seg") }

// globIn lists the files of dir that match pattern.
func globIn(tb testing.TB, dir, pattern string) []string {
	tb.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestSpoolRoundTrip(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{})
	want := []metering.Usage{row(1), row(2), row(3)}
	want[1].Time = time.Date(2026, 12, 1, 1, 2, 3, 456_789_000, time.FixedZone("X", 3600))
	want[2].ErrorCode, want[2].Model, want[2].Estimated = -32001, "modèle ✓", true
	if err := s.Append(want[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(want[1:]...); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, s)
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		w := storetest.Stored(want[i])
		if got[i] != w {
			t.Errorf("row %d\n got  %+v\n want %+v", i, got[i], w)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolRoundTripPendingAndBinds: rows carrying pending usage, a
// binding, a sent message, a lost task, a bill decided when recorded, or
// several (record versions 2, 3, 5, 6 and 7) read back whole, beside a
// plain row.
func TestSpoolRoundTripPendingAndBinds(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{})
	want := []metering.Usage{row(1), row(2), row(3), row(4), row(5), row(6), row(7), row(8), row(9), row(10)}
	pending := &metering.PendingBill{Key: "task-9", Cum: metering.Counters{InputTokens: 10, OutputTokens: 20, ComputeMs: 30},
		Add: metering.Counters{InputTokens: 1, ComputeMs: -2}, Rates: metering.Rates{InputTokensPerMillion: 3, PerTask: 7}}
	want[1].Pending = pending
	want[2].Binds = &metering.Binding{ParentListingID: "lst_p", DeadlineAt: time.Date(2026, 12, 2, 3, 4, 5, 6_000_000, time.UTC)}
	want[3].Pending, want[3].Binds = pending, &metering.Binding{Stored: true}
	at := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	want[4].Sent = &metering.Sent{MessageID: "m-1", Digest: "ab12", ClaimID: "use_1", ClaimedAt: at, HeldUntil: at.Add(time.Minute),
		ExpiresAt: at.Add(24 * time.Hour), Done: true, Result: []byte(`{"kind":"message"}`), ResultVersion: "0.3"}
	want[5].Pending, want[5].Binds = pending, &metering.Binding{ParentListingID: "lst_q", Endpoint: "https://eu.agent.example/a2a"}
	want[5].Sent = &metering.Sent{MessageID: "m-2", Digest: "cd34", ClaimID: "use_2", ClaimedAt: at, HeldUntil: at, ExpiresAt: at}
	want[6].Lost, want[6].ErrorCode = true, -32001
	want[7].Lost, want[7].Pending, want[7].Binds, want[7].Sent = true, pending, &metering.Binding{Stored: true}, want[5].Sent
	want[8].Billed = &metering.Counters{InputTokens: 1 << 40, OutputTokens: 3, ComputeMs: 0}
	want[9].Billed, want[9].Binds, want[9].Sent, want[9].Tags = &metering.Counters{ComputeMs: 7}, &metering.Binding{Endpoint: "http://b.example"}, want[4].Sent, "team=x"
	if err := s.Append(want...); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, s)
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if w := storetest.Stored(want[i]); !reflect.DeepEqual(got[i], w) {
			t.Errorf("row %d\n got  %+v %+v %+v %+v %+v\n want %+v %+v %+v %+v %+v", i, got[i], got[i].Pending, got[i].Binds, got[i].Sent, got[i].Billed,
				w, w.Pending, w.Binds, w.Sent, w.Billed)
		}
	}
}

func TestSpoolRefusesInvalidRows(t *testing.T) {
	dir := t.TempDir()
	s := MustOpenSpool(t, dir, spool.Options{})
	for _, bad := range []metering.Usage{
		{Time: t0},
		{ID: "x"},
		{ID: "x", Time: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)},
	} {
		if err := s.Append(row(1), bad); agentmarket.KindOf(err) != agentmarket.Invalid {
			t.Errorf("Append(%+v) err = %v, want invalid", bad, err)
		}
	}
	if got, _ := readAll(t, s); len(got) != 0 {
		t.Errorf("a refused Append wrote %v", idsOf(got))
	}
}

func TestSpoolConcurrentAppend(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{SegmentSize: 64 << 10, SyncInterval: time.Millisecond})
	const writers, each = 8, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Append(row(w*each + i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, _ := readAll(t, s)
	ids := idsOf(got)
	slices.Sort(ids)
	if len(ids) != writers*each || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatalf("read %d rows (%d distinct), want %d", len(ids), len(slices.Compact(ids)), writers*each)
	}
	if st := s.Stats(); st.Rows != writers*each || st.Segments < 2 {
		t.Errorf("stats = %+v, want %d rows over several segments", st, writers*each)
	}
}

func TestSpoolAckRemovesShippedSegments(t *testing.T) {
	dir := t.TempDir()
	s := MustOpenSpool(t, dir, spool.Options{SegmentSize: 4 << 10})
	for i := range 100 {
		if err := s.Append(row(i)); err != nil {
			t.Fatal(err)
		}
	}
	before := len(segments(t, dir))
	if before < 5 {
		t.Fatalf("%d segments for 100 rows of 4 KiB segments", before)
	}
	rows, c, err := s.Read(s.Acked(), 60, nil)
	if err != nil || len(rows) != 60 {
		t.Fatalf("Read = %d rows, %v", len(rows), err)
	}
	if err := s.Ack(c); err != nil {
		t.Fatal(err)
	}
	mid := len(segments(t, dir))
	if mid >= before {
		t.Errorf("Ack of 60 rows left %d of %d segments", mid, before)
	}
	if st := s.Stats(); st.Rows != 40 || st.Bytes <= 0 || st.Appended != 100 {
		t.Errorf("stats after ack = %+v, want 40 rows pending", st)
	}
	rest, c, err := s.Read(c, 1000, nil)
	if err != nil || len(rest) != 40 || rest[0].ID != "r_60" {
		t.Fatalf("Read after ack = %v, %v", idsOf(rest), err)
	}
	if err := s.Ack(c); err != nil {
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 1 {
		t.Errorf("%d segments after everything was acknowledged, want the active one", n)
	}
	if st := s.Stats(); st.Rows != 0 || st.Bytes != 0 {
		t.Errorf("stats after full ack = %+v", st)
	}
	// An older cursor is ignored.
	if err := s.Ack(spool.Cursor{}); err != nil || s.Acked() != c {
		t.Errorf("Ack of an old cursor: %v, acked %+v", err, s.Acked())
	}
}

func TestSpoolCursorSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := spool.Open(dir, spool.Options{SegmentSize: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := s.Append(row(i)); err != nil {
			t.Fatal(err)
		}
	}
	_, c, err := s.Read(s.Acked(), 12, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(c); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = MustOpenSpool(t, dir, spool.Options{SegmentSize: 2 << 10})
	if s.Acked() != c {
		t.Errorf("acked after reopen = %+v, want %+v", s.Acked(), c)
	}
	if st := s.Stats(); st.Rows != 18 {
		t.Errorf("pending after reopen = %d, want 18", st.Rows)
	}
	if err := s.Append(row(30)); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, s)
	var want []string
	for i := 12; i <= 30; i++ {
		want = append(want, "r_"+strconv.Itoa(i))
	}
	if ids := idsOf(got); !slices.Equal(ids, want) {
		t.Errorf("after reopen read %v, want %v", ids, want)
	}
}

func TestSpoolOneProcessPerDirectory(t *testing.T) {
	dir := t.TempDir()
	MustOpenSpool(t, dir, spool.Options{})
	if s, err := spool.Open(dir, spool.Options{}); err == nil {
		s.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
}

func TestSpoolClosed(t *testing.T) {
	s, err := spool.Open(t.TempDir(), spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(row(1)); err != spool.ErrClosed {
		t.Errorf("Append after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestSpoolRecord: Record appends the meter's rows, refusing invalid ones
// as Append does; Err is nil while the spool works.
func TestSpoolRecord(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{})
	if err := s.Record(context.Background(), row(1)); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, s); len(got) != 1 || got[0].ID != "r_1" {
		t.Errorf("rows after Record = %v, want r_1", idsOf(got))
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err of a working spool = %v", err)
	}
	if err := s.Record(context.Background(), metering.Usage{}); agentmarket.KindOf(err) != agentmarket.Invalid {
		t.Errorf("Record of an invalid row = %v, want invalid", err)
	}
}

// lastSegmentWithData returns the newest segment file that holds records.
func lastSegmentWithData(tb testing.TB, dir string) string {
	tb.Helper()
	segs := segments(tb, dir)
	for i := len(segs) - 1; i >= 0; i-- {
		if fi, err := os.Stat(segs[i]); err == nil && fi.Size() > 0 {
			return segs[i]
		}
	}
	tb.Fatal("no segment with data")
	return ""
}

func TestSpoolTornTailIsCut(t *testing.T) {
	rec := spool.EncodeRecord(row(99))
	badCRC := slices.Clone(rec)
	badCRC[len(badCRC)-1] ^= 0xff
	hugeLen := slices.Clone(rec[:8])
	hugeLen[3] = 0x7f
	for name, tail := range map[string][]byte{
		"half a record":         rec[:len(rec)/2],
		"only a header":         rec[:8],
		"three bytes":           rec[:3],
		"whole record bad crc":  badCRC,
		"absurd length":         append(hugeLen, rec[8:]...),
		"zero filled":           make([]byte, 4096),
		"good record then torn": append(slices.Clone(spool.EncodeRecord(row(5))), rec[:len(rec)-1]...),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := spool.Open(dir, spool.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if err := s.Append(row(i)); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			// What a crash in the middle of a write leaves behind.
			seg := lastSegmentWithData(t, dir)
			f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tail)
			f.Close()
			good, _ := os.Stat(seg)

			s = MustOpenSpool(t, dir, spool.Options{})
			got, _ := readAll(t, s)
			want := []string{"r_0", "r_1", "r_2", "r_3", "r_4"}
			if bytes.HasPrefix(tail, spool.EncodeRecord(row(5))) {
				want = append(want, "r_5")
			}
			if ids := idsOf(got); !slices.Equal(ids, want) {
				t.Fatalf("after the torn write read %v, want %v", ids, want)
			}
			st := s.Stats()
			// Zeros are what a prepared segment holds past its records:
			// cut, but not a torn record.
			zeros := !slices.ContainsFunc(tail, func(c byte) bool { return c != 0 })
			if st.Rows != int64(len(want)) || (st.TruncatedBytes <= 0) != zeros {
				t.Errorf("stats = %+v, want %d rows and truncated bytes unless the tail is zeros", st, len(want))
			}
			if fi, _ := os.Stat(seg); fi.Size() >= good.Size() {
				t.Errorf("torn tail not cut: %d bytes, was %d", fi.Size(), good.Size())
			}
			// Appending and reading go on past the cut.
			if err := s.Append(row(6)); err != nil {
				t.Fatal(err)
			}
			got, _ = readAll(t, s)
			if ids := idsOf(got); !slices.Equal(ids, append(want, "r_6")) {
				t.Errorf("after a new append read %v", ids)
			}
		})
	}
}

// The SIGKILL tests run a child: this test binary, re-executed with
// killEnv naming the spool directory. TestMain sends it to killChild.
const (
	killEnv  = "AGENTMARKET_TEST_SPOOL_KILL_DIR"
	killMode = "AGENTMARKET_TEST_SPOOL_KILL_MODE"
	killRows = 2000
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(killEnv); dir != "" {
		killChild(dir, os.Getenv(killMode))
		return
	}
	os.Exit(m.Run())
}

// killChild appends rows with no fsync at all (the sync interval is an
// hour) and dies by SIGKILL. In mode "self" it appends killRows rows from
// four goroutines and kills itself right after the last Append returns; in
// mode "stream" it appends until its parent kills it, printing each id
// after its Append returned.
func killChild(dir, mode string) {
	s, err := spool.Open(dir, spool.Options{SyncInterval: time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; mode == "stream" || i < killRows/4; i++ {
				n := w*1_000_000 + i
				if err := s.Append(row(n)); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				if mode == "stream" {
					out.Lock()
					fmt.Fprintf(os.Stdout, "r_%d\n", n)
					out.Unlock()
				}
			}
		})
	}
	wg.Wait()
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func startChild(t *testing.T, dir, mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killEnv+"="+dir, killMode+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

func wasKilled(t *testing.T, err error) {
	t.Helper()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child: %v, want death by SIGKILL", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", err)
	}
}

func TestSpoolSurvivesSIGKILL(t *testing.T) {
	t.Run("killed by itself after the last append", func(t *testing.T) {
		dir := t.TempDir()
		wasKilled(t, startChild(t, dir, "self").Run())
		s := MustOpenSpool(t, dir, spool.Options{})
		got, _ := readAll(t, s)
		seen := map[string]bool{}
		for _, u := range got {
			if seen[u.ID] {
				t.Fatalf("row %s read twice", u.ID)
			}
			seen[u.ID] = true
		}
		for w := range 4 {
			for i := range killRows / 4 {
				if id := "r_" + strconv.Itoa(w*1_000_000+i); !seen[id] {
					t.Fatalf("row %s was appended before the SIGKILL and is gone (%d of %d rows survived)", id, len(seen), killRows)
				}
			}
		}
		if len(got) != killRows {
			t.Errorf("read %d rows, want %d", len(got), killRows)
		}
	})

	t.Run("killed by its parent mid-stream", func(t *testing.T) {
		dir := t.TempDir()
		cmd := startChild(t, dir, "stream")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Every id the child printed had its Append return before.
		var acked []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			acked = append(acked, sc.Text())
			if len(acked) == killRows {
				cmd.Process.Kill() // SIGKILL, while four goroutines keep appending
			}
		}
		wasKilled(t, cmd.Wait())
		// A line cut by the kill names a row whose Append returned too,
		// but its id may be truncated: drop it.
		if n := len(acked); n > 0 && !strings.HasPrefix(acked[n-1], "r_") {
			acked = acked[:n-1]
		}
		s := MustOpenSpool(t, dir, spool.Options{})
		got, _ := readAll(t, s)
		seen := map[string]bool{}
		for _, u := range got {
			if seen[u.ID] {
				t.Fatalf("row %s read twice", u.ID)
			}
			seen[u.ID] = true
		}
		for _, id := range acked {
			if !seen[id] {
				t.Fatalf("row %s was acknowledged to the caller and is gone", id)
			}
		}
		if len(got) < len(acked) {
			t.Fatalf("read %d rows, fewer than the %d acknowledged", len(got), len(acked))
		}
		t.Logf("%d rows acknowledged before the kill, %d in the spool after it (torn tail cut: %d bytes)", len(acked), len(got), s.Stats().TruncatedBytes)
	})
}

// benchRow is a row of the size the meter writes (~330 bytes encoded).
var benchRow = row(12345)

// BenchmarkSpoolAppend measures one Append of one row, the meter's hot path.
// Run: go test -run '^$' -bench SpoolAppend -benchmem ./metering/
func BenchmarkSpoolAppend(b *testing.B) {
	s := MustOpenSpool(b, b.TempDir(), spool.Options{})
	b.SetBytes(int64(len(spool.EncodeRecord(benchRow))))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Append(benchRow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpoolAppendParallel is the same from GOMAXPROCS*4 goroutines,
// as concurrent request handlers append.
func BenchmarkSpoolAppendParallel(b *testing.B) {
	for _, d := range []struct {
		name string
		opts spool.Options
	}{{"each", spool.Options{}}, {"interval", spool.Options{Durability: spool.SyncInterval}}} {
		b.Run(d.name, func(b *testing.B) {
			s := MustOpenSpool(b, b.TempDir(), d.opts)
			b.SetBytes(int64(len(spool.EncodeRecord(benchRow))))
			b.SetParallelism(16) // 32 appenders on 2 cores, as the meter's 32 connections
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Append(benchRow); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := (ru1.Utime.Nano() + ru1.Stime.Nano()) - (ru0.Utime.Nano() + ru0.Stime.Nano())
			b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkSpoolAppendLatency reports the latency percentiles of single
// appends while the group commit fsyncs behind them (the tail the meter's
// p99 sees).
func BenchmarkSpoolAppendLatency(b *testing.B) {
	s := MustOpenSpool(b, b.TempDir(), spool.Options{})
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := s.Append(benchRow); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50-ns", 0.50}, {"p99-ns", 0.99}, {"p99.9-ns", 0.999}} {
		b.ReportMetric(float64(lat[int(p.q*float64(len(lat)-1))].Nanoseconds()), p.name)
	}
}

// A segment damaged after Open checked it (a disk error) costs the
// rest of that segment, counted in CorruptBytes, and shipping goes on.
func TestSpoolSkipsASegmentDamagedLater(t *testing.T) {
	dir := t.TempDir()
	s := MustOpenSpool(t, dir, spool.Options{SegmentSize: 2 << 10})
	for i := range 40 {
		if err := s.Append(row(i)); err != nil {
			t.Fatal(err)
		}
	}
	segs := segments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	rec := len(spool.EncodeRecord(row(0)))
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xff}, int64(rec+rec/2)) // inside the second record
	f.Close()
	got, _ := readAll(t, s)
	ids := idsOf(got)
	if len(ids) == 0 || ids[0] != "r_0" || slices.Contains(ids, "r_1") || !slices.Contains(ids, "r_39") {
		t.Fatalf("read %v: want r_0, then the rows after the damaged segment", ids)
	}
	if st := s.Stats(); st.CorruptBytes <= 0 {
		t.Errorf("stats = %+v, want corrupt bytes counted", st)
	}
}

// TestSpoolRoundTripTags: tagged rows (record version 4, wrapping versions
// 1 to 3, 5 and 6) read back whole, beside untagged ones, whose records are the
// versions they always were: spools written before tags read as before.
func TestSpoolRoundTripTags(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{})
	want := []metering.Usage{row(1), row(2), row(3), row(4), row(5), row(6), row(7), row(8)}
	tags := agentmarket.Tags(`{"project":"kyc","team":"payments"}`)
	want[0].Tags = tags
	want[1].Tags, want[1].Pending = tags, &metering.PendingBill{Key: "task-9", Cum: metering.Counters{InputTokens: 10}}
	want[2].Tags, want[2].Binds = `{"team":"risk"}`, &metering.Binding{ParentListingID: "lst_p"}
	at := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	sent := &metering.Sent{MessageID: "m-1", Digest: "ab12", ClaimID: "snd_1", ClaimedAt: at, HeldUntil: at, ExpiresAt: at.Add(time.Hour), Done: true}
	want[4].Tags, want[4].Sent, want[4].Binds = tags, sent, &metering.Binding{ParentListingID: "lst_q"}
	want[5].Sent = sent
	want[6].Lost = true
	want[7].Tags, want[7].Lost = tags, true
	if err := s.Append(want...); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, s)
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if w := storetest.Stored(want[i]); !reflect.DeepEqual(got[i], w) {
			t.Errorf("row %d\n got  %+v\n want %+v", i, got[i], w)
		}
	}
	// The version bytes: untagged rows keep theirs, tagged ones wrap them.
	for _, tc := range []struct {
		u    metering.Usage
		want []byte
	}{{want[3], []byte{1}}, {want[0], []byte{4, 1}}, {want[1], []byte{4, 2}}, {want[2], []byte{4, 3}}, {want[4], []byte{4, 5}}, {want[5], []byte{5}},
		{want[6], []byte{6}}, {want[7], []byte{4, 6}}} {
		if rec := spool.EncodeRecord(tc.u); !bytes.Equal(rec[8:8+len(tc.want)], tc.want) {
			t.Errorf("row %s: version bytes %v, want %v", tc.u.ID, rec[8:8+len(tc.want)], tc.want)
		}
	}
}

// TestSpoolDurability: with SyncEach (the default) an Append returns only
// once a sync covers its rows, and concurrent Appends share syncs (group
// commit); with SyncInterval it returns after the write, and the rows are
// synced within the interval.
func TestSpoolDurability(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{})
	if err := s.Append(row(1)); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.SyncedRows != 1 || st.Syncs == 0 {
		t.Fatalf("after one Append: %+v, want it synced", st)
	}
	const writers, each = 32, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Append(row(2 + w*each + i)); err != nil {
					t.Error(err)
					return
				}
				if st := s.Stats(); st.SyncedRows+writers < st.Appended {
					// Every writer but this one may have appended after its
					// row, not more: this row is synced.
					t.Errorf("an Append returned before its row was synced: %+v", st)
					return
				}
				if w == 0 && i%10 == 0 {
					// What an Append returned for is readable at once (its
					// round wrote it before syncing).
					var got []metering.Usage
					c := s.Acked()
					for {
						n := len(got)
						var err error
						if got, c, err = s.Read(c, 97, got); err != nil || len(got) == n {
							break
						}
					}
					if !slices.Contains(idsOf(got), row(2+i).ID) {
						t.Errorf("row %s not readable after its Append returned", row(2+i).ID)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.SyncedRows != st.Appended || st.Appended != 1+writers*each {
		t.Errorf("after the writers: %+v", st)
	}
	if st.Syncs >= st.Appended {
		t.Errorf("%d syncs for %d Appends: no group commit", st.Syncs, st.Appended)
	}
	if st.Writes > st.Syncs {
		t.Errorf("%d writes for %d syncs: the rounds' records were not written together", st.Writes, st.Syncs)
	}
	t.Logf("%d appends, %d syncs, %d writes", st.Appended, st.Syncs, st.Writes)

	iv := MustOpenSpool(t, t.TempDir(), spool.Options{Durability: spool.SyncInterval, SyncInterval: 20 * time.Millisecond})
	if err := iv.Append(row(1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for iv.Stats().SyncedRows != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("SyncInterval: the row was not synced within 5 s: %+v", iv.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
