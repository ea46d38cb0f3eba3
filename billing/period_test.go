package billing_test

import (
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
)

func TestMonthOf(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	cases := []struct {
		name string
		t    time.Time
		want billing.Period
	}{
		{"mid-month", date(2026, 1, 15, 12), period(date(2026, 1, 1), date(2026, 2, 1))},
		{"first instant", date(2026, 3, 1), period(date(2026, 3, 1), date(2026, 4, 1))},
		{"last nanosecond of the year", time.Date(2026, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
			period(date(2026, 12, 1), date(2027, 1, 1))},
		{"leap day", date(2028, 2, 29, 8), period(date(2028, 2, 1), date(2028, 3, 1))},
		{"another zone is taken in UTC", time.Date(2026, 2, 1, 0, 30, 0, 0, cet),
			period(date(2026, 1, 1), date(2026, 2, 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := billing.MonthOf(tc.t)
			if !got.Start.Equal(tc.want.Start) || !got.End.Equal(tc.want.End) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if got.Start.Location() != time.UTC || got.End.Location() != time.UTC {
				t.Errorf("got locations %v, %v; want UTC", got.Start.Location(), got.End.Location())
			}
			if !got.Contains(tc.t) {
				t.Errorf("MonthOf(%v) does not contain it", tc.t)
			}
		})
	}
}

func TestPeriodContains(t *testing.T) {
	p := billing.MonthOf(date(2026, 4, 1))
	cases := []struct {
		name string
		t    time.Time
		want bool
	}{
		{"start is in", date(2026, 4, 1), true},
		{"inside", date(2026, 4, 15, 12), true},
		{"last nanosecond is in", date(2026, 5, 1).Add(-time.Nanosecond), true},
		{"end is out", date(2026, 5, 1), false},
		{"before is out", date(2026, 4, 1).Add(-time.Nanosecond), false},
	}
	for _, tc := range cases {
		if got := p.Contains(tc.t); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPeriodValidate(t *testing.T) {
	start := date(2026, 1, 1)
	cases := []struct {
		name string
		p    billing.Period
		errs string
	}{
		{"a month", billing.MonthOf(start), ""},
		{"one second", period(start, start.Add(time.Second)), ""},
		{"zero", billing.Period{}, "start:required end:required"},
		{"no end", billing.Period{Start: start}, "end:required"},
		{"empty", period(start, start), "end:after_start"},
		{"backwards", period(start, start.Add(-time.Hour)), "end:after_start"},
		{"shorter than a whole second", period(start.Add(100*time.Millisecond), start.Add(900*time.Millisecond)), "end:after_start"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.errs == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if got := fieldRules(t, err, "invalid_period"); got != tc.errs {
				t.Errorf("got %q, want %q", got, tc.errs)
			}
		})
	}
}

func TestUsageValidate(t *testing.T) {
	if err := (billing.Usage{}).Validate(); err != nil {
		t.Errorf("zero usage: err = %v, want nil", err)
	}
	err := billing.Usage{InputTokens: -1, OutputTokens: -1, ComputeMs: -1, Tasks: -1}.Validate()
	want := "input_tokens:non_negative output_tokens:non_negative compute_ms:non_negative tasks:non_negative"
	if got := fieldRules(t, err, "invalid_usage"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
