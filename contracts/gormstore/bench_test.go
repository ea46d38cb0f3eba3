package gormstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
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

// BenchmarkTaskRowsGrown measures what a new task's row costs once the
// table holds many (the meter binds a task per new task, and agents name
// tasks at random: each row is a write at a random page of the primary
// key, which costs more as the table outgrows what one checkpoint window
// covers). The table is filled with 100,000 random bindings first, then
// each op binds a batch of 256 more through the store's own connection
// (WriteTasksDirect); reported as CPU (user + system) per row, which a
// busy machine disturbs less than wall time.
//
//	go test -run '^$' -bench TaskRowsGrown -benchtime 200x ./contracts/gormstore/
func BenchmarkTaskRowsGrown(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "grown.db")
	ddb, err := relational.OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer ddb.Close()
	s := gormstore.New(ddb.DB)
	if err := s.WriteTasksDirect(path); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const batch = 256
	seq := 0
	bindBatch := func() {
		bs := make([]contracts.TaskBinding, batch)
		for i := range bs {
			seq++
			bs[i] = contracts.TaskBinding{ListingID: "lst_1", TaskID: fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()), OrgID: "org_1",
				ContractID: "ctr_1", ContextID: fmt.Sprintf("ctx-%d", seq), CreatedAt: now,
				Ended:  &contracts.TaskEvent{Kind: contracts.TaskEnded, State: "completed", At: now, TraceID: fmt.Sprintf("%032x", seq)},
				Billed: &contracts.TaskBilled{InputTokens: 180, OutputTokens: 160, ComputeMs: 930, At: now}}
		}
		if _, errs := s.BindTasks(ctx, bs); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
	for range 100_000 / batch {
		bindBatch()
	}
	cpu0 := cpuTime()
	for b.Loop() {
		bindBatch()
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N*batch), "cpu-µs/row")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "wall-µs/row")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		panic(err)
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
