package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime/pprof"
	"strings"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/httpserver"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

// market is the marketplace with its embedded meter, wired exactly as
// cmd/marketplace's run wires it (same stores, services, middleware and
// routes; no demo and no card refresh loop): by default in a process of
// its own (meterproc.go), with -meter-process=false in this process,
// where the meter's goroutines carry the pprof label role=meter.
type market struct {
	URL  string
	pid  int // of the meter's own process (-meter-process); 0: it runs in this one
	done chan error
	stop func()
}

// meterSync is the meter's spool setting for a durability mode of the
// lean peer's (-lean-sync): the same promise to the buyer. The meter has
// no "off" (answering before its record is written): it then runs as for
// bg, the nearest.
func meterSync(durability string) string {
	if durability == "wait" {
		return "each"
	}
	return "5ms"
}

// marketEnv is the marketplace's configuration for the benchmark: the
// caller's AGENTMARKET_* settings (a PostgreSQL or ClickHouse URL, a log
// level), with a free loopback port, the benchmark's data dir, card fetches
// allowed from the loopback and listings published at once.
func marketEnv(getenv func(string) string, dataDir, logLevel, durability string) func(string) string {
	set := map[string]string{
		"AGENTMARKET_SPOOL_SYNC":        meterSync(durability),
		"AGENTMARKET_ADDR":              "127.0.0.1:0",
		"AGENTMARKET_DATA_DIR":          dataDir,
		"AGENTMARKET_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
		"AGENTMARKET_AUTO_APPROVE":      "true",
		"AGENTMARKET_EMBEDDED_METER":    "true",
		"AGENTMARKET_PUBLIC_METER_URL":  "",
		"AGENTMARKET_LOG_LEVEL":         logLevel,
	}
	return func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		if strings.HasPrefix(k, "AGENTMARKET_") {
			return getenv(k)
		}
		return ""
	}
}

// startMarket starts the marketplace; its log goes to logOut. It serves
// until stop is called.
func startMarket(ctx context.Context, env func(string) string, logOut io.Writer) (m *market, err error) {
	pprof.Do(ctx, pprof.Labels("role", "meter"), func(ctx context.Context) {
		m, err = wireMarket(ctx, env, logOut)
	})
	return m, err
}

func wireMarket(parent context.Context, env func(string) string, logOut io.Writer) (*market, error) {
	cfg, err := config.Load("marketplace", serve.ConfigFormats(), nil, env, io.Discard)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	log, flushLog := serve.Logger(cfg, logOut)
	core, err := serve.OpenCore(ctx, cfg, log)
	if err != nil {
		cancel()
		flushLog()
		return nil, err
	}
	fail := func(err error) (*market, error) {
		cancel()
		core.Close()
		flushLog()
		return nil, err
	}
	if _, _, err := core.Accounts.EnsurePlatform(ctx, cfg.OperatorKey); err != nil {
		return fail(fmt.Errorf("platform org: %w", err))
	}
	ln, baseURL, err := httpserver.Listen(cfg.Addr)
	if err != nil {
		return fail(err)
	}
	mk, err := serve.NewMarketplace(ctx, core, baseURL)
	if err != nil {
		ln.Close()
		return fail(err)
	}
	m := &market{URL: baseURL, done: make(chan error, 1)}
	go func() {
		err := httpserver.Run(ctx, mk.App, ln)
		mk.Close()
		core.Close()
		flushLog()
		m.done <- err
	}()
	m.stop = func() {
		cancel()
		<-m.done
	}
	return m, nil
}

// pricing is a usage-priced plan like a seller's: tokens, compute and a
// per-task fee, so every call is rated.
var pricing = map[string]any{
	"currency":                         "usd",
	"monthly_fee_micros":               49_000_000,
	"input_tokens_per_million_micros":  3_000_000,
	"output_tokens_per_million_micros": 15_000_000,
	"compute_per_hour_micros":          360_000,
	"per_task_micros":                  1_000,
}

// subscription is what a buyer needs to call listings through the meter.
type subscription struct {
	Key      string
	Listings []subscribed // in the order of the cards given
}

type subscribed struct {
	ID       string // the listing's id
	Endpoint string // the meter's URL for it
}

// subscribe goes through the REST API as people would: a seller signs up
// and lists each agent by its card URL (with credentials for the agent),
// a buyer signs up and subscribes to each.
//
// With endpoints > 1 the first listing (the A2A 1.0 JSON-RPC agent) names
// that many endpoints of the seller's: its card's interface and the same
// URL with ?replica=2, 3, … (one agent: the meter's balancing and its
// per-endpoint state are what is measured, not other agents).
//
// With limits the buyer calls under every admission limit the meter has,
// each far above what the run can reach (issue 25: what checking them
// costs): the org's, the key's and each subscription's rate limits and
// in-flight caps, and the org's, the key's and each subscription's
// monthly budget; the key is a second one, made with its budget.
func subscribe(ctx context.Context, apiBase string, cardURLs []string, endpoints int, limits bool) (*subscription, error) {
	c := apiClient{base: strings.TrimRight(apiBase, "/") + "/api/v1"}
	var signup struct {
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	if err := c.do(ctx, "", "POST", "/signup", map[string]any{"org_name": "Bench Agents", "email": "seller@bench.example", "password": "correct horse battery"}, &signup); err != nil {
		return nil, fmt.Errorf("seller signup: %w", err)
	}
	seller := signup.APIKey.Key
	type listing struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	var listed []listing
	for _, card := range cardURLs {
		var l listing
		if err := c.do(ctx, seller, "POST", "/listings", map[string]any{"card_url": card, "pricing": pricing,
			"upstream_auth": map[string]string{"header": "Authorization", "value": "Bearer seller-secret-for-the-agent"}}, &l); err != nil {
			return nil, fmt.Errorf("list the agent at %s: %w", card, err)
		}
		if endpoints > 1 && len(listed) == 0 {
			if err := setEndpoints(ctx, c, seller, l.ID, card, endpoints); err != nil {
				return nil, err
			}
		}
		listed = append(listed, l)
	}
	if err := c.do(ctx, "", "POST", "/signup", map[string]any{"org_name": "Bench Buyer", "email": "buyer@bench.example", "password": "correct horse battery"}, &signup); err != nil {
		return nil, fmt.Errorf("buyer signup: %w", err)
	}
	sub := &subscription{Key: signup.APIKey.Key}
	if limits {
		if err := limitBuyer(ctx, c, sub); err != nil {
			return nil, fmt.Errorf("the buyer's limits: %w", err)
		}
	}
	for _, l := range listed {
		var s struct {
			ID       string `json:"id"`
			Endpoint string `json:"endpoint"`
		}
		req := map[string]any{"listing_id": l.ID}
		if limits {
			req["monthly_budget_micros"] = benchBudget
		}
		if err := c.do(ctx, sub.Key, "POST", "/subscriptions", req, &s); err != nil {
			return nil, fmt.Errorf("subscribe (listing %s is %s): %w", l.ID, l.Status, err)
		}
		if limits {
			if err := c.do(ctx, sub.Key, "PATCH", "/subscriptions/"+s.ID, map[string]any{"rate_limits": benchRates}, nil); err != nil {
				return nil, fmt.Errorf("the subscription's rate limits: %w", err)
			}
		}
		sub.Listings = append(sub.Listings, subscribed{ID: l.ID, Endpoint: s.Endpoint})
	}
	return sub, nil
}

// benchBudget and benchRates are -limits' limits: far above what a run
// reaches (a run's calls cost a few hundred million micros at most).
const benchBudget = int64(1_000_000_000_000_000)

var benchRates = map[string]int64{"requests_per_second": 1_000_000, "requests_per_minute": 60_000_000,
	"tokens_per_minute": 1_000_000_000_000, "max_in_flight": 1_000_000}

// limitBuyer puts the buyer's org under a budget and rate limits, and
// makes sub.Key a new buyer key with its own budget and rate limits.
func limitBuyer(ctx context.Context, c apiClient, sub *subscription) error {
	if err := c.do(ctx, sub.Key, "PUT", "/org/budget", map[string]any{"monthly_budget_micros": benchBudget}, nil); err != nil {
		return err
	}
	if err := c.do(ctx, sub.Key, "PUT", "/org/rate-limits", benchRates, nil); err != nil {
		return err
	}
	var key struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if err := c.do(ctx, sub.Key, "POST", "/api-keys", map[string]any{"name": "bench, limited", "role": "buyer", "monthly_budget_micros": benchBudget}, &key); err != nil {
		return err
	}
	if err := c.do(ctx, sub.Key, "PUT", "/api-keys/"+key.ID+"/rate-limits", benchRates, nil); err != nil {
		return err
	}
	sub.Key = key.Key
	return nil
}

// setEndpoints names n endpoints of the listing's agent: its card's first
// interface and the same URL with ?replica=2 … n.
func setEndpoints(ctx context.Context, c apiClient, seller, listing, cardURL string, n int) error {
	req, err := http.NewRequestWithContext(ctx, "GET", cardURL, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var card struct {
		URL        string `json:"url"`
		Interfaces []struct {
			URL string `json:"url"`
		} `json:"supportedInterfaces"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&card); err != nil {
		return fmt.Errorf("read the card at %s: %w", cardURL, err)
	}
	base := card.URL
	if len(card.Interfaces) > 0 {
		base = card.Interfaces[0].URL
	}
	if base == "" {
		return fmt.Errorf("the card at %s names no interface", cardURL)
	}
	eps := []map[string]any{{"url": base}}
	for i := 2; i <= n; i++ {
		eps = append(eps, map[string]any{"url": fmt.Sprintf("%s?replica=%d", base, i)})
	}
	if err := c.do(ctx, seller, "PATCH", "/listings/"+listing, map[string]any{"endpoints": eps}, nil); err != nil {
		return fmt.Errorf("set %d endpoints of listing %s: %w", n, listing, err)
	}
	return nil
}

type apiClient struct{ base string }

func (c apiClient) do(ctx context.Context, key, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, res.StatusCode, body)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}
