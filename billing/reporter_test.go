package billing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func reportCall(contractID string, kind billing.LineKind, qty string, w billing.Period) string {
	return "ReportUsage " + itemID(contractID, kind) + " " + qty + " " + w.End.Add(-time.Second).Format(time.RFC3339) + " " +
		billing.UsageReportKey(contractID, kind, w)
}

func runOnce(t *testing.T, r *billing.Reporter, want int) {
	t.Helper()
	n, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if n != want {
		t.Fatalf("RunOnce reported %d, want %d", n, want)
	}
}

func wantWatermark(t *testing.T, e *env, contractID string, kind billing.LineKind, reported int64, through time.Time) {
	t.Helper()
	w, err := e.store.Watermark(context.Background(), contractID, kind, billing.MonthOf(through.Add(-time.Second)).Start)
	if err != nil {
		t.Fatal(err)
	}
	if w.Reported != reported || !w.Through.Equal(through) {
		t.Fatalf("%s watermark = %d through %s, want %d through %s", kind, w.Reported, w.Through, reported, through)
	}
}

func TestReporterReportsClosedWindows(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1") // at 10:17:42
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{InputTokens: 1_000_000, OutputTokens: 2_000, ComputeMs: 500, Tasks: 1})
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 59, 59), billing.Usage{InputTokens: 500_000, Tasks: 1})
	r := e.reporter()

	// 11:01: the 10:00 window has ended but is still settling.
	e.at(date(2026, 5, 3, 11, 1))
	runOnce(t, r, 0)
	wantCalls(t, e.prov.take())

	// 11:02: it is closed, and reported in full (the allowance is in the
	// provider's prices), at its last second, one report per kind.
	e.at(date(2026, 5, 3, 11, 2))
	runOnce(t, r, 4)
	w := period(date(2026, 5, 3, 10), date(2026, 5, 3, 11))
	wantCalls(t, e.prov.take(),
		reportCall("ctr_1", billing.LineInputTokens, "1500000", w),
		reportCall("ctr_1", billing.LineOutputTokens, "2000", w),
		reportCall("ctr_1", billing.LineCompute, "500", w),
		reportCall("ctr_1", billing.LineTasks, "2", w))
	wantWatermark(t, e, "ctr_1", billing.LineInputTokens, 1_500_000, date(2026, 5, 3, 11))

	// Nothing new: nothing sent, however often it runs.
	runOnce(t, r, 0)
	e.at(date(2026, 5, 3, 11, 59))
	runOnce(t, r, 0)
	wantCalls(t, e.prov.take())

	// A window without usage sends nothing but moves the watermark.
	e.at(date(2026, 5, 3, 12, 5))
	runOnce(t, r, 0)
	wantCalls(t, e.prov.take())
	wantWatermark(t, e, "ctr_1", billing.LineInputTokens, 1_500_000, date(2026, 5, 3, 12))

	// The next window reports only its own usage.
	e.use(t, "ctr_1", date(2026, 5, 3, 12, 10), billing.Usage{InputTokens: 42})
	e.at(date(2026, 5, 3, 13, 2))
	runOnce(t, r, 1)
	wantCalls(t, e.prov.take(), reportCall("ctr_1", billing.LineInputTokens, "42", period(date(2026, 5, 3, 12), date(2026, 5, 3, 13))))
	if got := e.prov.countedFor(itemID("ctr_1", billing.LineInputTokens)); got != 1_500_042 {
		t.Errorf("provider counted %d input tokens, want 1500042", got)
	}
}

// TestReporterExactlyOnceAcrossACrash: the provider accepted a report but
// the process died before marking it sent. The next run sends the same
// key and quantity again; the provider counts it once, and so does the
// watermark.
func TestReporterExactlyOnceAcrossACrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.attach(t, "ctr_1")
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{InputTokens: 1000})
	e.at(date(2026, 5, 3, 11, 2))
	w := period(date(2026, 5, 3, 10), date(2026, 5, 3, 11))
	call := reportCall("ctr_1", billing.LineInputTokens, "1000", w)

	e.store.crash.Store(true)
	n, err := e.reporter().RunOnce(ctx)
	if !errors.Is(err, errCrash) || n != 1 {
		t.Fatalf("RunOnce during the crash = %d, %v; want 1, the crash", n, err)
	}
	wantCalls(t, e.prov.take(), call)
	pending, err := e.store.PendingReports(ctx, "")
	if err != nil || len(pending) != 1 || pending[0].Quantity != 1000 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}

	// Restarted, with more usage meanwhile (in the next window): the
	// pending report goes out exactly as recorded, then the new window.
	e.store.crash.Store(false)
	e.use(t, "ctr_1", date(2026, 5, 3, 11, 30), billing.Usage{InputTokens: 5})
	e.at(date(2026, 5, 3, 12, 2))
	runOnce(t, e.reporter(), 2)
	wantCalls(t, e.prov.take(), call, reportCall("ctr_1", billing.LineInputTokens, "5", period(date(2026, 5, 3, 11), date(2026, 5, 3, 12))))
	if got := e.prov.countedFor(itemID("ctr_1", billing.LineInputTokens)); got != 1005 {
		t.Errorf("provider counted %d, want 1005", got)
	}
	wantWatermark(t, e, "ctr_1", billing.LineInputTokens, 1005, date(2026, 5, 3, 12))
	if pending, _ := e.store.PendingReports(ctx, ""); len(pending) != 0 {
		t.Errorf("still pending: %+v", pending)
	}
}

// TestReporterLostAnswer: the provider counted the report but its answer
// was lost; the report stays pending and is sent again, same key.
func TestReporterLostAnswer(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{Tasks: 3})
	e.at(date(2026, 5, 3, 11, 2))
	e.prov.set(func(p *fakeProvider) { p.loseAnswers = 1 })
	n, err := e.reporter().RunOnce(context.Background())
	if agentmarket.KindOf(err) != agentmarket.Unavailable || n != 0 {
		t.Fatalf("RunOnce = %d, %v; want 0, Unavailable", n, err)
	}
	call := reportCall("ctr_1", billing.LineTasks, "3", period(date(2026, 5, 3, 10), date(2026, 5, 3, 11)))
	wantCalls(t, e.prov.take(), call)
	runOnce(t, e.reporter(), 1)
	wantCalls(t, e.prov.take(), call)
	if got := e.prov.countedFor(itemID("ctr_1", billing.LineTasks)); got != 3 {
		t.Errorf("provider counted %d tasks, want 3", got)
	}
	wantWatermark(t, e, "ctr_1", billing.LineTasks, 3, date(2026, 5, 3, 11))
}

// TestReporterLateUsage: usage that reaches the store after its window was
// reported goes out with the next window.
func TestReporterLateUsage(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{OutputTokens: 100})
	e.at(date(2026, 5, 3, 11, 2))
	runOnce(t, e.reporter(), 1)
	e.prov.take()

	e.use(t, "ctr_1", date(2026, 5, 3, 10, 45), billing.Usage{OutputTokens: 30}) // late, in the reported window
	e.use(t, "ctr_1", date(2026, 5, 3, 11, 15), billing.Usage{OutputTokens: 7})
	e.at(date(2026, 5, 3, 12, 2))
	runOnce(t, e.reporter(), 1)
	wantCalls(t, e.prov.take(), reportCall("ctr_1", billing.LineOutputTokens, "37", period(date(2026, 5, 3, 11), date(2026, 5, 3, 12))))
	if got := e.prov.countedFor(itemID("ctr_1", billing.LineOutputTokens)); got != 137 {
		t.Errorf("provider counted %d, want 137", got)
	}
}

// TestReporterCatchesUpAcrossAMonthEnd: windows that closed while the
// reporter was down go out as one window per billing period, each period
// with its own usage.
func TestReporterCatchesUpAcrossAMonthEnd(t *testing.T) {
	e := newEnv(t)
	e.at(date(2026, 5, 31, 22, 10))
	e.attach(t, "ctr_1")
	e.use(t, "ctr_1", date(2026, 5, 31, 22, 30), billing.Usage{ComputeMs: 1000})
	e.use(t, "ctr_1", date(2026, 5, 31, 23, 59, 59), billing.Usage{ComputeMs: 1})
	e.use(t, "ctr_1", date(2026, 6, 1, 0, 0), billing.Usage{ComputeMs: 20})
	e.use(t, "ctr_1", date(2026, 6, 1, 2, 59, 59), billing.Usage{ComputeMs: 300})
	e.use(t, "ctr_1", date(2026, 6, 1, 3, 0), billing.Usage{ComputeMs: 4000}) // not closed yet
	e.at(date(2026, 6, 1, 3, 5))
	runOnce(t, e.reporter(), 2)
	wantCalls(t, e.prov.take(),
		reportCall("ctr_1", billing.LineCompute, "1001", period(date(2026, 5, 31, 22), date(2026, 6, 1))),
		reportCall("ctr_1", billing.LineCompute, "320", period(date(2026, 6, 1), date(2026, 6, 1, 3))))
	wantWatermark(t, e, "ctr_1", billing.LineCompute, 1001, date(2026, 6, 1))
	wantWatermark(t, e, "ctr_1", billing.LineCompute, 320, date(2026, 6, 1, 3))
}

// TestReporterRefusedReport: a report the provider refuses for good is
// marked failed and its quantity goes out with the next window.
func TestReporterRefusedReport(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.attach(t, "ctr_1")
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{Tasks: 2})
	e.at(date(2026, 5, 3, 11, 2))
	e.prov.set(func(p *fakeProvider) { p.refuse = 1 })
	runOnce(t, e.reporter(), 0)
	e.prov.take()
	failed, err := e.store.Reports(ctx, billing.ReportQuery{Status: billing.ReportFailed})
	if err != nil || len(failed) != 1 || failed[0].Quantity != 2 || failed[0].Error == "" {
		t.Fatalf("failed reports = %+v, %v", failed, err)
	}
	e.use(t, "ctr_1", date(2026, 5, 3, 11, 30), billing.Usage{Tasks: 1})
	e.at(date(2026, 5, 3, 12, 2))
	runOnce(t, e.reporter(), 1)
	wantCalls(t, e.prov.take(), reportCall("ctr_1", billing.LineTasks, "3", period(date(2026, 5, 3, 11), date(2026, 5, 3, 12))))
}

// TestReporterStopsWhenTheProviderIsDown: nothing is recorded as sent,
// and everything goes out once it is back.
func TestReporterStopsWhenTheProviderIsDown(t *testing.T) {
	e := newEnv(t)
	e.attach(t, "ctr_1")
	e.attach(t, "ctr_2")
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{Tasks: 1})
	e.use(t, "ctr_2", date(2026, 5, 3, 10, 30), billing.Usage{Tasks: 4})
	e.at(date(2026, 5, 3, 11, 2))
	e.prov.set(func(p *fakeProvider) { p.down = true })
	if _, err := e.reporter().RunOnce(context.Background()); agentmarket.KindOf(err) != agentmarket.Unavailable {
		t.Fatalf("RunOnce = %v, want Unavailable", err)
	}
	// It stopped at the first failure rather than trying every contract.
	if calls := e.prov.take(); len(calls) != 1 {
		t.Fatalf("calls while down: %v", calls)
	}
	e.prov.set(func(p *fakeProvider) { p.down = false })
	runOnce(t, e.reporter(), 2)
	if a, b := e.prov.countedFor(itemID("ctr_1", billing.LineTasks)), e.prov.countedFor(itemID("ctr_2", billing.LineTasks)); a != 1 || b != 4 {
		t.Errorf("counted %d and %d tasks, want 1 and 4", a, b)
	}
}

// TestReportersRacing: reporters running at once (two marketplace
// processes, or Detach during a run) report every unit once.
func TestReportersRacing(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) { testReportersRacing(t, newEnvOn(t, o.Open)) })
	}
}

func testReportersRacing(t *testing.T, e *env) {
	for _, id := range []string{"ctr_1", "ctr_2", "ctr_3"} {
		e.attach(t, id)
	}
	var want int64
	for h := 10; h < 14; h++ {
		for _, id := range []string{"ctr_1", "ctr_2", "ctr_3"} {
			e.use(t, id, date(2026, 5, 3, h, 30), billing.Usage{InputTokens: int64(h)})
		}
		want += int64(h)
	}
	errs := make(chan error, 8)
	for h := 11; h <= 14; h++ {
		e.at(date(2026, 5, 3, h, 2))
		for range 4 {
			go func() {
				_, err := e.reporter().RunOnce(context.Background())
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	runOnce(t, e.reporter(), 0)
	for _, id := range []string{"ctr_1", "ctr_2", "ctr_3"} {
		if got := e.prov.countedFor(itemID(id, billing.LineInputTokens)); got != want {
			t.Errorf("%s: provider counted %d, want %d", id, got, want)
		}
	}
}

func TestReporterValidate(t *testing.T) {
	for _, w := range []time.Duration{time.Second, 61 * time.Second, 7 * time.Minute, 48 * time.Hour} {
		r := &billing.Reporter{Window: w}
		if got := fieldRules(t, r.Validate(), "invalid_reporter"); got != "report_window:divides_day store:required provider:required usage:required clock:required" {
			t.Errorf("window %s: %s", w, got)
		}
	}
	e := newEnv(t)
	for _, w := range []time.Duration{0, time.Minute, 15 * time.Minute, time.Hour, 24 * time.Hour} {
		r := e.reporter()
		r.Window = w
		if err := r.Validate(); err != nil {
			t.Errorf("window %s: %v", w, err)
		}
	}
}
