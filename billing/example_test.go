package billing_test

import (
	"fmt"
	"time"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// A contract that starts on 21 April pays 10/30 of the monthly fee, gets
// the whole allowance, and is charged for usage past it. Lines keep exact
// micros; the total is rounded once, and each line's share of it in cents
// adds up to the total.
func ExampleRate() {
	plan := listings.Plan{
		Currency:                     "usd",
		MonthlyFeeMicros:             49_000_000, // 49 USD a month
		InputTokensPerMillionMicros:  3_000_000,  // 3 USD per million
		OutputTokensPerMillionMicros: 15_000_000, // 15 USD per million
		ComputePerHourMicros:         360_000,    // 0.36 USD an hour
		PerTaskMicros:                10_000,     // 1 cent a task
		IncludedInputTokens:          1_000_000,
		IncludedTasks:                100,
	}
	april := billing.MonthOf(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	active := billing.Period{Start: time.Date(2026, 4, 21, 0, 0, 0, 0, time.UTC), End: april.End}
	usage := billing.Usage{InputTokens: 1_250_000, OutputTokens: 40_000, ComputeMs: 1_234_567, Tasks: 130}

	inv, err := billing.Rate(plan, usage, april, active)
	if err != nil {
		panic(err)
	}
	for _, l := range inv.Lines {
		fmt.Printf("%-13s %9d of %9d billable  %9d+%d/%d micros  %5d cents\n", l.Kind, l.Quantity, l.Used,
			l.AmountMicros, l.AmountFraction.Num, l.AmountFraction.Den, l.AmountMinor)
	}
	fmt.Printf("subtotal %d+%d/%d micros, total %d cents\n", inv.SubtotalMicros,
		inv.SubtotalFraction.Num, inv.SubtotalFraction.Den, inv.TotalMinor)
	// Output:
	// flat_fee         864000 of    864000 billable   16333333+1/3 micros   1633 cents
	// input_tokens     250000 of   1250000 billable     750000+0/1 micros     75 cents
	// output_tokens     40000 of     40000 billable     600000+0/1 micros     60 cents
	// compute         1234567 of   1234567 billable     123456+7/10 micros     13 cents
	// tasks                30 of       130 billable     300000+0/1 micros     30 cents
	// subtotal 18106790+1/30 micros, total 1811 cents
}
