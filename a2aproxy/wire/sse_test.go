package wire_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// readAll reads every event of a stream.
func readAll(tb testing.TB, r io.Reader) ([]wire.Event, error) {
	tb.Helper()
	sr := wire.NewSSEReader(r)
	var evs []wire.Event
	for {
		ev, err := sr.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if len(evs) > 10000 {
			tb.Fatal("no end")
		}
	}
}

type wantEvent struct {
	data       string // "<nil>" for no data
	raw        string
	id, typ    string
	comment    bool
	incomplete bool
}

func toWant(ev wire.Event) wantEvent {
	data := "<nil>"
	if ev.Data != nil {
		data = string(ev.Data)
	}
	return wantEvent{data: data, raw: string(ev.Raw), id: ev.ID, typ: ev.Type, comment: ev.Comment, incomplete: ev.Incomplete}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []wantEvent
	}{
		{
			name: "one event",
			in:   "data: {\"a\":1}\n\n",
			want: []wantEvent{{data: `{"a":1}`, raw: "data: {\"a\":1}\n\n"}},
		},
		{
			name: "CRLF and several events",
			in:   "data: one\r\n\r\ndata: two\r\n\r\n",
			want: []wantEvent{{data: "one", raw: "data: one\r\n\r\n"}, {data: "two", raw: "data: two\r\n\r\n"}},
		},
		{
			name: "bare CR line ends",
			in:   "data: one\r\rdata: two\r\r",
			want: []wantEvent{{data: "one", raw: "data: one\r\r"}, {data: "two", raw: "data: two\r\r"}},
		},
		{
			name: "multi-line data, no space after the colon, fields",
			in:   "id: 7\nevent: update\ndata:line1\ndata: line2\ndata\nretry: 100\n\n",
			want: []wantEvent{{data: "line1\nline2\n", raw: "id: 7\nevent: update\ndata:line1\ndata: line2\ndata\nretry: 100\n\n", id: "7", typ: "update"}},
		},
		{
			name: "a comment keep-alive, then an event with a comment in it",
			in:   ": keep-alive\n\n: note\ndata: x\n\n",
			want: []wantEvent{{data: "<nil>", raw: ": keep-alive\n\n", comment: true}, {data: "x", raw: ": note\ndata: x\n\n"}},
		},
		{
			name: "extra blank lines travel with the next event",
			in:   "\n\ndata: a\n\n\ndata: b\n\n",
			want: []wantEvent{{data: "a", raw: "\n\ndata: a\n\n"}, {data: "b", raw: "\ndata: b\n\n"}},
		},
		{
			name: "an id-only block has no data",
			in:   "id: 5\n\n",
			want: []wantEvent{{data: "<nil>", raw: "id: 5\n\n", id: "5"}},
		},
		{
			name: "an empty data field is empty data, not none",
			in:   "data:\n\n",
			want: []wantEvent{{data: "", raw: "data:\n\n"}},
		},
		{
			name: "a byte order mark opens the stream",
			in:   "\xEF\xBB\xBFdata: x\n\n",
			want: []wantEvent{{data: "x", raw: "\xEF\xBB\xBFdata: x\n\n"}},
		},
		{
			name: "an event cut off by the end of the stream",
			in:   "data: a\n\ndata: b",
			want: []wantEvent{{data: "a", raw: "data: a\n\n"}, {data: "b", raw: "data: b", incomplete: true}},
		},
		{
			name: "trailing blank lines are returned too",
			in:   "data: a\n\n\n",
			want: []wantEvent{{data: "a", raw: "data: a\n\n"}, {data: "<nil>", raw: "\n", incomplete: true}},
		},
		{
			name: "unknown fields and ids with NUL are ignored",
			in:   "foo: bar\nid: a\x00b\ndata: z\n\n",
			want: []wantEvent{{data: "z", raw: "foo: bar\nid: a\x00b\ndata: z\n\n"}},
		},
		{name: "empty stream", in: "", want: nil},
	}
	for _, tc := range tests {
		for _, reader := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{
			{"whole", func(r io.Reader) io.Reader { return r }},
			{"byte by byte", iotest.OneByteReader},
			{"half", iotest.HalfReader},
		} {
			t.Run(tc.name+"/"+reader.name, func(t *testing.T) {
				evs, err := readAll(t, reader.wrap(strings.NewReader(tc.in)))
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				var got []wantEvent
				var raw bytes.Buffer
				for _, ev := range evs {
					raw.Write(ev.Raw)
					if reader.name != "whole" && strings.Trim(string(ev.Raw), "\r\n") == "" {
						continue // the LF of a CRLF split by a read may end up alone
					}
					got = append(got, toWant(ev))
				}
				want := tc.want
				if reader.name != "whole" {
					// Where a read splits "\r\n", the event ends at the CR
					// and the LF opens the next one: compare all but Raw.
					want = nil
					for _, w := range tc.want {
						if strings.Trim(w.raw, "\r\n") != "" {
							w.raw = ""
							want = append(want, w)
						}
					}
					for i := range got {
						got[i].raw = ""
						got[i].incomplete = false
					}
					for i := range want {
						want[i].incomplete = false
					}
				}
				if len(got) != len(want) {
					t.Fatalf("got %d events %+v, want %d %+v", len(got), got, len(want), want)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("event %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
					}
				}
				if raw.String() != tc.in {
					t.Errorf("the Raws do not add up to the stream: %q", raw.String())
				}
			})
		}
	}
}

// Events must come out as soon as their blank line is in, not when more
// input arrives: the pipe below hands over each event in pieces, with
// pauses, and the next piece is written only once the reader has returned
// the event (a reader that waited for more would time out).
func TestSSEReaderReturnsEachEventAsItArrives(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	events := make(chan wire.Event)
	errc := make(chan error, 1)
	go func() {
		sr := wire.NewSSEReader(pr)
		for {
			ev, err := sr.Next()
			if err != nil {
				errc <- err
				close(events)
				return
			}
			events <- ev
		}
	}()
	write := func(s string) {
		t.Helper()
		if _, err := pw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	expectNone := func() {
		t.Helper()
		select {
		case ev := <-events:
			t.Fatalf("event %q returned before its blank line", ev.Raw)
		case <-time.After(30 * time.Millisecond):
		}
	}
	expect := func(raw, data string) {
		t.Helper()
		select {
		case ev := <-events:
			if string(ev.Raw) != raw || string(ev.Data) != data {
				t.Fatalf("got raw %q data %q, want raw %q data %q", ev.Raw, ev.Data, raw, data)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("event %q not returned once its blank line was written", raw)
		}
	}

	write(`data: {"jsonrpc":"2.0",`)
	write(`"id":1,"result":{}}`)
	write("\n")
	expectNone()
	write("\n")
	expect("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", `{"jsonrpc":"2.0","id":1,"result":{}}`)

	// CRLF split across writes; the final LF comes late and must not hold
	// the event back: it is carried by the next event.
	write("data: two\r")
	write("\n\r")
	expect("data: two\r\n\r", "two")
	write("\n: ping\r\n")
	expectNone()
	write("\r\n")
	expect("\n: ping\r\n\r\n", "")

	write("data: a\ndata: b\n\n")
	expect("data: a\ndata: b\n\n", "a\nb")

	pw.Close()
	select {
	case err := <-errc:
		if err != io.EOF {
			t.Fatalf("err = %v, want io.EOF", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no end of stream")
	}
}

// An event handed out stays intact while the reader goes on: the proxy
// relays one event while the next is read.
func TestSSEEventsOwnTheirBytes(t *testing.T) {
	sr := wire.NewSSEReader(strings.NewReader("data: first\n\ndata: a\ndata: b\n\ndata: second!\n\n"))
	first, _ := sr.Next()
	multi, _ := sr.Next()
	if _, err := sr.Next(); err != nil {
		t.Fatal(err)
	}
	if string(first.Raw) != "data: first\n\n" || string(first.Data) != "first" || string(multi.Data) != "a\nb" {
		t.Errorf("earlier events changed: %q %q %q", first.Raw, first.Data, multi.Data)
	}
	first.Data = append(first.Data, "XX"...)
	if string(first.Raw) != "data: first\n\n" {
		t.Errorf("appending to Data wrote into Raw: %q", first.Raw)
	}
}

func TestSSEReaderErrors(t *testing.T) {
	sr := wire.NewSSEReader(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\ndata: ok\n\n"))
	sr.MaxEventBytes = 50
	if _, err := sr.Next(); !errors.Is(err, wire.ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
	if _, err := sr.Next(); !errors.Is(err, wire.ErrEventTooLarge) {
		t.Fatalf("the error is not sticky: %v", err)
	}

	boom := errors.New("connection reset")
	sr = wire.NewSSEReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	ev, err := sr.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("first event: %q %v", ev.Data, err)
	}
	ev, err = sr.Next()
	if err != nil || !ev.Incomplete || string(ev.Raw) != "data: b" {
		t.Fatalf("cut-off event: %+v %v", ev, err)
	}
	if _, err := sr.Next(); err != boom {
		t.Fatalf("err = %v, want the reader's error", err)
	}
}

func TestWriteEvent(t *testing.T) {
	tests := []struct {
		data, want string
	}{
		{`{"a":1}`, "data: {\"a\":1}\n\n"},
		{"a\nb", "data: a\ndata: b\n\n"},
		{"a\r\nb\rc\n", "data: a\ndata: b\ndata: c\ndata: \n\n"},
		{"", "data: \n\n"},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		if err := wire.WriteEvent(&buf, []byte(tc.data)); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tc.want {
			t.Errorf("WriteEvent(%q) wrote %q, want %q", tc.data, buf.String(), tc.want)
		}
		// What is written reads back as the same data (line breaks
		// normalised to "\n").
		ev, err := wire.NewSSEReader(&buf).Next()
		wantData := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(tc.data)
		if err != nil || string(ev.Data) != wantData {
			t.Errorf("read back %q (%v), want %q", ev.Data, err, wantData)
		}
	}
	var w countingWriter
	if err := wire.WriteEvent(&w, []byte("a\nb\nc")); err != nil || w.writes != 1 {
		t.Errorf("WriteEvent used %d writes (%v), want 1", w.writes, err)
	}
}

type countingWriter struct{ writes int }

func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return len(p), nil }
