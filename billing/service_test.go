package billing_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/gormstore"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// ---- a fake provider that behaves like Stripe where it matters ----

// fakeProvider records every call. Usage reports are counted the way
// Stripe counts them: once per idempotency key (a key sent again with the
// same parameters is answered from the first; with others, refused).
type fakeProvider struct {
	mu    sync.Mutex
	calls []string
	// byKey is the first usage report of each key; counted the quantity
	// counted per subscription item.
	byKey   map[string]usageCall
	counted map[string]int64
	// subscribed are the Subscribe inputs, canceled the subscriptions.
	subscribed []billing.SubscribeInput
	canceled   []string
	// failSubscribe makes the next Subscribe calls fail (Unavailable).
	failSubscribe int
	failCancel    bool // CancelSubscription fails
	// loseAnswers makes the next usage reports count but answer
	// Unavailable, as when the answer is lost on the way back.
	loseAnswers int
	// refuse makes the next usage reports be refused (Invalid).
	refuse int
	// down makes every call fail (Unavailable).
	down bool
	n    int
}

type usageCall struct {
	Item string
	Qty  int64
	At   time.Time
	Key  string
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{byKey: map[string]usageCall{}, counted: map[string]int64{}}
}

var errUnavailable = agentmarket.Errorf(agentmarket.Unavailable, "payment_provider_unavailable", "the payment provider is unavailable")

func (p *fakeProvider) record(format string, args ...any) {
	p.calls = append(p.calls, fmt.Sprintf(format, args...))
}

func (p *fakeProvider) EnsurePlan(_ context.Context, listingID, listingName string, plan listings.Plan) (billing.PlanPrices, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("EnsurePlan %s v%d", listingID, plan.Version)
	if p.down {
		return billing.PlanPrices{}, errUnavailable
	}
	ids := map[billing.LineKind]string{}
	for _, k := range billing.MeteredLineKinds {
		ids[k] = fmt.Sprintf("price_%s_%d_%s", listingID, plan.Version, k)
	}
	return billing.PlanPrices{ProductID: "am_" + listingID, FlatPriceID: fmt.Sprintf("price_%s_%d_flat", listingID, plan.Version), MeteredPriceIDs: ids}, nil
}

func (p *fakeProvider) EnsureCustomer(_ context.Context, orgID, orgName, email string) (billing.Customer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("EnsureCustomer %s %q %s", orgID, orgName, email)
	if p.down {
		return billing.Customer{}, errUnavailable
	}
	return billing.Customer{ID: "cus_" + orgID}, nil
}

func (p *fakeProvider) Subscribe(_ context.Context, in billing.SubscribeInput) (billing.SubscriptionRefs, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in.TrialEnd.IsZero() {
		p.record("Subscribe %s", in.ContractID)
	} else {
		p.record("Subscribe %s trial_end=%s cancel_at_trial_end=%v anchor=%s", in.ContractID, in.TrialEnd.Format(time.RFC3339),
			in.CancelAtTrialEnd, in.BillingCycleAnchor.Format(time.RFC3339))
	}
	if err := in.Validate(); err != nil {
		return billing.SubscriptionRefs{}, err
	}
	if p.down || p.failSubscribe > 0 {
		p.failSubscribe--
		return billing.SubscriptionRefs{}, errUnavailable
	}
	p.subscribed = append(p.subscribed, in)
	refs := billing.SubscriptionRefs{ID: "sub_" + in.ContractID, FlatItemID: "si_" + in.ContractID + "_flat", MeteredItemIDs: map[billing.LineKind]string{}}
	for _, k := range billing.MeteredLineKinds {
		refs.MeteredItemIDs[k] = itemID(in.ContractID, k)
	}
	return refs, nil
}

func itemID(contractID string, k billing.LineKind) string {
	return "si_" + contractID + "_" + string(k)
}

func (p *fakeProvider) CancelSubscription(_ context.Context, subscriptionID, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("CancelSubscription %s %s", subscriptionID, key)
	if p.down || p.failCancel {
		return errUnavailable
	}
	p.canceled = append(p.canceled, subscriptionID)
	return nil
}

func (p *fakeProvider) EndTrialNow(_ context.Context, subscriptionID, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("EndTrialNow %s %s", subscriptionID, key)
	if p.down {
		return errUnavailable
	}
	return nil
}

func (p *fakeProvider) SetCancelAt(_ context.Context, subscriptionID string, at time.Time, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	when := "none"
	if !at.IsZero() {
		when = at.UTC().Format(time.RFC3339)
	}
	p.record("SetCancelAt %s %s %s", subscriptionID, when, key)
	if p.down {
		return errUnavailable
	}
	return nil
}

func (p *fakeProvider) ChangePlan(_ context.Context, in billing.PlanChangeInput) (billing.SubscriptionRefs, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("ChangePlan %s %s→%s at %s %s", in.SubscriptionID, in.Old.FlatItemID, in.Prices.FlatPriceID, in.At.UTC().Format(time.RFC3339Nano), in.IdempotencyKey)
	if p.down {
		return billing.SubscriptionRefs{}, errUnavailable
	}
	refs := billing.SubscriptionRefs{ID: in.SubscriptionID, FlatItemID: in.Old.FlatItemID + "_" + in.Prices.FlatPriceID, MeteredItemIDs: map[billing.LineKind]string{}}
	for _, k := range billing.MeteredLineKinds {
		refs.MeteredItemIDs[k] = in.Old.MeteredItemIDs[k] + "+"
	}
	return refs, nil
}

func (p *fakeProvider) AddInvoiceItem(_ context.Context, in billing.InvoiceItem) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("AddInvoiceItem %s %s %d %s %q %s", in.SubscriptionID, in.CustomerID, in.AmountMinor, in.Currency, in.Description, in.IdempotencyKey)
	if p.down {
		return errUnavailable
	}
	return nil
}

func (p *fakeProvider) ReportUsage(_ context.Context, item string, qty int64, at time.Time, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.record("ReportUsage %s %d %s %s", item, qty, at.UTC().Format(time.RFC3339), key)
	if p.down {
		return errUnavailable
	}
	if p.refuse > 0 {
		p.refuse--
		return agentmarket.Errorf(agentmarket.Invalid, "payment_provider_invalid_request", "timestamp outside the current billing period")
	}
	c := usageCall{Item: item, Qty: qty, At: at.UTC(), Key: key}
	if first, ok := p.byKey[key]; ok {
		if first != c {
			return agentmarket.Errorf(agentmarket.Conflict, "payment_provider_idempotency_conflict", "key %s reused with other parameters", key)
		}
	} else {
		p.byKey[key] = c
		p.counted[item] += qty
	}
	if p.loseAnswers > 0 {
		p.loseAnswers--
		return errUnavailable
	}
	return nil
}

// take returns the calls recorded since the last take.
func (p *fakeProvider) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	p.calls = nil
	return c
}

func (p *fakeProvider) countedFor(item string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counted[item]
}

func (p *fakeProvider) set(f func(p *fakeProvider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// ---- the other collaborators ----

// plans is a PlanSource of fixed plan versions.
type plans map[string]listings.Plan

func (ps plans) Plan(_ context.Context, listingID string, version int) (*listings.Plan, error) {
	p, ok := ps[fmt.Sprintf("%s/%d", listingID, version)]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "plan_not_found", "no plan %d of %s", version, listingID)
	}
	return &p, nil
}

// lister is a ContractLister over a fixed set of contracts.
type lister struct{ all []contracts.Contract }

func (l *lister) ContractsActiveIn(_ context.Context, p billing.Period) ([]contracts.Contract, error) {
	var out []contracts.Contract
	for _, c := range l.all {
		if c.CreatedAt.Before(p.End) && (c.CanceledAt == nil || c.CanceledAt.After(p.Start)) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ListContracts implements billing.Stays.
func (l *lister) ListContracts(_ context.Context, org string) ([]contracts.Contract, error) {
	var out []contracts.Contract
	for _, c := range l.all {
		if c.BuyerOrgID == org {
			out = append(out, c)
		}
	}
	return out, nil
}

// flakyStore is a Store whose MarkReportSent fails while crash is set,
// as if the process died between the provider's answer and the marking.
type flakyStore struct {
	billing.Store
	crash    atomic.Bool
	failSave atomic.Bool // SaveSubscription fails
	// crashCharge: MarkCommitmentChargeSent fails.
	crashCharge atomic.Bool
}

var errSave = errors.New("simulated failure to record the subscription")

func (s *flakyStore) SaveSubscription(ctx context.Context, sub *billing.Subscription) (*billing.Subscription, error) {
	if s.failSave.Load() {
		return nil, errSave
	}
	return s.Store.SaveSubscription(ctx, sub)
}

var errCrash = errors.New("simulated crash before the report was marked sent")

// crashCharge makes MarkCommitmentChargeSent fail: a crash after the
// provider took the charge, before it was marked sent.
func (s *flakyStore) MarkCommitmentChargeSent(ctx context.Context, contractID string, periodStart, at time.Time) error {
	if s.crashCharge.Load() {
		return errCrash
	}
	return s.Store.MarkCommitmentChargeSent(ctx, contractID, periodStart, at)
}

func (s *flakyStore) MarkReportSent(ctx context.Context, k billing.ReportKey, at time.Time) (bool, error) {
	if s.crash.Load() {
		return false, errCrash
	}
	return s.Store.MarkReportSent(ctx, k, at)
}

// env is a billing setup on real stores: the gorm store on SQLite and the
// embedded usage store, with a manual clock and the fake provider.
type env struct {
	store *flakyStore
	usage *embedded.Store
	clock *agentmarket.ManualClock
	prov  *fakeProvider
	plans plans
	ctrs  *lister
	n     int
}

// t0 is 10:17:42 on 3 May 2026 (UTC).
var t0 = time.Date(2026, 5, 3, 10, 17, 42, 0, time.UTC)

func newEnv(t *testing.T) *env { return newEnvOn(t, relationaltest.SQLite) }

// newEnvOn is an env whose billing store is on the database open opens.
func newEnvOn(t *testing.T, open func(testing.TB) *relational.DB) *env {
	t.Helper()
	db := open(t)
	u, err := embedded.Open(filepath.Join(t.TempDir(), "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return &env{
		store: &flakyStore{Store: gormstore.New(db.DB)},
		usage: u,
		clock: agentmarket.NewManualClock(t0),
		prov:  newFakeProvider(),
		plans: plans{"lst_echo/3": basePlan(49_000_000)},
		ctrs:  &lister{},
	}
}

func (e *env) service() *billing.Service {
	return &billing.Service{Store: e.store, Provider: e.prov, Usage: e.usage, Clock: e.clock, Plans: e.plans, Contracts: e.ctrs,
		Stays: e.ctrs, PlatformFeePercent: 12.5, Logger: quiet}
}

func (e *env) ledger() *billing.Service {
	s := e.service()
	s.Provider = nil
	return s
}

func (e *env) reporter() *billing.Reporter {
	return &billing.Reporter{Store: e.store, Provider: e.prov, Usage: e.usage, Clock: e.clock, Logger: quiet}
}

// contract is a contract of org_buyer to lst_echo at plan version 3.
func (e *env) contract(id string, created time.Time) *contracts.Contract {
	c := contracts.Contract{ID: id, BuyerOrgID: "org_buyer", ListingID: "lst_echo", SellerOrgID: "org_seller", PlanVersion: 3,
		Status: contracts.ContractActive, CreatedAt: created, UpdatedAt: created}
	e.ctrs.all = append(e.ctrs.all, c)
	return &c
}

// quiet drops the logs of the code under test.
var quiet = slog.New(slog.DiscardHandler)

var buyer = billing.OrgInfo{ID: "org_buyer", Name: "Buyer Ltd", Email: "billing@buyer.example"}

// attach creates a contract at the clock's time and its subscription.
func (e *env) attach(t *testing.T, id string) *contracts.Contract {
	t.Helper()
	c := e.contract(id, e.clock.Now())
	if err := e.service().Attach(context.Background(), c, buyer, "Echo agent", e.plans["lst_echo/3"], ""); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	e.prov.take()
	return c
}

// use stores one usage row of a contract at time at.
func (e *env) use(t *testing.T, contractID string, at time.Time, u billing.Usage) {
	t.Helper()
	e.n++
	row := metering.Usage{ID: fmt.Sprintf("u%d", e.n), Time: at, ContractID: contractID, ListingID: "lst_echo", BuyerOrgID: "org_buyer",
		SellerOrgID: "org_seller", InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ComputeMs: u.ComputeMs, Tasks: u.Tasks}
	if err := e.usage.Insert(context.Background(), []metering.Usage{row}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) at(t time.Time) { e.clock.Advance(t.Sub(e.clock.Now())) }

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("provider calls:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// ---- Attach and Detach ----

func TestAttachCreatesEachObjectOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.service()
	plan := e.plans["lst_echo/3"]
	c1 := e.contract("ctr_1", t0)
	if err := s.Attach(ctx, c1, buyer, "Echo agent", plan, ""); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take(),
		"EnsurePlan lst_echo v3",
		`EnsureCustomer org_buyer "Buyer Ltd" billing@buyer.example`,
		"Subscribe ctr_1")
	in := e.prov.subscribed[0]
	if !in.BillingCycleAnchor.Equal(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)) || in.ConnectedAccountID != "" || in.PlatformFeePercent != 0 ||
		in.CustomerID != "cus_org_buyer" || in.Prices.FlatPriceID != "price_lst_echo_3_flat" {
		t.Errorf("subscribe input = %+v", in)
	}
	sub, err := e.store.Subscription(ctx, "ctr_1")
	if err != nil || sub.Refs.ID != "sub_ctr_1" || sub.Refs.MeteredItemIDs[billing.LineTasks] != "si_ctr_1_tasks" || !sub.CreatedAt.Equal(t0) {
		t.Fatalf("stored subscription = %+v, %v", sub, err)
	}

	// Again: nothing to do.
	if err := s.Attach(ctx, c1, buyer, "Echo agent", plan, ""); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take())

	// Another contract of the same buyer and plan, with a seller who has
	// a connected account: the prices and the customer are reused.
	c2 := e.contract("ctr_2", t0)
	if err := s.Attach(ctx, c2, buyer, "Echo agent", plan, "acct_seller"); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take(), "Subscribe ctr_2")
	if in := e.prov.subscribed[1]; in.ConnectedAccountID != "acct_seller" || in.PlatformFeePercent != 12.5 {
		t.Errorf("subscribe input with a connected account = %+v", in)
	}
}

func TestAttachResumesAfterAFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.service()
	c := e.contract("ctr_1", t0)
	e.prov.set(func(p *fakeProvider) { p.failSubscribe = 1 })
	if err := s.Attach(ctx, c, buyer, "Echo agent", e.plans["lst_echo/3"], ""); agentmarket.KindOf(err) != agentmarket.Unavailable {
		t.Fatalf("Attach with the provider down = %v, want Unavailable", err)
	}
	e.prov.take()
	if _, err := e.store.Subscription(ctx, "ctr_1"); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Fatalf("a subscription was stored: %v", err)
	}
	if err := s.Attach(ctx, c, buyer, "Echo agent", e.plans["lst_echo/3"], ""); err != nil {
		t.Fatal(err)
	}
	// The prices and the customer stored by the first call are reused.
	wantCalls(t, e.prov.take(), "Subscribe ctr_1")
}

// TestAttachCancelsWhatItCannotRecord: a subscription the provider
// created but the store could not record is canceled at the provider at
// once (the contract is canceled too), with the contract's cancel key, so
// no buyer is charged for a contract that does not exist; if that cancel
// fails too, both errors are returned.
func TestAttachCancelsWhatItCannotRecord(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.service()
	c := e.contract("ctr_1", t0)
	e.store.failSave.Store(true)
	if err := s.Attach(ctx, c, buyer, "Echo agent", e.plans["lst_echo/3"], ""); !errors.Is(err, errSave) {
		t.Fatalf("Attach = %v, want the save error", err)
	}
	calls := e.prov.take()
	if n := len(calls); n < 2 || calls[n-2] != "Subscribe ctr_1" || calls[n-1] != "CancelSubscription sub_ctr_1 "+billing.CancelKey("ctr_1") {
		t.Errorf("provider calls = %q, want the subscription canceled right after it was created", calls)
	}

	c2 := e.contract("ctr_2", t0)
	e.prov.set(func(p *fakeProvider) { p.failCancel = true })
	if err := s.Attach(ctx, c2, buyer, "Echo agent", e.plans["lst_echo/3"], ""); !errors.Is(err, errSave) || !errors.Is(err, errUnavailable) {
		t.Errorf("Attach with the cancel failing too = %v, want both errors", err)
	}
}

func TestAttachRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.contract("ctr_1", t0)
	other := e.plans["lst_echo/3"]
	other.Version = 4
	err := e.service().Attach(context.Background(), c, billing.OrgInfo{}, "Echo agent", other, "")
	if got := fieldRules(t, err, "invalid_attach"); got != "plan.version:frozen buyer.id:required" {
		t.Errorf("fields = %s", got)
	}
	wantCalls(t, e.prov.take())
}

func TestAttachAndDetachWithoutProviderDoNothing(t *testing.T) {
	e := newEnv(t)
	s := e.ledger()
	c := e.contract("ctr_1", t0)
	if err := s.Attach(context.Background(), c, buyer, "Echo agent", e.plans["lst_echo/3"], ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Detach(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take())
}

func TestDetachReportsTheLastUsageThenCancels(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.attach(t, "ctr_1")
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{InputTokens: 1000})
	e.at(date(2026, 5, 3, 11, 2))
	if n, err := e.reporter().RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	e.prov.take()
	// Usage in the open window, then the buyer cancels at 11:20.
	e.use(t, "ctr_1", date(2026, 5, 3, 11, 10), billing.Usage{InputTokens: 500, Tasks: 1})
	e.at(date(2026, 5, 3, 11, 20))
	if err := e.service().Detach(ctx, c); err != nil {
		t.Fatal(err)
	}
	w := period(date(2026, 5, 3, 11), date(2026, 5, 3, 11, 20))
	wantCalls(t, e.prov.take(),
		"ReportUsage si_ctr_1_input_tokens 500 2026-05-03T11:19:59Z "+billing.UsageReportKey("ctr_1", billing.LineInputTokens, w),
		"ReportUsage si_ctr_1_tasks 1 2026-05-03T11:19:59Z "+billing.UsageReportKey("ctr_1", billing.LineTasks, w),
		"CancelSubscription sub_ctr_1 am1/contract/ctr_1/cancel")
	sub, err := e.store.Subscription(ctx, "ctr_1")
	if err != nil || sub.CanceledAt == nil {
		t.Fatalf("subscription after Detach = %+v, %v", sub, err)
	}
	// The reporter leaves it alone now, and Detach again does nothing.
	e.use(t, "ctr_1", date(2026, 5, 3, 11, 30), billing.Usage{InputTokens: 7})
	e.at(date(2026, 5, 3, 13, 0))
	if n, err := e.reporter().RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce after Detach = %d, %v", n, err)
	}
	if err := e.service().Detach(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take())
}

func TestHooksAttachAtTheFrozenPlan(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var looked []string
	h := &billing.Hooks{
		Service: e.service(),
		Buyer: func(_ context.Context, orgID string) (billing.OrgInfo, error) {
			looked = append(looked, "buyer "+orgID)
			return billing.OrgInfo{ID: orgID, Name: "Buyer Ltd", Email: "billing@buyer.example"}, nil
		},
		Listing: func(_ context.Context, listingID string) (string, string, error) {
			looked = append(looked, "listing "+listingID)
			return "Echo agent", "acct_seller", nil
		},
	}
	c := e.contract("ctr_1", t0)
	if err := h.Attach(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantStrings(t, "lookups", looked, "buyer org_buyer", "listing lst_echo")
	wantCalls(t, e.prov.take(), "EnsurePlan lst_echo v3", `EnsureCustomer org_buyer "Buyer Ltd" billing@buyer.example`, "Subscribe ctr_1")
	if in := e.prov.subscribed[0]; in.ConnectedAccountID != "acct_seller" || in.PlatformFeePercent != 12.5 {
		t.Errorf("subscribe input = %+v", in)
	}
	if err := h.Detach(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take(), "CancelSubscription sub_ctr_1 am1/contract/ctr_1/cancel")

	// A plan version that does not exist is an error, not a guess.
	c2 := e.contract("ctr_2", t0)
	c2.PlanVersion = 9
	if err := h.Attach(ctx, c2); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("Attach at a missing plan version = %v, want NotFound", err)
	}
	// Without a provider nothing is looked up.
	looked = nil
	h.Service = e.ledger()
	if err := h.Attach(ctx, e.contract("ctr_3", t0)); err != nil || len(looked) != 0 {
		t.Errorf("Attach without a provider = %v, looked up %v", err, looked)
	}
}

func TestContractsBetweenIsAContractLister(t *testing.T) {
	var got []time.Time
	var l billing.ContractLister = billing.ContractsBetween(func(_ context.Context, from, to time.Time) ([]contracts.Contract, error) {
		got = append(got, from, to)
		return []contracts.Contract{{ID: "ctr_1"}}, nil
	})
	may := billing.MonthOf(t0)
	cs, err := l.ContractsActiveIn(context.Background(), may)
	if err != nil || len(cs) != 1 || len(got) != 2 || !got[0].Equal(may.Start) || !got[1].Equal(may.End) {
		t.Fatalf("ContractsActiveIn = %+v, %v; called with %v", cs, err, got)
	}
}
