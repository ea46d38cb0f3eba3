package contracts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// TestSubscribeBudgetBound: a subscription's monthly budget is refused
// past agentmarket.MaxBudgetMicros, before anything is looked up.
func TestSubscribeBudgetBound(t *testing.T) {
	subs := &contracts.Subscriptions{}
	buyer := agentmarket.Actor{OrgID: "org_b", Role: agentmarket.RoleBuyer}
	for _, b := range []int64{-1, agentmarket.MaxBudgetMicros + 1, 1<<63 - 1} {
		_, err := subs.Subscribe(context.Background(), buyer, contracts.SubscribeInput{ListingID: "lst_1", MonthlyBudgetMicros: &b})
		var ae *agentmarket.Error
		if agentmarket.CodeOf(err) != "invalid_subscription" || !errors.As(err, &ae) || len(ae.Fields) != 1 || ae.Fields[0].Field != "monthly_budget_micros" {
			t.Errorf("budget %d: err = %v, want invalid_subscription on monthly_budget_micros", b, err)
		}
	}
}
