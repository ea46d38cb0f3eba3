package contracts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func TestReached(t *testing.T) {
	for _, tc := range []struct {
		spent, budget int64
		pct           int
		want          bool
	}{
		{0, 1_000_000, 50, false},
		{499_999, 1_000_000, 50, false},
		{500_000, 1_000_000, 50, true},
		{999_999, 1_000_000, 100, false},
		{1_000_000, 1_000_000, 100, true},
		{3, 5, 50, true},  // 50% of 5 micros is 2.5: reached at 3
		{2, 5, 50, false}, // not at 2
		{1, 0, 50, true},  // a zero budget: the first spend
		{0, 0, 100, false},
		{agentmarket.MaxBudgetMicros, agentmarket.MaxBudgetMicros, contracts.MaxAlertPercent, false},
		{9_223_372_036_854_775_807, agentmarket.MaxBudgetMicros, contracts.MaxAlertPercent, true}, // a saturated spend
	} {
		if got := contracts.Reached(tc.spent, tc.budget, tc.pct); got != tc.want {
			t.Errorf("Reached(%d, %d, %d%%) = %v, want %v", tc.spent, tc.budget, tc.pct, got, tc.want)
		}
	}
}

// spendFake is what each budget spent this month.
type spendFake map[string]int64

func (s spendFake) Spent(_ context.Context, keyID, contractID string, _ time.Time) (int64, error) {
	return s[keyID+contractID], nil
}

type plainSealer struct{}

func (plainSealer) Seal(p, ctx []byte) ([]byte, error) {
	return append(append([]byte{}, ctx...), p...), nil
}

type urlsFake struct{}

func (urlsFake) CheckWebhook(_ context.Context, raw string) error {
	if strings.Contains(raw, "10.0.0.1") {
		return agentmarket.Errorf(agentmarket.Invalid, "webhook_refused", "10.0.0.1 is a private address")
	}
	return nil
}

// TestSpendAlerts: each budget's thresholds (the org's, its own, or the
// default) are alerted once a month as its spend reaches them, and each
// alert is enqueued for the org's webhook, once; a new month alerts anew;
// the settings are checked and kept.
func TestSpendAlerts(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		s := newTrialSetup(t, db)
		store := contractsgorm.New(db.DB)
		spend := spendFake{}
		alerts := &contracts.Alerts{Store: store, Push: store, Spend: spend, Clock: s.clock, Sealer: plainSealer{}, URLs: urlsFake{}}
		accounts := &contracts.Accounts{Store: store, Clock: s.clock}
		admin := agentmarket.Actor{OrgID: "org_buyer", Role: agentmarket.RoleAdmin}
		budget := int64(1_000_000)
		k1, _, err := accounts.CreateKey(ctx, admin, contracts.KeyInput{Name: "default thresholds", MonthlyBudgetMicros: &budget})
		if err != nil {
			t.Fatal(err)
		}
		k2, _, err := accounts.CreateKey(ctx, admin, contracts.KeyInput{Name: "own thresholds", MonthlyBudgetMicros: &budget, AlertThresholds: []int{90, 10, 90}})
		if err != nil || fmt.Sprint(k2.AlertThresholds) != "[10 90]" {
			t.Fatalf("key with thresholds: %+v, %v", k2, err)
		}
		if _, _, err := accounts.CreateKey(ctx, admin, contracts.KeyInput{Name: "x", AlertThresholds: []int{50}}); agentmarket.CodeOf(err) != "invalid_api_key_request" {
			t.Errorf("thresholds without a budget: %v", err)
		}
		terms := s.subs.Listings.(listingsFake)
		terms["lst_1"].TrialDays = 0
		c, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1", MonthlyBudgetMicros: &budget})
		if err != nil {
			t.Fatal(err)
		}

		evaluate := func(want int) {
			t.Helper()
			n, err := alerts.Evaluate(ctx)
			if err != nil || n != want {
				t.Fatalf("Evaluate = %d, %v; want %d", n, err, want)
			}
		}
		month := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		show := func() string {
			list, err := alerts.List(ctx, s.buyer, month)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, a := range list {
				out = append(out, fmt.Sprintf("%s %s %d%% %d/%d", a.Kind, a.Subject[:3], a.Percent, a.SpentMicros, a.BudgetMicros))
			}
			return strings.Join(out, "; ")
		}
		spend[k1.ID], spend[k2.ID], spend[c.ID] = 499_999, 100_000, 800_000
		evaluate(3) // k2 10%; the contract 50% and 80%
		evaluate(0)
		spend[k1.ID] = 500_000
		s.clock.Advance(time.Minute)
		evaluate(1)
		if got, want := show(), "api_key key 50% 500000/1000000; subscription ctr 80% 800000/1000000; subscription ctr 50% 800000/1000000; api_key key 10% 100000/1000000"; got != want {
			t.Errorf("alerts:\n  %s\nwant\n  %s", got, want)
		}

		// The org's own thresholds; a webhook: alerts from now on go there.
		th := []int{25, 200}
		set, err := alerts.SetSettings(ctx, s.buyer, contracts.AlertSettingsInput{Thresholds: &th,
			Webhook: &contracts.WebhookInput{URL: "https://hooks.example/alerts", Token: "t-1"}})
		if err != nil || fmt.Sprint(set.Thresholds) != "[25 200]" || set.WebhookURL != "https://hooks.example/alerts" {
			t.Fatalf("SetSettings = %+v, %v", set, err)
		}
		evaluate(2) // 25% of k1 and of the contract (the alerts of 50% stay)
		ds, err := store.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_buyer", Limit: 10})
		if err != nil || len(ds) != 2 {
			t.Fatalf("deliveries %+v, %v", ds, err)
		}
		var body contracts.AlertBody
		for _, d := range ds {
			if err := json.Unmarshal(d.Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.BudgetKind == contracts.BudgetAPIKey {
				ds[0] = d
				break
			}
		}
		if body.Type != "spend_alert" || body.BudgetID != k1.ID || body.Percent != 25 || body.SpentMicros != 500_000 || body.BudgetName != "default thresholds" ||
			ds[0].ConfigID != contracts.AlertConfigID("org_buyer") || ds[0].ListingID != "" || ds[0].Status != contracts.DeliveryPending {
			t.Errorf("delivery %+v: %+v", ds[0], body)
		}
		cfg, err := store.PushConfig(ctx, "", "", contracts.AlertConfigID("org_buyer"))
		if err != nil || string(cfg.Sealed) != `push|||alerts:org_buyer{"token":"t-1"}` || cfg.Version != "" {
			t.Errorf("the webhook's config %+v, %v", cfg, err)
		}

		// A new month: every threshold again.
		s.clock.Advance(15 * 24 * time.Hour)
		evaluate(3) // k1 25%, k2 10%, the contract 25% (200% not reached)
		if ds, _ := store.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_buyer", Limit: 10}); len(ds) != 5 {
			t.Errorf("%d deliveries after the new month, want 5", len(ds))
		}

		// Bad settings are refused, nothing changed.
		bad := []int{0, 5000}
		_, err = alerts.SetSettings(ctx, s.buyer, contracts.AlertSettingsInput{Thresholds: &bad,
			Webhook: &contracts.WebhookInput{URL: "https://10.0.0.1/x", Token: "a\nb"}})
		if got := fieldRules(appError(t, err)); got != "thresholds[0]:range thresholds[1]:range webhook.url:refused webhook.token:format" {
			t.Errorf("bad settings: %s", got)
		}
		if st, _ := alerts.Settings(ctx, s.buyer); fmt.Sprint(st.Thresholds) != "[25 200]" {
			t.Errorf("settings after a refused change: %+v", st)
		}
		// Back to the default, no webhook.
		none := []int{}
		st, err := alerts.SetSettings(ctx, s.buyer, contracts.AlertSettingsInput{Thresholds: &none, Webhook: &contracts.WebhookInput{}})
		if err != nil || st.Thresholds != nil || st.WebhookURL != "" {
			t.Errorf("back to the default: %+v, %v", st, err)
		}
		if err := alerts.SetBudgetThresholds(ctx, agentmarket.Actor{OrgID: "org_seller"}, contracts.BudgetAPIKey, k1.ID, []int{5}); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("another org sets a key's thresholds: %v", err)
		}
	})
}
