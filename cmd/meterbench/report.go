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
	Machine  Machine      `json:"machine"`
	Settings Settings     `json:"settings"`
	Max      []Result     `json:"max_throughput"`
	Half     []Result     `json:"half_load,omitempty"`
	SSE      []SSEResult  `json:"sse,omitempty"`
	Hold     []HoldResult `json:"held_streams,omitempty"`
	Ratios   []Ratio      `json:"ratios"`
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
	Agent         string  `json:"agent"` // "built-in" or the URL given
	RequestBytes  int     `json:"request_bytes"`
	SSEStreams    int     `json:"sse_streams,omitempty"`
	SSEEvents     int     `json:"sse_events,omitempty"`
	SSEIntervalMs float64 `json:"sse_interval_ms,omitempty"`
}

// Ratio is one comparison, with the product's target when it has one.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"` // "x" (a throughput ratio) or "ms" (added latency)
	Target string  `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
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

func settings(o *options, agentURL string) Settings {
	s := Settings{Connections: o.conns, Seconds: o.duration.Seconds(), WarmupSeconds: o.warmup.Seconds(), MaxRequests: o.maxReqs,
		Agent: "built-in", RequestBytes: len(sendBody())}
	if o.agentURL != "" {
		s.Agent = agentURL
	}
	if o.sseStreams > 0 && o.agentURL == "" {
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

// compare computes the ratios the product's targets are stated in.
func (r *Report) compare(extra []namedTarget) {
	atLeast := func(name string, v, target float64) {
		met := v >= target
		r.Ratios = append(r.Ratios, Ratio{Name: name, Value: v, Unit: "x", Target: fmt.Sprintf(">= %.1fx", target), Met: &met})
	}
	atMost := func(name string, v, target float64) {
		met := v <= target
		r.Ratios = append(r.Ratios, Ratio{Name: name, Value: v, Unit: "ms", Target: fmt.Sprintf("<= %g ms", target), Met: &met})
	}
	meter := r.result("meter")
	if meter != nil {
		if d := r.result("direct"); d != nil {
			r.Ratios = append(r.Ratios, Ratio{Name: "throughput meter/direct", Value: meter.RPS / d.RPS, Unit: "x"})
		}
		if p := r.result("proxy"); p != nil {
			atLeast("throughput meter/proxy", meter.RPS/p.RPS, 1.0)
		}
		for _, t := range extra {
			x := r.result(t.name)
			if x == nil {
				continue
			}
			if strings.Contains(t.name, "nginx") {
				atLeast("throughput meter/"+t.name, meter.RPS/x.RPS, 0.9)
			} else {
				r.Ratios = append(r.Ratios, Ratio{Name: "throughput meter/" + t.name, Value: meter.RPS / x.RPS, Unit: "x"})
			}
		}
	}
	if hm := find(r.Half, "meter"); hm != nil {
		if hd := find(r.Half, "direct"); hd != nil {
			atMost("added p99 at half load, meter-direct", hm.P99-hd.P99, 1)
		}
		if hp := find(r.Half, "proxy"); hp != nil {
			r.Ratios = append(r.Ratios, Ratio{Name: "added p99 at half load, meter-proxy", Value: hm.P99 - hp.P99, Unit: "ms"})
		}
	}
	if sm, sd := findSSE(r.SSE, "meter"), findSSE(r.SSE, "direct"); sm != nil && sd != nil {
		r.Ratios = append(r.Ratios, Ratio{Name: "SSE added delay p50, meter-direct", Value: sm.P50 - sd.P50, Unit: "ms"})
		atMost("SSE added delay p99, meter-direct", sm.P99-sd.P99, 1)
	}
	var hm, hd *HoldResult
	for i := range r.Hold {
		switch r.Hold[i].Target {
		case "meter":
			hm = &r.Hold[i]
		case "direct":
			hd = &r.Hold[i]
		}
	}
	if hm != nil && hd != nil && hm.Opened > 0 && hd.Opened > 0 {
		met := hm.HeapStackKB-hd.HeapStackKB <= 30
		r.Ratios = append(r.Ratios, Ratio{Name: "held stream, meter's own heap+stacks (meter-direct)", Value: hm.HeapStackKB - hd.HeapStackKB, Unit: "KiB",
			Target: "<= 30 KiB", Met: &met})
	}
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *Report) writeText(w io.Writer) error {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "meterbench: %d CPUs (GOMAXPROCS %d), %s, %s; agent %s; %d-byte message/send\n",
		m.CPUs, m.GOMAXPROCS, m.CPUModel, m.Go, s.Agent, s.RequestBytes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table := func(title string, rs []Result, rate bool) {
		fmt.Fprintf(w, "\n%s\n", title)
		head := "target\treq/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tnet err\tnon-200\trpc err\tcpu cores\t"
		if rate {
			head = "target\toffered/s\treq/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tnet err\tnon-200\trpc err\tcpu cores\tunsent\t"
		}
		fmt.Fprintln(tw, head)
		var missing []Result
		for _, x := range rs {
			if x.Unavailable != "" {
				missing = append(missing, x)
				continue
			}
			fmt.Fprintf(tw, "%s\t", x.Target)
			if rate {
				fmt.Fprintf(tw, "%.0f\t", x.OfferedRPS)
			}
			fmt.Fprintf(tw, "%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%d\t%.2f\t", x.RPS, x.P50, x.P90, x.P99, x.P999, x.Max, x.NetErrors, x.BadStatus, x.RPCErrors, x.CPUCores)
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
	table(fmt.Sprintf("max throughput: closed loop, %d connections, %s each after %s warm-up", s.Connections, secs(s.Seconds), secs(s.WarmupSeconds)), r.Max, false)
	if len(r.Half) > 0 {
		table(fmt.Sprintf("half load: open loop at half the meter's max, %s each", secs(s.Seconds)), r.Half, true)
	}
	if len(r.SSE) > 0 {
		fmt.Fprintf(w, "\nSSE relay: %d streams x %d events, %gms apart; delay from the agent's write to the client's read\n", s.SSEStreams, s.SSEEvents, s.SSEIntervalMs)
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
	}
	fmt.Fprintln(w, "\nratios")
	for _, x := range r.Ratios {
		v := fmt.Sprintf("%.2fx", x.Value)
		switch x.Unit {
		case "ms":
			v = fmt.Sprintf("%+.3f ms", x.Value)
		case "KiB":
			v = fmt.Sprintf("%.1f KiB", x.Value)
		}
		verdict := ""
		if x.Met != nil {
			verdict = "target " + x.Target + ": missed"
			if *x.Met {
				verdict = "target " + x.Target + ": met"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t  %s\n", x.Name, v, verdict)
	}
	return tw.Flush()
}

func secs(s float64) string { return time.Duration(s * float64(time.Second)).String() }
