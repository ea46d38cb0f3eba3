package billing_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

func at(t time.Time) *time.Time { return &t }

func TestPreview(t *testing.T) {
	apr := billing.MonthOf(date(2026, 4, 1)) // 30 days
	now := date(2026, 4, 10, 12)
	cases := []struct {
		name       string
		usage      billing.Usage
		start, end *time.Time
		wantActive billing.Period
		want       string
	}{
		{name: "contract from before the period, open-ended: the whole fee", wantActive: apr,
			want: "flat_fee=30000000[3000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=30000000 total=3000"},
		{name: "started this period: the fee to the period's end, not to now", start: at(date(2026, 4, 6)),
			wantActive: period(date(2026, 4, 6), apr.End),
			want:       "flat_fee=25000000[2500] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=25000000 total=2500"},
		{name: "started this instant", start: at(now), wantActive: period(now, apr.End),
			want: "flat_fee=20500000[2050] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=20500000 total=2050"},
		{name: "ends later this period: the fee to its end", start: at(date(2026, 1, 5)), end: at(date(2026, 4, 21)),
			wantActive: period(apr.Start, date(2026, 4, 21)),
			want:       "flat_fee=20000000[2000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=20000000 total=2000"},
		{name: "ended earlier this period", end: at(date(2026, 4, 5)), wantActive: period(apr.Start, date(2026, 4, 5)),
			want: "flat_fee=4000000[400] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=4000000 total=400"},
		{name: "ends after the period", end: at(date(2026, 7, 1)), wantActive: apr,
			want: "flat_fee=30000000[3000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=30000000 total=3000"},
		{name: "usage so far, past the full allowance", usage: over(included, 1, 1, 1, 1), start: at(date(2026, 4, 6)),
			wantActive: period(date(2026, 4, 6), apr.End),
			want:       "flat_fee=25000000[2500] input_tokens=3[0] output_tokens=15[0] compute=0+1/10[0] tasks=10000[1] subtotal=25010018+1/10 total=2501"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := billing.Preview(basePlan(30_000_000), tc.usage, apr, tc.start, tc.end, now)
			if err != nil {
				t.Fatalf("Preview: %v", err)
			}
			if got := summary(inv); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if !inv.Preview || !inv.AsOf.Equal(now) {
				t.Errorf("preview, as of = %v, %v; want true, %v", inv.Preview, inv.AsOf, now)
			}
			if inv.Active != tc.wantActive || inv.Period != apr {
				t.Errorf("period, active = %v, %v; want %v, %v", inv.Period, inv.Active, apr, tc.wantActive)
			}

			// A preview is the rating of the contract's span in the period.
			rated, err := billing.Rate(basePlan(30_000_000), tc.usage, apr, inv.Active)
			if err != nil {
				t.Fatal(err)
			}
			rated.Preview, rated.AsOf = true, now
			if !reflect.DeepEqual(inv, rated) {
				t.Errorf("Preview and Rate differ:\npreview %+v\nrate    %+v", inv, rated)
			}
		})
	}
}

func TestPreviewInvalid(t *testing.T) {
	apr := billing.MonthOf(date(2026, 4, 1))
	now := date(2026, 4, 10, 12)
	cases := []struct {
		name       string
		plan       listings.Plan
		usage      billing.Usage
		period     billing.Period
		start, end *time.Time
		now        time.Time
		errs       string
	}{
		{name: "now after the period", plan: basePlan(1), period: apr, now: apr.End, errs: "now:outside_period"},
		{name: "now before the period", plan: basePlan(1), period: apr, now: apr.Start.Add(-time.Nanosecond), errs: "now:outside_period"},
		{name: "contract starts after now", plan: basePlan(1), period: apr, now: now, start: at(now.Add(time.Second)),
			errs: "contract_start:not_started"},
		{name: "contract ended before the period", plan: basePlan(1), period: apr, now: now, end: at(date(2026, 3, 20)),
			errs: "contract_end:outside_period"},
		{name: "contract ended as the period started", plan: basePlan(1), period: apr, now: now, end: at(apr.Start),
			errs: "contract_end:outside_period"},
		{name: "contract ends before it starts", plan: basePlan(1), period: apr, now: now,
			start: at(date(2026, 4, 5)), end: at(date(2026, 4, 3)), errs: "contract_end:after_start"},
		{name: "period longer than 366 days", plan: basePlan(1), period: period(date(2026, 1, 1), date(2027, 6, 1)), now: now,
			errs: "period.end:max_length"},
		{name: "bad plan, usage and period, all reported", plan: listings.Plan{Currency: "usd", PerTaskMicros: -1},
			usage: billing.Usage{Tasks: -2}, now: now,
			errs: "plan.per_task_micros:non_negative usage.tasks:non_negative period.start:required period.end:required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := billing.Preview(tc.plan, tc.usage, tc.period, tc.start, tc.end, tc.now)
			if inv != nil {
				t.Errorf("got an invoice, want an error")
			}
			if got := fieldRules(t, err, "invalid_preview_input"); got != tc.errs {
				t.Errorf("got %q, want %q", got, tc.errs)
			}
		})
	}
}
