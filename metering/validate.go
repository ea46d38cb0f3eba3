package metering

import (
	"time"

	"github.com/agentmarket/agentmarket"
)

// Stored times must fit every store: ClickHouse's DateTime is an unsigned
// 32-bit count of seconds, so usage is dated from 1970 to early 2106.
var (
	minTime = time.Unix(0, 0).UTC()
	maxTime = time.Unix(1<<32-1, 0).UTC()
)

// TimeInRange reports whether t is a time every store can hold (what
// Usage.Validate checks of Time).
func TimeInRange(t time.Time) bool { return !t.Before(minTime) && !t.After(maxTime) }

// Valid reports whether g is one of GroupBys, or a tag key (ByTag).
func (g GroupBy) Valid() bool {
	switch g {
	case ByListing, BySeller, ByBuyer, ByAPIKey, ByTask, ByDay:
		return true
	}
	_, ok := g.TagKey()
	return ok
}

// Validate checks what every store relies on: a row has an ID (it is what
// makes writes idempotent) and a time that every store can hold.
func (u *Usage) Validate() error {
	var f agentmarket.Fields
	if u.ID == "" {
		f.Add("id", "required", "a usage row needs an id")
	}
	if !TimeInRange(u.Time) {
		f.Add("time", "range", "time %s is outside 1970-01-01 .. 2106-02-07 UTC", u.Time.Format(time.RFC3339))
	}
	if u.Tags != "" && u.Tags.Map() == nil {
		f.Add("tags", "format", "tags must be a JSON object of strings")
	}
	return f.Err("invalid_usage", "invalid usage row")
}

// Validate checks a query for Rows: a known GroupBy when one is set, and a
// range whose end is not before its start.
func (q Query) Validate() error {
	var f agentmarket.Fields
	q.validate(&f)
	return f.Err("invalid_usage_query", "invalid usage query")
}

// ValidateTotals checks a query for Totals, which needs a GroupBy.
func (q Query) ValidateTotals() error {
	var f agentmarket.Fields
	if q.GroupBy == "" {
		f.Add("group_by", "required", "group_by is required (one of listing, seller, buyer, api_key, task, day, tag:<key>)")
	}
	q.validate(&f)
	return f.Err("invalid_usage_query", "invalid usage query")
}

func (q Query) validate(f *agentmarket.Fields) {
	if q.GroupBy != "" && !q.GroupBy.Valid() {
		f.Add("group_by", "enum", "group_by %q is not one of listing, seller, buyer, api_key, task, day, tag:<key>", q.GroupBy)
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.To.Before(q.From) {
		f.Add("to", "after_from", "to (%s) is before from (%s)", q.To.Format(time.RFC3339), q.From.Format(time.RFC3339))
	}
}

// DayKey is the Total.Key of ByDay for the UTC day that starts dayNumber
// days after 1970-01-01: stores group by the day number and format it here,
// so every store names days alike whatever its server's time zone.
func DayKey(dayNumber int64) string {
	return time.Unix(dayNumber*86400, 0).UTC().Format(time.DateOnly)
}
