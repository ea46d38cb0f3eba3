package a2aproxy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// sameShardKeys returns n keys of listing lst_1 whose task ids fall in one
// shard of x.
func sameShardKeys(x *ownerIndex, n int) []ownerKey {
	var out []ownerKey
	var want *ownerShard
	for i := 0; len(out) < n; i++ {
		k := ownerKey{"lst_1", "task-" + strconv.Itoa(i)}
		sh := x.shard(k)
		if want == nil {
			want = sh
		}
		if sh == want {
			out = append(out, k)
		}
	}
	return out
}

// TestOwnerIndexKeepsARebindAfterForget: a binding forgotten (its store
// write failed, or Redis named another owner) keeps its old place in the
// ring; bound again (the buyer's retry, the agent answering the same task
// id), the new binding must stay held as long as any new one. It does not:
// the ring's stale place of the key evicts the live binding, at once when
// that place is the next to go (Bind reports it created, Peek finds
// nothing), or after a few binds instead of a shard's capacity.
func TestOwnerIndexKeepsARebindAfterForget(t *testing.T) {
	t.Run("stale place is next", func(t *testing.T) {
		x := newOwnerIndex(nil, 0, time.Second) // 16 a shard
		ks := sameShardKeys(x, 16)
		for _, k := range ks {
			x.Bind(contracts.TaskBinding{ListingID: k.listing, TaskID: k.task, OrgID: "org_a"})
		}
		k := ks[0] // at the ring's next place
		x.Forget(k.listing, k.task)
		if _, created := x.Bind(contracts.TaskBinding{ListingID: k.listing, TaskID: k.task, OrgID: "org_a"}); !created {
			t.Fatal("rebind not created")
		}
		if x.Peek(k.listing, k.task) == nil {
			t.Errorf("Bind of %s reported created, but the index holds no binding of it: its own stale ring place evicted it", k.task)
		}
	})
	t.Run("stale place comes before the live one", func(t *testing.T) {
		x := newOwnerIndex(nil, 0, time.Second)
		ks := sameShardKeys(x, 16+8)
		for _, k := range ks[:16] {
			x.Bind(contracts.TaskBinding{ListingID: k.listing, TaskID: k.task, OrgID: "org_a"})
		}
		k := ks[5]
		x.Forget(k.listing, k.task)
		x.Bind(contracts.TaskBinding{ListingID: k.listing, TaskID: k.task, OrgID: "org_a"}) // evicts ks[0]
		for _, n := range ks[16:22] {                                                       // 6 newer binds: evict ks[1..4], then ks[5]'s stale place
			x.Bind(contracts.TaskBinding{ListingID: n.listing, TaskID: n.task, OrgID: "org_a"})
		}
		if x.Peek(k.listing, k.task) == nil {
			t.Errorf("%s, bound again 7 binds ago in a shard of 16, is no longer held: the eviction of its stale ring place dropped the live binding", k.task)
		}
	})
}

// TestLocalShareOfABudgetAcrossSequentialCalls: two meters without Redis
// at AGENTMARKET_METER_LIMIT_SHARE=1/2, a key budget of 10,000 micros,
// calls of 1,000 each reserved and settled one after another (a buyer's
// sequential calls, within one refresh of the store's figure, which does
// not show the other meter's spend yet). docs/limits.md says 1/N keeps N
// meters within the budget together; the share only caps what is held at
// once, and each meter's own settled spend frees its share again: each
// admits 9 calls, 18,000 micros against a budget of 10,000 (20,000 with no
// share at all).
func TestLocalShareOfABudgetAcrossSequentialCalls(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	budget := int64(10_000)
	total := 0
	for range 2 {
		book := newBudgetBook(fixedSpend(0), nil, clock, 2*time.Second, nil)
		book.share = share(0.5)
		for range 20 {
			cl := &call{x: headerExchange{}, actor: agentmarket.Actor{OrgID: "org_b", KeyID: "key_b", KeyBudgetMicros: &budget}, contract: &contracts.Contract{ID: "ctr_1"}}
			if book.reserve(context.Background(), cl, 1000) != nil {
				break
			}
			book.settle(cl, 1000)
			total++
		}
	}
	if total*1000 > int(budget) {
		t.Errorf("two meters at a share of 1/2 admitted %d calls of 1,000 micros (%d) under a budget of %d", total, total*1000, budget)
	}
}

// TestLocalShareOfAThirdStaysWithinTheLimit: three meters at 1/3 (the
// docs' "1/N on each of N meters they stay within it together") under 10
// requests a second and a session cap of 10 calls: each rounds 3.33 up to
// 4, and together they admit 12 of each.
func TestLocalShareOfAThirdStaysWithinTheLimit(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	rps, calls := 0, 0
	for range 3 {
		k := testKeeper(clock)
		k.local.share = share(1.0 / 3)
		l := limit{rates: k}
		for range 20 {
			cl := limitedCall(t, agentmarket.RateLimits{RequestsPerSecond: 10}, "", contracts.SessionCaps{})
			if l.serve(cl, func(cl *call) error { l.rates.done(cl, &metering.Usage{}); return nil }) == nil {
				rps++
			}
		}
		for range 20 {
			cl := limitedCall(t, agentmarket.RateLimits{}, "ctx-1", contracts.SessionCaps{MaxCalls: 10})
			if l.serve(cl, func(cl *call) error { l.rates.done(cl, &metering.Usage{}); return nil }) == nil {
				calls++
			}
		}
	}
	if rps > 10 {
		t.Errorf("three meters at 1/3 admitted %d calls at once under 10 a second", rps)
	}
	if calls > 10 {
		t.Errorf("three meters at 1/3 admitted %d calls of a context capped at 10", calls)
	}
}

type failingRecorder struct{}

func (failingRecorder) Record(context.Context, metering.Usage) error { return errors.New("disk full") }
func (failingRecorder) Err() error                                   { return nil }

// TestLostRowStillLoggedAtInfo: a successful call whose usage row could not
// be spooled is lost (accounting.go: "the 'a2a call' line record wrote is
// its only trace"); since ec112e9 that line is at debug for a successful
// call, so at the default level nothing records the lost call's listing,
// org, method and tokens.
func TestLostRowStillLoggedAtInfo(t *testing.T) {
	var buf bytes.Buffer
	a := &accounting{recorder: failingRecorder{}, clock: agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)),
		logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	cl := &call{seen: metering.Counters{InputTokens: 1200, OutputTokens: 300}}
	u := metering.Usage{TraceID: "0af7651916cd43dd8448eb211c80319c", TaskID: "task-1", ListingID: "lst_1", BuyerOrgID: "org_b", Method: "SendMessage", State: "TASK_STATE_COMPLETED"}
	if err := a.record(context.Background(), cl, u, time.Millisecond); err == nil {
		t.Fatal("record succeeded with a failing recorder")
	}
	if !strings.Contains(buf.String(), "a2a call") || !strings.Contains(buf.String(), "observed_input_tokens=1200") {
		t.Errorf("a successful call whose row was lost left no info line with its usage; the log says %q", buf.String())
	}
}
