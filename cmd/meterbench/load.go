package main

import (
	"bytes"
	"context"
	"math"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec bounds one load phase against one target.
type loadSpec struct {
	conns    int
	duration time.Duration // measured time, after the warm-up
	warmup   time.Duration // closed loop only: run but not recorded
	maxReqs  int64         // hard bound on requests sent in the measured time
	timeout  time.Duration // per request
	rate     float64       // open loop: requests per second; 0 = closed loop
	server   int           // the pid of the process serving the target, when it is another one we started; else 0
}

// Result is what one phase measured against one target. Latencies are in
// milliseconds.
type Result struct {
	Target      string  `json:"target"`
	URL         string  `json:"url"`
	Round       int     `json:"round,omitempty"` // max throughput: the round (1, 2, …) of targets taken in turn
	Mode        string  `json:"mode"`            // "closed" (max throughput) or "open" (fixed rate)
	Connections int     `json:"connections"`
	Seconds     float64 `json:"seconds"`
	OfferedRPS  float64 `json:"offered_rps,omitempty"`
	OK          int64   `json:"ok"`
	RPS         float64 `json:"rps"`
	P50         float64 `json:"p50_ms"`
	P90         float64 `json:"p90_ms"`
	P99         float64 `json:"p99_ms"`
	P999        float64 `json:"p99_9_ms"`
	Max         float64 `json:"max_ms"`
	// CPUCores is the CPU time the whole process (load generator, agent
	// and proxies alike) used per second of the phase: below the machine's
	// cores with the target saturated, the target waits rather than works.
	CPUCores float64 `json:"cpu_cores"`
	// CPUPerCall is the same CPU time per answer, in µs: with the meter in
	// this process, the meter's own is the meter's figure minus direct's
	// (see Report.compare).
	CPUPerCall float64 `json:"cpu_us_per_call"`
	// ServerCPUPerCall is the CPU time (user and system, /proc/PID/stat)
	// of the separate process serving the target per answer, in µs: the
	// lean peer's, the SDK proxy's, the meter's in its own process. 0 when
	// the target has no such process or it could not be read (not Linux).
	ServerCPUPerCall float64 `json:"server_cpu_us_per_call,omitempty"`
	NetErrors        int64   `json:"net_errors"`            // dial, write, read or timeout
	BadStatus        int64   `json:"bad_status"`            // an HTTP status other than 200
	RPCErrors        int64   `json:"rpc_errors"`            // HTTP 200 without a JSON-RPC result
	Unsent           int64   `json:"unsent"`                // open loop: scheduled but not sent in time
	Unavailable      string  `json:"unavailable,omitempty"` // why the target was skipped
}

// outcome classifies one answer to req.
func (req request) outcome(status int, body []byte, err error) (net, bad, rpc bool) {
	switch {
	case err != nil:
		return true, false, false
	case status != 200:
		return false, true, false
	case !req.answered(status, body):
		return false, false, true
	}
	return false, false, false
}

// answered tells an answer with a result: HTTP 200 with a JSON-RPC result
// and no error, or for HTTP+JSON, HTTP 200 with a task.
func (req request) answered(status int, body []byte) bool {
	if status != 200 {
		return false
	}
	if req.rest {
		return bytes.Contains(body, []byte(`"task"`))
	}
	return bytes.Contains(body, []byte(`"result"`)) && !bytes.Contains(body, []byte(`"error":{`))
}

// recorder is one worker's tally; merged once at the end.
type recorder struct {
	lat               []time.Duration
	ok, net, bad, rpc int64
}

func (r *recorder) add(req request, d time.Duration, status int, body []byte, err error) {
	n, b, p := req.outcome(status, body, err)
	switch {
	case n:
		r.net++
	case b:
		r.bad++
	case p:
		r.rpc++
	default:
		r.ok++
		r.lat = append(r.lat, d)
	}
}

// probe sends one request and says why the target cannot be measured, if
// it cannot.
func probe(req request, timeout time.Duration) string {
	c := newConn(req, timeout)
	defer c.close()
	status, body, err := c.do()
	n, b, p := req.outcome(status, body, err)
	switch {
	case n:
		return "unreachable: " + err.Error()
	case b:
		return "answered HTTP " + strconv.Itoa(status) + ": " + trimBody(body)
	case p:
		return "answered without a JSON-RPC result: " + trimBody(body)
	}
	return ""
}

func trimBody(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// closedLoop runs spec.conns connections, each sending its next request as
// soon as the previous answer is read, for the warm-up and then for the
// measured duration or spec.maxReqs requests, whichever ends first.
func closedLoop(ctx context.Context, name, target string, req request, spec loadSpec) Result {
	res := Result{Target: name, URL: target, Mode: "closed", Connections: spec.conns}
	if why := probe(req, spec.timeout); why != "" {
		res.Unavailable = why
		return res
	}
	var (
		measuring atomic.Bool
		budget    atomic.Int64
		wg        sync.WaitGroup
		recs      = make([]recorder, spec.conns)
	)
	budget.Store(spec.maxReqs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range recs {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) {
			defer wg.Done()
			c := newConn(req, spec.timeout)
			defer c.close()
			r := &recs[i]
			for ctx.Err() == nil {
				m := measuring.Load()
				if m && budget.Add(-1) < 0 {
					return
				}
				start := time.Now()
				status, body, err := c.do()
				if m {
					r.add(req, time.Since(start), status, body, err)
				}
				if err != nil {
					pause(ctx, 10*time.Millisecond) // a refused dial must not spin
				}
			}
		})
	}
	pause(ctx, spec.warmup)
	measuring.Store(true)
	began, cpu, srv := time.Now(), cpuTime(), startServerClock(spec.server)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done: // the request budget ran out first
	case <-time.After(spec.duration):
	case <-ctx.Done():
	}
	elapsed, used := time.Since(began), cpuTime()-cpu
	srvUsed, srvOK := srv.used()
	cancel()
	<-done
	res.fill(recs, elapsed, used)
	res.ServerCPUPerCall = serverPerCall(srvUsed, srvOK, res.OK)
	return res
}

// openLoop sends requests at spec.rate, spread evenly, whatever the
// answers' pace: each latency counts from the time the scheduler released
// the request, queueing for a free connection included, so a stall shows
// in the percentiles instead of slowing the sender.
func openLoop(ctx context.Context, name, target string, req request, spec loadSpec) Result {
	res := Result{Target: name, URL: target, Mode: "open", Connections: spec.conns, OfferedRPS: spec.rate}
	if why := probe(req, spec.timeout); why != "" {
		res.Unavailable = why
		return res
	}
	total := min(int64(spec.rate*spec.duration.Seconds()), spec.maxReqs)
	if total < 1 || spec.rate <= 0 {
		res.Unavailable = "no rate to send at"
		return res
	}
	interval := time.Duration(float64(time.Second) / spec.rate)
	due := make(chan time.Time, min(total, 1<<20))
	recs := make([]recorder, spec.conns)
	var unsent atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Requests still queued this long after the last one was due are given up.
	hardStop := time.Now().Add(spec.duration + spec.timeout)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) {
			defer wg.Done()
			c := newConn(req, spec.timeout)
			defer c.close()
			r := &recs[i]
			for at := range due {
				if ctx.Err() != nil || time.Now().After(hardStop) {
					unsent.Add(1)
					continue
				}
				status, body, err := c.do()
				r.add(req, time.Since(at), status, body, err)
			}
		})
	}
	began, cpu, srv := time.Now(), cpuTime(), startServerClock(spec.server)
	next := began
	for sent := int64(0); sent < total && ctx.Err() == nil; {
		now := time.Now()
		for ; sent < total && !next.After(now); sent++ {
			// A timer that woke late is the client's fault, not the
			// target's: count from when the request left the scheduler.
			due <- now
			next = next.Add(interval)
		}
		pause(ctx, time.Until(next))
	}
	close(due)
	wg.Wait()
	srvUsed, srvOK := srv.used()
	res.fill(recs, time.Since(began), cpuTime()-cpu)
	res.ServerCPUPerCall = serverPerCall(srvUsed, srvOK, res.OK)
	res.Unsent = unsent.Load()
	return res
}

// fill merges the workers' tallies into r.
func (r *Result) fill(recs []recorder, elapsed, cpu time.Duration) {
	var all []time.Duration
	for _, rec := range recs {
		all = append(all, rec.lat...)
		r.OK += rec.ok
		r.NetErrors += rec.net
		r.BadStatus += rec.bad
		r.RPCErrors += rec.rpc
	}
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.RPS = float64(r.OK) / r.Seconds
		r.CPUCores = cpu.Seconds() / r.Seconds
	}
	if r.OK > 0 {
		r.CPUPerCall = float64(cpu.Microseconds()) / float64(r.OK)
	}
	slices.Sort(all)
	r.P50, r.P90, r.P99, r.P999 = pct(all, 0.50), pct(all, 0.90), pct(all, 0.99), pct(all, 0.999)
	if n := len(all); n > 0 {
		r.Max = ms(all[n-1])
	}
}

// pct is the nearest-rank percentile of sorted latencies, in ms.
func pct(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return ms(sorted[max(i, 0)])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
