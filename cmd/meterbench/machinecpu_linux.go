package main

import (
	"bytes"
	"os"
	"strconv"
)

// machineCPU is the machine's CPU time so far, busy and in all, in clock
// ticks, from the first line of /proc/stat.
func machineCPU() (busy, total int64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseMachineStat(b)
}

// parseMachineStat reads "cpu user nice system idle iowait irq softirq
// steal …": idle and iowait are not busy.
func parseMachineStat(b []byte) (busy, total int64, ok bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	for i, x := range f[1:] {
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, true
}
