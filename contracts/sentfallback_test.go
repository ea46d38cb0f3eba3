package contracts_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/sentlog"
	"github.com/agentmarket/agentmarket/contracts/storetest"
)

func openSentLog(t *testing.T) *sentlog.Store {
	s, err := sentlog.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// flaky is a store that fails while down.
type flaky struct {
	contracts.SentMessages
	down atomic.Bool
}

var errDown = errors.New("down")

func (f *flaky) FindSent(ctx context.Context, keys []contracts.SentKey, now time.Time) ([]*contracts.SentMessage, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.SentMessages.FindSent(ctx, keys, now)
}

func (f *flaky) RecordSent(ctx context.Context, recs []contracts.SentMessage, now time.Time) ([]bool, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.SentMessages.RecordSent(ctx, recs, now)
}

func TestSentFallbackContract(t *testing.T) {
	storetest.RunSent(t, func(t *testing.T) contracts.SentMessages {
		return &contracts.SentFallback{Hot: openSentLog(t), Durable: openSentLog(t)}
	})
}

// TestSentFallbackOutage: sends recorded while the shared state is down
// go to the database and are still found there once it is back, until
// their window ends; nothing is refused meanwhile.
func TestSentFallbackOutage(t *testing.T) {
	ctx := context.Background()
	hot := &flaky{SentMessages: openSentLog(t)}
	var fallbacks []string
	f := &contracts.SentFallback{Hot: hot, Durable: openSentLog(t), OnFallback: func(op string, err error) { fallbacks = append(fallbacks, op) }}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	rec := func(msg string, at time.Time) contracts.SentMessage {
		return contracts.SentMessage{SentKey: contracts.SentKey{ListingID: "lst_1", OrgID: "org_b", MessageID: msg}, Digest: "d", ClaimID: "c-" + msg,
			Stage: contracts.SentDone, TaskID: "task-" + msg, ClaimedAt: at, HeldUntil: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour)}
	}
	find := func(msg string, at time.Time) *contracts.SentMessage {
		t.Helper()
		got, err := f.FindSent(ctx, []contracts.SentKey{{ListingID: "lst_1", OrgID: "org_b", MessageID: msg}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	if a, err := f.RecordSent(ctx, []contracts.SentMessage{rec("before", t0)}, t0); err != nil || !a[0] {
		t.Fatalf("record before the outage: %v %v", a, err)
	}
	hot.down.Store(true)
	if a, err := f.RecordSent(ctx, []contracts.SentMessage{rec("during", t0)}, t0); err != nil || !a[0] {
		t.Fatalf("record during the outage: %v %v", a, err)
	}
	if got := find("during", t0); got == nil || got.TaskID != "task-during" {
		t.Errorf("found during the outage: %+v", got)
	}
	hot.down.Store(false)
	if got := find("during", t0.Add(time.Minute)); got == nil || got.TaskID != "task-during" {
		t.Errorf("a send of the outage, after it: %+v", got)
	}
	if got := find("before", t0.Add(time.Minute)); got == nil || got.TaskID != "task-before" {
		t.Errorf("a send of before the outage, after it: %+v", got)
	}
	if got := find("during", t0.Add(2*time.Hour)); got != nil {
		t.Errorf("after the window: %+v", got)
	}
	if len(fallbacks) != 2 || fallbacks[0] != "sent_record" || fallbacks[1] != "sent_find" {
		t.Errorf("fallbacks told: %v, want sent_record then sent_find", fallbacks)
	}
}
