package billing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
)

// TestSweepEvery: a minute by default, a quarter of a short grace, never
// below 100 ms.
func TestSweepEvery(t *testing.T) {
	for _, tc := range []struct{ grace, want time.Duration }{
		{72 * time.Hour, time.Minute},
		{4 * time.Minute, time.Minute},
		{2 * time.Minute, 30 * time.Second},
		{time.Second, 250 * time.Millisecond},
		{200 * time.Millisecond, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
	} {
		if got := billing.SweepEvery(tc.grace); got != tc.want {
			t.Errorf("SweepEvery(%s) = %s, want %s", tc.grace, got, tc.want)
		}
	}
}

// noStates is a marketplace with no contract to move on time.
type noStates struct{}

func (noStates) EndTrial(context.Context, string, time.Time) (*contracts.Contract, error) {
	return nil, nil
}
func (noStates) CancelScheduled(context.Context, string) (*contracts.Contract, error) {
	return nil, nil
}
func (noStates) SuspendOverdue(context.Context, time.Duration) (int, error) { return 0, nil }

// lockedBuffer is a log's output, read while the scheduler writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUnratableContracts: a contract whose plan is in a currency
// AgentMarket cannot rate is listed with why, for the month and before it
// ends; the scheduler's month close invoices the others and logs that
// contract at error level, with its id, its month and why, on every sweep;
// a contract with an invoice is never listed.
func TestUnratableContracts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	withUnratable(e)
	e.use(t, "ctr_ok", t0.Add(time.Minute), billing.Usage{Tasks: 1})
	month := billing.MonthOf(t0)
	svc := e.ledger()

	check := func(when string) {
		t.Helper()
		list, err := svc.Unratable(ctx, month)
		if err != nil {
			t.Fatalf("%s: Unratable: %v", when, err)
		}
		if len(list) != 1 || list[0].Contract.ID != "ctr_odd" || !strings.Contains(list[0].Why, `"zzz"`) {
			t.Fatalf("%s: Unratable = %+v; want ctr_odd, for its currency", when, list)
		}
	}
	e.at(t0.Add(time.Hour))
	check("during the month")

	e.at(date(2026, 6, 1, 0, 5))
	var out lockedBuffer
	sched := &billing.Scheduler{Service: svc, States: noStates{}, Grace: 400 * time.Millisecond, Clock: e.clock,
		Logger: slog.New(slog.NewJSONHandler(&out, nil))}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sched.Run(runCtx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "a contract's month cannot be rated") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done

	var logged int
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if !strings.HasPrefix(fmt.Sprint(rec["msg"]), "a contract's month cannot be rated") {
			continue
		}
		logged++
		if rec["level"] != "ERROR" || rec["contract"] != "ctr_odd" || rec["period"] != "2026-05" || rec["listing"] != "lst_odd" ||
			!strings.Contains(fmt.Sprint(rec["why"]), `"zzz"`) || !strings.Contains(fmt.Sprint(rec["msg"]), "/operator/unratable") {
			t.Errorf("the log line: %s", line)
		}
	}
	if logged < 2 {
		t.Errorf("the unratable contract was logged %d times in two sweeps or more; log:\n%s", logged, out.String())
	}
	if _, err := e.store.Invoice(ctx, "ctr_ok", month.Start); err != nil {
		t.Errorf("the ratable contract was not invoiced: %v", err)
	}
	check("after the close")
}
