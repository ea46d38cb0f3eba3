package sentlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/sentlog"
	"github.com/agentmarket/agentmarket/contracts/storetest"
)

func mustOpen(t *testing.T, dir string) *sentlog.Store {
	t.Helper()
	s, err := sentlog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContract: the records of sent messages behave as the database's do.
func TestContract(t *testing.T) {
	storetest.RunSent(t, func(t *testing.T) contracts.SentMessages { return mustOpen(t, t.TempDir()) })
}

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

func rec(msg, claim string, stage contracts.SentStage, task string) contracts.SentMessage {
	return contracts.SentMessage{SentKey: contracts.SentKey{ListingID: "lst_1", OrgID: "org_b", MessageID: msg}, ContractID: "ctr_1",
		Digest: "d-" + msg, ClaimID: claim, Stage: stage, TaskID: task, State: "completed", ClaimedAt: t0,
		HeldUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(24 * time.Hour)}
}

// TestReopen: what was recorded is found after the store is opened again
// (a restart, or a crash: every RecordSent is synced before it returns),
// its latest version; a torn record at the end (a crash mid-write) is cut
// and the records before it stay.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sentlog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	answer := rec("m-2", "use_2", contracts.SentDone, "")
	answer.Result, answer.ResultVersion = []byte(`{"kind":"message"}`), "0.3"
	if _, err := s.RecordSent(ctx, []contracts.SentMessage{rec("m-1", "use_1", contracts.SentInFlight, ""), answer}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordSent(ctx, []contracts.SentMessage{rec("m-1", "use_1", contracts.SentDone, "task-1")}, t0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A torn record after them: the length of one, and half its bytes.
	seg, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	f, err := os.OpenFile(seg[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, 1, 9, 9})
	f.Close()

	s = mustOpen(t, dir)
	got, err := s.FindSent(ctx, []contracts.SentKey{{ListingID: "lst_1", OrgID: "org_b", MessageID: "m-1"}, {ListingID: "lst_1", OrgID: "org_b", MessageID: "m-2"}}, t0)
	if err != nil || got[0] == nil || got[0].Stage != contracts.SentDone || got[0].TaskID != "task-1" || got[1] == nil ||
		string(got[1].Result) != `{"kind":"message"}` || got[1].ResultVersion != "0.3" || !got[1].ExpiresAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("after reopening: %+v %+v, %v", got[0], got[1], err)
	}
	if _, err := s.RecordSent(ctx, []contracts.SentMessage{rec("m-3", "use_3", contracts.SentDone, "task-3")}, t0); err != nil {
		t.Fatalf("appending after a cut tail: %v", err)
	}
	if got, _ := s.FindSent(ctx, []contracts.SentKey{{ListingID: "lst_1", OrgID: "org_b", MessageID: "m-3"}}, t0); got[0] == nil {
		t.Fatal("a record appended after the cut tail is not found")
	}
	if _, err := sentlog.Open(dir); err == nil {
		t.Error("a second store opened the same directory")
	}
}

// TestPruneRemovesSegments: once every record of a segment is past its
// window, the segment's file goes.
func TestPruneRemovesSegments(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	big := make([]byte, 1<<20)
	for i := range 70 { // past one segment (64 MiB)
		r := rec(fmt.Sprintf("m-%d", i), "use", contracts.SentDone, "")
		r.Result = big
		if _, err := s.RecordSent(ctx, []contracts.SentMessage{r}, t0); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) < 2 {
		t.Fatalf("%d segments after 70 MiB of records", len(segs))
	}
	if n, err := s.PruneSent(ctx, t0.Add(25*time.Hour)); err != nil || n != 70 {
		t.Fatalf("PruneSent = %d, %v; want 70", n, err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(after) != 1 {
		t.Errorf("%d segments left, want the active one", len(after))
	}
}
