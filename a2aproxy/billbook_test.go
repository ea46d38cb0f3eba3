package a2aproxy_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/metering"
)

// billStore is coreMarket's task store with the bills a meter billing in
// memory keeps on each task's row (contracts.BatchTaskOwners); down fails
// its reads of bound tasks.
type billStore struct {
	*coreMarket
	// reads, when positive, is how many more reads of bound tasks succeed
	// before the database is down for reads.
	reads atomic.Int32
}

func (s *billStore) TaskOwner(ctx context.Context, listing, task string) (*contracts.TaskBinding, error) {
	if s.reads.Load() > 0 && s.reads.Add(-1) == 0 {
		return nil, agentmarket.Errorf(agentmarket.Unavailable, "db_down", "the database is down")
	}
	return s.coreMarket.TaskOwner(ctx, listing, task)
}

// Bill is the shared database's ledger over the same rows (as
// gormledger bills a bound task): max(billed, cum) + add.
func (s *billStore) Bill(_ context.Context, listing, task string, cum, add metering.Counters) (metering.Counters, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.owners[listing+"|"+task]
	var old metering.Counters
	first := b.Billed == nil
	if !first {
		old = metering.Counters{InputTokens: b.Billed.InputTokens, OutputTokens: b.Billed.OutputTokens, ComputeMs: b.Billed.ComputeMs}
	}
	n := old.Raise(cum, add)
	b.Billed = &contracts.TaskBilled{InputTokens: n.InputTokens, OutputTokens: n.OutputTokens, ComputeMs: n.ComputeMs}
	s.owners[listing+"|"+task] = b
	return n.Sub(old), first, nil
}

func (s *billStore) BindTasks(ctx context.Context, bs []contracts.TaskBinding) ([]string, []error) {
	owners, errs := make([]string, len(bs)), make([]error, len(bs))
	for i, b := range bs {
		owners[i], errs[i] = s.BindTask(ctx, b)
		if errs[i] == nil && b.Billed != nil && owners[i] == b.OrgID {
			errs[i] = s.RaiseBilled(ctx, []contracts.TaskBill{{ListingID: b.ListingID, TaskID: b.TaskID, Billed: *b.Billed}})
		}
	}
	return owners, errs
}

func (s *billStore) RaiseBilled(_ context.Context, bills []contracts.TaskBill) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tb := range bills {
		k := tb.ListingID + "|" + tb.TaskID
		b, ok := s.owners[k]
		if !ok {
			continue
		}
		c := tb.Billed
		if old := b.Billed; old != nil {
			c = contracts.TaskBilled{InputTokens: max(old.InputTokens, c.InputTokens), OutputTokens: max(old.OutputTokens, c.OutputTokens),
				ComputeMs: max(old.ComputeMs, c.ComputeMs), At: old.At}
		}
		b.Billed = &c
		s.owners[k] = b
	}
	return nil
}

// startBilling builds a meter that bills in memory over store, with ledger
// for the rows it leaves to the shipper.
func startBilling(t *testing.T, agent *coreAgent, store *billStore, ledger metering.Ledger) *fiber.App {
	t.Helper()
	_, m := startCore(t, agent) // the listing and the market's fakes
	store.coreMarket.listing = m.listing
	allow, err := httpfetch.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p := &a2aproxy.Proxy{PublicURL: "http://meter.test", Auth: store, Resolver: store, Plans: store, Contracts: store, Entitlements: store, Owners: store,
		Recorder: store, Incidents: store, Ledger: ledger, BillInMemory: true, Guard: httpfetch.Guard{Allow: allow}, Clock: agentmarket.SystemClock{},
		Logger: slog.New(slog.DiscardHandler)}
	p.Init()
	store.proxy = p
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	p.Mount(app)
	return app
}

// TestBillInMemory: a meter billing in memory records each row with its
// final bill (no pending usage): the agent's cumulative report is billed
// once, a poll that reports the same bills nothing; the projection stores
// the task's bill on its one row; a meter started afresh over that store
// bills the task's next poll from the stored bill, not from zero.
func TestBillInMemory(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	store := &billStore{coreMarket: &coreMarket{owners: map[string]contracts.TaskBinding{}}}
	app := startBilling(t, agent, store, nil)
	get := `{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"task-1"}}`
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", get)
	rows := store.usage()
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	reported := metering.Counters{InputTokens: 12, OutputTokens: 34, ComputeMs: 56}
	cost := metering.Price(metering.Rates{InputTokensPerMillion: 1_000_000, OutputTokensPerMillion: 2_000_000}, reported, 1)
	if u := rows[0]; u.Pending != nil || u.InputTokens != 12 || u.OutputTokens != 34 || u.ComputeMs != 56 || u.Tasks != 1 ||
		u.CostMicros != cost || u.Billed == nil || *u.Billed != reported {
		t.Errorf("the send's row: %+v billed %+v", u, u.Billed)
	}
	if u := rows[1]; u.Pending != nil || u.InputTokens != 0 || u.OutputTokens != 0 || u.ComputeMs != 0 || u.Tasks != 0 || u.CostMicros != 0 ||
		u.Billed == nil || *u.Billed != reported {
		t.Errorf("the poll's row (same report): %+v billed %+v", u, u.Billed)
	}
	if err := store.proxy.Project(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	if b, err := store.TaskOwner(context.Background(), "lst_core", "task-1"); err != nil || b.Billed == nil ||
		(metering.Counters{InputTokens: b.Billed.InputTokens, OutputTokens: b.Billed.OutputTokens, ComputeMs: b.Billed.ComputeMs}) != reported {
		t.Fatalf("the stored task: %+v, %v", b, err)
	}
	if rows[0].Billed != nil || rows[0].Binds != nil {
		t.Errorf("the projection left the row's bill for the store: %+v", rows[0])
	}

	// Afresh: the same store, a new meter (its memory empty).
	store.rows = nil
	app = startBilling(t, agent, store, nil)
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", get)
	if rows := store.usage(); len(rows) != 1 || rows[0].InputTokens != 0 || rows[0].Tasks != 0 || rows[0].CostMicros != 0 || rows[0].Pending != nil {
		t.Errorf("after a restart, the poll's row: %+v", rows)
	}
}

// TestBillInMemoryDeferred: when a task's stored bill cannot be read, the
// meter leaves its rows to the shipper (pending, billed through the shared
// ledger), every later one too until those are settled, even once the
// database answers again; then it reads the stored bill again, which holds
// them. The task is billed once in all.
func TestBillInMemoryDeferred(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	store := &billStore{coreMarket: &coreMarket{owners: map[string]contracts.TaskBinding{}}}
	app := startBilling(t, agent, store, store)
	get := `{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"task-1"}}`
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	rows := store.usage()
	if err := store.proxy.Project(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	// Afresh: the binding's read works (ownership), the bill's does not.
	store.rows = nil
	app = startBilling(t, agent, store, store)
	store.reads.Store(2)
	for range 2 {
		if _, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", get); !strings.Contains(body, `"id":"task-1"`) {
			t.Fatalf("GetTask: %s", body)
		}
	}
	rows = store.usage()
	if len(rows) != 2 || rows[0].Pending == nil || rows[1].Pending == nil || rows[0].Billed != nil || rows[1].Billed != nil {
		t.Fatalf("rows while the bill cannot be read: %+v", rows)
	}
	if err := store.proxy.Project(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	store.rows = nil
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", get)
	after := store.usage()
	if len(after) != 1 || after[0].Pending != nil || after[0].Billed == nil {
		t.Fatalf("once settled, the row: %+v", after)
	}
	var total metering.Counters
	for _, u := range append(rows, after...) {
		total = metering.Counters{InputTokens: total.InputTokens + u.InputTokens, OutputTokens: total.OutputTokens + u.OutputTokens,
			ComputeMs: total.ComputeMs + u.ComputeMs}
	}
	if !total.Zero() {
		t.Errorf("after the first bill, the polls billed %+v more, want nothing", total)
	}
}
