package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// StatsStore is a usage store that computes verified listing stats.
type StatsStore interface {
	metering.Store
	metering.StatsStore
}

// StatsFactory returns a fresh, empty store.
type StatsFactory func(t *testing.T) StatsStore

// w0 starts the stats cases' window.
var w0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// call is a usage row of the stats cases: one call to a listing.
type call struct {
	listing, task, method, state string
	code                         int
	latency, cost                int64
	estimated                    bool
	at                           time.Duration // after w0
	currency                     string
	own                          bool   // the seller calls its own listing
	org                          string // the buyer org ("": Row's)
}

func (c call) row(n int) metering.Usage {
	u := Row(n, w0.Add(c.at))
	u.ListingID, u.TaskID, u.Method, u.State, u.ErrorCode = c.listing, c.task, c.method, c.state, c.code
	u.LatencyMs, u.CostMicros, u.Estimated = c.latency, c.cost, c.estimated
	if u.Method == "" {
		u.Method = "message/send"
	}
	if c.currency != "" {
		u.Currency = c.currency
	}
	if c.org != "" {
		u.BuyerOrgID = c.org
	}
	if c.own {
		u.BuyerOrgID = u.SellerOrgID
	}
	return u
}

// sends are n message/send calls to a listing, each its own completed
// task, with latencies and costs from the lists.
func sends(listing string, latencies, costs []int64) []call {
	out := make([]call, len(latencies))
	for i := range latencies {
		out[i] = call{listing: listing, task: fmt.Sprintf("%s-t%d", listing, i), state: "completed", latency: latencies[i], cost: costs[i],
			at: time.Duration(i+1) * time.Minute}
	}
	return out
}

// seq is 1, 2, … n.
func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// fromOrgs spreads calls over n buyer orgs, the i-th call to the i mod
// n-th.
func fromOrgs(n int, calls []call) []call {
	for i := range calls {
		calls[i].org = fmt.Sprintf("org_b%d", i%n)
	}
	return calls
}

// polls are n tasks/get calls about a task, answered without error, a
// minute apart from at.
func polls(listing, org, task string, n int, at time.Duration) []call {
	out := make([]call, n)
	for i := range out {
		out[i] = call{listing: listing, org: org, task: task, method: "tasks/get", state: "working", latency: 1,
			at: at + time.Duration(i)*time.Minute}
	}
	return out
}

// RunStats is the contract of metering.StatsStore: a table of usage rows
// and the stats they must give, then random rows checked against
// StatsReference, the rules written in Go.
func RunStats(t *testing.T, open StatsFactory) {
	window := metering.StatsQuery{From: w0, To: w0.Add(metering.StatsWindow), MinBuyerOrgs: 1, MinTasks: 1}
	// The default minimums: 3 buyer orgs, 20 tasks.
	crowd := func(q metering.StatsQuery) metering.StatsQuery {
		q.MinBuyerOrgs, q.MinTasks = metering.DefaultStatsMinBuyerOrgs, metering.DefaultStatsMinTasks
		return q
	}
	cases := []struct {
		name  string
		calls []call
		q     func(q metering.StatsQuery) metering.StatsQuery
		want  []metering.ListingStats
	}{
		{
			name:  "percentiles at rank floor(p × n / 100)",
			calls: sends("lst_a", []int64{100, 90, 80, 70, 60, 50, 40, 30, 20, 10}, []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}),
			want: []metering.ListingStats{{ListingID: "lst_a", Calls: 10, Completed: 10, Sends: 10, LatencyP50Ms: 60, LatencyP95Ms: 100,
				Tasks: 10, MedianTaskCostMicros: 6, Currency: "usd"}},
		},
		{
			name:  "twenty values: p50 the 11th, p95 the 20th",
			calls: sends("lst_20", seq(20), seq(20)),
			want: []metering.ListingStats{{ListingID: "lst_20", Calls: 20, Completed: 20, Sends: 20, LatencyP50Ms: 11, LatencyP95Ms: 20,
				Tasks: 20, MedianTaskCostMicros: 11, Currency: "usd"}},
		},
		{
			name: "one value, two values: the upper one",
			calls: append(sends("lst_one", []int64{42}, []int64{7}),
				sends("lst_two", []int64{20, 10}, []int64{5, 9})...),
			want: []metering.ListingStats{
				{ListingID: "lst_one", Calls: 1, Completed: 1, Sends: 1, LatencyP50Ms: 42, LatencyP95Ms: 42, Tasks: 1, MedianTaskCostMicros: 7, Currency: "usd"},
				{ListingID: "lst_two", Calls: 2, Completed: 2, Sends: 2, LatencyP50Ms: 20, LatencyP95Ms: 20, Tasks: 2, MedianTaskCostMicros: 9, Currency: "usd"},
			},
		},
		{
			name: "outcomes per task, agent errors per call, buyers' errors and the meter's rows apart",
			calls: []call{
				{listing: "lst_o", task: "t1", state: "working", latency: 30, at: time.Minute},
				{listing: "lst_o", task: "t1", method: "tasks/get", state: "completed", latency: 1, at: 2 * time.Minute},
				{listing: "lst_o", task: "t1", method: "tasks/get", state: "completed", latency: 1, at: 3 * time.Minute},
				{listing: "lst_o", task: "t2", method: "SendMessage", state: "failed", latency: 50, at: 4 * time.Minute},
				{listing: "lst_o", task: "t3", method: "message/stream", state: "rejected", latency: 900, at: 5 * time.Minute},
				{listing: "lst_o", task: "t4", state: "canceled", latency: 40, at: 6 * time.Minute},
				{listing: "lst_o", code: -32051, latency: 30_000, at: 7 * time.Minute},                             // the agent timed out
				{listing: "lst_o", code: -32042, latency: 2, at: 8 * time.Minute},                                  // the buyer's budget
				{listing: "lst_o", task: "t9", method: "tasks/get", code: -32001, latency: 3, at: 9 * time.Minute}, // no such task
				{listing: "lst_o", task: "t5", state: "working", latency: 20, estimated: true, at: 10 * time.Minute},
				{listing: "lst_o", task: "t5", method: "push", state: "completed", at: 11 * time.Minute}, // the meter's: no call
				{listing: "lst_o", task: "t6", method: "sweep", state: "failed", at: 12 * time.Minute},
			},
			// Calls: 10 (not push, sweep). Completed t1, t5; failed t2, t3,
			// t6 and the timeout. Latencies of error-free sends: 30, 50,
			// 40, 20 → sorted 20 30 40 50: p50 rank 2 = 40, p95 rank 3 = 50.
			// Tasks t1..t6, t9: 7 of cost 0.
			want: []metering.ListingStats{{ListingID: "lst_o", Calls: 10, Completed: 2, Failed: 4, Sends: 4, LatencyP50Ms: 40, LatencyP95Ms: 50,
				Tasks: 7, Currency: "usd", EstimatedCalls: 1}},
		},
		{
			name: "a task's cost is its rows' sum; calls without a task are no task",
			calls: []call{
				{listing: "lst_c", task: "a", cost: 100, at: time.Minute},
				{listing: "lst_c", task: "a", method: "tasks/get", cost: 200, at: 2 * time.Minute},
				{listing: "lst_c", task: "a", method: "push", cost: 300, at: 3 * time.Minute},
				{listing: "lst_c", task: "b", cost: 50, at: 4 * time.Minute},
				{listing: "lst_c", task: "c", cost: 1000, at: 5 * time.Minute},
				{listing: "lst_c", cost: 5000, at: 6 * time.Minute},
				{listing: "lst_c", cost: 7000, at: 7 * time.Minute, currency: "eur"},
			},
			want: []metering.ListingStats{{ListingID: "lst_c", Calls: 6, Sends: 5, LatencyP50Ms: 0, LatencyP95Ms: 0, Tasks: 3,
				MedianTaskCostMicros: 600, Currency: "usd"}},
		},
		{
			name: "the window: its start in, its end out",
			calls: []call{
				{listing: "lst_w", task: "in1", latency: 1, at: 0},
				{listing: "lst_w", task: "in2", latency: 2, at: metering.StatsWindow - time.Millisecond},
				{listing: "lst_w", task: "before", latency: 3, at: -time.Millisecond},
				{listing: "lst_w", task: "end", latency: 4, at: metering.StatsWindow},
			},
			want: []metering.ListingStats{{ListingID: "lst_w", Calls: 2, Sends: 2, LatencyP50Ms: 2, LatencyP95Ms: 2, Tasks: 2, Currency: "usd"}},
		},
		{
			name: "fewer tasks than the minimum: hidden (the meter's rows do not count)",
			calls: append(append(sends("lst_few", []int64{1, 2}, []int64{1, 1}),
				call{listing: "lst_few", task: "lst_few-t9", method: "push", state: "completed", at: time.Hour}),
				sends("lst_enough", []int64{1, 2, 3}, []int64{1, 1, 1})...),
			q: func(q metering.StatsQuery) metering.StatsQuery { q.MinTasks = 3; return q },
			want: []metering.ListingStats{{ListingID: "lst_enough", Calls: 3, Completed: 3, Sends: 3, LatencyP50Ms: 2, LatencyP95Ms: 3,
				Tasks: 3, MedianTaskCostMicros: 1, Currency: "usd"}},
		},
		{
			name:  "three orgs and twenty tasks: shown",
			calls: fromOrgs(3, sends("lst_crowd", seq(20), seq(20))),
			q:     crowd,
			want: []metering.ListingStats{{ListingID: "lst_crowd", Calls: 20, Completed: 20, Sends: 20, LatencyP50Ms: 11, LatencyP95Ms: 20,
				Tasks: 20, MedianTaskCostMicros: 11, Currency: "usd"}},
		},
		{
			// Issue 23: one buyer reaching a calls threshold with free
			// polls of its own task would read the other buyers' figures.
			name: "one org's many calls on its tasks: hidden",
			// lst_one_org: 25 tasks, all one org's. lst_polled: two orgs'
			// tasks, polled 70 times: 72 calls, 2 tasks, 2 orgs.
			calls: append(append(append(
				fromOrgs(1, sends("lst_one_org", seq(25), seq(25))),
				fromOrgs(2, sends("lst_polled", seq(2), seq(2)))...),
				polls("lst_polled", "org_b0", "lst_polled-t0", 60, time.Hour)...),
				polls("lst_polled", "org_b1", "lst_polled-t1", 10, 2*time.Hour)...),
			q:    crowd,
			want: []metering.ListingStats{},
		},
		{
			name: "many calls on few tasks from many orgs: hidden",
			calls: append(fromOrgs(5, sends("lst_few_tasks", seq(19), seq(19))),
				polls("lst_few_tasks", "org_b4", "lst_few_tasks-t18", 40, time.Hour)...),
			q:    crowd,
			want: []metering.ListingStats{},
		},
		{
			name: "calls answered with an error make no task and no org",
			// 18 tasks of two orgs; a third org asks for tasks that do not
			// exist (refused), sends without budget, gets an agent's
			// timeout; a fourth has only the meter's row of a push.
			// Counted, they would make 23 tasks of 4 orgs.
			calls: append(fromOrgs(2, sends("lst_errors", seq(18), seq(18))),
				call{listing: "lst_errors", org: "org_c", task: "made-up-1", method: "tasks/get", code: -32001, at: time.Hour},
				call{listing: "lst_errors", org: "org_c", task: "made-up-2", method: "tasks/get", code: -32001, at: time.Hour},
				call{listing: "lst_errors", org: "org_c", task: "no-budget", code: -32042, at: time.Hour},
				call{listing: "lst_errors", org: "org_c", task: "timed-out", code: -32051, at: 2 * time.Hour},
				call{listing: "lst_errors", org: "org_d", task: "pushed", method: "push", state: "completed", at: 2 * time.Hour}),
			q:    crowd,
			want: []metering.ListingStats{},
		},
		{
			name: "the seller's own tasks count for no minimum",
			calls: append(fromOrgs(2, sends("lst_own", seq(20), seq(20))),
				call{listing: "lst_own", task: "own", state: "completed", latency: 1, at: time.Hour, own: true}),
			q:    crowd,
			want: []metering.ListingStats{},
		},
		{
			name:  "only the listings asked for",
			calls: append(sends("lst_x", []int64{5}, []int64{1}), append(sends("lst_y", []int64{6}, []int64{2}), sends("lst_z", []int64{7}, []int64{3})...)...),
			q:     func(q metering.StatsQuery) metering.StatsQuery { q.ListingIDs = []string{"lst_z", "lst_x"}; return q },
			want: []metering.ListingStats{
				{ListingID: "lst_x", Calls: 1, Completed: 1, Sends: 1, LatencyP50Ms: 5, LatencyP95Ms: 5, Tasks: 1, MedianTaskCostMicros: 1, Currency: "usd"},
				{ListingID: "lst_z", Calls: 1, Completed: 1, Sends: 1, LatencyP50Ms: 7, LatencyP95Ms: 7, Tasks: 1, MedianTaskCostMicros: 3, Currency: "usd"},
			},
		},
		{
			name: "the seller's own calls to its listing do not count",
			calls: append(sends("lst_s", []int64{10, 20}, []int64{1, 2}),
				call{listing: "lst_s", task: "own1", state: "completed", latency: 1, cost: 100, at: time.Hour, own: true},
				call{listing: "lst_s", task: "own2", state: "completed", latency: 1, cost: 100, at: time.Hour, own: true},
				call{listing: "lst_s", task: "own3", state: "completed", latency: 1, cost: 100, at: time.Hour, own: true},
				call{listing: "lst_only_own", task: "own4", state: "completed", latency: 1, cost: 100, at: time.Hour, own: true}),
			want: []metering.ListingStats{{ListingID: "lst_s", Calls: 2, Completed: 2, Sends: 2, LatencyP50Ms: 20, LatencyP95Ms: 20,
				Tasks: 2, MedianTaskCostMicros: 2, Currency: "usd"}},
		},
		{
			name:  "nothing in the window",
			calls: []call{{listing: "lst_old", task: "t", at: -time.Hour}},
			want:  []metering.ListingStats{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			rows := make([]metering.Usage, len(tc.calls))
			for i, c := range tc.calls {
				rows[i] = c.row(i)
			}
			ctx := context.Background()
			// Twice: a row stored twice counts once.
			for range 2 {
				if err := s.Insert(ctx, rows); err != nil {
					t.Fatal(err)
				}
			}
			q := window
			if tc.q != nil {
				q = tc.q(q)
			}
			got, err := s.ListingStats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("stats\n got  %+v\n want %+v", got, tc.want)
			}
			if ref := StatsReference(rows, q); !reflect.DeepEqual(ref, tc.want) {
				t.Errorf("the reference disagrees with the case\n ref  %+v\n want %+v", ref, tc.want)
			}
		})
	}

	t.Run("random rows give the reference's stats", func(t *testing.T) {
		r := rand.New(rand.NewPCG(14, 7))
		s := open(t)
		methods := []string{"message/send", "SendMessage", "message/stream", "tasks/get", "push", "sweep"}
		states := []string{"", "working", "completed", "failed", "rejected", "canceled", "input-required"}
		codes := []int{0, 0, 0, 0, -32051, -32603, -32042, -32001, -32006}
		var rows []metering.Usage
		for i := range 400 {
			l := r.IntN(4)
			c := call{listing: fmt.Sprintf("lst_%d", l), method: methods[r.IntN(len(methods))], state: states[r.IntN(len(states))],
				code: codes[r.IntN(len(codes))], latency: r.Int64N(5000), cost: r.Int64N(100_000), estimated: r.IntN(3) == 0,
				at: time.Duration(r.Int64N(int64(metering.StatsWindow+2*time.Hour))) - time.Hour}
			if r.IntN(5) > 0 {
				c.task = fmt.Sprintf("t%d", r.IntN(60))
			}
			c.org = fmt.Sprintf("org_b%d", r.IntN(2+l)) // lst_0's buyers are 2 orgs, lst_3's 5
			rows = append(rows, c.row(i))
		}
		if err := s.Insert(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
		for _, least := range [][2]int64{{1, 1}, {3, 1}, {3, 16}, {3, 18}, {3, 20}, {4, 16}, {6, 1}} {
			q := window
			q.MinBuyerOrgs, q.MinTasks = least[0], least[1]
			got, err := s.ListingStats(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if want := StatsReference(rows, q); !reflect.DeepEqual(got, want) {
				t.Errorf("at least %d orgs, %d tasks:\n got  %+v\n want %+v", least[0], least[1], got, want)
			}
		}
	})

	t.Run("invalid queries", func(t *testing.T) {
		s := open(t)
		for _, q := range []metering.StatsQuery{{}, {From: w0, To: w0, MinBuyerOrgs: 1, MinTasks: 1}, {From: w0, To: w0.Add(time.Hour)},
			{From: w0, To: w0.Add(time.Hour), MinTasks: 1}, {From: w0, To: w0.Add(time.Hour), MinBuyerOrgs: 1}} {
			if _, err := s.ListingStats(context.Background(), q); agentmarket.KindOf(err) != agentmarket.Invalid {
				t.Errorf("%+v: %v, want Invalid", q, err)
			}
		}
	})
}

// StatsReference computes what ListingStats must answer, by brute force,
// from the rules of metering's StatsStore, counting each row ID once.
func StatsReference(rows []metering.Usage, q metering.StatsQuery) []metering.ListingStats {
	type task struct {
		cost                 int64
		completed, failed, n bool
	}
	type acc struct {
		st    metering.ListingStats
		lats  []int64
		tasks map[string]*task
		// The tasks and buyer orgs of error-free buyer calls about a task.
		crowdTasks, crowdOrgs map[string]bool
	}
	seen := map[string]bool{}
	by := map[string]*acc{}
	for _, u := range rows {
		if seen[u.ID] || u.Time.Before(q.From) || !u.Time.Before(q.To) || (len(q.ListingIDs) > 0 && !slices.Contains(q.ListingIDs, u.ListingID)) ||
			u.BuyerOrgID == u.SellerOrgID {
			continue
		}
		seen[u.ID] = true
		a := by[u.ListingID]
		if a == nil {
			a = &acc{st: metering.ListingStats{ListingID: u.ListingID}, tasks: map[string]*task{}, crowdTasks: map[string]bool{}, crowdOrgs: map[string]bool{}}
			by[u.ListingID] = a
		}
		if !slices.Contains(metering.MeterMethods, u.Method) {
			a.st.Calls++
			if u.Estimated {
				a.st.EstimatedCalls++
			}
			if u.TaskID != "" && u.ErrorCode == 0 {
				a.crowdTasks[u.TaskID], a.crowdOrgs[u.BuyerOrgID] = true, true
			}
		}
		if slices.Contains(metering.AgentErrorCodes, u.ErrorCode) {
			a.st.Failed++
		}
		if slices.Contains(metering.SendMethods, u.Method) && u.ErrorCode == 0 {
			a.lats = append(a.lats, u.LatencyMs)
		}
		a.st.Currency = max(a.st.Currency, u.Currency)
		if u.TaskID == "" {
			continue
		}
		tk := a.tasks[u.TaskID]
		if tk == nil {
			tk = &task{}
			a.tasks[u.TaskID] = tk
		}
		tk.cost = agentmarket.AddSat(tk.cost, u.CostMicros)
		tk.completed = tk.completed || u.State == "completed"
		tk.failed = tk.failed || slices.Contains(metering.FailedStates, u.State)
	}
	rank := func(v []int64, p int) int64 {
		if len(v) == 0 {
			return 0
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)*p/100]
	}
	out := []metering.ListingStats{}
	for _, a := range by {
		if int64(len(a.crowdOrgs)) < q.MinBuyerOrgs || int64(len(a.crowdTasks)) < q.MinTasks {
			continue
		}
		var costs []int64
		for _, tk := range a.tasks {
			costs = append(costs, tk.cost)
			if tk.completed {
				a.st.Completed++
			}
			if tk.failed {
				a.st.Failed++
			}
		}
		a.st.Sends, a.st.LatencyP50Ms, a.st.LatencyP95Ms = int64(len(a.lats)), rank(a.lats, 50), rank(a.lats, 95)
		a.st.Tasks, a.st.MedianTaskCostMicros = int64(len(costs)), rank(costs, 50)
		out = append(out, a.st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ListingID < out[j].ListingID })
	return out
}
