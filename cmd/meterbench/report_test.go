package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// closed is a max-throughput result.
func closed(name string, round int, rps, p99, cpuPerCall float64) Result {
	return Result{Target: name, Round: round, Mode: "closed", OK: int64(rps), RPS: rps, P50: p99 / 2, P99: p99, CPUPerCall: cpuPerCall}
}

func TestTargets(t *testing.T) {
	rep := &Report{Settings: Settings{Connections: 32, Rounds: 2, HalfLoadOf: halfOfNginx, Store: storeEmbedded}}
	rep.Max = []Result{
		closed(direct10, 1, 50000, 1, 20), closed(nginx10, 1, 20000, 2, 20), closed(meter10, 1, 18000, 4, 70),
		closed(direct10, 2, 50000, 1, 20), closed(nginx10, 2, 20000, 2, 20), closed(meter10, 2, 16000, 6, 90),
		closed(nginx03, 1, 20000, 2, 20), closed(meter03, 1, 20000, 3, 60),
		{Target: sdkProxy10, Mode: "closed", Unavailable: "a2a CLI not installed: a2a is not on PATH"},
	}
	rep.Half = []Result{
		{Target: direct10, OK: 10, P99: 1.0}, {Target: meter10, OK: 10, P99: 1.5},
		{Target: direct03, OK: 10, P99: 1.0}, {Target: meter03, OK: 10, P99: 2.5},
	}
	rep.Projections = &Projections{SpoolRows: 900, DrainSeconds: 0.25, WaitSeconds: 30, Usage: []UsageCompare{
		{Listing: "l10", Answered: 10, Calls: 10, InTokens: 10 * answerInputTokens, OutTokens: 10 * answerOutputTokens},
		{Listing: "l03", Answered: 5, Calls: 5, InTokens: 5 * answerInputTokens, OutTokens: 5*answerOutputTokens - 1},
	}}
	rep.compare(nil)

	type want struct {
		value    float64
		met      string // "met", "missed" or "not measured"
		rangeLen int
	}
	for prefix, w := range map[string]want{
		"message/send 1.0 (embedded): meter ÷ nginx": {0.85, "missed", 2}, // (18000+16000)/2 ÷ 20000
		"message/send 0.3 (embedded): meter ÷ nginx": {1.0, "met", 0},
		"message/send 1.0: meter ÷ the SDK's":        {0, "not measured", 0},
		"HTTP+JSON":                                  {0, "not measured", 0},
		"open loop at half nginx's max: meter/1.0":   {0.5, "met", 0},
		"open loop at half nginx's max: meter/0.3":   {1.5, "missed", 0},
		"closed loop, 32 connections: meter/1.0 p99": {6, "missed", 0}, // the worst round
		"closed loop, 32 connections: meter/0.3 p99": {3, "met", 0},
		"spool drained":                              {0.25, "met", 0},
		"usage API calls":                            {1, "missed", 0}, // the sums match, one listing's tokens do not
		"usage API tokens":                           {(15*340 - 1) / (15 * 340.0), "missed", 0},
		"held stream":                                {0, "not measured", 0},
		"the meter's CPU per call, meter/1.0":        {60, "", 2}, // 80 − 20
		"throughput meter/1.0 ÷ direct/1.0":          {0.34, "", 2},
	} {
		r := ratioNamed(rep, prefix)
		if r == nil {
			t.Errorf("no ratio %q", prefix)
			continue
		}
		got := verdictOf(r)
		if math.Abs(r.Value-w.value) > 1e-9 || got != w.met || len(r.Range) != w.rangeLen {
			t.Errorf("%s: %+v, want %+v", prefix, *r, w)
		}
	}
	if r := ratioNamed(rep, "message/send 1.0 (embedded): meter ÷ nginx"); r.Range[0] != 0.8 || r.Range[1] != 0.9 || math.Abs(r.Reached-0.85/0.9) > 1e-9 {
		t.Errorf("per round: %+v", *r)
	}
	if r := ratioNamed(rep, "message/send 1.0: meter ÷ the SDK's"); !strings.Contains(r.NotMeasured, "not on PATH") {
		t.Errorf("why not measured: %q", r.NotMeasured)
	}

	pg := &Report{Settings: Settings{Store: "PostgreSQL + ClickHouse"}, Max: rep.Max}
	pg.compare(nil)
	if r := ratioNamed(pg, "message/send 1.0 (PostgreSQL + ClickHouse): meter ÷ nginx"); r == nil || r.Goal != ">= 0.8x" || !*r.Met {
		t.Errorf("on PostgreSQL + ClickHouse: %+v", r)
	}

	var out bytes.Buffer
	if err := rep.writeText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"0.850x (0.800x to 0.900x)",
		"0.94     missed",
		"sdk-proxy/1.0: unavailable: a2a CLI not installed",
		"spool: 900 rows when the load stopped, empty after 0.250s",
		"not measured: sdk-proxy/1.0: a2a CLI not installed: a2a is not on PATH",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// TestIssue22Targets checks issue 22's rows (the lean peer, the SDK's
// proxy at 3x, REST and bridged against meter/1.0, the closed loop's p99
// against the lean peer's and its max, the servers' CPU) on made-up
// results of two rounds.
func TestIssue22Targets(t *testing.T) {
	at := func(r Result, maxMs, serverCPU float64) Result {
		r.Max, r.ServerCPUPerCall = maxMs, serverCPU
		return r
	}
	rs := []Result{
		at(closed(sdkProxy10, 1, 5000, 20, 30), 40, 300), at(closed(sdkProxy10, 2, 5000, 20, 30), 40, 300),
		at(closed(lean10, 1, 20000, 2, 20), 10, 40), at(closed(lean10, 2, 20000, 3, 20), 12, 40),
		at(closed(meter10, 1, 18000, 4, 20), 30, 70), at(closed(meter10, 2, 16000, 6, 20), 60, 50),
		at(closed(meter03, 1, 20000, 3, 20), 20, 60),
		at(closed(meterREST, 1, 15300, 4, 20), 30, 70), at(closed(meterREST, 2, 13600, 4, 20), 30, 70),
		at(closed(meterBridged, 1, 12000, 4, 20), 30, 90), at(closed(meterBridged, 2, 11000, 4, 20), 30, 90),
	}
	rep := &Report{Settings: Settings{Connections: 32, Rounds: 2, Store: storeEmbedded, LeanSync: "bg", MeterProcess: true}, Max: rs}
	rep.compare(nil)
	type want struct {
		value float64
		met   string // "met", "missed", "not measured", or "" (no goal)
	}
	for prefix, w := range map[string]want{
		"message/send 1.0: meter ÷ lean peer (-sync bg)":        {0.85, "missed"}, // 17000 ÷ 20000
		"message/send 0.3: meter ÷ lean peer (1.0, -sync bg)":   {1, "met"},       // round 1 only
		"message/send 1.0: meter ÷ the SDK's serve --proxy":     {3.4, "met"},
		"message/send 1.0 (issue 12): meter ÷ the SDK's":        {3.4, "missed"},
		"HTTP+JSON: meter/rest ÷ meter/1.0":                     {0.85, "met"},
		"bridged: meter/bridged ÷ meter/1.0":                    {11500.0 / 17000, "missed"},
		"closed loop p99: meter/1.0 ÷ lean/1.0 (worst round)":   {2, "met"}, // 4 ÷ 2 and 6 ÷ 3
		"closed loop max latency: meter/1.0 (worst round)":      {60, "missed"},
		"closed loop max latency: meter/0.3 (worst round)":      {20, "met"},
		"server CPU per call: meter/1.0 ÷ lean/1.0":             {1.5, "met"}, // mean 60 ÷ 40
		"the meter's CPU per call, meter/1.0 (its own process)": {60, ""},
		"the lean peer's CPU per call":                          {40, ""},
		"the SDK proxy's CPU per call":                          {300, ""},
		"throughput lean/1.0 ÷ nginx/1.0":                       {0, "not measured"},
	} {
		r := ratioNamed(rep, prefix)
		if r == nil {
			t.Errorf("no ratio %q", prefix)
			continue
		}
		got := verdictOf(r)
		if math.Abs(r.Value-w.value) > 1e-9 || got != w.met {
			t.Errorf("%s: %+v, want %+v", prefix, *r, w)
		}
	}
	if r := ratioNamed(rep, "closed loop p99: meter/1.0 ÷ lean/1.0"); r.Goal != "<= 2x" || len(r.Range) != 2 {
		t.Errorf("p99 ratio: %+v", *r)
	}
	if r := ratioNamed(rep, "message/send 0.3: meter ÷ lean peer"); !strings.Contains(r.Note, "only A2A 1.0") {
		t.Errorf("0.3 against the lean peer: note %q", r.Note)
	}

	// The meter in this process: no CPU of its own to compare.
	for _, s := range []Settings{{LeanSync: "wait"}, {LeanSync: "wait", MeterInProcess: "-cpuprofile measures this process"}} {
		in := &Report{Settings: s, Max: rs}
		in.compare(nil)
		r := ratioNamed(in, "server CPU per call: meter/1.0 ÷ lean/1.0")
		if r == nil || r.Met != nil || !strings.Contains(r.NotMeasured, "the meter ran in this process") ||
			(s.MeterInProcess != "" && !strings.Contains(r.NotMeasured, "-cpuprofile")) {
			t.Errorf("meter in process: %+v", r)
		}
		if r := ratioNamed(in, "message/send 1.0: meter ÷ lean peer (-sync wait)"); r == nil || !strings.Contains(r.Note, "after the group-committed fdatasync") {
			t.Errorf("-lean-sync wait: %+v", r)
		}
		if r := ratioNamed(in, "the meter's CPU per call, meter/1.0 (process CPU"); r == nil {
			t.Errorf("meter in process: no process CPU difference in %+v", in.Ratios)
		}
	}

	// No lean peer, no server CPU read: each row says why.
	var noLean []Result
	for _, x := range rs {
		switch x.Target {
		case lean10:
			if x.Round == 1 {
				noLean = append(noLean, Result{Target: lean10, Mode: "closed", Unavailable: "lean peer not installed: -lean auto: no main.go"})
			}
		case meter10:
			x.ServerCPUPerCall = 0
			noLean = append(noLean, x)
		default:
			noLean = append(noLean, x)
		}
	}
	rep = &Report{Settings: Settings{LeanSync: "bg", MeterProcess: true}, Max: noLean}
	rep.compare(nil)
	for prefix, why := range map[string]string{
		"message/send 1.0: meter ÷ lean peer":       "no main.go",
		"closed loop p99: meter/1.0 ÷ lean/1.0":     "no main.go",
		"server CPU per call: meter/1.0 ÷ lean/1.0": "meter/1.0: its process's CPU time was not read",
	} {
		if r := ratioNamed(rep, prefix); r == nil || !strings.Contains(r.NotMeasured, why) {
			t.Errorf("%s: %+v, want not measured: …%s…", prefix, r, why)
		}
	}
	var out bytes.Buffer
	if err := rep.writeText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the meter: in its own process (-meter-process); the lean peer: -sync bg", "server µs/call", "lean/1.0: unavailable: lean peer not installed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// verdictOf is a ratio's verdict as the tests name it: "met", "missed",
// "not measured", or "" for a comparison without a goal.
func verdictOf(r *Ratio) string {
	switch {
	case r.NotMeasured != "":
		return "not measured"
	case r.Met != nil && *r.Met:
		return "met"
	case r.Met != nil:
		return "missed"
	}
	return ""
}
