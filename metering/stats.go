package metering

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Verified listing stats are what the marketplace measured on a listing's
// metered traffic, never what its seller says. Every store computes them
// from its usage rows by the same rules (StatsStore; the storetest suite
// checks both stores give the same figures):
//
//   - Calls are the buyers' calls: every row but those the meter makes on
//     its own (MeterMethods: push notifications, settled streams).
//   - Outcomes are counted per task that reached a terminal state in the
//     window (a task polled ten times counts once): completed is a
//     success; failed or rejected a failure. Calls answered with an error
//     the agent is responsible for (AgentErrorCodes: unreachable, timed
//     out, invalid or too large an answer, an internal error…) are
//     failures too, one per call. Errors of the buyer's making (no key, no
//     budget, a task that does not exist…) count for nothing. The success
//     rate is successes / (successes + failures).
//   - Latency is that of the message/send calls (SendMethods) answered
//     without error; the p-th percentile is the value at 0-based rank
//     floor(p × n / 100) of the n latencies sorted (p50 of 10, 20 is 20).
//   - Cost per task is a task's list cost summed over its rows in the
//     window (cost_micros); the median is its 50th percentile, by the same
//     rank rule, over the tasks with a row in the window.
//   - Estimated calls are calls whose tokens the meter estimated from text
//     because the agent reported none.
//
// A listing's stats show only when enough buyers made enough tasks in the
// window: MinTasks distinct tasks or more, from MinBuyerOrgs distinct buyer
// orgs or more. A task counts when a buyer's call about it was answered
// without error; an org counts when it made such a call. Calls are no
// measure of that: one buyer polling its own task with free tasks/get
// calls, or asking for task ids that do not exist (answered with an
// error), would reach any number of them and then read the figures of the
// other buyers of a small listing. A listing whose agent answers only with
// messages (no task) has no stats. The thresholds are a minimum of crowd,
// not anonymity: buyers who combine orgs may still learn what the rest
// did.
//
// A seller's own calls to its listing (buyer org = seller org) are not
// counted: a seller may subscribe to its own listing, and must not make
// its own figures. SelfTrafficSQL is that rule in SQL.

// MeterMethods are the Usage.Method of rows the meter makes on its own.
var MeterMethods = []string{"push", "sweep"}

// SendMethods are message/send in the A2A versions the meter speaks.
var SendMethods = []string{"message/send", "SendMessage"}

// FailedStates are the terminal task states that are failures.
var FailedStates = []string{"failed", "rejected"}

// AgentErrorCodes are the JSON-RPC error codes answered to a buyer for
// which the agent, not the buyer, is responsible: JSON-RPC's internal
// error, A2A's invalid agent response, and the meter's codes for an agent
// that could not be reached, timed out, answered too much, went idle in a
// stream, sits at an address the meter refuses, or answered with another
// organisation's task (a2aproxy's Code* constants).
var AgentErrorCodes = []int{-32603, -32006, -32050, -32051, -32052, -32054, -32055, -32056}

// MaxStatsListings bounds the listings of one StatsQuery.
const MaxStatsListings = 500

// StatsQuery selects the listings to measure: the window [From, To) and,
// when set, the listings (none: every listing with calls in the window).
// Listings with fewer than MinTasks tasks or MinBuyerOrgs buyer orgs (as
// the rules above count them) are left out.
type StatsQuery struct {
	From, To     time.Time
	ListingIDs   []string
	MinBuyerOrgs int64
	MinTasks     int64
}

// Validate reports every broken rule.
func (q StatsQuery) Validate() error {
	var f agentmarket.Fields
	if q.From.IsZero() {
		f.Add("from", "required", "from is required")
	}
	if q.To.IsZero() {
		f.Add("to", "required", "to is required")
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		f.Add("to", "after_from", "to must be after from")
	}
	if q.MinBuyerOrgs < 1 {
		f.Add("min_buyer_orgs", "min", "min_buyer_orgs must be at least 1")
	}
	if q.MinTasks < 1 {
		f.Add("min_tasks", "min", "min_tasks must be at least 1")
	}
	if len(q.ListingIDs) > MaxStatsListings {
		f.Add("listing_ids", "max_items", "at most %d listings", MaxStatsListings)
	}
	for _, id := range q.ListingIDs {
		if id == "" {
			f.Add("listing_ids", "required", "a listing id is empty")
			break
		}
	}
	return f.Err("invalid_stats_query", "the listing stats query is not valid")
}

// ListingStats are a listing's verified figures over a window.
type ListingStats struct {
	ListingID string
	Calls     int64
	// Completed counts the tasks that completed; Failed the tasks that
	// failed or were rejected, and the calls answered with an agent error.
	Completed, Failed int64
	// Sends is how many message/send calls the latency percentiles are of.
	Sends                      int64
	LatencyP50Ms, LatencyP95Ms int64
	// Tasks is how many tasks the median cost is of, in Currency.
	Tasks                int64
	MedianTaskCostMicros int64
	Currency             string
	EstimatedCalls       int64
}

// StatsStore computes verified listing stats from usage rows
// (metering/embedded and metering/clickhouse implement it; storetest
// RunStats is its contract).
type StatsStore interface {
	// ListingStats returns the stats of q's listings that reach q's
	// minimums of tasks and buyer orgs in the window, ordered by listing
	// id.
	ListingStats(ctx context.Context, q StatsQuery) ([]ListingStats, error)
}

// ReadListingStats reads the rows of a stats query whose columns are the
// listing id, calls, completed, failed, sends, p50, p95, tasks, median
// task cost, currency and estimated calls: the one reading every store
// shares. Errors are the driver's, for the store to wrap.
func ReadListingStats(rows TotalRows) ([]ListingStats, error) {
	out := []ListingStats{}
	for rows.Next() {
		var st ListingStats
		if err := rows.Scan(&st.ListingID, &st.Calls, &st.Completed, &st.Failed, &st.Sends, &st.LatencyP50Ms, &st.LatencyP95Ms,
			&st.Tasks, &st.MedianTaskCostMicros, &st.Currency, &st.EstimatedCalls); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// inList renders values as SQL string literals, for the constant lists
// above (none holds a quote).
func inList(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = "'" + v + "'"
	}
	return "(" + strings.Join(out, ", ") + ")"
}

// StatsSQLLists are the constant lists of the rules in SQL, for the
// stores' queries: meter methods, send methods, failed states and agent
// error codes.
func StatsSQLLists() (meter, send, failed, codes string) {
	c := make([]string, len(AgentErrorCodes))
	for i, n := range AgentErrorCodes {
		c[i] = strconv.Itoa(n)
	}
	return inList(MeterMethods), inList(SendMethods), inList(FailedStates), "(" + strings.Join(c, ", ") + ")"
}

// ListingFilter is the SQL condition selecting q's listings, with its
// arguments ("" when q asks for every listing).
func (q StatsQuery) ListingFilter() (string, []any) {
	if len(q.ListingIDs) == 0 {
		return "", nil
	}
	args := make([]any, len(q.ListingIDs))
	for i, id := range q.ListingIDs {
		args[i] = id
	}
	return "listing_id IN (?" + strings.Repeat(", ?", len(q.ListingIDs)-1) + ")", args
}

// StatsWindow is the window verified stats cover: the last 30 days.
const StatsWindow = 30 * 24 * time.Hour

// DefaultStatsMinBuyerOrgs and DefaultStatsMinTasks are the fewest buyer
// orgs and tasks in the window for a listing's stats to show.
const (
	DefaultStatsMinBuyerOrgs = 3
	DefaultStatsMinTasks     = 20
)

// Verified serves listings' verified stats over the last StatsWindow,
// computed for every listing at once and kept for TTL (the figures of 30
// days move slowly; a catalog page then costs no query).
type Verified struct {
	Store StatsStore
	Clock agentmarket.Clock
	// MinBuyerOrgs and MinTasks are the fewest buyer orgs and tasks for
	// stats to show (0: the defaults).
	MinBuyerOrgs, MinTasks int64
	// TTL is how long computed stats are served (0: computed every time).
	TTL time.Duration

	mu    sync.Mutex
	at    time.Time
	stats map[string]ListingStats
	from  time.Time
}

// Minimums are the fewest buyer orgs and tasks in the window for a
// listing's stats to show.
func (v *Verified) Minimums() (buyerOrgs, tasks int64) {
	buyerOrgs, tasks = v.MinBuyerOrgs, v.MinTasks
	if buyerOrgs < 1 {
		buyerOrgs = DefaultStatsMinBuyerOrgs
	}
	if tasks < 1 {
		tasks = DefaultStatsMinTasks
	}
	return buyerOrgs, tasks
}

// Listing returns a listing's stats, and whether it has any (false below
// the minimums), with the window they cover.
func (v *Verified) Listing(ctx context.Context, listingID string) (ListingStats, bool, Period, error) {
	all, window, err := v.all(ctx)
	if err != nil {
		return ListingStats{}, false, window, err
	}
	s, ok := all[listingID]
	return s, ok, window, nil
}

// Listings returns the stats of the listings that have any, by id.
func (v *Verified) Listings(ctx context.Context) (map[string]ListingStats, error) {
	all, _, err := v.all(ctx)
	return all, err
}

// Period is a window of time [Start, End).
type Period struct{ Start, End time.Time }

func (v *Verified) all(ctx context.Context) (map[string]ListingStats, Period, error) {
	now := v.Clock.Now().UTC()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stats != nil && v.TTL > 0 && !now.Before(v.at) && now.Before(v.at.Add(v.TTL)) {
		return v.stats, Period{Start: v.from, End: v.at}, nil
	}
	from := now.Add(-StatsWindow)
	orgs, tasks := v.Minimums()
	list, err := v.Store.ListingStats(ctx, StatsQuery{From: from, To: now, MinBuyerOrgs: orgs, MinTasks: tasks})
	if err != nil {
		return nil, Period{Start: from, End: now}, err
	}
	m := make(map[string]ListingStats, len(list))
	for _, s := range list {
		m[s.ListingID] = s
	}
	v.stats, v.at, v.from = m, now, from
	return m, Period{Start: from, End: now}, nil
}

// SelfTrafficSQL is the condition that leaves a seller's own calls out of
// the stats, in both stores' SQL.
const SelfTrafficSQL = "buyer_org_id <> seller_org_id"
