package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// TaskStore is what RunTasks exercises: contracts, the tasks the meter
// carries and their push notifications, which every adapter keeps beside
// the accounts.
type TaskStore = interface {
	contracts.Store
	contracts.ContractStore
	contracts.PlanChangeStore
	contracts.AlertStore
	contracts.BatchTaskOwners
	contracts.TaskLife
	contracts.PushStore
}

// TaskFactory returns a fresh, empty store and a function that creates a
// listing sold by an org already in the store: contracts reference
// listings, which another package keeps.
type TaskFactory func(t *testing.T) (s TaskStore, newListing func(listingID, sellerOrgID string))

// RunTasks runs the contract suite of contracts, task bindings, task life
// and push notifications.
func RunTasks(t *testing.T, newStore TaskFactory) {
	runContracts(t, newStore)
	runTrials(t, newStore)
	runPlanChanges(t, newStore)
	runAlerts(t, newStore)
	runBindings(t, newStore)
	runTaskLife(t, newStore)
	runPush(t, newStore)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, what string, err error, kind agentmarket.Kind) {
	t.Helper()
	if err == nil || agentmarket.KindOf(err) != kind {
		t.Errorf("%s: err = %v, want kind %s", what, err, kind)
	}
}

func wantBool(t *testing.T, what string, got bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// ts shows an instant with its location, so comparing two renderings
// checks both the instant and that the store handed it back in UTC.
func ts(t time.Time) string { return t.Format(time.RFC3339Nano) + " " + t.Location().String() }

func tsp(t *time.Time) string {
	if t == nil {
		return "nil"
	}
	return ts(*t)
}

func utc(t time.Time) *time.Time {
	u := t.UTC()
	return &u
}

func showBinding(b contracts.TaskBinding) string {
	return fmt.Sprintf("%s/%s org=%s contract=%s context=%s created=%s parent=%s/%s deadline=%s reused=%s",
		b.ListingID, b.TaskID, b.OrgID, b.ContractID, b.ContextID, ts(b.CreatedAt), b.ParentListingID, b.ParentTaskID, tsp(b.DeadlineAt), tsp(b.ReusedAt))
}

func wantBinding(t *testing.T, what string, got, want contracts.TaskBinding) {
	t.Helper()
	want.CreatedAt = want.CreatedAt.UTC()
	if want.DeadlineAt != nil {
		want.DeadlineAt = utc(*want.DeadlineAt)
	}
	if want.ReusedAt != nil {
		want.ReusedAt = utc(*want.ReusedAt)
	}
	if g, w := showBinding(got), showBinding(want); g != w {
		t.Errorf("%s =\n  %s\nwant\n  %s", what, g, w)
	}
}

func taskIDs(bs []contracts.TaskBinding) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.ListingID+"/"+b.TaskID)
	}
	return out
}

func runContracts(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	budgets := contracts.TimeBudgets{RequestTimeout: 1500 * time.Millisecond, TaskTimeout: 2 * time.Hour, MaxPause: 10 * time.Minute}
	setup := func(t *testing.T) TaskStore {
		s, newListing := newStore(t)
		for _, id := range []string{"org_b", "org_s"} {
			must(t, s.CreateOrg(ctx, org(id, false), nil, nil))
		}
		newListing("lst_1", "org_s")
		newListing("lst_2", "org_s")
		for _, c := range []*contracts.Contract{
			{ID: "ctr_1", BuyerOrgID: "org_b", ListingID: "lst_1", SellerOrgID: "org_s", PlanVersion: 1, Status: contracts.ContractActive,
				CreatedAt: t0, UpdatedAt: t0, Budgets: budgets},
			{ID: "ctr_2", BuyerOrgID: "org_b", ListingID: "lst_2", SellerOrgID: "org_s", PlanVersion: 1, Status: contracts.ContractActive,
				CreatedAt: t0.Add(time.Minute), UpdatedAt: t0.Add(time.Minute)},
		} {
			must(t, s.CreateContract(ctx, c, nil))
		}
		return s
	}

	t.Run("contracts: budgets round trip", func(t *testing.T) {
		s := setup(t)
		c, err := s.GetContract(ctx, "ctr_1")
		must(t, err)
		if c.Budgets != budgets {
			t.Errorf("GetContract budgets = %+v, want %+v", c.Budgets, budgets)
		}
		c, err = s.OpenContract(ctx, "org_b", "lst_1")
		must(t, err)
		if c.Budgets != budgets {
			t.Errorf("OpenContract budgets = %+v, want %+v", c.Budgets, budgets)
		}
		cs, err := s.ListContracts(ctx, "org_b")
		must(t, err)
		if len(cs) != 2 || cs[0].Budgets != budgets || cs[1].Budgets != (contracts.TimeBudgets{}) {
			t.Errorf("ListContracts = %+v, want ctr_1 with %+v and ctr_2 with none", cs, budgets)
		}
	})

	t.Run("contracts: set budgets", func(t *testing.T) {
		s := setup(t)
		at := t0.Add(time.Hour)
		nb := contracts.TimeBudgets{TaskTimeout: 30 * time.Minute}
		c, err := s.SetContractBudgets(ctx, "ctr_2", nb, at)
		must(t, err)
		if c.ID != "ctr_2" || c.Budgets != nb || ts(c.UpdatedAt) != ts(at.UTC()) || ts(c.CreatedAt) != ts(t0.Add(time.Minute).UTC()) {
			t.Errorf("SetContractBudgets = %+v, want ctr_2 with %+v updated at %v", c, nb, at)
		}
		c, err = s.GetContract(ctx, "ctr_2")
		must(t, err)
		if c.Budgets != nb || c.Status != contracts.ContractActive || c.BuyerOrgID != "org_b" {
			t.Errorf("GetContract after SetContractBudgets = %+v, want budgets %+v and the rest unchanged", c, nb)
		}
		// Clearing them: zero is "the listing's".
		c, err = s.SetContractBudgets(ctx, "ctr_1", contracts.TimeBudgets{}, at)
		must(t, err)
		if c.Budgets != (contracts.TimeBudgets{}) {
			t.Errorf("cleared budgets = %+v, want none", c.Budgets)
		}
		if c, _ := s.GetContract(ctx, "ctr_2"); c.Budgets != nb {
			t.Errorf("another contract's budgets changed: %+v", c.Budgets)
		}
		_, err = s.SetContractBudgets(ctx, "ctr_nope", nb, at)
		wantKind(t, "SetContractBudgets(unknown)", err, agentmarket.NotFound)
	})
}

func runTrials(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	setup := func(t *testing.T) TaskStore {
		s, newListing := newStore(t)
		for _, id := range []string{"org_b", "org_s"} {
			must(t, s.CreateOrg(ctx, org(id, false), nil, nil))
		}
		newListing("lst_1", "org_s")
		newListing("lst_2", "org_s")
		return s
	}
	trialEnd := t0.Add(14 * 24 * time.Hour)
	trialing := func(id, listing string) *contracts.Contract {
		return &contracts.Contract{ID: id, BuyerOrgID: "org_b", ListingID: listing, SellerOrgID: "org_s", PlanVersion: 1,
			Status: contracts.ContractTrialing, CreatedAt: t0, UpdatedAt: t0, TrialEnd: &trialEnd}
	}

	t.Run("trials: a trial round trips and is listed while it runs", func(t *testing.T) {
		s := setup(t)
		c := trialing("ctr_t", "lst_1")
		c.CancelAtTrialEnd = true
		must(t, s.CreateContract(ctx, c, nil))
		must(t, s.CreateContract(ctx, &contracts.Contract{ID: "ctr_p", BuyerOrgID: "org_b", ListingID: "lst_2", SellerOrgID: "org_s",
			PlanVersion: 7, Status: contracts.ContractActive, CreatedAt: t0, UpdatedAt: t0, OfferID: "ofr_1"}, nil))
		got, err := s.GetContract(ctx, "ctr_t")
		must(t, err)
		if got.Status != contracts.ContractTrialing || tsp(got.TrialEnd) != ts(trialEnd.UTC()) || !got.CancelAtTrialEnd {
			t.Errorf("GetContract = %+v, want trialing until %v, canceling at its end", got, trialEnd)
		}
		if got, _ := s.GetContract(ctx, "ctr_p"); got.TrialEnd != nil || got.CancelAtTrialEnd || got.OfferID != "ofr_1" || got.PlanVersion != 7 {
			t.Errorf("a contract without a trial, accepting offer ofr_1 at its plan v7 = %+v", got)
		}
		list, err := s.TrialingContracts(ctx)
		must(t, err)
		if len(list) != 1 || list[0].ID != "ctr_t" {
			t.Errorf("TrialingContracts = %+v, want ctr_t", list)
		}
		had, err := s.HadTrial(ctx, "org_b", "lst_1")
		wantBool(t, "HadTrial(lst_1)", had, err, true)
		had, err = s.HadTrial(ctx, "org_b", "lst_2")
		wantBool(t, "HadTrial(lst_2)", had, err, false)
		had, err = s.HadTrial(ctx, "org_s", "lst_1")
		wantBool(t, "HadTrial(another org)", had, err, false)
	})

	t.Run("trials: the buyer's choice, only while trialing", func(t *testing.T) {
		s := setup(t)
		must(t, s.CreateContract(ctx, trialing("ctr_t", "lst_1"), nil))
		at := t0.Add(time.Hour)
		c, err := s.SetCancelAtTrialEnd(ctx, "ctr_t", true, at)
		must(t, err)
		if !c.CancelAtTrialEnd || ts(c.UpdatedAt) != ts(at.UTC()) || c.Status != contracts.ContractTrialing {
			t.Errorf("SetCancelAtTrialEnd(true) = %+v", c)
		}
		c, err = s.SetCancelAtTrialEnd(ctx, "ctr_t", false, at)
		must(t, err)
		if c.CancelAtTrialEnd {
			t.Errorf("SetCancelAtTrialEnd(false) = %+v", c)
		}
		_, err = s.SetCancelAtTrialEnd(ctx, "ctr_nope", true, at)
		wantKind(t, "SetCancelAtTrialEnd(unknown)", err, agentmarket.NotFound)
		_, err = s.EndTrial(ctx, "ctr_t", t0.Add(time.Hour), contracts.ContractActive, at, nil)
		must(t, err)
		_, err = s.SetCancelAtTrialEnd(ctx, "ctr_t", true, at)
		if agentmarket.CodeOf(err) != "trial_over" {
			t.Errorf("SetCancelAtTrialEnd after the trial: %v, want trial_over", err)
		}
	})

	t.Run("trials: ended once, converted or canceled at the end", func(t *testing.T) {
		s := setup(t)
		must(t, s.CreateContract(ctx, trialing("ctr_a", "lst_1"), nil))
		must(t, s.CreateContract(ctx, trialing("ctr_c", "lst_2"), []contracts.Rule{contracts.InvokeRule("org_b", "lst_2")}))
		end := t0.Add(26*time.Hour + 1500*time.Millisecond) // brought forward, to the millisecond
		at := t0.Add(27 * time.Hour)
		c, err := s.EndTrial(ctx, "ctr_a", end, contracts.ContractActive, at, nil)
		must(t, err)
		if c.Status != contracts.ContractActive || tsp(c.TrialEnd) != ts(end.UTC()) || c.CanceledAt != nil || ts(c.UpdatedAt) != ts(at.UTC()) {
			t.Errorf("EndTrial(active) = %+v, want active with the trial ended at %v", c, end)
		}
		_, err = s.EndTrial(ctx, "ctr_a", end, contracts.ContractActive, at, nil)
		if agentmarket.KindOf(err) != agentmarket.Conflict || agentmarket.CodeOf(err) != "trial_over" {
			t.Errorf("EndTrial twice: %v, want a Conflict trial_over", err)
		}
		_, err = s.EndTrial(ctx, "ctr_nope", end, contracts.ContractActive, at, nil)
		wantKind(t, "EndTrial(unknown)", err, agentmarket.NotFound)

		c, err = s.EndTrial(ctx, "ctr_c", trialEnd, contracts.ContractCanceled, at, []contracts.Rule{contracts.InvokeRule("org_b", "lst_2")})
		must(t, err)
		if c.Status != contracts.ContractCanceled || tsp(c.CanceledAt) != ts(trialEnd.UTC()) || tsp(c.TrialEnd) != ts(trialEnd.UTC()) {
			t.Errorf("EndTrial(canceled) = %+v, want canceled at the trial's end %v", c, trialEnd)
		}
		if ps, ok := s.(contracts.PolicyStore); ok {
			rules, err := ps.LoadRules(ctx)
			must(t, err)
			for _, r := range rules {
				if r == contracts.InvokeRule("org_b", "lst_2") {
					t.Errorf("the invoke rule of a contract canceled with its trial is still there")
				}
			}
		}
		if list, _ := s.TrialingContracts(ctx); len(list) != 0 {
			t.Errorf("TrialingContracts after both ended = %+v", list)
		}
	})

	t.Run("trials: one per buyer org and listing, ever", func(t *testing.T) {
		s := setup(t)
		must(t, s.CreateContract(ctx, trialing("ctr_1", "lst_1"), nil))
		_, err := s.SetContractStatus(ctx, "ctr_1", contracts.ContractCanceled, t0.Add(time.Hour), nil, nil)
		must(t, err)
		second := trialing("ctr_2", "lst_1")
		wantKind(t, "a second trial on the same listing", s.CreateContract(ctx, second, nil), agentmarket.Conflict)
		second.TrialEnd, second.Status = nil, contracts.ContractActive
		must(t, s.CreateContract(ctx, second, nil))
	})
}

func runPlanChanges(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	setup := func(t *testing.T) TaskStore {
		s, newListing := newStore(t)
		for _, id := range []string{"org_b", "org_s"} {
			must(t, s.CreateOrg(ctx, org(id, false), nil, nil))
		}
		newListing("lst_1", "org_s")
		newListing("lst_2", "org_s")
		for _, id := range []string{"ctr_1", "ctr_2"} {
			must(t, s.CreateContract(ctx, &contracts.Contract{ID: id, BuyerOrgID: "org_b", ListingID: "lst_" + id[4:], SellerOrgID: "org_s",
				PlanVersion: 1, Status: contracts.ContractActive, CreatedAt: t0, UpdatedAt: t0}, nil))
		}
		return s
	}
	show := func(chs []contracts.PlanChange) string {
		var out []string
		for _, ch := range chs {
			out = append(out, fmt.Sprintf("#%d %s v%d→v%d %s", ch.Seq, ts(ch.At), ch.FromVersion, ch.ToVersion, ch.OfferID))
		}
		return strings.Join(out, "; ")
	}

	t.Run("plan changes: recorded in order, the contract moved with them", func(t *testing.T) {
		s := setup(t)
		at1 := t0.Add(26*time.Hour + 1500*time.Millisecond)
		c, err := s.ChangePlan(ctx, contracts.PlanChange{ContractID: "ctr_1", Seq: 1, At: at1, FromVersion: 1, ToVersion: 3})
		must(t, err)
		if c.PlanVersion != 3 || ts(c.UpdatedAt) != ts(at1.UTC()) {
			t.Errorf("after the change: %+v", c)
		}
		// A stale change (from the old version, or out of sequence) is refused.
		_, err = s.ChangePlan(ctx, contracts.PlanChange{ContractID: "ctr_1", Seq: 2, At: at1, FromVersion: 1, ToVersion: 4})
		if agentmarket.CodeOf(err) != "plan_changed" {
			t.Errorf("a change from the old version: %v, want plan_changed", err)
		}
		_, err = s.ChangePlan(ctx, contracts.PlanChange{ContractID: "ctr_1", Seq: 1, At: at1, FromVersion: 3, ToVersion: 4})
		if agentmarket.CodeOf(err) != "plan_changed" {
			t.Errorf("a change out of sequence: %v, want plan_changed", err)
		}
		at2 := t0.AddDate(0, 1, 0)
		_, err = s.ChangePlan(ctx, contracts.PlanChange{ContractID: "ctr_1", Seq: 2, At: at2, FromVersion: 3, ToVersion: 5, OfferID: "ofr_1"})
		must(t, err)
		chs, err := s.PlanChanges(ctx, "ctr_1")
		must(t, err)
		want := []contracts.PlanChange{{ContractID: "ctr_1", Seq: 1, At: at1.UTC(), FromVersion: 1, ToVersion: 3},
			{ContractID: "ctr_1", Seq: 2, At: at2.UTC(), FromVersion: 3, ToVersion: 5, OfferID: "ofr_1"}}
		if show(chs) != show(want) {
			t.Errorf("PlanChanges = %s\nwant %s", show(chs), show(want))
		}
		if chs, _ := s.PlanChanges(ctx, "ctr_2"); len(chs) != 0 {
			t.Errorf("another contract has changes: %s", show(chs))
		}
		if c, _ := s.GetContract(ctx, "ctr_2"); c.PlanVersion != 1 {
			t.Errorf("another contract moved: %+v", c)
		}
		_, err = s.ChangePlan(ctx, contracts.PlanChange{ContractID: "ctr_nope", Seq: 1, At: at1, FromVersion: 1, ToVersion: 2})
		if agentmarket.KindOf(err) != agentmarket.Conflict && agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("an unknown contract: %v", err)
		}
	})

	t.Run("plan changes: a cancellation scheduled, taken back, and due", func(t *testing.T) {
		s := setup(t)
		end := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
		c, err := s.SetCancelAt(ctx, "ctr_1", &end, t0)
		must(t, err)
		if tsp(c.CancelAt) != ts(end) {
			t.Errorf("cancel_at = %s, want %s", tsp(c.CancelAt), ts(end))
		}
		_, err = s.SetCancelAt(ctx, "ctr_2", &end, t0)
		must(t, err)
		c, err = s.SetCancelAt(ctx, "ctr_2", nil, t0.Add(time.Minute))
		must(t, err)
		if c.CancelAt != nil {
			t.Errorf("taken back: %+v", c)
		}
		_, err = s.SetCancelAt(ctx, "ctr_nope", &end, t0)
		wantKind(t, "SetCancelAt(unknown)", err, agentmarket.NotFound)
		due := func(now time.Time) string {
			cs, err := s.DueCancellations(ctx, now)
			must(t, err)
			var ids []string
			for _, c := range cs {
				ids = append(ids, c.ID)
			}
			return fmt.Sprint(ids)
		}
		if got := due(end.Add(-time.Millisecond)); got != "[]" {
			t.Errorf("due before the end: %s", got)
		}
		if got := due(end); got != "[ctr_1]" {
			t.Errorf("due at the end: %s", got)
		}
		_, err = s.SetContractStatus(ctx, "ctr_1", contracts.ContractCanceled, end, nil, nil)
		must(t, err)
		if got := due(end.Add(time.Hour)); got != "[]" {
			t.Errorf("due once canceled: %s", got)
		}
	})
}

func runAlerts(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	budget := int64(1_000_000)

	t.Run("alerts: the budgets watched, thresholds kept per org and per budget", func(t *testing.T) {
		s, newListing := newStore(t)
		for _, id := range []string{"org_b", "org_s"} {
			must(t, s.CreateOrg(ctx, org(id, false), nil, nil))
		}
		newListing("lst_1", "org_s")
		newListing("lst_2", "org_s")
		for i, k := range []*contracts.APIKey{key("k_budget", "org_b", t0), key("k_none", "org_b", t0), key("k_revoked", "org_b", t0)} {
			if i != 1 {
				k.MonthlyBudgetMicros = &budget
			}
			if i == 0 {
				k.AlertThresholds, k.Tags = []int{10, 90}, `{"project":"kyc","team":"payments"}`
			}
			must(t, s.CreateAPIKey(ctx, k))
		}
		_, err := s.RevokeAPIKey(ctx, "org_b", "k_revoked", t0)
		must(t, err)
		for i, id := range []string{"ctr_1", "ctr_2"} {
			must(t, s.CreateContract(ctx, &contracts.Contract{ID: id, BuyerOrgID: "org_b", ListingID: "lst_" + id[4:], SellerOrgID: "org_s",
				PlanVersion: 1, Status: contracts.ContractActive, CreatedAt: t0, UpdatedAt: t0, MonthlyBudgetMicros: &budget,
				AlertThresholds: []int{75}[:i]}, nil))
		}
		_, err = s.SetContractStatus(ctx, "ctr_2", contracts.ContractCanceled, t0, nil, nil)
		must(t, err)
		keys, err := s.BudgetedKeys(ctx)
		must(t, err)
		if len(keys) != 1 || keys[0].ID != "k_budget" || fmt.Sprint(keys[0].AlertThresholds) != "[10 90]" || keys[0].Tags != `{"project":"kyc","team":"payments"}` {
			t.Errorf("BudgetedKeys = %+v", keys)
		}
		cs, err := s.BudgetedContracts(ctx)
		must(t, err)
		if len(cs) != 1 || cs[0].ID != "ctr_1" || cs[0].AlertThresholds != nil {
			t.Errorf("BudgetedContracts = %+v", cs)
		}
		th, err := s.OrgAlertThresholds(ctx, "org_b")
		if err != nil || th != nil {
			t.Errorf("thresholds never set = %v, %v", th, err)
		}
		must(t, s.SetOrgAlertThresholds(ctx, "org_b", []int{25, 50}, t0))
		must(t, s.SetOrgAlertThresholds(ctx, "org_b", []int{30}, t0))
		if th, _ := s.OrgAlertThresholds(ctx, "org_b"); fmt.Sprint(th) != "[30]" {
			t.Errorf("thresholds = %v, want [30]", th)
		}
		must(t, s.SetBudgetAlertThresholds(ctx, "org_b", contracts.BudgetSubscription, "ctr_1", []int{60}))
		c, err := s.SetContractTags(ctx, "ctr_1", `{"team":"risk"}`, t0.Add(time.Hour))
		if err != nil || c.Tags != `{"team":"risk"}` {
			t.Errorf("SetContractTags = %+v, %v", c, err)
		}
		if c, _ := s.GetContract(ctx, "ctr_1"); c.Tags != `{"team":"risk"}` {
			t.Errorf("the contract's tags = %q", c.Tags)
		}
		_, err = s.SetContractTags(ctx, "ctr_nope", "", t0)
		wantKind(t, "SetContractTags(unknown)", err, agentmarket.NotFound)
		must(t, s.SetBudgetAlertThresholds(ctx, "org_b", contracts.BudgetAPIKey, "k_budget", nil))
		if c, _ := s.GetContract(ctx, "ctr_1"); fmt.Sprint(c.AlertThresholds) != "[60]" {
			t.Errorf("the contract's thresholds = %v", c.AlertThresholds)
		}
		if keys, _ := s.BudgetedKeys(ctx); keys[0].AlertThresholds != nil {
			t.Errorf("the key's thresholds after clearing = %v", keys[0].AlertThresholds)
		}
		wantKind(t, "another org's budget", s.SetBudgetAlertThresholds(ctx, "org_s", contracts.BudgetAPIKey, "k_budget", []int{1}), agentmarket.NotFound)
	})

	t.Run("alerts: recorded once with their delivery, listed by month", func(t *testing.T) {
		s, _ := newStore(t)
		month := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		alert := func(pct int, at time.Time) *contracts.Alert {
			return &contracts.Alert{ID: contracts.AlertID(contracts.BudgetAPIKey, "k_1", month, pct), OrgID: "org_b", Kind: contracts.BudgetAPIKey,
				Subject: "k_1", PeriodStart: month, Percent: pct, BudgetMicros: budget, SpentMicros: int64(pct) * 10_000, CreatedAt: at}
		}
		d := &contracts.Delivery{ID: "dlv_1", ConfigID: contracts.AlertConfigID("org_b"), OrgID: "org_b", Body: []byte(`{"a":1}`), CreatedAt: t0}
		ok, err := s.RecordAlert(ctx, alert(50, t0), d)
		wantBool(t, "RecordAlert(50%)", ok, err, true)
		d2 := *d
		d2.ID = "dlv_2"
		ok, err = s.RecordAlert(ctx, alert(50, t0.Add(time.Hour)), &d2)
		wantBool(t, "RecordAlert(50%) again", ok, err, false)
		ok, err = s.RecordAlert(ctx, alert(80, t0.Add(time.Minute)), nil)
		wantBool(t, "RecordAlert(80%) without a webhook", ok, err, true)
		ds, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_b", Limit: 10})
		must(t, err)
		if len(ds) != 1 || ds[0].ID != "dlv_1" || string(ds[0].Body) != `{"a":1}` || ds[0].Status != contracts.DeliveryPending {
			t.Errorf("deliveries = %+v, want dlv_1 only", ds)
		}
		list, err := s.Alerts(ctx, "org_b", month)
		must(t, err)
		if len(list) != 2 || list[0].Percent != 80 || list[1].Percent != 50 || ts(list[1].CreatedAt) != ts(t0.UTC()) ||
			list[1].SpentMicros != 500_000 || list[1].Kind != contracts.BudgetAPIKey || ts(list[1].PeriodStart) != ts(month) {
			t.Errorf("Alerts = %+v", list)
		}
		if list, _ := s.Alerts(ctx, "org_b", month.AddDate(0, 1, 0)); len(list) != 0 {
			t.Errorf("alerts of another month: %+v", list)
		}
		if list, _ := s.Alerts(ctx, "org_s", month); len(list) != 0 {
			t.Errorf("alerts of another org: %+v", list)
		}
	})
}

func runBindings(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()

	t.Run("bindings: parent and deadline round trip", func(t *testing.T) {
		s, _ := newStore(t)
		deadline := t0.Add(time.Hour)
		child := contracts.TaskBinding{ListingID: "lst_2", TaskID: "task_c", OrgID: "org_a", ContractID: "ctr_2", ContextID: "ctx_1",
			CreatedAt: t0, ParentListingID: "lst_1", ParentTaskID: "task_p", DeadlineAt: &deadline}
		root := contracts.TaskBinding{ListingID: "lst_1", TaskID: "task_p", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0}
		for _, b := range []contracts.TaskBinding{child, root} {
			owner, err := s.BindTask(ctx, b)
			must(t, err)
			if owner != b.OrgID {
				t.Errorf("BindTask(%s) = %s, want %s", b.TaskID, owner, b.OrgID)
			}
		}
		got, err := s.TaskOwner(ctx, "lst_2", "task_c")
		must(t, err)
		wantBinding(t, "TaskOwner(child)", *got, child)
		got, err = s.TaskOwner(ctx, "lst_1", "task_p")
		must(t, err)
		wantBinding(t, "TaskOwner(root)", *got, root)

		// A second sight binds nothing new: the first binding stays whole.
		later := t0.Add(2 * time.Hour)
		other := contracts.TaskBinding{ListingID: "lst_2", TaskID: "task_c", OrgID: "org_z", ContractID: "ctr_9", CreatedAt: later,
			ParentListingID: "lst_9", ParentTaskID: "task_9", DeadlineAt: &later}
		owner, err := s.BindTask(ctx, other)
		must(t, err)
		if owner != "org_a" {
			t.Errorf("BindTask of a bound task = %s, want the first owner org_a", owner)
		}
		got, err = s.TaskOwner(ctx, "lst_2", "task_c")
		must(t, err)
		wantBinding(t, "TaskOwner(child) after a second bind", *got, child)
	})

	t.Run("bindings: a reused task id is marked once, and stays bound to its owner", func(t *testing.T) {
		s, _ := newStore(t)
		b := contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-1", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0}
		_, err := s.BindTask(ctx, b)
		must(t, err)
		first := t0.Add(time.Minute)
		must(t, s.MarkTaskReused(ctx, "lst_1", "task-1", first))
		must(t, s.MarkTaskReused(ctx, "lst_1", "task-1", first.Add(time.Hour)))
		got, err := s.TaskOwner(ctx, "lst_1", "task-1")
		must(t, err)
		b.ReusedAt = &first
		wantBinding(t, "TaskOwner(reused)", *got, b)
		wantKind(t, "MarkTaskReused(unseen)", s.MarkTaskReused(ctx, "lst_1", "task-9", first), agentmarket.NotFound)
	})

	t.Run("bindings: a task bound ended is recorded ended once, with its event", func(t *testing.T) {
		s, _ := newStore(t)
		end := t0.Add(3 * time.Second)
		b := contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-e", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0,
			Ended: &contracts.TaskEvent{State: "completed", At: end, TraceID: "tr-1"}}
		for range 2 { // bound again (a projection replayed): nothing more
			owners, errs := s.BindTasks(ctx, []contracts.TaskBinding{b})
			must(t, errs[0])
			if owners[0] != "org_a" {
				t.Fatalf("owner %s", owners[0])
			}
		}
		rec, err := s.TaskRecord(ctx, "lst_1", "task-e")
		must(t, err)
		if rec.EndedAt == nil || !rec.EndedAt.Equal(end) || len(rec.Events) != 1 || rec.Events[0].Kind != contracts.TaskEnded ||
			rec.Events[0].State != "completed" || rec.Events[0].TraceID != "tr-1" {
			t.Fatalf("record %+v, events %+v", rec, rec.Events)
		}
		// A later end (a replayed or re-observed one) records nothing more.
		changed, err := s.TaskEnded(ctx, contracts.TaskEvent{ListingID: "lst_1", TaskID: "task-e", State: "completed", At: end.Add(time.Second)})
		must(t, err)
		if changed {
			t.Error("TaskEnded changed a task already ended")
		}
	})

	t.Run("bindings: a task its agent lost ends once, with a lost event", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-l", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		must(t, err)
		lost := contracts.TaskEvent{ID: "tev_l", ListingID: "lst_1", TaskID: "task-l", Kind: contracts.TaskLost, At: t0.Add(time.Minute),
			Reason: "the agent no longer knows the task", TraceID: "tr-l"}
		changed, err := s.TaskEnded(ctx, lost)
		wantBool(t, "TaskEnded(lost)", changed, err, true)
		lost.ID = "tev_l2"
		changed, err = s.TaskEnded(ctx, lost)
		wantBool(t, "TaskEnded(lost again)", changed, err, false)
		rec, err := s.TaskRecord(ctx, "lst_1", "task-l")
		must(t, err)
		if rec.EndedAt == nil || !rec.EndedAt.Equal(lost.At) || len(rec.Events) != 1 || rec.Events[0].Kind != contracts.TaskLost ||
			rec.Events[0].Reason != lost.Reason {
			t.Fatalf("record %+v, events %+v", rec, rec.Events)
		}
		_, err = s.TaskEnded(ctx, contracts.TaskEvent{ID: "tev_l3", ListingID: "lst_1", TaskID: "task-9", Kind: contracts.TaskLost, At: t0})
		wantKind(t, "TaskEnded(lost, unbound)", err, agentmarket.NotFound)
	})

	t.Run("life: a stall is marked once, cleared by progress, and by the task's end", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-s", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		must(t, err)
		ev := func(id string, kind contracts.TaskEventKind, at time.Time) contracts.TaskEvent {
			return contracts.TaskEvent{ID: id, ListingID: "lst_1", TaskID: "task-s", Kind: kind, State: "working", At: at}
		}
		stalled := t0.Add(10 * time.Minute)
		ok, err := s.TaskStalled(ctx, ev("tev_s1", contracts.TaskStalled, stalled))
		wantBool(t, "TaskStalled", ok, err, true)
		ok, err = s.TaskStalled(ctx, ev("tev_s2", contracts.TaskStalled, stalled.Add(time.Minute)))
		wantBool(t, "TaskStalled(stalled)", ok, err, false)
		rec, err := s.TaskRecord(ctx, "lst_1", "task-s")
		must(t, err)
		if rec.StalledSince == nil || !rec.StalledSince.Equal(stalled) || rec.EndedAt != nil {
			t.Fatalf("stalled record %+v", rec)
		}
		ok, err = s.TaskProgressed(ctx, ev("tev_s3", contracts.TaskProgressed, stalled.Add(2*time.Minute)))
		wantBool(t, "TaskProgressed", ok, err, true)
		ok, err = s.TaskProgressed(ctx, ev("tev_s4", contracts.TaskProgressed, stalled.Add(3*time.Minute)))
		wantBool(t, "TaskProgressed(not stalled)", ok, err, false)
		ok, err = s.TaskStalled(ctx, ev("tev_s5", contracts.TaskStalled, stalled.Add(20*time.Minute)))
		wantBool(t, "TaskStalled(again)", ok, err, true)
		ok, err = s.TaskEnded(ctx, ev("tev_s6", contracts.TaskEnded, stalled.Add(21*time.Minute)))
		wantBool(t, "TaskEnded(stalled)", ok, err, true)
		ok, err = s.TaskStalled(ctx, ev("tev_s7", contracts.TaskStalled, stalled.Add(40*time.Minute)))
		wantBool(t, "TaskStalled(ended)", ok, err, false)
		rec, err = s.TaskRecord(ctx, "lst_1", "task-s")
		must(t, err)
		var kinds []contracts.TaskEventKind
		for _, e := range rec.Events {
			kinds = append(kinds, e.Kind)
		}
		want := []contracts.TaskEventKind{contracts.TaskStalled, contracts.TaskProgressed, contracts.TaskStalled, contracts.TaskEnded}
		if rec.StalledSince != nil || !slices.Equal(kinds, want) {
			t.Fatalf("record %+v, events %v, want not stalled, %v", rec, kinds, want)
		}
		_, err = s.TaskStalled(ctx, contracts.TaskEvent{ListingID: "lst_1", TaskID: "task-9", At: t0})
		wantKind(t, "TaskStalled(unbound)", err, agentmarket.NotFound)
	})

	t.Run("bindings: a batch keeps parent and deadline", func(t *testing.T) {
		s, _ := newStore(t)
		d1 := t0.Add(time.Hour)
		_, err := s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task_old", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		must(t, err)
		batch := []contracts.TaskBinding{
			{ListingID: "lst_1", TaskID: "task_x", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0, DeadlineAt: &d1},
			{ListingID: "lst_1", TaskID: "task_y", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0, ParentListingID: "lst_1", ParentTaskID: "task_x"},
			{ListingID: "lst_1", TaskID: "task_old", OrgID: "org_z", ContractID: "ctr_z", CreatedAt: t0, DeadlineAt: &d1},
		}
		owners, errs := s.BindTasks(ctx, batch)
		for i := range batch {
			if errs[i] != nil {
				t.Fatalf("BindTasks[%d]: %v", i, errs[i])
			}
		}
		if want := []string{"org_a", "org_a", "org_a"}; !slices.Equal(owners, want) {
			t.Errorf("BindTasks owners = %v, want %v", owners, want)
		}
		for _, b := range batch[:2] {
			got, err := s.TaskOwner(ctx, b.ListingID, b.TaskID)
			must(t, err)
			wantBinding(t, "TaskOwner("+b.TaskID+")", *got, b)
		}
		got, err := s.TaskOwner(ctx, "lst_1", "task_old")
		must(t, err)
		if got.DeadlineAt != nil || got.OrgID != "org_a" {
			t.Errorf("TaskOwner(task_old) = %s, want the first binding, without deadline", showBinding(*got))
		}
	})

	t.Run("bindings: a large batch, with a task twice in it", func(t *testing.T) {
		s, _ := newStore(t)
		var batch []contracts.TaskBinding
		for i := range 250 {
			batch = append(batch, contracts.TaskBinding{ListingID: "lst_1", TaskID: fmt.Sprintf("task_%03d", i), OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		}
		// The same task again, from another org, in the same batch (and in
		// another chunk of it): the first binding wins.
		batch = append(batch, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task_007", OrgID: "org_z", ContractID: "ctr_z", CreatedAt: t0})
		owners, errs := s.BindTasks(ctx, batch)
		for i := range batch {
			if errs[i] != nil || owners[i] != "org_a" {
				t.Fatalf("BindTasks[%d] (%s) = %q, %v; want org_a", i, batch[i].TaskID, owners[i], errs[i])
			}
		}
		got, err := s.TaskOwner(ctx, "lst_1", "task_249")
		must(t, err)
		wantBinding(t, "TaskOwner(task_249)", *got, batch[249])
	})
}

func runTaskLife(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	bind := func(t *testing.T, s TaskStore, listingID, taskID, orgID string, created time.Time, mod func(*contracts.TaskBinding)) contracts.TaskBinding {
		t.Helper()
		b := contracts.TaskBinding{ListingID: listingID, TaskID: taskID, OrgID: orgID, ContractID: "ctr_" + orgID, CreatedAt: created}
		if mod != nil {
			mod(&b)
		}
		if _, err := s.BindTask(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	ev := func(listingID, taskID, id string, kind contracts.TaskEventKind, at time.Time) contracts.TaskEvent {
		return contracts.TaskEvent{ID: id, ListingID: listingID, TaskID: taskID, Kind: kind, At: at}
	}
	deadline := func(d time.Time) func(*contracts.TaskBinding) {
		return func(b *contracts.TaskBinding) { b.DeadlineAt = &d }
	}

	t.Run("task life: unknown tasks are not found", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		e := ev("lst_1", "task_nope", "", "", t0)
		_, err := s.TaskPaused(ctx, e, nil)
		wantKind(t, "TaskPaused", err, agentmarket.NotFound)
		_, err = s.TaskResumed(ctx, e)
		wantKind(t, "TaskResumed", err, agentmarket.NotFound)
		_, err = s.TaskEnded(ctx, e)
		wantKind(t, "TaskEnded", err, agentmarket.NotFound)
		_, err = s.TaskRecord(ctx, "lst_1", "task_nope")
		wantKind(t, "TaskRecord", err, agentmarket.NotFound)
		_, err = s.TaskRecord(ctx, "lst_2", "task_1")
		wantKind(t, "TaskRecord on another listing", err, agentmarket.NotFound)
		if got, err := s.FindTasks(ctx, "task_nope", 10); err != nil || len(got) != 0 {
			t.Errorf("FindTasks of an unknown task = %v, %v; want none", taskIDs(got), err)
		}
	})

	t.Run("task life: pause, resume and end, each once, with their events", func(t *testing.T) {
		s, _ := newStore(t)
		b := bind(t, s, "lst_1", "task_1", "org_a", t0, deadline(t0.Add(time.Hour)))
		bind(t, s, "lst_1", "task_2", "org_a", t0, nil)
		record := func(t *testing.T) *contracts.TaskRecord {
			t.Helper()
			r, err := s.TaskRecord(ctx, "lst_1", "task_1")
			must(t, err)
			return r
		}
		cancelAt := t0.Add(10 * time.Minute)

		p1 := contracts.TaskEvent{ID: "tev_1", ListingID: "lst_1", TaskID: "task_1", Kind: contracts.TaskPaused, State: "input-required",
			At: t0.Add(time.Minute), Actor: "", Reason: "the agent asks", TraceID: "trace_1"}
		ok, err := s.TaskPaused(ctx, p1, &cancelAt)
		wantBool(t, "first TaskPaused", ok, err, true)
		ok, err = s.TaskPaused(ctx, ev("lst_1", "task_1", "tev_x", contracts.TaskPaused, t0.Add(2*time.Minute)), nil)
		wantBool(t, "TaskPaused while paused", ok, err, false)
		r := record(t)
		if tsp(r.PausedSince) != tsp(utc(p1.At)) || tsp(r.PauseCancelAt) != tsp(utc(cancelAt)) || r.EndedAt != nil {
			t.Errorf("paused record: since %s, cancel at %s, ended %s; want %s, %s, nil",
				tsp(r.PausedSince), tsp(r.PauseCancelAt), tsp(r.EndedAt), ts(p1.At.UTC()), ts(cancelAt.UTC()))
		}
		wantBinding(t, "TaskRecord binding", r.TaskBinding, b)
		if len(r.Events) != 1 {
			t.Errorf("events after a repeated pause: %d, want 1", len(r.Events))
		}

		// The resume and the second pause happen at the same instant: the
		// order they were recorded in breaks the tie. No kind: the method's.
		same := t0.Add(3 * time.Minute)
		res := contracts.TaskEvent{ID: "tev_2", ListingID: "lst_1", TaskID: "task_1", At: same, Actor: "key:key_1"}
		ok, err = s.TaskResumed(ctx, res)
		wantBool(t, "TaskResumed", ok, err, true)
		ok, err = s.TaskResumed(ctx, ev("lst_1", "task_1", "tev_y", "", same))
		wantBool(t, "TaskResumed when not paused", ok, err, false)
		if r := record(t); r.PausedSince != nil || r.PauseCancelAt != nil {
			t.Errorf("resumed record: since %s, cancel at %s; want nil, nil", tsp(r.PausedSince), tsp(r.PauseCancelAt))
		}
		ok, err = s.TaskPaused(ctx, ev("lst_1", "task_1", "tev_3", "", same), nil)
		wantBool(t, "second TaskPaused", ok, err, true)
		if r := record(t); tsp(r.PausedSince) != tsp(utc(same)) || r.PauseCancelAt != nil {
			t.Errorf("paused without limit: since %s, cancel at %s; want %s, nil", tsp(r.PausedSince), tsp(r.PauseCancelAt), ts(same.UTC()))
		}

		end := contracts.TaskEvent{ID: "tev_4", ListingID: "lst_1", TaskID: "task_1", Kind: contracts.TaskCanceled, State: "canceled",
			At: t0.Add(5 * time.Minute), Actor: contracts.CanceledByMeter, Reason: "paused too long", TraceID: "trace_4"}
		ok, err = s.TaskEnded(ctx, end)
		wantBool(t, "TaskEnded", ok, err, true)
		ok, err = s.TaskEnded(ctx, ev("lst_1", "task_1", "tev_z", contracts.TaskEnded, t0.Add(6*time.Minute)))
		wantBool(t, "TaskEnded when ended", ok, err, false)
		ok, err = s.TaskPaused(ctx, ev("lst_1", "task_1", "tev_z1", "", t0.Add(7*time.Minute)), nil)
		wantBool(t, "TaskPaused when ended", ok, err, false)
		ok, err = s.TaskResumed(ctx, ev("lst_1", "task_1", "tev_z2", "", t0.Add(7*time.Minute)))
		wantBool(t, "TaskResumed when ended", ok, err, false)

		r = record(t)
		if tsp(r.EndedAt) != tsp(utc(end.At)) || r.PausedSince != nil || r.PauseCancelAt != nil {
			t.Errorf("ended record: ended %s, since %s, cancel at %s; want %s, nil, nil (the end closes the pause)",
				tsp(r.EndedAt), tsp(r.PausedSince), tsp(r.PauseCancelAt), ts(end.At.UTC()))
		}
		res.Kind = contracts.TaskResumed
		want := []contracts.TaskEvent{p1, res, ev("lst_1", "task_1", "tev_3", contracts.TaskPaused, same), end}
		var got, wantText []string
		for _, e := range r.Events {
			got = append(got, showEvent(e))
		}
		for _, e := range want {
			e.At = e.At.UTC()
			wantText = append(wantText, showEvent(e))
		}
		if !slices.Equal(got, wantText) {
			t.Errorf("events =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantText, "\n  "))
		}

		// The other task has a life of its own.
		r2, err := s.TaskRecord(ctx, "lst_1", "task_2")
		must(t, err)
		if len(r2.Events) != 0 || r2.PausedSince != nil || r2.EndedAt != nil {
			t.Errorf("untouched task's record = %+v, want no life", r2)
		}
	})

	t.Run("task life: an ended task may end as ended, without a pause", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		ok, err := s.TaskEnded(ctx, contracts.TaskEvent{ListingID: "lst_1", TaskID: "task_1", State: "completed", At: t0.Add(time.Minute)})
		wantBool(t, "TaskEnded", ok, err, true)
		r, err := s.TaskRecord(ctx, "lst_1", "task_1")
		must(t, err)
		if len(r.Events) != 1 || r.Events[0].Kind != contracts.TaskEnded || r.Events[0].ID == "" || r.Events[0].State != "completed" {
			t.Errorf("events = %+v, want one ended event with an id", r.Events)
		}
	})

	t.Run("task life: an event of another kind is refused", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		_, err := s.TaskPaused(ctx, ev("lst_1", "task_1", "", contracts.TaskEnded, t0), nil)
		wantKind(t, "TaskPaused with an ended event", err, agentmarket.Invalid)
		_, err = s.TaskResumed(ctx, ev("lst_1", "task_1", "", contracts.TaskPaused, t0))
		wantKind(t, "TaskResumed with a paused event", err, agentmarket.Invalid)
		_, err = s.TaskEnded(ctx, ev("lst_1", "task_1", "", contracts.TaskResumed, t0))
		wantKind(t, "TaskEnded with a resumed event", err, agentmarket.Invalid)
		r, err := s.TaskRecord(ctx, "lst_1", "task_1")
		must(t, err)
		if len(r.Events) != 0 || r.PausedSince != nil || r.EndedAt != nil {
			t.Errorf("record after refused events = %+v, want no life", r)
		}
	})

	t.Run("task life: find a task by its id alone", func(t *testing.T) {
		s, _ := newStore(t)
		// The same id on three listings: org_a's older task, org_b's newer
		// one, then org_a's newest on a third listing.
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		bind(t, s, "lst_2", "task_1", "org_b", t0.Add(time.Minute), nil)
		bind(t, s, "lst_3", "task_2", "org_a", t0.Add(2*time.Minute), nil)
		for _, tc := range []struct {
			task  string
			limit int
			want  []string
		}{
			{"task_1", 10, []string{"lst_2/task_1", "lst_1/task_1"}},
			{"task_1", 1, []string{"lst_2/task_1"}},
			{"task_2", 10, []string{"lst_3/task_2"}},
		} {
			got, err := s.FindTasks(ctx, tc.task, tc.limit)
			if err != nil || !slices.Equal(taskIDs(got), tc.want) {
				t.Errorf("FindTasks(%s, %d) = %v, %v; want %v", tc.task, tc.limit, taskIDs(got), err, tc.want)
			}
		}
	})

	t.Run("task life: child tasks are the open tasks naming the parent", func(t *testing.T) {
		s, _ := newStore(t)
		child := func(listingID, taskID string) func(*contracts.TaskBinding) {
			return func(b *contracts.TaskBinding) { b.ParentListingID, b.ParentTaskID = listingID, taskID }
		}
		bind(t, s, "lst_1", "task_p", "org_a", t0, nil)
		bind(t, s, "lst_2", "task_c2", "org_a", t0.Add(2*time.Minute), child("lst_1", "task_p"))
		want := bind(t, s, "lst_3", "task_c1", "org_b", t0.Add(time.Minute), child("lst_1", "task_p"))
		bind(t, s, "lst_2", "task_done", "org_a", t0.Add(3*time.Minute), child("lst_1", "task_p"))
		bind(t, s, "lst_2", "task_other", "org_a", t0, child("lst_9", "task_p"))
		bind(t, s, "lst_2", "task_grandchild", "org_a", t0, child("lst_2", "task_c2"))
		// Delegated before the meter had bound the parent: unresolved.
		unresolved := bind(t, s, "lst_4", "task_early", "org_a", t0.Add(4*time.Minute), child("", "task_p"))
		_, err := s.TaskEnded(ctx, ev("lst_2", "task_done", "", contracts.TaskEnded, t0.Add(4*time.Minute)))
		must(t, err)

		got, err := s.ChildTasks(ctx, "lst_1", "task_p")
		must(t, err)
		if ids, wantIDs := taskIDs(got), []string{"lst_3/task_c1", "lst_2/task_c2", "lst_4/task_early"}; !slices.Equal(ids, wantIDs) {
			t.Errorf("ChildTasks = %v, want %v", ids, wantIDs)
		} else {
			wantBinding(t, "ChildTasks[0]", got[0], want)
			wantBinding(t, "ChildTasks[2]", got[2], unresolved)
		}
		if got, err := s.ChildTasks(ctx, "lst_1", "task_nope"); err != nil || len(got) != 0 {
			t.Errorf("ChildTasks of a childless task = %v, %v; want none", taskIDs(got), err)
		}
		// "" names no parent: root tasks are nobody's children.
		if got, err := s.ChildTasks(ctx, "", ""); err != nil || len(got) != 0 {
			t.Errorf(`ChildTasks("", "") = %v, %v; want none`, taskIDs(got), err)
		}
	})

	t.Run("task life: due tasks are leased", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		past, future := now.Add(-time.Minute), now.Add(10*time.Minute)
		pause := func(taskID string, since time.Time, cancelAt *time.Time) {
			t.Helper()
			ok, err := s.TaskPaused(ctx, ev("lst_1", taskID, "", "", since), cancelAt)
			wantBool(t, "TaskPaused("+taskID+")", ok, err, true)
		}
		bind(t, s, "lst_1", "t_deadline", "org_a", t0, deadline(past))
		bind(t, s, "lst_1", "t_deadline_now", "org_a", t0.Add(time.Second), deadline(now))
		bind(t, s, "lst_1", "t_deadline_later", "org_a", t0.Add(2*time.Second), deadline(future))
		bind(t, s, "lst_1", "t_pause", "org_a", t0.Add(3*time.Second), nil)
		pause("t_pause", t0.Add(30*time.Minute), &past)
		bind(t, s, "lst_1", "t_pause_later", "org_a", t0.Add(4*time.Second), deadline(past))
		pause("t_pause_later", t0.Add(31*time.Minute), &future) // the deadline is due, the pause is not
		bind(t, s, "lst_1", "t_both", "org_a", t0.Add(5*time.Second), deadline(past))
		pause("t_both", t0.Add(32*time.Minute), &past)
		bind(t, s, "lst_1", "t_pause_forever", "org_a", t0.Add(6*time.Second), nil)
		pause("t_pause_forever", t0.Add(33*time.Minute), nil)
		bind(t, s, "lst_1", "t_ended", "org_a", t0.Add(7*time.Second), deadline(past))
		_, err := s.TaskEnded(ctx, ev("lst_1", "t_ended", "", "", t0.Add(time.Minute)))
		must(t, err)
		bind(t, s, "lst_1", "t_resumed", "org_a", t0.Add(8*time.Second), nil)
		pause("t_resumed", t0.Add(34*time.Minute), &past)
		_, err = s.TaskResumed(ctx, ev("lst_1", "t_resumed", "", "", t0.Add(35*time.Minute)))
		must(t, err)

		showDue := func(ds []contracts.DueTask) []string {
			out := []string{}
			for _, d := range ds {
				out = append(out, d.TaskID+" "+d.Why+" "+tsp(d.PausedSince))
			}
			slices.Sort(out)
			return out
		}
		want := []string{
			"t_both pause " + ts(t0.Add(32*time.Minute).UTC()),
			"t_deadline deadline nil",
			"t_deadline_now deadline nil",
			"t_pause pause " + ts(t0.Add(30*time.Minute).UTC()),
			"t_pause_later deadline " + ts(t0.Add(31*time.Minute).UTC()),
		}
		leaseUntil := now.Add(time.Minute)
		first, err := s.DueTasks(ctx, now, leaseUntil, 3)
		must(t, err)
		second, err := s.DueTasks(ctx, now, leaseUntil, 3)
		must(t, err)
		if len(first) != 3 || len(second) != 2 {
			t.Errorf("DueTasks with limit 3 gave %d then %d, want 3 then 2", len(first), len(second))
		}
		if got := showDue(append(first, second...)); !slices.Equal(got, want) {
			t.Errorf("DueTasks =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		for _, d := range first {
			if d.TaskID == "t_deadline" {
				wantBinding(t, "due binding", d.TaskBinding, contracts.TaskBinding{ListingID: "lst_1", TaskID: "t_deadline", OrgID: "org_a",
					ContractID: "ctr_org_a", CreatedAt: t0, DeadlineAt: &past})
			}
		}
		if got, err := s.DueTasks(ctx, leaseUntil.Add(-time.Millisecond), leaseUntil, 10); err != nil || len(got) != 0 {
			t.Errorf("DueTasks before the lease ends = %v, %v; want none", showDue(got), err)
		}

		// Ending a task takes it out; a lease that ran out lets the others
		// come back.
		_, err = s.TaskEnded(ctx, ev("lst_1", "t_both", "", contracts.TaskCanceled, now))
		must(t, err)
		again, err := s.DueTasks(ctx, leaseUntil, leaseUntil.Add(time.Minute), 10)
		must(t, err)
		if got, want := showDue(again), slices.DeleteFunc(slices.Clone(want), func(s string) bool { return strings.HasPrefix(s, "t_both ") }); !slices.Equal(got, want) {
			t.Errorf("DueTasks after the lease =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if got, err := s.DueTasks(ctx, now, now, 0); err != nil || len(got) != 0 {
			t.Errorf("DueTasks with limit 0 = %v, %v; want none", showDue(got), err)
		}
	})

	t.Run("task life: requested cancels are due at once, kept until the task ends, attempts counted", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		bind(t, s, "lst_1", "t_child", "org_a", t0, nil)
		bind(t, s, "lst_1", "t_ended", "org_a", t0, nil)
		_, err := s.TaskEnded(ctx, ev("lst_1", "t_ended", "", "", t0.Add(time.Minute)))
		must(t, err)
		must(t, s.RequestCancel(ctx, "lst_1", "t_child", contracts.CanceledByCascade, "its parent task p was canceled", "trace1", now))
		// The first request stands; an ended task takes none.
		must(t, s.RequestCancel(ctx, "lst_1", "t_child", "meter", "other", "trace2", now.Add(time.Second)))
		must(t, s.RequestCancel(ctx, "lst_1", "t_ended", contracts.CanceledByCascade, "x", "trace1", now))
		wantKind(t, "RequestCancel(unknown)", s.RequestCancel(ctx, "lst_1", "t_nope", "meter", "x", "", now), agentmarket.NotFound)

		if got, err := s.DueTasks(ctx, now.Add(-time.Second), now, 10); err != nil || len(got) != 0 {
			t.Errorf("DueTasks before the request = %d, %v; want none", len(got), err)
		}
		for attempt := 1; attempt <= 3; attempt++ {
			at := now.Add(time.Duration(attempt) * time.Minute)
			got, err := s.DueTasks(ctx, at, at.Add(time.Second), 10)
			must(t, err)
			if len(got) != 1 || got[0].TaskID != "t_child" || got[0].Why != "requested" || got[0].CancelActor != contracts.CanceledByCascade ||
				got[0].CancelReason != "its parent task p was canceled" || got[0].CancelTraceID != "trace1" || got[0].Attempts != attempt {
				t.Fatalf("DueTasks, sweep %d = %+v", attempt, got)
			}
		}
		_, err = s.TaskEnded(ctx, ev("lst_1", "t_child", "", contracts.TaskCanceled, now.Add(time.Hour)))
		must(t, err)
		if got, err := s.DueTasks(ctx, now.Add(2*time.Hour), now.Add(3*time.Hour), 10); err != nil || len(got) != 0 {
			t.Errorf("DueTasks after the end = %d, %v; want none", len(got), err)
		}
	})

	t.Run("task life: events of tasks ended long ago are pruned, the tasks stay", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "t_old", "org_a", t0, nil)
		bind(t, s, "lst_1", "t_recent", "org_a", t0, nil)
		bind(t, s, "lst_1", "t_open", "org_a", t0, nil)
		for _, id := range []string{"t_old", "t_recent", "t_open"} {
			_, err := s.TaskPaused(ctx, ev("lst_1", id, "", "", t0), nil)
			must(t, err)
		}
		_, err := s.TaskEnded(ctx, ev("lst_1", "t_old", "", "", t0.Add(time.Hour)))
		must(t, err)
		_, err = s.TaskEnded(ctx, ev("lst_1", "t_recent", "", "", t0.Add(48*time.Hour)))
		must(t, err)
		n, err := s.PruneEvents(ctx, t0.Add(24*time.Hour))
		must(t, err)
		if n != 2 {
			t.Errorf("PruneEvents removed %d events, want 2 (t_old's pause and end)", n)
		}
		for id, want := range map[string]int{"t_old": 0, "t_recent": 2, "t_open": 1} {
			r, err := s.TaskRecord(ctx, "lst_1", id)
			must(t, err)
			if len(r.Events) != want {
				t.Errorf("%s has %d events after pruning, want %d", id, len(r.Events), want)
			}
		}
	})

	t.Run("task life: concurrent sweeps lease each due task once", func(t *testing.T) {
		s, _ := newStore(t)
		const tasks, sweepers = 30, 8
		for i := range tasks {
			bind(t, s, "lst_1", fmt.Sprintf("task_%02d", i), "org_a", t0.Add(time.Duration(i)*time.Second), deadline(t0))
		}
		now := t0.Add(time.Hour)
		var (
			mu      sync.Mutex
			claimed = map[string]int{}
			wg      sync.WaitGroup
		)
		errs := make([]error, sweepers)
		for i := range sweepers {
			wg.Go(func() {
				for {
					due, err := s.DueTasks(ctx, now, now.Add(time.Hour), 3)
					if err != nil {
						errs[i] = err
						return
					}
					if len(due) == 0 {
						return
					}
					mu.Lock()
					for _, d := range due {
						claimed[d.TaskID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("sweeper %d: %v", i, err)
			}
		}
		if len(claimed) != tasks {
			t.Errorf("%d tasks leased, want %d", len(claimed), tasks)
		}
		for id, n := range claimed {
			if n != 1 {
				t.Errorf("%s leased %d times, want once", id, n)
			}
		}
	})
}

func showEvent(e contracts.TaskEvent) string {
	return fmt.Sprintf("%s %s/%s %s state=%q at=%s actor=%q reason=%q trace=%q", e.ID, e.ListingID, e.TaskID, e.Kind, e.State, ts(e.At), e.Actor, e.Reason, e.TraceID)
}
