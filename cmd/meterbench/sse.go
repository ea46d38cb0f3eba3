package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"
)

// SSEResult is how long stream events took from the agent's write to the
// client's read, through one target. Delays are in milliseconds.
type SSEResult struct {
	Target  string  `json:"target"`
	Streams int     `json:"streams"`
	Events  int     `json:"events"` // events received with a timestamp
	Missing int     `json:"missing"`
	Errors  int     `json:"errors"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
	// The first event of each stream (the task) on its own: the meter
	// binds the task to the buyer before relaying it.
	FirstP50    float64 `json:"first_event_p50_ms"`
	FirstMax    float64 `json:"first_event_max_ms"`
	Unavailable string  `json:"unavailable,omitempty"`
}

// sseDelays opens streams concurrent message/stream calls to target and
// measures each event's delay from the "bench/sentNs" stamp the canned
// agent wrote into it. The agent and this client share the process clock.
func sseDelays(ctx context.Context, name, target string, headers map[string]string, streams int, spec streamSpec) SSEResult {
	res := SSEResult{Target: name, Streams: streams}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(spec.events)*spec.interval+30*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		delays []time.Duration
		firsts []time.Duration
		wg     sync.WaitGroup
	)
	body := streamBody()
	for range streams {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) {
			defer wg.Done()
			got, err := readStream(ctx, client, target, freshMessage(body), headers)
			mu.Lock()
			defer mu.Unlock()
			delays = append(delays, got...)
			if len(got) > 0 {
				firsts = append(firsts, got[0])
			}
			res.Missing += max(spec.events-len(got), 0)
			if err != nil {
				res.Errors++
				if res.Unavailable == "" && len(got) == 0 {
					res.Unavailable = err.Error()
				}
			}
		})
	}
	wg.Wait()
	if len(delays) > 0 {
		res.Unavailable = ""
	}
	slices.Sort(delays)
	res.Events = len(delays)
	res.P50, res.P99 = pct(delays, 0.50), pct(delays, 0.99)
	if n := len(delays); n > 0 {
		res.Max = ms(delays[n-1])
	}
	slices.Sort(firsts)
	res.FirstP50 = pct(firsts, 0.5)
	if n := len(firsts); n > 0 {
		res.FirstMax = ms(firsts[n-1])
	}
	return res
}

type httpStatusError int

func (e httpStatusError) Error() string { return "HTTP " + strconv.Itoa(int(e)) }

// readStream reads one stream to its end and returns each stamped event's
// delay.
func readStream(ctx context.Context, client *http.Client, target string, body []byte, headers map[string]string) ([]time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, httpStatusError(res.StatusCode)
	}
	var out []time.Duration
	stamp := []byte(`"bench/sentNs":`)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at := time.Now().UnixNano()
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		i := bytes.Index(line, stamp)
		if i < 0 {
			continue
		}
		digits := line[i+len(stamp):]
		j := 0
		for j < len(digits) && digits[j] >= '0' && digits[j] <= '9' {
			j++
		}
		sent, err := strconv.ParseInt(string(digits[:j]), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, time.Duration(at-sent))
	}
	return out, sc.Err()
}
