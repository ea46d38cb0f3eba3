package gormstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// BenchmarkProjectionWrites measures what the meter's projections write
// per call on SQLite, in batches of 256 calls (SettleRows): each call's
// task binding (ended at once, so with its end, and billed), through the
// driver and through the store's own connection (WriteTasksDirect), and a
// send's record.
//
//	go test -run '^$' -bench ProjectionWrites ./contracts/gormstore/
func BenchmarkProjectionWrites(b *testing.B) {
	ctx := context.Background()
	s := gormstore.New(relationaltest.SQLite(b).DB)
	path := filepath.Join(b.TempDir(), "direct.db")
	ddb, err := relational.OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer ddb.Close()
	direct := gormstore.New(ddb.DB)
	if err := direct.WriteTasksDirect(path); err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const batch = 256
	seq := 0
	for _, v := range []struct {
		name   string
		s      *gormstore.Store
		random bool
	}{{"bind", s, false}, {"bind-direct", direct, false}, {"bind-direct-random", direct, true}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				bs := make([]contracts.TaskBinding, batch)
				for i := range bs {
					seq++
					task := fmt.Sprintf("task-%d", seq)
					if v.random { // as agents name tasks: a UUID, or nginx's $request_id
						task = fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
					}
					bs[i] = contracts.TaskBinding{ListingID: "lst_1", TaskID: task, OrgID: "org_1", ContractID: "ctr_1",
						ContextID: fmt.Sprintf("ctx-%d", seq), CreatedAt: now,
						Ended:  &contracts.TaskEvent{Kind: contracts.TaskEnded, State: "completed", At: now, TraceID: fmt.Sprintf("%032x", seq)},
						Billed: &contracts.TaskBilled{InputTokens: 180, OutputTokens: 160, ComputeMs: 930, At: now}}
				}
				if _, errs := v.s.BindTasks(ctx, bs); errs[0] != nil {
					b.Fatal(errs[0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/call")
		})
	}
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
