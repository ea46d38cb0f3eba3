package billing_test

import (
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
)

// TestSweepEvery: a minute by default, a quarter of a short grace, never
// below 100 ms.
func TestSweepEvery(t *testing.T) {
	for _, tc := range []struct{ grace, want time.Duration }{
		{72 * time.Hour, time.Minute},
		{4 * time.Minute, time.Minute},
		{2 * time.Minute, 30 * time.Second},
		{time.Second, 250 * time.Millisecond},
		{200 * time.Millisecond, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
	} {
		if got := billing.SweepEvery(tc.grace); got != tc.want {
			t.Errorf("SweepEvery(%s) = %s, want %s", tc.grace, got, tc.want)
		}
	}
}
