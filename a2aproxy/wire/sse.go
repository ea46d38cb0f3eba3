package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Event is one Server-Sent Events block: the lines up to and including
// the blank line that ends it.
type Event struct {
	// Data is the event's data lines joined with "\n"; nil when the block
	// has no data field (comments, a lone id or retry).
	Data []byte
	// Raw is the exact bytes of the block, ending with its blank line, to
	// relay unchanged. Blank lines that end no block (a second blank line
	// in a row) are kept at the start of the next block's Raw, so the
	// Raws of all events concatenate to the whole stream.
	Raw     []byte
	ID      string // the id field, if any
	Type    string // the event field, if any
	Comment bool   // the block holds only comment (":") lines
	// Incomplete marks the bytes left when the stream ended (or failed)
	// without the blank line a block needs. The SSE standard drops such a
	// block; it is returned so that nothing is lost in relay.
	Incomplete bool
}

// DefaultMaxEventBytes bounds one event unless SSEReader.MaxEventBytes says
// otherwise.
const DefaultMaxEventBytes = 4 << 20

// ErrEventTooLarge is returned when a block exceeds MaxEventBytes.
var ErrEventTooLarge = errors.New("wire: SSE event too large")

// SSEReader reads Server-Sent Events one by one, as they arrive: Next
// returns as soon as the blank line ending an event has been read, never
// waiting for more input. Lines may end in "\n", "\r\n" or "\r".
//
// Each Event owns its slices: they stay valid after later calls to Next.
type SSEReader struct {
	// MaxEventBytes bounds the bytes of one block (0 means
	// DefaultMaxEventBytes).
	MaxEventBytes int

	br        *bufio.Reader
	raw       []byte // the block being read (reused between events)
	data      []byte // its data lines, joined (reused)
	dataLines int
	dataAt    [2]int // where the one data line's value lies in raw
	pendingCR bool   // the last line ended in "\r": a "\n" next belongs to it
	started   bool
	err       error
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	// Lines longer than the buffer are gathered in raw, so the buffer
	// bounds no event; a small one is memory each held stream saves.
	return &SSEReader{br: bufio.NewReaderSize(r, 1024)}
}

// Next returns the next event. At the end of the stream it returns io.EOF
// (or the reader's error), after any incomplete block.
func (r *SSEReader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.raw, r.data, r.dataLines = r.raw[:0], r.data[:0], 0
	var ev Event
	lines, comments := 0, 0
	for {
		start, end, err := r.readLine()
		if err != nil {
			r.err = err
			if len(r.raw) == 0 || err == ErrEventTooLarge {
				return Event{}, err
			}
			if end > start {
				r.field(&ev, start, end, &lines, &comments)
			}
			ev.Incomplete = true
			return r.finish(ev, lines, comments), nil
		}
		if end == start { // a blank line
			if lines+comments > 0 {
				return r.finish(ev, lines, comments), nil
			}
			continue
		}
		r.field(&ev, start, end, &lines, &comments)
	}
}

// field interprets the line raw[start:end].
func (r *SSEReader) field(ev *Event, start, end int, lines, comments *int) {
	line := r.raw[start:end]
	if !r.started {
		r.started = true
		if bytes.HasPrefix(line, []byte("\xEF\xBB\xBF")) { // a byte order mark may open the stream
			line = line[3:]
			start += 3
		}
	}
	if len(line) > 0 && line[0] == ':' {
		*comments++
		return
	}
	*lines++
	name, value, vstart := line, []byte(nil), end
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value, vstart = line[:i], line[i+1:], start+i+1
		if len(value) > 0 && value[0] == ' ' {
			value, vstart = value[1:], vstart+1
		}
	}
	switch string(name) {
	case "data":
		if r.dataLines > 0 {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.dataLines++
		r.dataAt = [2]int{vstart, vstart + len(value)}
	case "event":
		ev.Type = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			ev.ID = string(value)
		}
	}
}

// finish gives the event its own copy of the block.
func (r *SSEReader) finish(ev Event, lines, comments int) Event {
	ev.Raw = bytes.Clone(r.raw)
	switch {
	case r.dataLines == 1: // the common case: data is a slice of Raw, no copy
		ev.Data = ev.Raw[r.dataAt[0]:r.dataAt[1]:r.dataAt[1]]
	case r.dataLines > 1:
		ev.Data = bytes.Clone(r.data)
	}
	ev.Comment = lines == 0 && comments > 0
	return ev
}

// readLine appends the next line, with its ending, to r.raw and returns
// where its content lies there. It blocks only while no line end has
// arrived. On error, raw[start:end] is the unterminated rest.
func (r *SSEReader) readLine() (start, end int, err error) {
	limit := r.MaxEventBytes
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	start = len(r.raw)
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return start, len(r.raw), err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.pendingCR {
			r.pendingCR = false
			if buf[0] == '\n' { // the second half of a "\r\n" split across reads
				r.raw = append(r.raw, '\n')
				r.br.Discard(1)
				start = len(r.raw)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			r.raw = append(r.raw, buf...)
			r.br.Discard(len(buf))
			if len(r.raw) > limit {
				return start, len(r.raw), ErrEventTooLarge
			}
			continue
		}
		end = len(r.raw) + i
		n := i + 1
		if buf[i] == '\r' {
			if i+1 < len(buf) {
				if buf[i+1] == '\n' {
					n++
				}
			} else {
				// Whether "\n" follows has not arrived yet; do not wait for it.
				r.pendingCR = true
			}
		}
		r.raw = append(r.raw, buf[:n]...)
		r.br.Discard(n)
		if len(r.raw) > limit {
			return start, end, ErrEventTooLarge
		}
		return start, end, nil
	}
}

// WriteEvent writes data as one SSE event ("data: …" lines and a blank
// line) in a single Write, so the event reaches the writer whole. Line
// breaks in data ("\n", "\r\n", "\r") become separate data lines.
func WriteEvent(w io.Writer, data []byte) error {
	b := make([]byte, 0, len(data)+8)
	for {
		b = append(b, "data: "...)
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, '\n')
	_, err := w.Write(b)
	return err
}
