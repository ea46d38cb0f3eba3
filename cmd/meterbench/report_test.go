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
		got := ""
		switch {
		case r.NotMeasured != "":
			got = "not measured"
		case r.Met != nil && *r.Met:
			got = "met"
		case r.Met != nil:
			got = "missed"
		}
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
