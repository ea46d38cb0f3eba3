package main

import (
	"os"
	"strconv"
	"time"
)

// procCPU is the CPU time process pid has used so far.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
}
