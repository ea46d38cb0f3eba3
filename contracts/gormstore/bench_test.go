package gormstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// BenchmarkProjectionWrites measures what the meter's projections write
// per call on SQLite, in batches of 256 calls (SettleRows): each call's
// task binding (ended at once, so with its end, and billed) and its
// send's record.
//
//	go test -run '^$' -bench ProjectionWrites ./contracts/gormstore/
func BenchmarkProjectionWrites(b *testing.B) {
	ctx := context.Background()
	s := gormstore.New(relationaltest.SQLite(b).DB)
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const batch = 256
	seq := 0
	b.Run("bind", func(b *testing.B) {
		for b.Loop() {
			bs := make([]contracts.TaskBinding, batch)
			for i := range bs {
				seq++
				bs[i] = contracts.TaskBinding{ListingID: "lst_1", TaskID: fmt.Sprintf("task-%d", seq), OrgID: "org_1", ContractID: "ctr_1",
					ContextID: fmt.Sprintf("ctx-%d", seq), CreatedAt: now,
					Ended:  &contracts.TaskEvent{Kind: contracts.TaskEnded, State: "completed", At: now, TraceID: fmt.Sprintf("%032x", seq)},
					Billed: &contracts.TaskBilled{InputTokens: 180, OutputTokens: 160, ComputeMs: 930, At: now}}
			}
			if _, errs := s.BindTasks(ctx, bs); errs[0] != nil {
				b.Fatal(errs[0])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/call")
	})
	b.Run("sent", func(b *testing.B) {
		for b.Loop() {
			recs := make([]contracts.SentMessage, batch)
			for i := range recs {
				seq++
				recs[i] = contracts.SentMessage{SentKey: contracts.SentKey{ListingID: "lst_1", OrgID: "org_1", MessageID: fmt.Sprintf("m-%d", seq)},
					ContractID: "ctr_1", Digest: "d", ClaimID: fmt.Sprintf("c-%d", seq), Stage: contracts.SentDone, TaskID: fmt.Sprintf("task-%d", seq),
					ClaimedAt: now, HeldUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
			}
			if _, err := s.RecordSent(ctx, recs, now); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/call")
	})
}

// BenchmarkFindSent measures the idempotency lookup of fresh messageIds
// (the call path's one read: every key misses) by batch size, on SQLite,
// over a table holding 100,000 records.
//
//	go test -run '^$' -bench FindSent ./contracts/gormstore/
func BenchmarkFindSent(b *testing.B) {
	ctx := context.Background()
	s := gormstore.New(relationaltest.SQLite(b).DB)
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var recs []contracts.SentMessage
	for i := range 100_000 {
		recs = append(recs, contracts.SentMessage{SentKey: contracts.SentKey{ListingID: "lst_1", OrgID: "org_1", MessageID: fmt.Sprintf("m-%d", i)},
			ContractID: "ctr_1", Digest: "d", ClaimID: fmt.Sprintf("c-%d", i), Stage: contracts.SentDone, TaskID: "t",
			ClaimedAt: now, HeldUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
		if len(recs) == 1000 {
			if _, err := s.RecordSent(ctx, recs, now); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	seq := 0
	for _, n := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("keys-%d", n), func(b *testing.B) {
			keys := make([]contracts.SentKey, n)
			for b.Loop() {
				for i := range keys {
					keys[i] = contracts.SentKey{ListingID: "lst_1", OrgID: "org_1", MessageID: fmt.Sprintf("fresh-%d", seq)}
					seq++
				}
				if _, err := s.FindSent(ctx, keys, now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/key")
		})
	}
}
