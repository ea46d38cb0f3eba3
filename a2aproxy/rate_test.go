package a2aproxy_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/metering"
)

func TestRate(t *testing.T) {
	plan := listings.Plan{InputTokensPerMillionMicros: 3_000_000, OutputTokensPerMillionMicros: 15_000_000,
		ComputePerHourMicros: 360_000, PerTaskMicros: 1_000}
	c := func(in, out, ms int64) metering.Counters {
		return metering.Counters{InputTokens: in, OutputTokens: out, ComputeMs: ms}
	}
	cases := []struct {
		name  string
		d     metering.Counters
		tasks int64
		want  int64
	}{
		{"nothing", c(0, 0, 0), 0, 0},
		{"one task", c(0, 0, 0), 1, 1_000},
		{"a million input tokens", c(1_000_000, 0, 0), 0, 3_000_000},
		{"one input token is 3 micros", c(1, 0, 0), 0, 3},
		{"one output token is 15 micros", c(0, 1, 0), 0, 15},
		{"an hour of compute", c(0, 0, 3_600_000), 0, 360_000},
		{"one ms of compute is 0.1 micro: rounds down", c(0, 0, 1), 0, 0},
		{"five ms is 0.5 micro: rounds half up", c(0, 0, 5), 0, 1},
		{"parts are summed before rounding", c(0, 0, 3), 0, 0},
		{"fractions of parts add up", c(1, 1, 5), 1, 3 + 15 + 1 + 1_000},
		{"large volume stays exact", c(10_000_000_000, 1_000_000_000, 36_000_000_000), 1_000_000, 30_000_000_000 + 15_000_000_000 + 3_600_000_000 + 1_000_000_000},
	}
	for _, tc := range cases {
		if got := a2aproxy.Rate(plan, tc.d, tc.tasks); got != tc.want {
			t.Errorf("%s: Rate = %d, want %d", tc.name, got, tc.want)
		}
	}
	// Huge prices and counts take the exact path, and saturate rather than wrap.
	huge := listings.Plan{InputTokensPerMillionMicros: 1_000_000_000_000_000}
	if got := a2aproxy.Rate(huge, c(1000, 0, 0), 0); got != 1_000_000_000_000 {
		t.Errorf("huge price: %d", got)
	}
	if got := a2aproxy.Rate(huge, c(math.MaxInt64/2, 0, 0), 0); got != math.MaxInt64 {
		t.Errorf("beyond int64: %d, want saturation", got)
	}
	// Both paths agree at the boundary.
	if a, b := a2aproxy.Rate(plan, c(1<<26-1, 1<<26-1, 1<<26-1), 1), a2aproxy.Rate(plan, c(1<<26, 1<<26-1, 1<<26-1), 1); b-a != 3 {
		t.Errorf("fast and exact paths disagree: %d then %d", a, b)
	}
	// More usage never costs less.
	prev := int64(math.MinInt64)
	for n := int64(0); n < 2000; n += 7 {
		got := a2aproxy.Rate(plan, c(n, n/2, n*3), n/100)
		if got < prev {
			t.Fatalf("Rate decreased at %d: %d < %d", n, got, prev)
		}
		prev = got
	}
}

func TestProxiedCard(t *testing.T) {
	for _, file := range []string{"summarizer-v0.3.json", "translator-v1.0.json"} {
		raw, err := os.ReadFile("../listings/storetest/testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		card, err := agentcard.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		const ep = "https://meter.example/a2a/lst_1"
		out, err := a2aproxy.ProxiedCard(raw, card, ep, false, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := agentcard.Parse(out)
		if err != nil {
			t.Fatalf("%s: proxied card is not a valid card: %v", file, err)
		}
		bindings := map[string]bool{}
		for _, i := range got.Interfaces {
			if i.URL != ep {
				t.Errorf("%s: interface %+v not rewritten to the meter", file, i)
			}
			bindings[i.Binding] = true
		}
		if !bindings["JSONRPC"] || !bindings["HTTP+JSON"] || len(bindings) != 2 {
			t.Errorf("%s: proxied interfaces %v, want JSON-RPC and HTTP+JSON", file, got.Interfaces)
		}
		if got.Name != card.Name || got.Description != card.Description || len(got.Skills) != len(card.Skills) || got.Capabilities.Streaming != card.Capabilities.Streaming {
			t.Errorf("%s: the card changed beyond endpoints and security", file)
		}
		if got.Capabilities.PushNotifications {
			t.Errorf("%s: push notifications must be off through the meter", file)
		}
		if _, ok := got.SecuritySchemes[a2aproxy.SecuritySchemeName]; !ok || len(got.SecuritySchemes) != 1 {
			t.Errorf("%s: security schemes %v", file, got.SecuritySchemes)
		}
		var m map[string]json.RawMessage
		json.Unmarshal(out, &m)
		if _, ok := m["signatures"]; ok {
			t.Errorf("%s: stale signatures kept", file)
		}
	}
}
