package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// spoolRowsMetric is the meter's gauge of usage rows in its spool not yet
// shipped to the usage store (served at /metrics).
const spoolRowsMetric = "agentmarket_meter_spool_rows"

// drainGoal is how soon after a run at the meter's max rate its spool
// must be empty (product.md, "Usage pipeline").
const drainGoal = 5 * time.Second

// Projections is whether the meter's projections kept up with the
// max-throughput phases: how long its spool took to drain once they
// ended, and whether the usage API's totals then equal what the meter
// answered, to the call and to the token.
type Projections struct {
	// SpoolRows is the spool's depth when the last max-throughput phase
	// of the meter ended.
	SpoolRows int64 `json:"spool_rows_at_end"`
	// DrainSeconds is the time from then until the spool was empty; -1
	// when it was not within the wait.
	DrainSeconds float64        `json:"drain_seconds"`
	RowsLeft     int64          `json:"rows_left,omitempty"` // when it did not drain
	WaitSeconds  float64        `json:"wait_seconds"`
	Usage        []UsageCompare `json:"usage"`
	Unavailable  string         `json:"unavailable,omitempty"`
}

// UsageCompare is one listing's calls as the load generator saw them and
// as the usage API reports them. Every canned answer reports
// answerInputTokens and answerOutputTokens.
type UsageCompare struct {
	Listing   string   `json:"listing"`
	Targets   []string `json:"targets"`
	Answered  int64    `json:"answered"`
	Unknown   int64    `json:"unknown"` // calls sent whose answer was not read
	Calls     int64    `json:"calls"`
	InTokens  int64    `json:"input_tokens"`
	OutTokens int64    `json:"output_tokens"`
	Error     string   `json:"error,omitempty"`
}

// Equal says whether the usage API's totals are what the meter answered.
func (u UsageCompare) Equal() bool {
	return u.Error == "" && u.Calls == u.Answered && u.InTokens == u.Answered*answerInputTokens && u.OutTokens == u.Answered*answerOutputTokens
}

// meteredListing is a listing the load went to through the meter, and
// the calls it answered.
type meteredListing struct {
	id      string
	targets []string
	calls   *callCount
}

// checkProjections waits (at most wait) for the meter's spool to drain,
// then for the usage API's totals of each listing to equal the calls the
// meter answered; when the wait runs out it reports what it saw last.
func checkProjections(ctx context.Context, market *usageAPI, listings []meteredListing, wait time.Duration) *Projections {
	began := time.Now()
	deadline := began.Add(wait)
	p := &Projections{DrainSeconds: -1, WaitSeconds: wait.Seconds()}
	rows, err := market.spoolRows(ctx)
	if err != nil {
		p.Unavailable = err.Error()
		return p
	}
	p.SpoolRows = rows
	for rows > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		pause(ctx, 10*time.Millisecond)
		if r, err := market.spoolRows(ctx); err == nil {
			rows = r
		}
	}
	if rows == 0 {
		p.DrainSeconds = time.Since(began).Seconds()
	} else {
		p.RowsLeft = rows
	}
	for {
		// Each query gets a few seconds even when the wait is over: the
		// totals are read at least once.
		qctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), 5*time.Second))
		totals, err := market.totalsByListing(qctx)
		cancel()
		p.Usage = p.Usage[:0]
		for _, l := range listings {
			u := UsageCompare{Listing: l.id, Targets: l.targets, Answered: l.calls.answered.Load(), Unknown: l.calls.unknown.Load()}
			if err != nil {
				u.Error = err.Error()
			}
			t := totals[l.id]
			u.Calls, u.InTokens, u.OutTokens = t.Calls, t.InputTokens, t.OutputTokens
			p.Usage = append(p.Usage, u)
		}
		if allEqual(p.Usage) || !time.Now().Before(deadline) || ctx.Err() != nil {
			return p
		}
		pause(ctx, 100*time.Millisecond)
	}
}

func allEqual(us []UsageCompare) bool {
	for _, u := range us {
		if !u.Equal() {
			return false
		}
	}
	return true
}

// usageAPI reads the marketplace the way its operators and buyers do:
// the meter's metrics, and the usage API with the buyer's key.
type usageAPI struct {
	base  string // the marketplace's URL
	key   string // the buyer's API key
	since time.Time
}

// spoolRows reads the spool's depth from /metrics.
func (m *usageAPI) spoolRows(ctx context.Context) (int64, error) {
	body, err := m.get(ctx, "/metrics", "")
	if err != nil {
		return 0, err
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), spoolRowsMetric+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", spoolRowsMetric, err)
			}
			return int64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("the meter's /metrics has no %s", spoolRowsMetric)
}

// usageTotal is one row of GET /api/v1/usage.
type usageTotal struct {
	Key          string `json:"key"`
	Calls        int64  `json:"calls"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

// totalsByListing is the buyer's usage since the run began, by listing.
func (m *usageAPI) totalsByListing(ctx context.Context) (map[string]usageTotal, error) {
	q := url.Values{"group_by": {"listing"}, "from": {m.since.UTC().Format(time.RFC3339)}, "to": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
	body, err := m.get(ctx, "/api/v1/usage?"+q.Encode(), m.key)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var out struct {
		Items []usageTotal `json:"items"`
	}
	if err := json.NewDecoder(body).Decode(&out); err != nil {
		return nil, fmt.Errorf("usage API: %w", err)
	}
	totals := map[string]usageTotal{}
	for _, t := range out.Items {
		totals[t.Key] = t
	}
	return totals, nil
}

func (m *usageAPI) get(ctx context.Context, path, key string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(m.base, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		res.Body.Close()
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", path, res.StatusCode, b)
	}
	return res.Body, nil
}
