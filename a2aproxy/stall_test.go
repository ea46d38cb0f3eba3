package a2aproxy_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// stallLife records the stalls and progress the sweeper writes; a task is
// stalled until progressed.
type stallLife struct {
	contracts.TaskLife
	mu      sync.Mutex
	stalled map[string]bool
	events  []string
	down    error // every write fails with it while set
}

func (s *stallLife) TaskStalled(_ context.Context, e contracts.TaskEvent) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		return false, s.down
	}
	if s.stalled[e.TaskID] {
		return false, nil
	}
	s.stalled[e.TaskID] = true
	s.events = append(s.events, e.TaskID+":stalled")
	return true, nil
}

func (s *stallLife) TaskProgressed(_ context.Context, e contracts.TaskEvent) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		return false, s.down
	}
	if !s.stalled[e.TaskID] {
		return false, nil
	}
	s.stalled[e.TaskID] = false
	s.events = append(s.events, e.TaskID+":progressed")
	return true, nil
}

func (s *stallLife) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.events, " ")
	s.events = nil
	return out
}

// TestStallRules: what counts as progress, and when a task is marked
// stalled, on a clock the test moves.
func TestStallRules(t *testing.T) {
	ctx := context.Background()
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	life := &stallLife{stalled: map[string]bool{}}
	p := &a2aproxy.Proxy{Clock: clock, Tasks: life, Logger: slog.New(slog.DiscardHandler)}
	const after = time.Minute
	task := func(state string, artifact string) wire.Observation {
		ob := wire.Observation{Kind: wire.KindTask, TaskID: "t", State: state, Terminal: state == "completed"}
		if artifact != "" {
			ob.Artifacts = []wire.ArtifactChunk{{ArtifactID: "a", Text: artifact}}
		}
		return ob
	}
	note := func(ob wire.Observation) { p.NoteProgress("lst_1", "t", after, ob) }
	sweep := func(want string) {
		t.Helper()
		p.SweepStalls(ctx)
		if got := life.take(); got != want {
			t.Errorf("at %s: sweep recorded %q, want %q", clock.Now().Format(time.TimeOnly), got, want)
		}
	}

	note(task("working", ""))
	clock.Advance(after)
	sweep("") // exactly stall_after: not yet
	note(task("working", ""))
	clock.Advance(time.Second)
	sweep("t:stalled") // the same task again is no progress
	sweep("")          // marked once
	note(task("working", "half a report"))
	sweep("t:progressed") // more artifact text: progress
	clock.Advance(after + time.Second)
	note(task("working", "half a report"))
	sweep("t:stalled")
	note(wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "t", State: "working", AgentTexts: []string{"still on it"}})
	sweep("t:progressed") // a status update with a message
	clock.Advance(after + time.Second)
	sweep("t:stalled")
	note(wire.Observation{Kind: wire.KindArtifactUpdate, TaskID: "t", Artifacts: []wire.ArtifactChunk{{ArtifactID: "a", Text: " more", Append: true}}})
	sweep("t:progressed") // an artifact chunk
	note(task("input-required", "half a report more"))
	clock.Advance(10 * after)
	sweep("") // waiting for the buyer: a pause, not a stall
	note(task("working", "half a report more"))
	clock.Advance(after + time.Second)
	sweep("t:stalled") // state changed (resumed), then silent
	note(task("completed", "the report"))
	clock.Advance(10 * after)
	sweep("") // ended: no longer watched

	// A stall time of 0 (off): never watched.
	p.NoteProgress("lst_1", "u", 0, wire.Observation{Kind: wire.KindTask, TaskID: "u", State: "working"})
	clock.Advance(24 * time.Hour)
	sweep("")
}

// TestStallRecordRetried: a stall or a resume the store did not take is
// written by the next sweep, not lost.
func TestStallRecordRetried(t *testing.T) {
	ctx := context.Background()
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	life := &stallLife{stalled: map[string]bool{}}
	p := &a2aproxy.Proxy{Clock: clock, Tasks: life, Logger: slog.New(slog.DiscardHandler)}
	working := func(text string) {
		p.NoteProgress("lst_1", "t", time.Minute, wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "t", State: "working", AgentTexts: []string{text}})
	}
	working("started")
	clock.Advance(2 * time.Minute)
	life.down = errors.New("database is locked")
	if n := p.SweepStalls(ctx); n != 0 || life.take() != "" {
		t.Fatalf("a sweep with the store down recorded a stall")
	}
	life.down = nil
	if n := p.SweepStalls(ctx); n != 1 || life.take() != "t:stalled" {
		t.Fatalf("the next sweep did not record the stall")
	}
	working("moving again")
	life.down = errors.New("database is locked")
	p.SweepStalls(ctx)
	life.down = nil
	p.SweepStalls(ctx)
	if got := life.take(); got != "t:progressed" {
		t.Errorf("the resume after a failed write: %q, want t:progressed", got)
	}
}

// endLife records the ends written.
type endLife struct {
	contracts.TaskLife
	mu   sync.Mutex
	ends []string
}

func (e *endLife) TaskEnded(_ context.Context, ev contracts.TaskEvent) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ends = append(e.ends, ev.TaskID+":"+ev.State)
	return true, nil
}

// TestProjectionEndsCanceledTasks: the projection records the end of a
// task its usage row shows canceled, as of every other end: when the
// cancel's own record (trackLife, with who and why) failed, the task is
// still ended in the store, not left open.
func TestProjectionEndsCanceledTasks(t *testing.T) {
	life := &endLife{}
	p := &a2aproxy.Proxy{Tasks: life, Ledger: countingLedger{}, Recorder: &failingRecorder{},
		Clock: agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)), Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	rows := []metering.Usage{{ID: "use_1", TaskID: "t-1", ListingID: "lst_1", Method: "CancelTask", State: "canceled", Time: p.Clock.Now()}}
	if err := p.Project(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	if strings.Join(life.ends, " ") != "t-1:canceled" {
		t.Errorf("ends recorded: %v", life.ends)
	}
}

// childLife is a task store with one delegated task under any parent,
// which can be down.
type childLife struct {
	contracts.TaskLife
	mu        sync.Mutex
	down      error
	requested []string
}

func (c *childLife) ChildTasks(_ context.Context, listingID, _ string) ([]contracts.TaskBinding, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return nil, c.down
	}
	return []contracts.TaskBinding{{ListingID: "lst_child", TaskID: "child-1", OrgID: "org_b", ParentListingID: listingID}}, nil
}

func (c *childLife) RequestCancel(_ context.Context, listingID, taskID, _, _, _ string, _ time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return c.down
	}
	c.requested = append(c.requested, listingID+"/"+taskID)
	return nil
}

// TestDelegatedCancelsRequestedLater: when the store cannot list a
// canceled task's delegated tasks, the task sweeper asks again and
// requests their cancels once it answers (Sweep then carries them out).
func TestDelegatedCancelsRequestedLater(t *testing.T) {
	life := &childLife{down: errors.New("database is locked")}
	p := &a2aproxy.Proxy{Tasks: life, Recorder: &failingRecorder{}, Clock: agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)),
		Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	ctx := context.Background()
	p.RequestChildCancels(ctx, "lst_parent", "parent-1")
	p.WriteLater(ctx) // still down
	if len(life.requested) != 0 {
		t.Fatalf("requested while down: %v", life.requested)
	}
	life.mu.Lock()
	life.down = nil
	life.mu.Unlock()
	p.WriteLater(ctx)
	if strings.Join(life.requested, " ") != "lst_child/child-1" {
		t.Errorf("cancels requested once the store answered: %v", life.requested)
	}
}
