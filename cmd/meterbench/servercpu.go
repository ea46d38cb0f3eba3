package main

import (
	"bytes"
	"strconv"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/PID/stat: USER_HZ,
// sysconf(_SC_CLK_TCK), which Linux fixes at 100 on amd64 and arm64. A
// figure is thus good to 10 ms, which a phase of seconds at full load
// makes small.
const clockTicks = 100

// parseProcStat is the CPU time (user and system, not its children's)
// in a /proc/PID/stat line: fields 14 and 15, counted after the command
// name, which is in parentheses and may itself hold spaces or ')'.
func parseProcStat(stat []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3 (the state)
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// serverClock measures the CPU time of the process serving a target
// (another process: the lean peer, the SDK's proxy, the meter's own)
// over a phase. With pid 0, or where it cannot be read, it measures
// nothing.
type serverClock struct {
	pid   int
	start time.Duration
	ok    bool
}

func startServerClock(pid int) serverClock {
	if pid == 0 {
		return serverClock{}
	}
	t, ok := procCPU(pid)
	return serverClock{pid: pid, start: t, ok: ok}
}

// used is the CPU time the server used since the start; ok is false
// when it was not measured.
func (c serverClock) used() (d time.Duration, ok bool) {
	if !c.ok {
		return 0, false
	}
	t, ok := procCPU(c.pid)
	if !ok || t < c.start {
		return 0, false
	}
	return t - c.start, true
}

// serverPerCall is a server's CPU time d in µs per answered call; 0 when
// it was not measured.
func serverPerCall(d time.Duration, ok bool, answered int64) float64 {
	if !ok || answered == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(answered)
}
