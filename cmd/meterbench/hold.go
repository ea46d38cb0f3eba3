package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HoldResult is what holding many open streams through one target costs
// this process: the Go heap and stacks in use, and the resident set,
// divided by the streams open. The process holds both ends (the client
// and the canned agent) and, for the meter, the meter in between: the
// meter's own cost per stream is the meter's figure minus direct's.
type HoldResult struct {
	Target      string  `json:"target"`
	Streams     int     `json:"streams"`
	Opened      int     `json:"opened"`
	HeapStackKB float64 `json:"heap_stack_kib_per_stream"`
	RSSKB       float64 `json:"rss_kib_per_stream"`
	Goroutines  float64 `json:"goroutines_per_stream"`
	// Limited says why fewer streams than asked were held (fitStreams).
	Limited     string `json:"limited,omitempty"`
	Unavailable string `json:"unavailable,omitempty"`
}

// holdBody asks the canned agent to keep the stream open after its first
// event (with a comment every second) until the client leaves.
func holdBody() []byte {
	return bytes.Replace(streamBody(), []byte(`"metadata":{"trace":`), []byte(`"metadata":{"bench/hold":true,"trace":`), 1)
}

// holdStreams opens n streams to target, waits until each has its first
// event, and measures what the process holds for them.
func holdStreams(ctx context.Context, name, target string, headers map[string]string, n int, memProfile string) HoldResult {
	res := HoldResult{Target: name, Streams: n}
	before, rss0, g0 := inUse()
	ctx, cancel := context.WithCancel(ctx)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
	body := holdBody()
	opened := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) {
			defer wg.Done()
			holdOne(ctx, client, target, freshMessage(body), headers, func(err error) { opened <- err })
		})
	}
	deadline := time.After(2 * time.Minute)
	for i := 0; i < n; i++ {
		select {
		case err := <-opened:
			if err == nil {
				res.Opened++
			} else if res.Unavailable == "" {
				res.Unavailable = err.Error()
			}
		case <-deadline:
			i = n
			if res.Unavailable == "" {
				res.Unavailable = "streams still opening after 2m"
			}
		}
	}
	time.Sleep(time.Second) // every hop settled (first events relayed, buffers in place)
	after, rss1, g1 := inUse()
	if memProfile != "" {
		if f, err := os.Create(memProfile); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	if res.Opened > 0 {
		res.HeapStackKB = float64(after-before) / 1024 / float64(res.Opened)
		res.RSSKB = float64(rss1-rss0) / 1024 / float64(res.Opened)
		res.Goroutines = float64(g1-g0) / float64(res.Opened)
		if res.Opened == n {
			res.Unavailable = ""
		}
	}
	cancel()
	wg.Wait()
	client.CloseIdleConnections()
	time.Sleep(2 * time.Second) // let the agent's and the meter's ends notice
	return res
}

// holdOne opens one stream, reports (once) when its first event arrived
// or it failed, and reads it until ctx ends.
func holdOne(ctx context.Context, client *http.Client, target string, body []byte, headers map[string]string, ready func(error)) {
	if err := openHeld(ctx, client, target, body, headers, ready); err != nil {
		ready(err)
	}
}

func openHeld(ctx context.Context, client *http.Client, target string, body []byte, headers map[string]string, ready func(error)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return httpStatusError(res.StatusCode)
	}
	r := bufio.NewReaderSize(res.Body, 4096)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			break
		}
	}
	ready(nil)
	for { // held: keep reading until the stream is closed (ctx ends)
		if _, err := r.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
			return nil
		}
	}
}

// inUse is the Go heap and stacks in use, the resident set, and the
// goroutines, after a collection.
func inUse() (heapStack, rss uint64, goroutines int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse, residentBytes(), runtime.NumGoroutine()
}

// residentBytes is VmRSS from /proc/self/status (0 where there is none).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// fdsPerStream is how many descriptors a stream held through the meter
// costs this process, which holds every hop: the load generator's
// connection, the meter's from the buyer and to the agent, and the
// agent's. fdsSpare covers the rest (listeners, files, idle connections).
const (
	fdsPerStream = 4
	fdsSpare     = 512
)

// fitStreams raises this process's descriptor limit (RLIMIT_NOFILE) to
// what n held streams need, the hard limit too when it is lower and the
// process may, and returns how many streams fit under the limit it has
// then; when that is fewer than n, why says exactly why.
func fitStreams(n int) (fit int, why string) {
	need := uint64(n*fdsPerStream + fdsSpare)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= need {
		return n, ""
	}
	err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: need, Max: max(lim.Max, need)})
	if err == nil {
		return n, ""
	}
	// The hard limit stays: the soft one goes up to it.
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim.Max, Max: lim.Max}) == nil {
		lim.Cur = lim.Max
	}
	fit = max(0, int(lim.Cur)-fdsSpare) / fdsPerStream
	return fit, fmt.Sprintf("%d streams need %d descriptors in this process (%d each: the load generator's, the meter's from the buyer and to the agent, the agent's; %d spare); its hard limit is %d and raising it was refused (%v): held %d",
		n, need, fdsPerStream, fdsSpare, lim.Max, err, fit)
}
