package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run's results.
type Report struct {
	Machine     Machine      `json:"machine"`
	Settings    Settings     `json:"settings"`
	Peers       []Peer       `json:"peers"`
	Max         []Result     `json:"max_throughput"`
	Projections *Projections `json:"projections,omitempty"`
	Half        []Result     `json:"half_load,omitempty"`
	SSE         []SSEResult  `json:"sse,omitempty"`
	Hold        []HoldResult `json:"held_streams,omitempty"`
	Fleet       *Fleet       `json:"fleet,omitempty"` // -fleet
	// Ratios are the product's targets (those with a goal), measured or
	// not, then other comparisons.
	Ratios []Ratio `json:"ratios"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model"`
	Go         string `json:"go"`
	Arch       string `json:"arch"`
}

// Settings are the load parameters of the run.
type Settings struct {
	Connections   int     `json:"connections"`
	Seconds       float64 `json:"seconds"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	MaxRequests   int64   `json:"max_requests"`
	Rounds        int     `json:"rounds"`
	Agent         string  `json:"agent"`                  // the canned agent of the message/send phases: "nginx return 200" or "built-in"
	Store         string  `json:"store"`                  // the meter's stores: "embedded", "PostgreSQL" or "PostgreSQL + ClickHouse"
	RequestBytes  int     `json:"request_bytes"`          // the 0.3 message/send
	RequestBytes1 int     `json:"request_bytes_1_0"`      // the 1.0 one
	HalfLoadOf    string  `json:"half_load_of,omitempty"` // whose max rate the half-load phase takes half of
	SSEStreams    int     `json:"sse_streams,omitempty"`
	SSEEvents     int     `json:"sse_events,omitempty"`
	SSEIntervalMs float64 `json:"sse_interval_ms,omitempty"`
	// MeterProcess says whether the meter ran in a process of its own
	// (-meter-process); MeterInProcess, why it did not although asked.
	MeterProcess   bool   `json:"meter_process"`
	MeterInProcess string `json:"meter_in_process,omitempty"`
	LeanSync       string `json:"lean_sync,omitempty"` // the lean peer's durability mode (-lean-sync)
	Traced         bool   `json:"traced,omitempty"`    // -otlp-sink: the meter exported a span per call
	Endpoints      int    `json:"endpoints,omitempty"` // -endpoints: the meter/1.0 listing's endpoints
	Limits         bool   `json:"limits,omitempty"`    // -limits: the buyer under rate limits and budgets
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), Arch: runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func settings(o *options, agent, store string) Settings {
	s := Settings{Connections: o.conns, Seconds: o.duration.Seconds(), WarmupSeconds: o.warmup.Seconds(), MaxRequests: o.maxReqs,
		Rounds: o.rounds, Agent: agent, Store: store, RequestBytes: len(sendBody(v03)), RequestBytes1: len(sendBody(v10)),
		MeterProcess: o.meterProcess, MeterInProcess: o.meterInProcess, LeanSync: o.leanSync,
		Traced: o.otlpSink, Endpoints: o.endpoints, Limits: o.limits}
	if o.sseStreams > 0 {
		s.SSEStreams, s.SSEEvents, s.SSEIntervalMs = o.sseStreams, o.sseEvents, ms(o.sseInterval)
	}
	return s
}

func (r *Report) result(name string) *Result { return find(r.Max, name) }

func find(rs []Result, name string) *Result {
	for i := range rs {
		if rs[i].Target == name && rs[i].Unavailable == "" && rs[i].OK > 0 {
			return &rs[i]
		}
	}
	return nil
}

func findSSE(rs []SSEResult, name string) *SSEResult {
	for i := range rs {
		if rs[i].Target == name && rs[i].Events > 0 {
			return &rs[i]
		}
	}
	return nil
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *Report) writeText(w io.Writer) error {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "meterbench: %d CPUs (GOMAXPROCS %d), %s, %s; canned agent: %s; stores: %s; message/send of %d bytes (0.3), %d (1.0); %d round(s)\n",
		m.CPUs, m.GOMAXPROCS, m.CPUModel, m.Go, s.Agent, s.Store, s.RequestBytes, s.RequestBytes1, s.Rounds)
	where := "in its own process (-meter-process)"
	switch {
	case !s.MeterProcess && s.MeterInProcess != "":
		where = "in this process, as " + s.MeterInProcess
	case !s.MeterProcess:
		where = "in this process (-meter-process=false)"
	}
	fmt.Fprintf(w, "the meter: %s; the lean peer: -sync %s\n", where, s.LeanSync)
	if s.Traced || s.Endpoints > 1 || s.Limits {
		fmt.Fprintf(w, "the meter traced into an OTLP sink: %t; meter/1.0's listing's endpoints: %d; the buyer under rate limits and budgets: %t\n", s.Traced, max(s.Endpoints, 1), s.Limits)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Peers) > 0 {
		fmt.Fprintln(w, "\npeers")
		for _, p := range r.Peers {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, p.Status, p.Detail)
		}
		tw.Flush()
	}
	table := func(title string, rs []Result, rate bool) {
		fmt.Fprintf(w, "\n%s\n", title)
		head := "target\treq/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tnet err\tnon-200\trpc err\tcpu cores\tcpu µs/call\tserver µs/call\t"
		if rate {
			head = "target\toffered/s\treq/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tnet err\tnon-200\trpc err\tcpu cores\tcpu µs/call\tserver µs/call\tunsent\t"
		} else if s.Rounds > 1 {
			head = "round\t" + head
		}
		fmt.Fprintln(tw, head)
		var missing []Result
		for _, x := range rs {
			if x.Unavailable != "" {
				missing = append(missing, x)
				continue
			}
			if !rate && s.Rounds > 1 {
				fmt.Fprintf(tw, "%d\t", x.Round)
			}
			fmt.Fprintf(tw, "%s\t", x.Target)
			if rate {
				fmt.Fprintf(tw, "%.0f\t", x.OfferedRPS)
			}
			fmt.Fprintf(tw, "%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%d\t%.2f\t%.1f\t", x.RPS, x.P50, x.P90, x.P99, x.P999, x.Max, x.NetErrors, x.BadStatus, x.RPCErrors, x.CPUCores, x.CPUPerCall)
			if x.ServerCPUPerCall > 0 {
				fmt.Fprintf(tw, "%.1f\t", x.ServerCPUPerCall)
			} else {
				fmt.Fprint(tw, "-\t")
			}
			if rate {
				fmt.Fprintf(tw, "%d\t", x.Unsent)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		for _, x := range missing {
			fmt.Fprintf(w, "%s: unavailable: %s\n", x.Target, x.Unavailable)
		}
	}
	table(fmt.Sprintf("max throughput: closed loop, %d connections, %s each after %s warm-up, targets in turn", s.Connections, secs(s.Seconds), secs(s.WarmupSeconds)), r.Max, false)
	inThis := "load generator, built-in agent, meter"
	if s.MeterProcess {
		inThis = "load generator, built-in agent"
	}
	fmt.Fprintf(w, "cpu: this process's CPU time (%s); server: the CPU time of the separate process serving the target (lean peer, SDK proxy, the meter in its own process; not nginx), from /proc/PID/stat in 10 ms ticks\n", inThis)
	if p := r.Projections; p != nil {
		r.writeProjections(w, tw, p)
	}
	if len(r.Half) > 0 {
		table(fmt.Sprintf("half load: open loop at %s, %s each", s.HalfLoadOf, secs(s.Seconds)), r.Half, true)
	}
	if len(r.SSE) > 0 {
		fmt.Fprintf(w, "\nSSE relay (built-in agent): %d streams x %d events, %gms apart; delay from the agent's write to the client's read\n", s.SSEStreams, s.SSEEvents, s.SSEIntervalMs)
		fmt.Fprintln(tw, "target\tevents\tmissing\tp50 ms\tp99 ms\tmax ms\tfirst event p50 ms\tfirst event max ms\terrors\t")
		for _, x := range r.SSE {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t\n", x.Target, x.Events, x.Missing, x.P50, x.P99, x.Max, x.FirstP50, x.FirstMax, x.Errors)
		}
		tw.Flush()
		for _, x := range r.SSE {
			if x.Unavailable != "" {
				fmt.Fprintf(w, "%s: unavailable: %s\n", x.Target, x.Unavailable)
			}
		}
	}
	if len(r.Hold) > 0 {
		fmt.Fprintf(w, "\nheld streams: each open at once, after its first event; what this process holds per stream (both ends included)\n")
		fmt.Fprintln(tw, "target\tstreams\topened\theap+stacks KiB\tRSS KiB\tgoroutines\t")
		for _, x := range r.Hold {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", x.Target, x.Streams, x.Opened, x.HeapStackKB, x.RSSKB, x.Goroutines)
		}
		tw.Flush()
		for _, x := range r.Hold {
			if x.Unavailable != "" {
				fmt.Fprintf(w, "%s: %s\n", x.Target, x.Unavailable)
			}
		}
		if l := r.Hold[0].Limited; l != "" {
			fmt.Fprintf(w, "not every stream asked for: %s\n", l)
		}
	}
	fmt.Fprintln(w, "\ntargets (shared/product.md, issues 12 and 22); reached: the measure against its goal, 1.00 or more meets it")
	fmt.Fprintln(tw, "target\tmeasured\tgoal\treached\tverdict\t")
	for _, x := range r.Ratios {
		if x.Goal != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", x.Name, x.value(), x.Goal, x.reached(), x.verdict())
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nother comparisons")
	for _, x := range r.Ratios {
		if x.Goal == "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", x.Name, x.value(), x.NotMeasured)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Fleet != nil {
		r.Fleet.writeText(w)
	}
	return nil
}

func (r *Report) writeProjections(w io.Writer, tw *tabwriter.Writer, p *Projections) {
	fmt.Fprintln(w, "\nprojections, once the meter's last max-throughput phase ended")
	switch {
	case p.Unavailable != "":
		fmt.Fprintf(w, "  unavailable: %s\n", p.Unavailable)
		return
	case p.DrainSeconds < 0:
		fmt.Fprintf(w, "  spool: %d rows when the load stopped, %d still there after %gs\n", p.SpoolRows, p.RowsLeft, p.WaitSeconds)
	default:
		fmt.Fprintf(w, "  spool: %d rows when the load stopped, empty after %.3fs\n", p.SpoolRows, p.DrainSeconds)
	}
	fmt.Fprintln(tw, "  listing\ttargets\tanswered\tno answer read\tusage calls\tinput tokens (want)\toutput tokens (want)\tequal\t")
	for _, u := range p.Usage {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d (%d)\t%d (%d)\t%t\t\n", u.Listing, strings.Join(u.Targets, ","), u.Answered, u.Unknown, u.Calls,
			u.InTokens, u.Answered*answerInputTokens, u.OutTokens, u.Answered*answerOutputTokens, u.Equal())
	}
	tw.Flush()
	for _, u := range p.Usage {
		if u.Error != "" {
			fmt.Fprintf(w, "  %s: %s\n", u.Listing, u.Error)
		}
	}
}

func (x Ratio) value() string {
	if x.NotMeasured != "" && x.Value == 0 {
		return "n/a"
	}
	f := func(v float64) string {
		switch x.Unit {
		case "x":
			return fmt.Sprintf("%.3fx", v)
		case "ms":
			return fmt.Sprintf("%.3f ms", v)
		case "s":
			return fmt.Sprintf("%.3f s", v)
		}
		return fmt.Sprintf("%.1f %s", v, x.Unit)
	}
	s := f(x.Value)
	if len(x.Range) == 2 {
		s += " (" + strings.TrimSpace(f(x.Range[0])) + " to " + strings.TrimSpace(f(x.Range[1])) + ")"
	}
	return s
}

func (x Ratio) reached() string {
	if x.Met == nil || x.Reached == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", x.Reached)
}

func (x Ratio) verdict() string {
	v := "not measured: " + x.NotMeasured
	if x.Met != nil {
		v = "missed"
		if *x.Met {
			v = "met"
		}
	}
	if x.Note != "" {
		v += " (" + x.Note + ")"
	}
	return v
}

func secs(s float64) string { return time.Duration(s * float64(time.Second)).String() }
