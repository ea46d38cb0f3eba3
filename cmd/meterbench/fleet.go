package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver of the statistics' reads
)

// The fleet (-fleet, issue 22): a second meter process on the same
// PostgreSQL (and Redis, ClickHouse, when the caller's settings name
// them), loaded alone then beside the first, and what PostgreSQL received
// meanwhile, counted from its own statistics.

// Fleet is what the fleet phases measured.
type Fleet struct {
	// Alone is the first meter loaded by itself; Together each meter's
	// share of a load split across both (half the connections each).
	Alone    Result   `json:"alone"`
	Together []Result `json:"together"`
	// Ratio is both meters' req/s together over the one's alone (goal
	// 1.6).
	Ratio float64 `json:"ratio"`
	// Rows are PostgreSQL's row writes (inserts, updates, deletes, from
	// pg_stat_user_tables) during each phase, until the meters had settled
	// it, per table and per new task (task_owners rows inserted: every
	// answered call, warm-up included, created one).
	AloneRows    []TableRows `json:"alone_rows"`
	TogetherRows []TableRows `json:"together_rows"`
	AloneTasks   int64       `json:"alone_new_tasks"`
	Tasks        int64       `json:"together_new_tasks"`
	AlonePerTask float64     `json:"alone_rows_per_task"`
	PerTask      float64     `json:"together_rows_per_task"`
	Shared       string      `json:"shared"` // what the meters share besides PostgreSQL
	// AloneBusy and TogetherBusy are how busy the whole machine was in
	// each phase (every process: meters, load, agent, databases), as a
	// fraction of all its CPUs; 0 when unknown.
	AloneBusy    float64 `json:"alone_machine_busy"`
	TogetherBusy float64 `json:"together_machine_busy"`
}

// busySince is how busy the machine was since a reading of machineCPU.
func busySince(busy0, total0 int64) float64 {
	busy, total, ok := machineCPU()
	if !ok || total <= total0 {
		return 0
	}
	return float64(busy-busy0) / float64(total-total0)
}

// TableRows is one table's row writes in a phase.
type TableRows struct {
	Table   string `json:"table"`
	Inserts int64  `json:"inserts"`
	Updates int64  `json:"updates"`
	Deletes int64  `json:"deletes"`
}

func (t TableRows) total() int64 { return t.Inserts + t.Updates + t.Deletes }

// pgStats reads the row writes of every table of the database.
func pgStats(ctx context.Context, db *sql.DB) (map[string]TableRows, error) {
	// A fresh snapshot each time: the statistics of the last read are not
	// kept within a transaction (there is none here) but say it anyway.
	if _, err := db.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]TableRows{}
	for rows.Next() {
		var t TableRows
		if err := rows.Scan(&t.Table, &t.Inserts, &t.Updates, &t.Deletes); err != nil {
			return nil, err
		}
		out[t.Table] = t
	}
	return out, rows.Err()
}

// settledStats waits until the statistics stop moving (the meters'
// projections are done, and every backend reported: an idle one reports
// within 10 s), at most limit, and returns them.
func settledStats(ctx context.Context, db *sql.DB, limit time.Duration) (map[string]TableRows, error) {
	deadline := time.Now().Add(limit)
	last, err := pgStats(ctx, db)
	if err != nil {
		return nil, err
	}
	stableSince := time.Now()
	for time.Now().Before(deadline) && time.Since(stableSince) < 11*time.Second {
		pause(ctx, 500*time.Millisecond)
		cur, err := pgStats(ctx, db)
		if err != nil {
			return nil, err
		}
		if diffRows(last, cur) != nil {
			stableSince = time.Now()
		}
		last = cur
	}
	return last, ctx.Err()
}

// diffRows is what changed from a to b, per table, largest first.
func diffRows(a, b map[string]TableRows) []TableRows {
	var out []TableRows
	for name, t := range b {
		d := TableRows{Table: name, Inserts: t.Inserts - a[name].Inserts, Updates: t.Updates - a[name].Updates, Deletes: t.Deletes - a[name].Deletes}
		if d.total() != 0 {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].total() != out[j].total() {
			return out[i].total() > out[j].total()
		}
		return out[i].Table < out[j].Table
	})
	return out
}

func sumRows(ts []TableRows) (n int64) {
	for _, t := range ts {
		n += t.total()
	}
	return n
}

// fleetMeter is the second meter of -fleet: its process and its
// endpoint for the 1.0 JSON-RPC listing.
type fleetMeter struct {
	m   *market
	url string
}

// startFleetMeter starts the second meter's process on the caller's
// settings (the same database), with a data dir of its own.
func startFleetMeter(ctx context.Context, o *options, getenv func(string) string, dataDir string, log io.Writer, first *market, endpoint string) (*fleetMeter, error) {
	dir := filepath.Join(dataDir, "meter2")
	m, err := startMarketProcess(ctx, marketEnv(getenv, dir, o.logLevel, o.leanSync), dataDir, log, filepath.Join(dataDir, meterLogFile))
	if err != nil {
		return nil, fmt.Errorf("the fleet's second meter: %w", err)
	}
	if !strings.HasPrefix(endpoint, first.URL) {
		m.stop()
		return nil, fmt.Errorf("the fleet's second meter: endpoint %s is not under the first meter's %s", endpoint, first.URL)
	}
	return &fleetMeter{m: m, url: m.URL + strings.TrimPrefix(endpoint, first.URL)}, nil
}

// measureFleet loads the first meter alone, then both meters together,
// with the 1.0 JSON-RPC send, reading PostgreSQL's statistics around each.
func (b *bench) measureFleet(ctx context.Context, o *options, spec loadSpec, dsn string) (*Fleet, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	t := b.target(meter10)
	second, err := newRequest(b.fleet.url, t.body, t.headers)
	if err != nil {
		return nil, err
	}
	if why := probe(second, o.timeout); why != "" {
		return nil, fmt.Errorf("the fleet's second meter %s %s", b.fleet.url, why)
	}
	f := &Fleet{Shared: "PostgreSQL"}
	if b.redis {
		f.Shared = "PostgreSQL and Redis"
	}
	const settle = 60 * time.Second
	s0, err := settledStats(ctx, db, settle)
	if err != nil {
		return nil, err
	}
	alone := spec
	alone.server = t.pid
	b0, t0, _ := machineCPU()
	f.Alone = closedLoop(ctx, "meter alone", t.url, t.req, alone)
	f.AloneBusy = busySince(b0, t0)
	s1, err := settledStats(ctx, db, settle)
	if err != nil {
		return nil, err
	}
	half := spec
	half.conns = max(spec.conns/2, 1)
	f.Together = make([]Result, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	b0, t0, _ = machineCPU()
	go func() {
		defer wg.Done()
		s := half
		s.server = t.pid
		f.Together[0] = closedLoop(ctx, "meter 1 of 2", t.url, t.req, s)
	}()
	go func() {
		defer wg.Done()
		s := half
		s.server = b.fleet.m.pid
		f.Together[1] = closedLoop(ctx, "meter 2 of 2", b.fleet.url, second, s)
	}()
	wg.Wait()
	f.TogetherBusy = busySince(b0, t0)
	s2, err := settledStats(ctx, db, settle)
	if err != nil {
		return nil, err
	}
	if f.Alone.RPS > 0 {
		f.Ratio = (f.Together[0].RPS + f.Together[1].RPS) / f.Alone.RPS
	}
	f.AloneRows, f.TogetherRows = diffRows(s0, s1), diffRows(s1, s2)
	f.AloneTasks, f.AlonePerTask = perTask(f.AloneRows)
	f.Tasks, f.PerTask = perTask(f.TogetherRows)
	return f, nil
}

// perTask is how many tasks a phase created (task_owners rows inserted:
// every answered call, its warm-up's included, created one) and the rows
// PostgreSQL received per task.
func perTask(rows []TableRows) (tasks int64, per float64) {
	for _, t := range rows {
		if t.Table == "task_owners" {
			tasks = t.Inserts
		}
	}
	if tasks > 0 {
		per = float64(sumRows(rows)) / float64(tasks)
	}
	return tasks, per
}

func (f *Fleet) writeText(w io.Writer) {
	fmt.Fprintf(w, "\nfleet: two meters sharing %s, the 1.0 JSON-RPC send (goal: together ≥ 1.6× one alone; PostgreSQL ≤ 1 row per new task)\n", f.Shared)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tconns\treq/s\tp99 ms\tmax ms\terrors\tserver µs/call\tnew tasks\tPostgreSQL rows\trows per new task\t")
	row := func(name string, r Result, tasks, rows int64, per float64) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%d\t%.0f\t%d\t%d\t%.2f\t\n", name, r.Connections, r.RPS, r.P99, r.Max, r.NetErrors+r.BadStatus+r.RPCErrors, r.ServerCPUPerCall, tasks, rows, per)
	}
	row("one meter alone", f.Alone, f.AloneTasks, sumRows(f.AloneRows), f.AlonePerTask)
	for i, r := range f.Together {
		fmt.Fprintf(tw, "meter %d of 2\t%d\t%.0f\t%.1f\t%.1f\t%d\t%.0f\t\t\t\t\n", i+1, r.Connections, r.RPS, r.P99, r.Max, r.NetErrors+r.BadStatus+r.RPCErrors, r.ServerCPUPerCall)
	}
	if len(f.Together) == 2 {
		both := Result{Connections: f.Together[0].Connections + f.Together[1].Connections, RPS: f.Together[0].RPS + f.Together[1].RPS,
			P99: max(f.Together[0].P99, f.Together[1].P99), Max: max(f.Together[0].Max, f.Together[1].Max), OK: f.Together[0].OK + f.Together[1].OK}
		row("two meters together", both, f.Tasks, sumRows(f.TogetherRows), f.PerTask)
	}
	tw.Flush()
	fmt.Fprintf(w, "  together ÷ alone: %.2f× (goal 1.6×); the machine's CPUs busy: %.0f%% alone, %.0f%% together (every process: meters, load, agent, databases)\n",
		f.Ratio, 100*f.AloneBusy, 100*f.TogetherBusy)
	for _, p := range []struct {
		name string
		rows []TableRows
	}{{"alone", f.AloneRows}, {"together", f.TogetherRows}} {
		var parts []string
		for _, t := range p.rows {
			parts = append(parts, fmt.Sprintf("%s +%d ~%d -%d", t.Table, t.Inserts, t.Updates, t.Deletes))
		}
		fmt.Fprintf(w, "  PostgreSQL rows %s (inserted ~updated -deleted): %s\n", p.name, strings.Join(parts, ", "))
	}
}
