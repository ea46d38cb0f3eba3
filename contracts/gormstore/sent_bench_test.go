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
