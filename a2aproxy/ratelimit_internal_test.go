package a2aproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// limitedCall is a send of key_1 (org_1, subscription ct_1, listing
// lst_1) in context ctxID ("" for none).
func limitedCall(t testing.TB, key agentmarket.RateLimits, ctxID string, caps contracts.SessionCaps) *call {
	t.Helper()
	ctxField := ""
	if ctxID != "" {
		ctxField = fmt.Sprintf(`,"contextId":%q`, ctxID)
	}
	req, werr := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]`+ctxField+`}}}`), "1.0")
	if werr != nil {
		t.Fatal(werr)
	}
	return &call{x: headerExchange{}, trace: newTrace(""), req: req,
		actor:    agentmarket.Actor{OrgID: "org_1", KeyID: "key_1", KeyRateLimits: key},
		contract: &contracts.Contract{ID: "ct_1", SessionCaps: caps},
		target:   &Target{ListingID: "lst_1"}}
}

func newTrace(string) traceContext {
	return traceContext{traceID: randomHex(16), spanID: randomHex(8), flags: "01"}
}

func testKeeper(clock agentmarket.Clock) *rateKeeper {
	return &rateKeeper{local: newLocalRates(clock), clock: clock, base: context.Background(), logger: slog.New(slog.DiscardHandler)}
}

func codeOf(err error) int {
	var re *rpcError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

// TestRateLimitedKeyAdmitsItsRate: a key under 10 requests a second, or
// 120 a minute, asked 100 times a second on the injected clock, gets its
// rate within 5 % past the first window (a simulated minute, or five),
// and about its limit in a row from idle (the full bucket); every refusal is -32045 with a
// Retry-After of the wait.
func TestRateLimitedKeyAdmitsItsRate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    agentmarket.RateLimits
		warm, run time.Duration
		burst     int
		want      float64
	}{
		{"per second", agentmarket.RateLimits{RequestsPerSecond: 10}, time.Second, time.Minute, 10, 590},
		{"per minute", agentmarket.RateLimits{RequestsPerMinute: 120}, time.Minute, 6 * time.Minute, 120, 600},
		{"both", agentmarket.RateLimits{RequestsPerSecond: 10, RequestsPerMinute: 300}, time.Minute, 6 * time.Minute, 10, 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
			l := limit{rates: testKeeper(clock)}
			start := clock.Now()
			first, steady, streak, most := 0, 0, 0, 0
			for end := start.Add(tc.run); clock.Now().Before(end); clock.Advance(10 * time.Millisecond) {
				cl := limitedCall(t, tc.limits, "", contracts.SessionCaps{})
				err := l.serve(cl, func(cl *call) error {
					l.rates.done(cl, &metering.Usage{})
					return nil
				})
				switch {
				case err == nil && clock.Now().Sub(start) >= tc.warm:
					steady++
				case err == nil:
					first++
				case codeOf(err) != CodeRateLimited:
					t.Fatalf("refused with %v, want -32045", err)
				case cl.x.(headed).header[0] != "Retry-After":
					t.Fatalf("a refusal's headers: %v", cl.x.(headed).header)
				}
				if err == nil {
					streak++
				} else {
					streak = 0
				}
				most = max(most, streak)
			}
			t.Logf("%d admitted in the first %s (%d in a row at most), %d in the %s past it (want %.0f)", first, tc.warm, most, steady, tc.run-tc.warm, tc.want)
			if got := float64(steady); got < tc.want*0.95 || got > tc.want*1.05 {
				t.Errorf("%d admitted over %s past the first, want %.0f ± 5 %%", steady, tc.run-tc.warm, tc.want)
			}
			// From idle: the bucket's fill, and what refills while it is
			// taken at 100 calls a second (within 5 % of it, and a call).
			if most > tc.burst+tc.burst/20+1 {
				t.Errorf("%d calls in a row from idle, 10 ms apart, want at most the limit (%d) and what refills meanwhile", most, tc.burst)
			}
		})
	}
}

// TestTokensPerMinuteDebitedAfterTheCall: a call is admitted while the
// key's bucket of 1,000 tokens a minute is not empty; once it used 1,500
// (its usage row), the next is refused until the bucket refilled (30 s),
// and told to retry after 31 s (30 s and a millisecond, in whole seconds).
func TestTokensPerMinuteDebitedAfterTheCall(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	l := limit{rates: testKeeper(clock)}
	lim := agentmarket.RateLimits{TokensPerMinute: 1000}
	used := func(tokens int64) func(cl *call) error {
		return func(cl *call) error {
			l.rates.done(cl, &metering.Usage{InputTokens: tokens / 2, OutputTokens: tokens - tokens/2})
			return nil
		}
	}
	if err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), used(1500)); err != nil {
		t.Fatalf("the first call: %v", err)
	}
	cl := limitedCall(t, lim, "", contracts.SessionCaps{})
	if err := l.serve(cl, used(0)); codeOf(err) != CodeRateLimited {
		t.Fatalf("after 1,500 tokens of 1,000 a minute: %v, want -32045", err)
	} else if h := cl.x.(headed).header; h[1] != "31" {
		// Empty for 30 s and a millisecond more, in whole seconds.
		t.Errorf("Retry-After %v, want 31", h)
	}
	clock.Advance(29 * time.Second)
	if err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), used(0)); codeOf(err) != CodeRateLimited {
		t.Fatalf("29 s later: %v, want -32045", err)
	}
	clock.Advance(time.Second + time.Millisecond)
	if err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), used(10)); err != nil {
		t.Fatalf("30 s later: %v, want admitted", err)
	}
}

// TestInFlightCapUnderConcurrency: 40 concurrent calls under a cap of 3
// in flight: never more than 3 run at once, and each refused one is
// -32045; once they end, calls are admitted again.
func TestInFlightCapUnderConcurrency(t *testing.T) {
	l := limit{rates: testKeeper(agentmarket.SystemClock{})}
	lim := agentmarket.RateLimits{MaxInFlight: 3}
	var running, most, admitted atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), func(cl *call) error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				admitted.Add(1)
				<-release
				running.Add(-1)
				l.rates.done(cl, &metering.Usage{})
				return nil
			})
			if err != nil && codeOf(err) != CodeRateLimited {
				t.Errorf("refused with %v, want -32045", err)
			}
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); admitted.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if most.Load() > 3 || admitted.Load() < 3 {
		t.Fatalf("%d admitted, at most %d at once; want at most 3 at once", admitted.Load(), most.Load())
	}
	if err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), func(*call) error { return nil }); err != nil {
		t.Fatalf("after they ended: %v", err)
	}
}

// TestSessionCapsRefuseOnlyTheCappedContext: under a cap of 2 sends a
// context, the third send in ctx-a is refused (-32046), while ctx-b and
// reading a task go on; a spend cap refuses a context once its calls cost
// it.
func TestSessionCapsRefuseOnlyTheCappedContext(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	l := limit{rates: testKeeper(clock)}
	ok := func(cl *call) error { l.rates.done(cl, &metering.Usage{ContextID: cl.req.ContextID()}); return nil }
	caps := contracts.SessionCaps{MaxCalls: 2}
	for i := range 2 {
		if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-a", caps), ok); err != nil {
			t.Fatalf("send %d in ctx-a: %v", i+1, err)
		}
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-a", caps), ok); codeOf(err) != CodeSessionCapped {
		t.Fatalf("the third send in ctx-a: %v, want -32046", err)
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-b", caps), ok); err != nil {
		t.Fatalf("a send in ctx-b: %v", err)
	}
	get := limitedCall(t, agentmarket.RateLimits{}, "ctx-a", caps)
	get.req, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"t1"}}`), "1.0")
	if err := l.serve(get, ok); err != nil {
		t.Fatalf("reading a task: %v", err)
	}
	// A new conversation is counted under the context its agent gave it.
	first := limitedCall(t, agentmarket.RateLimits{}, "", caps)
	if err := l.serve(first, func(cl *call) error { l.rates.done(cl, &metering.Usage{ContextID: "ctx-c"}); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-c", caps), ok); err != nil {
		t.Fatalf("the second send in ctx-c: %v", err)
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-c", caps), ok); codeOf(err) != CodeSessionCapped {
		t.Fatalf("the third send in ctx-c: %v, want -32046", err)
	}

	// A send that continues a task of ctx-c without naming the context
	// is in ctx-c all the same.
	l.owners = newOwnerIndex(nil, 64, 0)
	l.owners.Bind(contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-c", OrgID: "org_1", ContextID: "ctx-c"})
	cont := limitedCall(t, agentmarket.RateLimits{}, "", caps)
	cont.req, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m3","role":"ROLE_USER","taskId":"task-c","parts":[{"text":"more"}]}}}`), "1.0")
	if err := l.serve(cont, ok); codeOf(err) != CodeSessionCapped {
		t.Fatalf("a send continuing a task of ctx-c, naming no context: %v, want -32046", err)
	}

	spend := contracts.SessionCaps{MaxMicros: 1000}
	costs := func(micros int64) func(cl *call) error {
		return func(cl *call) error {
			l.rates.done(cl, &metering.Usage{ContextID: cl.req.ContextID(), CostMicros: micros})
			return nil
		}
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-d", spend), costs(1200)); err != nil {
		t.Fatal(err)
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-d", spend), costs(0)); codeOf(err) != CodeSessionCapped {
		t.Fatalf("a context that cost 1,200 of 1,000 micros: %v, want -32046", err)
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-e", spend), costs(0)); err != nil {
		t.Fatalf("another context: %v", err)
	}
}

// TestLimitStageFreeWhenUnconfigured: with no limit and no cap anywhere,
// the stage hands the call on without allocating.
func TestLimitStageFreeWhenUnconfigured(t *testing.T) {
	l := limit{rates: testKeeper(agentmarket.SystemClock{})}
	cl := &call{x: headerExchange{}, contract: &contracts.Contract{ID: "ct_1"}, target: &Target{ListingID: "lst_1", Limits: listings.Limits{}}}
	next := func(*call) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { _ = l.serve(cl, next) }); n != 0 {
		t.Errorf("%v allocations a call with nothing configured, want 0", n)
	}
	if cl.rate != nil {
		t.Error("a call with nothing configured holds limits")
	}
}

// downRates is shared state that never answers.
type downRates struct{}

var errDown = errors.New("redis: connection refused")

func (downRates) TakeRates(context.Context, string, []string, []int64, time.Duration) (int, time.Duration, []int64, error) {
	return 0, 0, nil, errDown
}
func (downRates) DoneRates(context.Context, string, []string, []int64, int64) error { return errDown }
func (downRates) TakeSession(context.Context, string, int64, int64, bool) (int, int64, int64, error) {
	return 0, 0, 0, errDown
}
func (downRates) AddSession(context.Context, string, int64, int64) error { return errDown }

// TestRateLimitsWhileSharedStateDown: while Redis fails, the meter holds
// the limits in its own memory: a key under 3 requests a minute gets 3,
// then -32045 (never no limit, never every call refused); session caps
// likewise.
func TestRateLimitsWhileSharedStateDown(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	k := testKeeper(clock)
	k.shared = downRates{}
	l := limit{rates: k}
	ok := func(cl *call) error { l.rates.done(cl, &metering.Usage{ContextID: cl.req.ContextID()}); return nil }
	lim := agentmarket.RateLimits{RequestsPerMinute: 3}
	for i := range 3 {
		if err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), ok); err != nil {
			t.Fatalf("call %d with Redis down: %v", i, err)
		}
	}
	if err := l.serve(limitedCall(t, lim, "", contracts.SessionCaps{}), ok); codeOf(err) != CodeRateLimited {
		t.Fatalf("a fourth with Redis down: %v, want -32045", err)
	}
	caps := contracts.SessionCaps{MaxCalls: 1}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-a", caps), ok); err != nil {
		t.Fatal(err)
	}
	if err := l.serve(limitedCall(t, agentmarket.RateLimits{}, "ctx-a", caps), ok); codeOf(err) != CodeSessionCapped {
		t.Fatalf("a second send in a context capped at one, Redis down: %v, want -32046", err)
	}
}
