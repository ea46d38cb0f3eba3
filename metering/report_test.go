package metering_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// queryStore answers every query with one total and remembers the query.
type queryStore struct{ got *metering.Query }

func (s queryStore) Insert(context.Context, []metering.Usage) error { return nil }
func (s queryStore) Totals(_ context.Context, q metering.Query) ([]metering.Total, error) {
	*s.got = q
	return []metering.Total{{Key: "k"}}, nil
}
func (s queryStore) Rows(context.Context, metering.Query) ([]metering.Usage, error) { return nil, nil }

// TestReportScopes: each scope narrows the query to the caller's org, and a
// seller can neither group by nor filter on its buyers' API keys.
func TestReportScopes(t *testing.T) {
	seller := agentmarket.Actor{OrgID: "org_s", KeyID: "key_s", Role: agentmarket.RoleSeller}
	cases := []struct {
		name  string
		actor agentmarket.Actor
		in    metering.ReportInput
		want  string // field:rule or error code; "" for success
		buyer string // the query's BuyerOrgID
		sell  string // the query's SellerOrgID
	}{
		{"buyer by key", seller, metering.ReportInput{GroupBy: metering.ByAPIKey}, "", "org_s", ""},
		{"buyer filtered on a key", seller, metering.ReportInput{Scope: metering.ScopeBuyer, GroupBy: metering.ByListing, APIKeyID: "key_x"}, "", "org_s", ""},
		{"seller by listing", seller, metering.ReportInput{Scope: metering.ScopeSeller, GroupBy: metering.ByListing}, "", "", "org_s"},
		{"seller by buyer", seller, metering.ReportInput{Scope: metering.ScopeSeller, GroupBy: metering.ByBuyer}, "", "", "org_s"},
		{"seller by task", seller, metering.ReportInput{Scope: metering.ScopeSeller, GroupBy: metering.ByTask}, "", "", "org_s"},
		{"seller by day", seller, metering.ReportInput{Scope: metering.ScopeSeller, GroupBy: metering.ByDay}, "", "", "org_s"},
		{"seller by key", seller, metering.ReportInput{Scope: metering.ScopeSeller, GroupBy: metering.ByAPIKey}, "group_by:scope", "", ""},
		{"seller filtered on a key", seller, metering.ReportInput{Scope: metering.ScopeSeller, GroupBy: metering.ByBuyer, APIKeyID: "key_b"}, "api_key_id:scope", "", ""},
		{"platform for a non-operator", seller, metering.ReportInput{Scope: metering.ScopePlatform, GroupBy: metering.ByAPIKey}, "operator_only", "", ""},
		{"platform for the operator", agentmarket.Actor{OrgID: "org_p", Role: agentmarket.RoleAdmin, Operator: true},
			metering.ReportInput{Scope: metering.ScopePlatform, GroupBy: metering.ByAPIKey}, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q metering.Query
			r := &metering.Reports{Store: queryStore{&q}, Clock: agentmarket.NewManualClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))}
			_, totals, err := r.Totals(context.Background(), tc.actor, tc.in)
			got := ""
			if ae, ok := err.(*agentmarket.Error); ok {
				got = ae.Code
				if len(ae.Fields) == 1 {
					got = ae.Fields[0].Field + ":" + ae.Fields[0].Rule
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Totals: %v, want %q", err, tc.want)
			}
			if tc.want != "" {
				if totals != nil {
					t.Errorf("refused query answered %v", totals)
				}
				return
			}
			if q.BuyerOrgID != tc.buyer || q.SellerOrgID != tc.sell {
				t.Errorf("query buyer, seller = %q, %q; want %q, %q", q.BuyerOrgID, q.SellerOrgID, tc.buyer, tc.sell)
			}
		})
	}
}
