package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// The contract suite of contracts themselves (part of RunTasks): their
// budgets, trials, plan changes and spend alerts.

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

		l, caps := agentmarket.RateLimits{RequestsPerMinute: 600, TokensPerMinute: 50_000}, contracts.SessionCaps{MaxCalls: 20, MaxMicros: 2_000_000}
		c, err = s.SetContractLimits(ctx, "ctr_2", l, caps, at)
		must(t, err)
		if c.RateLimits != l || c.SessionCaps != caps || c.Budgets != nb {
			t.Errorf("SetContractLimits = %+v, want %+v and %+v, budgets kept", c, l, caps)
		}
		if c, _ := s.GetContract(ctx, "ctr_2"); c.RateLimits != l || c.SessionCaps != caps {
			t.Errorf("GetContract after SetContractLimits: %+v %+v", c.RateLimits, c.SessionCaps)
		}
		c, err = s.SetContractLimits(ctx, "ctr_2", agentmarket.RateLimits{}, contracts.SessionCaps{}, at)
		must(t, err)
		if !c.RateLimits.IsZero() || !c.SessionCaps.IsZero() {
			t.Errorf("cleared limits: %+v %+v", c.RateLimits, c.SessionCaps)
		}
		_, err = s.SetContractLimits(ctx, "ctr_nope", l, caps, at)
		wantKind(t, "SetContractLimits(unknown)", err, agentmarket.NotFound)
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
		if c, err := s.SetContractFallbacks(ctx, "ctr_1", []string{"lst_b", "lst_a"}, t0.Add(time.Hour)); err != nil || fmt.Sprint(c.Fallbacks) != "[lst_b lst_a]" {
			t.Errorf("SetContractFallbacks = %+v, %v", c, err)
		}
		if c, _ := s.OpenContract(ctx, "org_b", "lst_1"); c == nil || fmt.Sprint(c.Fallbacks) != "[lst_b lst_a]" {
			t.Errorf("the open contract's fallbacks = %+v", c)
		}
		if c, err := s.SetContractFallbacks(ctx, "ctr_1", nil, t0.Add(time.Hour)); err != nil || c.Fallbacks != nil {
			t.Errorf("SetContractFallbacks(nil) = %+v, %v", c, err)
		}
		_, err = s.SetContractFallbacks(ctx, "ctr_nope", nil, t0)
		wantKind(t, "SetContractFallbacks(unknown)", err, agentmarket.NotFound)
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
