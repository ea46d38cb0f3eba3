package billing

import (
	"time"

	"github.com/agentmarket/agentmarket"
)

// Period is a billing period [Start, End) in UTC (a calendar month by
// default). Proration measures it in whole seconds: both ends are
// truncated to the second.
type Period struct{ Start, End time.Time }

// MaxPeriod is the longest period that can be billed: a leap year.
const MaxPeriod = 366 * 24 * time.Hour

// MonthOf is the calendar month, in UTC, that contains t.
func MonthOf(t time.Time) Period {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Period{Start: start, End: start.AddDate(0, 1, 0)}
}

// The span of time AgentMarket rates and reports: every instant a query
// names must fall in it (ClickHouse's DateTime ends on 7 February 2106;
// JSON times end with the year 9999).
var (
	Earliest = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	Latest   = time.Date(2106, 1, 1, 0, 0, 0, 0, time.UTC)
)

// InRange reports whether t falls in [Earliest, Latest].
func InRange(t time.Time) bool { return !t.Before(Earliest) && !t.After(Latest) }

// ParseMonth reads a month written YYYY-MM (a query's period=), from
// 1970-01 to 2105-12; anything else is an Invalid error on field.
func ParseMonth(field, v string) (Period, error) {
	t, err := time.Parse("2006-01", v)
	if err != nil || !InRange(t) || !t.Before(Latest) {
		var fe agentmarket.Fields
		fe.Add(field, "format", "%s must be a month like 2026-11, from 1970-01 to 2105-12", field)
		return Period{}, fe.Err("invalid_period", "the period is not valid")
	}
	return MonthOf(t), nil
}

// Contains reports whether t falls in [Start, End).
func (p Period) Contains(t time.Time) bool {
	return !t.Before(p.Start) && t.Before(p.End)
}

// Validate reports every broken rule: both ends are required, and End must
// be at least one whole second after Start.
func (p Period) Validate() error {
	var fe agentmarket.Fields
	p.check(&fe, "")
	return fe.Err("invalid_period", "the period is not valid")
}

// check adds p's broken rules to fe, with field names under prefix, and
// reports whether p is valid.
func (p Period) check(fe *agentmarket.Fields, prefix string) bool {
	n := len(*fe)
	if p.Start.IsZero() {
		fe.Add(field(prefix, "start"), "required", "start is required")
	}
	if p.End.IsZero() {
		fe.Add(field(prefix, "end"), "required", "end is required")
	}
	if !p.Start.IsZero() && !p.End.IsZero() && p.End.Unix() <= p.Start.Unix() {
		fe.Add(field(prefix, "end"), "after_start", "end must be at least one whole second after start")
	}
	return len(*fe) == n
}

// checkSpan is check for a span of terms, which may be shorter than a
// second: both ends required, the end not before the start.
func (p Period) checkSpan(fe *agentmarket.Fields, prefix string) bool {
	n := len(*fe)
	if p.Start.IsZero() {
		fe.Add(field(prefix, "start"), "required", "start is required")
	}
	if p.End.IsZero() {
		fe.Add(field(prefix, "end"), "required", "end is required")
	}
	if !p.Start.IsZero() && !p.End.IsZero() && p.End.Before(p.Start) {
		fe.Add(field(prefix, "end"), "after_start", "end must not be before start")
	}
	return len(*fe) == n
}

// touches reports whether a and b share any time, however short.
func touches(a, b Period) bool { return a.Start.Before(b.End) && b.Start.Before(a.End) }

// seconds returns the period's ends as Unix seconds (truncated).
func (p Period) seconds() (start, end int64) { return p.Start.Unix(), p.End.Unix() }

func field(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
