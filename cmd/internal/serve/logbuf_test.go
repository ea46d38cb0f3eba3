package serve

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Lines logged to a file are written together, in order, within
// logFlushEvery, all of them by the flush at the end; a writer that is not
// a file gets each line at once.
func TestLogLinesBufferedForFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, flush := bufferedLog(f)
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var want strings.Builder
	for i := range 3 {
		line := strings.Repeat("x", i) + "line\n"
		w.Write([]byte(line))
		want.WriteString(line)
	}
	if got := read(); got != "" {
		t.Logf("written before the flush interval: %q (the machine was slow)", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for read() != want.String() {
		if time.Now().After(deadline) {
			t.Fatalf("after the flush interval the file holds %q, want %q", read(), want.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// More than the buffer holds is written as it fills; the rest at the end.
	big := strings.Repeat("y", 1000) + "\n"
	for range 2 * logBufferBytes / len(big) {
		w.Write([]byte(big))
		want.WriteString(big)
	}
	if got := len(read()); got <= len(want.String())-logBufferBytes-len(big) {
		t.Errorf("%d bytes written with %d logged: a full buffer was not written", got, len(want.String()))
	}
	flush()
	if got := read(); got != want.String() {
		t.Fatalf("after the final flush the file holds %d bytes, want %d", len(got), len(want.String()))
	}
	w.Write([]byte("after\n"))
	if got := read(); !strings.HasSuffix(got, "after\n") {
		t.Errorf("a line after the final flush is not written at once")
	}

	var buf bytes.Buffer
	w, flush = bufferedLog(&buf)
	w.Write([]byte("now\n"))
	if buf.String() != "now\n" {
		t.Errorf("a buffer writer got %q, want the line at once", buf.String())
	}
	flush()
}
