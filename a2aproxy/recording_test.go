package a2aproxy_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// failingRecorder is a spool that cannot take rows: its fsync failed
// (err), or each append fails (recordErr).
type failingRecorder struct{ err, recordErr error }

func (f *failingRecorder) Err() error                                   { return f.err }
func (f *failingRecorder) Record(context.Context, metering.Usage) error { return f.recordErr }

// TestRefusesCallsItCannotRecord: a meter whose spool cannot take rows
// forwards no call (it could not bill it): -32057, HTTP 503, before
// anything else is looked at; and it says so (RecordingErr, which /readyz
// reports). A single failed append does the same for a while.
func TestRefusesCallsItCannotRecord(t *testing.T) {
	call := func(p *a2aproxy.Proxy) (int, string) {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		p.Mount(app)
		req := httptest.NewRequest("POST", "/a2a/lst_x", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`))
		req.Header.Set("Authorization", "Bearer amk_whatever")
		res, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))

	rec := &failingRecorder{err: errors.New("spool: fsync failed")}
	p := &a2aproxy.Proxy{Recorder: rec, Clock: clock}
	p.Init()
	if status, body := call(p); status != 503 || !strings.Contains(body, `"code":-32057`) {
		t.Errorf("a failed spool: %d %s, want 503 and -32057", status, body)
	}
	if p.RecordingErr() == nil {
		t.Error("RecordingErr is nil with a failed spool")
	}

	rec = &failingRecorder{recordErr: errors.New("no space left on device")}
	p = &a2aproxy.Proxy{Recorder: rec, Ledger: countingLedger{}, Clock: clock}
	p.Init()
	if err := p.RecordingErr(); err != nil {
		t.Fatalf("RecordingErr before any failure: %v", err)
	}
	_ = p.FinishSend(context.Background(), "lst_x", "task-1", &listings.Plan{Currency: "usd"}, nil)
	if p.RecordingErr() == nil {
		t.Error("RecordingErr is nil right after a row could not be recorded")
	}
	if status, body := call(p); status != 503 || !strings.Contains(body, `"code":-32057`) {
		t.Errorf("after a failed append: %d %s, want 503 and -32057", status, body)
	}
}

// TestHeldBackWhileProjectionsLag: while more spooled rows than
// MaxUnsettled wait for their projections, calls wait (UnsettledWait at
// most) and are then refused with -32058, HTTP 503; once the projections
// catch up, the wait ends (the call goes on to its other checks: here, a
// key that does not exist).
func TestHeldBackWhileProjectionsLag(t *testing.T) {
	var lag atomic.Int64
	lag.Store(10_000)
	p := &a2aproxy.Proxy{Recorder: &failingRecorder{}, Auth: noKeys{}, Clock: agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		Unsettled: func() int { return int(lag.Load()) }, Limits: a2aproxy.Limits{MaxUnsettled: 100, UnsettledWait: 50 * time.Millisecond}}
	p.Init()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	p.Mount(app)
	call := func() (int, string) {
		req := httptest.NewRequest("POST", "/a2a/lst_x", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`))
		req.Header.Set("Authorization", "Bearer amk_whatever")
		res, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := call(); status != 503 || !strings.Contains(body, `"code":-32058`) {
		t.Errorf("while the projections lag: %d %s, want 503 and -32058", status, body)
	}
	go func() { time.Sleep(20 * time.Millisecond); lag.Store(5) }()
	p.Limits.UnsettledWait = 5 * time.Second
	if status, body := call(); status != 401 {
		t.Errorf("once they caught up: %d %s, want the next check (401 for an unknown key)", status, body)
	}
}

// TestPacedWhileProjectionsLag: while more than half of MaxUnsettled rows
// wait for their projections, a call is delayed in proportion to the lag
// (the full 10 ms at MaxUnsettled) and then goes on, counted in
// calls_paced_total; at half or less it is not paced, and past
// MaxUnsettled it is held back instead.
func TestPacedWhileProjectionsLag(t *testing.T) {
	var lag atomic.Int64
	reg := prometheus.NewRegistry()
	p := &a2aproxy.Proxy{Recorder: &failingRecorder{}, Auth: noKeys{}, Clock: agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		Unsettled: func() int { return int(lag.Load()) }, Limits: a2aproxy.Limits{MaxUnsettled: 100, UnsettledWait: 50 * time.Millisecond},
		Metrics: a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{})}
	p.Init()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	p.Mount(app)
	call := func() (int, time.Duration) {
		req := httptest.NewRequest("POST", "/a2a/lst_x", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`))
		req.Header.Set("Authorization", "Bearer amk_whatever")
		start := time.Now()
		res, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, time.Since(start)
	}
	counted := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	lag.Store(50)
	if status, _ := call(); status != 401 || counted("agentmarket_meter_calls_paced_total") != 0 {
		t.Errorf("at half the limit: %d, paced %v; want the next check (401) and no pacing", status, counted("agentmarket_meter_calls_paced_total"))
	}
	lag.Store(100)
	if status, took := call(); status != 401 || took < 10*time.Millisecond {
		t.Errorf("at the limit: %d after %v; want the next check (401) after at least 10 ms", status, took)
	}
	if n := counted("agentmarket_meter_calls_paced_total"); n != 1 {
		t.Errorf("calls_paced_total = %v, want 1", n)
	}
	lag.Store(101)
	if status, _ := call(); status != 503 || counted("agentmarket_meter_calls_held_back_total") != 1 {
		t.Errorf("past the limit: %d, held back %v; want 503 after being held back once", status, counted("agentmarket_meter_calls_held_back_total"))
	}
}

// noKeys knows no key.
type noKeys struct{}

func (noKeys) Authenticate(context.Context, string) (agentmarket.Actor, error) {
	return agentmarket.Actor{}, agentmarket.Errorf(agentmarket.Unauthorized, "unknown_key", "unknown key")
}
