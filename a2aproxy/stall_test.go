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
	"github.com/agentmarket/agentmarket/listings/httpfetch"
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

// outage makes a fake store answer down until up is called; mu also
// guards what the fake records.
type outage struct {
	mu   sync.Mutex
	down error
}

func (o *outage) up() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = nil
}

// childLife is a task store with one delegated task under any parent,
// which can be down.
type childLife struct {
	contracts.TaskLife
	outage
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
	life := &childLife{outage: outage{down: errors.New("database is locked")}}
	p := &a2aproxy.Proxy{Tasks: life, Recorder: &failingRecorder{}, Clock: agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)),
		Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	ctx := context.Background()
	p.RequestChildCancels(ctx, "lst_parent", "parent-1")
	p.WriteLater(ctx) // still down
	if len(life.requested) != 0 {
		t.Fatalf("requested while down: %v", life.requested)
	}
	life.up()
	p.WriteLater(ctx)
	if strings.Join(life.requested, " ") != "lst_child/child-1" {
		t.Errorf("cancels requested once the store answered: %v", life.requested)
	}
}

// lostIncidents counts lost tasks per listing, and can be down.
type lostIncidents struct {
	outage
	lost []string
}

func (l *lostIncidents) RecordIncident(context.Context, string, string) error { return nil }

func (l *lostIncidents) RecordLostTask(_ context.Context, listingID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down != nil {
		return l.down
	}
	l.lost = append(l.lost, listingID)
	return nil
}

// TestLostTaskCountedLater: a lost task whose count on its listing the
// store refused is counted by the task sweeper once it answers.
func TestLostTaskCountedLater(t *testing.T) {
	inc := &lostIncidents{outage: outage{down: errors.New("database is locked")}}
	p := &a2aproxy.Proxy{Tasks: &endLife{}, Incidents: inc, Ledger: countingLedger{}, Recorder: &failingRecorder{},
		Clock: agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)), Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	ctx := context.Background()
	rows := []metering.Usage{{ID: "use_1", TaskID: "t-1", ListingID: "lst_1", Method: "GetTask", ErrorCode: -32001, Lost: true, Time: p.Clock.Now()}}
	if err := p.Project(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if len(inc.lost) != 0 {
		t.Fatalf("counted while the store was down: %v", inc.lost)
	}
	inc.up()
	p.WriteLater(ctx)
	if strings.Join(inc.lost, " ") != "lst_1" {
		t.Errorf("lost tasks counted once the store answered: %v", inc.lost)
	}
}

// stallPush is a push store with one config for every task, whose outbox
// can be down.
type stallPush struct {
	contracts.PushStore
	outage
	enqueued []string
}

func (s *stallPush) PushConfigs(_ context.Context, listingID, taskID string) ([]contracts.PushConfig, error) {
	return []contracts.PushConfig{{ListingID: listingID, TaskID: taskID, ConfigID: "cfg-1", OrgID: "org_b", Version: "1.0", CallbackID: "cb_1"}}, nil
}

func (s *stallPush) Enqueue(_ context.Context, d contracts.Delivery) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		return false, s.down
	}
	s.enqueued = append(s.enqueued, d.TaskID)
	return true, nil
}

// TestStallNotificationStoredLater: a stall whose notification the outbox
// refused is not notified again by the sweep (the stall is recorded), so
// the task sweeper enqueues that notification once the store answers.
func TestStallNotificationStoredLater(t *testing.T) {
	ctx := context.Background()
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	outbox := &stallPush{outage: outage{down: errors.New("database is locked")}}
	p := &a2aproxy.Proxy{Clock: clock, Tasks: &stallLife{stalled: map[string]bool{}}, Recorder: &failingRecorder{},
		Push: &a2aproxy.Push{Store: outbox, Guard: httpfetch.Guard{}}, Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	p.NoteProgress("lst_1", "t", time.Minute, wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "t", State: "working", AgentTexts: []string{"started"}})
	clock.Advance(2 * time.Minute)
	if n := p.SweepStalls(ctx); n != 1 {
		t.Fatalf("stalls marked: %d", n)
	}
	if len(outbox.enqueued) != 0 {
		t.Fatalf("enqueued while the outbox was down: %v", outbox.enqueued)
	}
	outbox.up()
	p.SweepStalls(ctx)
	p.WriteLater(ctx)
	if strings.Join(outbox.enqueued, " ") != "t" {
		t.Errorf("stall notifications enqueued once the outbox answered: %v", outbox.enqueued)
	}
}

// switchedOn is a store of kill switches with one on for good.
type switchedOn struct{ on contracts.Switch }

func (s switchedOn) SwitchVersion(context.Context) (int64, error) { return 1, nil }
func (s switchedOn) ActiveSwitches(context.Context) ([]contracts.Switch, int64, error) {
	return []contracts.Switch{s.on}, 1, nil
}
func (s switchedOn) RequestSwitchCancels(context.Context, *contracts.Switch, time.Time) (int64, error) {
	return 0, nil
}

// firstBinds is a task owners' store in which every binding is the first.
type firstBinds struct{ slowProjection }

func (*firstBinds) BindTask(_ context.Context, b contracts.TaskBinding) (string, error) {
	return b.OrgID, nil
}

// TestProjectionCancelsSwitchedTasks: a task bound by the projection after
// a kill switch's rounds of cancels (a call admitted before the switch,
// its row projected late: a backlog, a spool replayed after a crash) is
// canceled all the same when the switch concerns it (here the key that
// made it); the same batch's task of another key is not.
func TestProjectionCancelsSwitchedTasks(t *testing.T) {
	life := &childLife{}
	sw := contracts.Switch{ID: "ks_1", Scope: contracts.SwitchAPIKey, TargetID: "key_1", OrgID: "org_b", Reason: "loops", SetAt: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	p := &a2aproxy.Proxy{Tasks: life, Owners: &firstBinds{}, Ledger: countingLedger{}, Recorder: &failingRecorder{}, Switches: &a2aproxy.Switchboard{Store: switchedOn{sw}},
		Clock: agentmarket.NewManualClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)), Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	if err := p.LoadKillSwitches(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows := []metering.Usage{
		{ID: "use_1", TaskID: "t-1", ListingID: "lst_1", BuyerOrgID: "org_b", APIKeyID: "key_1", Method: "SendMessage", State: "working", Time: p.Clock.Now(), Binds: &metering.Binding{}},
		{ID: "use_2", TaskID: "t-2", ListingID: "lst_1", BuyerOrgID: "org_b", APIKeyID: "key_2", Method: "SendMessage", State: "working", Time: p.Clock.Now(), Binds: &metering.Binding{}},
	}
	if err := p.Project(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(life.requested, " "); got != "lst_1/t-1" {
		t.Errorf("cancels requested: %q, want lst_1/t-1 (the switched key's task) alone", got)
	}
}
