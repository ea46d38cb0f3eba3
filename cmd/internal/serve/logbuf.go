package serve

import (
	"io"
	"os"
	"sync"
	"time"
)

// The meter logs a line for every call. Written straight to a file (the
// process's stdout, a log file) each is a write(2) of its own, about 2 µs
// of CPU on this project's machines, a fifth of what the log line costs; a
// lineBuffer gathers the lines and writes them together, at most
// logFlushEvery after the first or when logBufferBytes are waiting. A
// crash of the process loses at most those last lines (never usage: the
// call's row is in the spool). Writers that are not files (tests'
// buffers, pipes the caller reads line by line) get each line at once.
const (
	logFlushEvery  = 100 * time.Millisecond
	logBufferBytes = 64 << 10
)

// lineBuffer is an io.Writer that batches whole log lines (each Write is
// one line from slog's handler) into a file.
type lineBuffer struct {
	out io.Writer

	mu      sync.Mutex
	buf     []byte
	pending bool // a flush is scheduled
	closed  bool
	timer   *time.Timer
}

// bufferedLog returns out wrapped in a lineBuffer when it is a file, and
// the function that writes what is buffered and stops buffering (out
// itself and a no-op otherwise).
func bufferedLog(out io.Writer) (io.Writer, func()) {
	if _, ok := out.(*os.File); !ok {
		return out, func() {}
	}
	b := &lineBuffer{out: out}
	b.timer = time.AfterFunc(time.Hour, b.flush)
	b.timer.Stop()
	return b, b.close
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.out.Write(p)
	}
	if len(b.buf)+len(p) > logBufferBytes {
		b.writeLocked()
	}
	b.buf = append(b.buf, p...)
	if !b.pending {
		b.pending = true
		b.timer.Reset(logFlushEvery)
	}
	return len(p), nil
}

// flush writes what is buffered (the timer's).
func (b *lineBuffer) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = false
	b.writeLocked()
}

// writeLocked writes the buffer out; b.mu is held. A failed write drops
// the lines: a log that cannot be written must not stop the calls.
func (b *lineBuffer) writeLocked() {
	if len(b.buf) > 0 {
		_, _ = b.out.Write(b.buf)
		b.buf = b.buf[:0]
	}
}

// close writes what is buffered; later lines are written at once.
func (b *lineBuffer) close() {
	b.timer.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writeLocked()
	b.closed = true
}
