package a2aproxy_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/metering"
)

// TestListingCostOnlyWhenAsked (issue 23, item 4): the list price billed
// per listing is no series unless the operator asks for it; the tokens
// are counted either way.
func TestListingCostOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		opts     a2aproxy.MetricsOptions
		wantCost bool
	}{
		{a2aproxy.MetricsOptions{}, false},
		{a2aproxy.MetricsOptions{ListingCost: true}, true},
	} {
		reg := prometheus.NewRegistry()
		p := &a2aproxy.Proxy{Metrics: a2aproxy.NewMetrics(reg, tc.opts)}
		p.Stored([]metering.Usage{{ListingID: "lst_a", InputTokens: 10, OutputTokens: 20, CostMicros: 500}})
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				got[f.GetName()] += m.GetCounter().GetValue()
			}
		}
		if cost, ok := got["agentmarket_meter_cost_micros_total"]; ok != tc.wantCost || (ok && cost != 500) {
			t.Errorf("%+v: cost_micros_total = %v (exported %v), want exported %v", tc.opts, cost, ok, tc.wantCost)
		}
		if got["agentmarket_meter_tokens_total"] != 30 {
			t.Errorf("%+v: tokens_total = %v, want 30", tc.opts, got["agentmarket_meter_tokens_total"])
		}
	}
}
