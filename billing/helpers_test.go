package billing_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// date is midnight UTC of a day, or a later instant that day.
func date(y int, m time.Month, d int, hms ...int) time.Time {
	hms = append(hms, 0, 0, 0)
	return time.Date(y, m, d, hms[0], hms[1], hms[2], 0, time.UTC)
}

func period(start, end time.Time) billing.Period { return billing.Period{Start: start, End: end} }

// basePlan has round rates: 1 input token = 3 micros, 1 output token = 15
// micros, 1 ms of compute = 1/10 micro, 1 task = 10,000 micros.
func basePlan(fee int64) listings.Plan {
	return listings.Plan{
		Version:                      3,
		Currency:                     "usd",
		MonthlyFeeMicros:             fee,
		InputTokensPerMillionMicros:  3_000_000,
		OutputTokensPerMillionMicros: 15_000_000,
		ComputePerHourMicros:         360_000,
		PerTaskMicros:                10_000,
		IncludedInputTokens:          1_000_000,
		IncludedOutputTokens:         200_000,
		IncludedComputeMs:            3_600_000,
		IncludedTasks:                100,
	}
}

// included is usage that uses exactly basePlan's allowance.
var included = billing.Usage{InputTokens: 1_000_000, OutputTokens: 200_000, ComputeMs: 3_600_000, Tasks: 100}

// summary renders an invoice's amounts: each line as
// kind=micros[+num/den][minor], then the exact subtotal and the total.
func summary(inv *billing.Invoice) string {
	var parts []string
	for _, l := range inv.Lines {
		parts = append(parts, fmt.Sprintf("%s=%s[%d]", l.Kind, amount(l.AmountMicros, l.AmountFraction), l.AmountMinor))
	}
	parts = append(parts, "subtotal="+amount(inv.SubtotalMicros, inv.SubtotalFraction), fmt.Sprintf("total=%d", inv.TotalMinor))
	return strings.Join(parts, " ")
}

func amount(whole int64, f billing.Fraction) string {
	if f.Num == 0 {
		return fmt.Sprint(whole)
	}
	return fmt.Sprintf("%d+%d/%d", whole, f.Num, f.Den)
}

// fieldRules renders an error's fields as "field:rule" pairs, in order,
// after checking it is an Invalid *agentmarket.Error with the given code.
func fieldRules(t *testing.T, err error, code string) string {
	t.Helper()
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *agentmarket.Error", err, err)
	}
	if ae.Kind != agentmarket.Invalid || ae.Code != code {
		t.Errorf("kind, code = %s, %s; want %s, %s", ae.Kind, ae.Code, agentmarket.Invalid, code)
	}
	var out []string
	for _, f := range ae.Fields {
		out = append(out, f.Field+":"+f.Rule)
	}
	return strings.Join(out, " ")
}
