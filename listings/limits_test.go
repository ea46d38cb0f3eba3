package listings_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

func TestParseLimits(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	cases := []struct {
		name   string
		in     *listings.LimitsInput
		want   listings.Limits
		fields []string
	}{
		{"none", nil, listings.Limits{}, nil},
		{"zeros keep the defaults", &listings.LimitsInput{RequestTimeoutMs: n(0), MaxResultBytes: n(0)}, listings.Limits{}, nil},
		{"all set", &listings.LimitsInput{RequestTimeoutMs: n(5000), StreamIdleTimeoutMs: n(60000), MaxRequestBytes: n(2048), MaxResultBytes: n(1 << 20)},
			listings.Limits{RequestTimeout: 5 * time.Second, StreamIdleTimeout: time.Minute, MaxRequestBytes: 2048, MaxResultBytes: 1 << 20}, nil},
		{"bounds", &listings.LimitsInput{RequestTimeoutMs: n(600_000), MaxResultBytes: n(16 << 20)},
			listings.Limits{RequestTimeout: 10 * time.Minute, MaxResultBytes: 16 << 20}, nil},
		{"idempotency window", &listings.LimitsInput{IdempotencyWindowMs: n(3_600_000)}, listings.Limits{IdempotencyWindow: time.Hour}, nil},
		{"idempotency window bounds", &listings.LimitsInput{IdempotencyWindowMs: n(999)}, listings.Limits{}, []string{"limits.idempotency_window_ms:range"}},
		{"idempotency window past a week", &listings.LimitsInput{IdempotencyWindowMs: n(7*24*3_600_000 + 1)}, listings.Limits{}, []string{"limits.idempotency_window_ms:range"}},
		{"every problem at once", &listings.LimitsInput{RequestTimeoutMs: n(-1), StreamIdleTimeoutMs: n(99), MaxRequestBytes: n(1023), MaxResultBytes: n(16<<20 + 1)},
			listings.Limits{}, []string{"limits.request_timeout_ms:range", "limits.stream_idle_timeout_ms:range", "limits.max_request_bytes:range", "limits.max_result_bytes:range"}},
	}
	for _, tc := range cases {
		got, err := listings.ParseLimits(tc.in)
		var fields []string
		if ae, ok := err.(*agentmarket.Error); ok {
			for _, f := range ae.Fields {
				fields = append(fields, fmt.Sprintf("%s:%s", f.Field, f.Rule))
			}
		}
		if !slices.Equal(fields, tc.fields) || (tc.fields == nil && got != tc.want) {
			t.Errorf("%s: got %+v fields %v, want %+v fields %v", tc.name, got, fields, tc.want, tc.fields)
		}
	}
}
