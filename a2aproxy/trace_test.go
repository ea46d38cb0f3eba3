package a2aproxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestTraceparent(t *testing.T) {
	in := parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if in.traceID != "4bf92f3577b34da6a3ce929d0e0e4736" || in.spanID == "00f067aa0ba902b7" || len(in.spanID) != 16 {
		t.Fatalf("kept trace %+v", in)
	}
	if got := in.child(); got[:36] != "00-4bf92f3577b34da6a3ce929d0e0e4736-" || got[len(got)-3:] != "-01" {
		t.Fatalf("child %s", got)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		tc := parseTraceparent(bad)
		if len(tc.traceID) != 32 || tc.traceID == "00000000000000000000000000000000" || tc.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%q: trace %q, want a fresh one", bad, tc.traceID)
		}
	}
}

// TestTraceparentOutlivesItsRequest: the trace read from a request's
// header is still that request's after the connection carried another one
// (Fiber's header strings alias fasthttp's buffers, which the next request
// on the connection overwrites), as a stream settled after its buyer left
// and a cascade of cancels need it to be.
func TestTraceparentOutlivesItsRequest(t *testing.T) {
	var mu sync.Mutex
	var kept []traceContext
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/", func(c *fiber.Ctx) error {
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, parseTraceparent(c.Get("traceparent")))
		return nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	defer app.Shutdown()
	ids := []string{"4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"}
	hc := &http.Client{Transport: &http.Transport{}} // one keep-alive connection for both
	for _, id := range ids {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("traceparent", "00-"+id+"-00f067aa0ba902b7-01")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ids {
		if kept[i].traceID != id {
			t.Errorf("request %d: trace %q, want %q", i, kept[i].traceID, id)
		}
	}
}

// traceparentCases are headers and whether the W3C Trace Context rules
// keep their trace id, with the flags carried on when they do.
var traceparentCases = []struct {
	h     string
	kept  bool
	flags string
}{
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, "01"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, "00"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", true, "03"}, // Level 2's random flag
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", true, "01"},
	{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", true, "01"}, // a later version's flags: sampled kept
	{"fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff-x-y", true, "03"},
	{"", false, ""},
	{"garbage", false, ""},
	{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, ""},
	{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, ""},
	{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", false, ""}, // reserved flag bits in version 00
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-10", false, ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false, ""},
	{"zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, ""},
	{"0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false, ""},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", false, ""},
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false, ""},
}

// TestTraceparentW3C: the meter's own reading of traceparent keeps the
// trace id exactly when the OpenTelemetry SDK's W3C propagator (what the
// meter reads it with when it traces) does, and carries on the flags the
// SDK keeps.
func TestTraceparentW3C(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range traceparentCases {
		tc := parseTraceparent(c.h)
		if kept := tc.traceID == id; kept != c.kept || len(tc.traceID) != 32 || tc.traceID == "00000000000000000000000000000000" {
			t.Errorf("%q: trace %q, want kept %v", c.h, tc.traceID, c.kept)
		}
		if c.kept && tc.flags != c.flags {
			t.Errorf("%q: flags %q, want %q", c.h, tc.flags, c.flags)
		}
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{"traceparent": c.h}))
		if sc.IsValid() != c.kept || c.kept && (sc.TraceID().String() != id || sc.TraceFlags().String() != c.flags) {
			t.Errorf("%q: the SDK's propagator reads %v (flags %s), the case says kept %v flags %q", c.h, sc.TraceID(), sc.TraceFlags(), c.kept, c.flags)
		}
	}
}
