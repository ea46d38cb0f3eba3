package contracts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

type listingsFake map[string]*contracts.ListingTerms

func (f listingsFake) ListingTerms(_ context.Context, _ agentmarket.Actor, id string) (*contracts.ListingTerms, error) {
	if t, ok := f[id]; ok {
		return t, nil
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "listing_not_found", "no listing %q", id)
}

// TestContractLifeCycle: billing moves a contract through past due,
// suspended, active again and canceled; the invoke right follows.
func TestContractLifeCycle(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		store := contractsgorm.New(db.DB)
		authz, err := casbin.New(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		clock := agentmarket.NewManualClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
		for _, o := range []string{"org_buyer", "org_seller"} {
			if err := store.CreateOrg(ctx, &contracts.Org{ID: o, Name: o, CreatedAt: clock.Now()}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Contracts reference listings: create one row the simplest way.
		if err := db.Exec(`INSERT INTO listings (id, seller_org_id, status, health, name, description, card_json, card_hash, card_fetched_at,
			protocol_versions, streaming, push_notifications, search_text, plan_version, currency, monthly_fee_micros, refresh_seconds, created_at, updated_at)
			VALUES ('lst_1', 'org_seller', 'published', 'healthy', 'x', 'x', '{}', 'h', ?, '0.3', false, false, '', 1, 'usd', 0, 0, ?, ?)`,
			clock.Now(), clock.Now(), clock.Now()).Error; err != nil {
			t.Fatal(err)
		}
		subs := &contracts.Subscriptions{Store: store, Policies: authz, Clock: clock,
			Listings: listingsFake{"lst_1": {ID: "lst_1", SellerOrgID: "org_seller", Published: true, PlanVersion: 1}}}
		buyer := agentmarket.Actor{OrgID: "org_buyer", Role: agentmarket.RoleBuyer}
		c, err := subs.Subscribe(ctx, buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil {
			t.Fatal(err)
		}
		may := func() bool {
			ok, err := authz.Allowed(contracts.OrgSubject("org_buyer"), "*", contracts.ListingObject("lst_1"), contracts.ActInvoke)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		step := func(to contracts.ContractStatus, wantInvoke bool) *contracts.Contract {
			t.Helper()
			got, err := subs.Transition(ctx, c.ID, to)
			if err != nil {
				t.Fatalf("→ %s: %v", to, err)
			}
			if got.Status != to || may() != wantInvoke {
				t.Fatalf("→ %s: status %s, may invoke %v", to, got.Status, may())
			}
			return got
		}
		first := step(contracts.ContractPastDue, true)
		if first.PastDueAt == nil || !first.PastDueAt.Equal(clock.Now()) {
			t.Fatalf("past_due_at = %v", first.PastDueAt)
		}
		clock.Advance(time.Hour)
		if again := step(contracts.ContractPastDue, true); !again.PastDueAt.Equal(*first.PastDueAt) {
			t.Errorf("a second failure moved the grace start to %v", again.PastDueAt)
		}
		if n, err := subs.SuspendOverdue(ctx, 72*time.Hour); err != nil || n != 0 {
			t.Fatalf("within grace: suspended %d, %v", n, err)
		}
		clock.Advance(72 * time.Hour)
		if n, err := subs.SuspendOverdue(ctx, 72*time.Hour); err != nil || n != 1 {
			t.Fatalf("after grace: suspended %d, %v", n, err)
		}
		if got, _ := subs.Get(ctx, buyer, c.ID); got.Status != contracts.ContractSuspended || may() {
			t.Fatalf("after grace: %s, may invoke %v", got.Status, may())
		}
		if paid := step(contracts.ContractActive, true); paid.PastDueAt != nil {
			t.Errorf("paid contract keeps past_due_at %v", paid.PastDueAt)
		}
		step(contracts.ContractCanceled, false)
		if _, err := subs.Transition(ctx, c.ID, contracts.ContractActive); agentmarket.CodeOf(err) != "invalid_transition" {
			t.Fatalf("canceled → active: %v, want invalid_transition", err)
		}
	})
}

// trialSetup is a buyer, a seller and two published listings whose plans
// offer a 14-day trial, on a real store and casbin.
type trialSetup struct {
	subs  *contracts.Subscriptions
	clock *agentmarket.ManualClock
	may   func(listingID string) bool
	buyer agentmarket.Actor
	hooks *recordingHooks
}

// recordingHooks records what billing was told.
type recordingHooks struct{ calls []string }

func (h *recordingHooks) Attach(_ context.Context, c *contracts.Contract) error {
	h.calls = append(h.calls, "attach "+string(c.Status))
	return nil
}

func (h *recordingHooks) Detach(_ context.Context, c *contracts.Contract) error {
	h.calls = append(h.calls, "detach "+string(c.Status))
	return nil
}

func (h *recordingHooks) ScheduleEnd(_ context.Context, c *contracts.Contract) error {
	h.calls = append(h.calls, fmt.Sprintf("trial cancel %v", c.CancelAtTrialEnd))
	if c.CancelAt != nil {
		h.calls[len(h.calls)-1] = "end at " + c.CancelAt.Format(time.RFC3339)
	}
	return nil
}

func (h *recordingHooks) ChangePlan(_ context.Context, c *contracts.Contract, ch contracts.PlanChange) error {
	h.calls = append(h.calls, fmt.Sprintf("change %s #%d v%d→v%d at %s", c.ID[:4], ch.Seq, ch.FromVersion, ch.ToVersion, ch.At.Format(time.RFC3339Nano)))
	return nil
}

func newTrialSetup(t *testing.T, db *relational.DB) *trialSetup {
	ctx := context.Background()
	store := contractsgorm.New(db.DB)
	authz, err := casbin.New(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	clock := agentmarket.NewManualClock(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
	for _, o := range []string{"org_buyer", "org_seller"} {
		if err := store.CreateOrg(ctx, &contracts.Org{ID: o, Name: o, CreatedAt: clock.Now()}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"lst_1", "lst_2"} {
		if err := db.Exec(`INSERT INTO listings (id, seller_org_id, status, health, name, description, card_json, card_hash, card_fetched_at,
			protocol_versions, streaming, push_notifications, search_text, plan_version, currency, monthly_fee_micros, refresh_seconds, created_at, updated_at)
			VALUES (?, 'org_seller', 'published', 'healthy', 'x', 'x', '{}', 'h', ?, '0.3', false, false, '', 1, 'usd', 0, 0, ?, ?)`,
			id, clock.Now(), clock.Now(), clock.Now()).Error; err != nil {
			t.Fatal(err)
		}
	}
	hooks := &recordingHooks{}
	s := &trialSetup{clock: clock, buyer: agentmarket.Actor{OrgID: "org_buyer", Role: agentmarket.RoleBuyer}, hooks: hooks,
		subs: &contracts.Subscriptions{Store: store, Changes: store, Policies: authz, Clock: clock, Billing: hooks, Listings: listingsFake{
			"lst_1": {ID: "lst_1", SellerOrgID: "org_seller", Published: true, PlanVersion: 1, TrialDays: 14},
			"lst_2": {ID: "lst_2", SellerOrgID: "org_seller", Published: true, PlanVersion: 1, TrialDays: 14},
		}}}
	s.may = func(listingID string) bool {
		ok, err := authz.Allowed(contracts.OrgSubject("org_buyer"), "*", contracts.ListingObject(listingID), contracts.ActInvoke)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	return s
}

// TestTrialLifeCycle: the first subscription to a listing with a trial
// starts trialing (and may be called); a trial is had once per org and
// listing; the provider's payment of the trial's empty invoice does not
// end it, its word after the trial's end converts it at the scheduled end;
// a buyer who chose to stop is canceled at the trial's end.
func TestTrialLifeCycle(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		s := newTrialSetup(t, db)
		start := s.clock.Now()
		c, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil {
			t.Fatal(err)
		}
		end := start.Add(14 * 24 * time.Hour)
		if c.Status != contracts.ContractTrialing || c.TrialEnd == nil || !c.TrialEnd.Equal(end) || c.CancelAtTrialEnd || !s.may("lst_1") {
			t.Fatalf("first subscription = %+v (may invoke %v), want trialing until %v", c, s.may("lst_1"), end)
		}
		if !c.InTrialAt(start) || !c.InTrialAt(end.Add(-time.Millisecond)) || c.InTrialAt(end) || c.InTrialAt(start.Add(-time.Millisecond)) {
			t.Errorf("InTrialAt is wrong at the trial's ends")
		}
		// Paid while trialing (the provider's trial invoice): still trialing.
		s.clock.Advance(time.Hour)
		if got, err := s.subs.Transition(ctx, c.ID, contracts.ContractActive); err != nil || got.Status != contracts.ContractTrialing {
			t.Fatalf("invoice paid in the trial: %+v, %v; want still trialing", got, err)
		}
		// Canceled and subscribed again: no second trial.
		if _, err := s.subs.Cancel(ctx, s.buyer, c.ID); err != nil {
			t.Fatal(err)
		}
		again, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil {
			t.Fatal(err)
		}
		if again.Status != contracts.ContractActive || again.TrialEnd != nil {
			t.Fatalf("second subscription = %+v, want active without a trial", again)
		}
		_, err = s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_2", CancelAtTrialEnd: true})
		if err != nil {
			t.Fatal(err)
		}
		// Asking to stop at the end of a trial one does not get is refused.
		if _, err := s.subs.Cancel(ctx, s.buyer, again.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1", CancelAtTrialEnd: true})
		if agentmarket.CodeOf(err) != "invalid_subscription" || !strings.Contains(fmt.Sprint(err), "trial") {
			t.Errorf("cancel_at_trial_end without a trial: %v, want invalid_subscription", err)
		}
		if got := strings.Join(s.hooks.calls, ", "); got != "attach trialing, detach canceled, attach active, attach trialing, detach canceled" {
			t.Errorf("billing was told: %s", got)
		}
	})
}

// TestTrialEnds: a trial ended early (its usage allowance) converts at the
// given instant; a trial whose buyer chose to stop ends canceled at the
// trial's end, even when the provider's word comes later; the choice can
// be changed while the trial runs, and is told to billing first.
func TestTrialEnds(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		s := newTrialSetup(t, db)
		start := s.clock.Now()
		a, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_2"})
		if err != nil {
			t.Fatal(err)
		}
		s.hooks.calls = nil

		// a: its allowance ran out 3 days and 1.5 s in; the sweeper saw it later.
		s.clock.Advance(4 * 24 * time.Hour)
		early := start.Add(3*24*time.Hour + 1500*time.Millisecond)
		got, err := s.subs.EndTrial(ctx, a.ID, early)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != contracts.ContractActive || !got.TrialEnd.Equal(early) || !s.may("lst_1") {
			t.Fatalf("ended early: %+v, want active with the trial ended at %v", got, early)
		}
		if again, err := s.subs.EndTrial(ctx, a.ID, s.clock.Now()); err != nil || !again.TrialEnd.Equal(early) {
			t.Errorf("ending it again: %+v, %v; want it left as it was", again, err)
		}
		if _, err := s.subs.SetCancelAtTrialEnd(ctx, s.buyer, a.ID, true); agentmarket.CodeOf(err) != "trial_over" {
			t.Errorf("choosing to stop after the trial: %v, want trial_over", err)
		}

		// b: the buyer chooses to stop, changes their mind, chooses again.
		for _, v := range []bool{true, false, true} {
			got, err := s.subs.SetCancelAtTrialEnd(ctx, s.buyer, b.ID, v)
			if err != nil || got.CancelAtTrialEnd != v {
				t.Fatalf("SetCancelAtTrialEnd(%v) = %+v, %v", v, got, err)
			}
		}
		if _, err := s.subs.SetCancelAtTrialEnd(ctx, agentmarket.Actor{OrgID: "org_seller"}, b.ID, false); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("another org's choice: %v, want NotFound", err)
		}
		if got := strings.Join(s.hooks.calls, ", "); got != "trial cancel true, trial cancel false, trial cancel true" {
			t.Errorf("billing was told: %s", got)
		}
		// The provider says the subscription was deleted, after the trial's end.
		s.clock.Advance(11*24*time.Hour + time.Minute)
		got, err = s.subs.Transition(ctx, b.ID, contracts.ContractCanceled)
		if err != nil {
			t.Fatal(err)
		}
		if want := start.Add(14 * 24 * time.Hour); got.Status != contracts.ContractCanceled || !got.CanceledAt.Equal(want) || !got.TrialEnd.Equal(want) || s.may("lst_2") {
			t.Fatalf("stopped with the trial: %+v, want canceled at %v", got, want)
		}
	})
}

// failingAudit is an audit log that cannot write.
type failingAudit struct{}

func (failingAudit) RecordChange(context.Context, agentmarket.Change) error {
	return agentmarket.Errorf(agentmarket.Unavailable, "audit_failed", "the audit log could not be written")
}

// TestAuditFailureLeavesNoHalfChange: when a contract's change cannot be
// recorded in the audit log, the request fails, but what follows from the
// change still happens: a canceled contract is detached from the provider
// and its invoke right revoked on the meters, a scheduled cancellation
// too.
func TestAuditFailureLeavesNoHalfChange(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		s := newTrialSetup(t, db)
		c, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil || !s.may("lst_1") {
			t.Fatalf("subscribe: %v, may %v", err, s.may("lst_1"))
		}
		s.subs.Audit = failingAudit{}
		if _, err := s.subs.Cancel(ctx, s.buyer, c.ID); agentmarket.CodeOf(err) != "audit_failed" {
			t.Fatalf("Cancel with the audit log down = %v, want audit_failed", err)
		}
		got, err := s.subs.Get(ctx, s.buyer, c.ID)
		if err != nil || got.Status != contracts.ContractCanceled {
			t.Fatalf("after the failed entry: %+v, %v; want canceled", got, err)
		}
		if !slices.Contains(s.hooks.calls, "detach canceled") {
			t.Errorf("billing was told %v, want the detach", s.hooks.calls)
		}
		if s.may("lst_1") {
			t.Error("the invoke right survived the cancellation")
		}
	})
}
