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
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/web/api"
)

// market is the marketplace with its embedded meter, wired in this process
// exactly as cmd/marketplace's run wires it (same stores, services,
// middleware and routes; no demo and no card refresh loop), so that the
// meter's goroutines carry the pprof label role=meter.
type market struct {
	URL  string
	done chan error
	stop func()
}

// marketEnv is the marketplace's configuration for the benchmark: the
// caller's AGENTMARKET_* settings (a PostgreSQL or ClickHouse URL, a log
// level), with a free loopback port, the benchmark's data dir, card fetches
// allowed from the loopback and listings published at once.
func marketEnv(getenv func(string) string, dataDir, logLevel string) func(string) string {
	set := map[string]string{
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
	cfg, err := config.Load("marketplace", nil, env, io.Discard)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	var closers []func()
	fail := func(err error) (*market, error) {
		cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		return nil, err
	}
	log := serve.Logger(cfg, logOut)
	clock := agentmarket.SystemClock{}
	db, err := serve.OpenDB(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { db.Close() })
	key, err := cfg.SealerKey()
	if err != nil {
		return fail(fmt.Errorf("secret key: %w", err))
	}
	sealer, err := aesgcm.New(key)
	if err != nil {
		return fail(err)
	}
	accountStore := contractsgorm.New(db.DB)
	accounts := &contracts.Accounts{Store: accountStore, Clock: clock}
	authz, err := casbin.New(ctx, accountStore)
	if err != nil {
		return fail(err)
	}
	go authz.Run(ctx, cfg.PolicyReload, func(err error) { log.Warn("policy reload failed", "err", err) })
	if _, _, err := accounts.EnsurePlatform(ctx, cfg.OperatorKey); err != nil {
		return fail(fmt.Errorf("platform org: %w", err))
	}
	listingStore := listingsgorm.New(db.DB)
	catalog := &listings.Service{
		Store:          listingStore,
		Fetcher:        &httpfetch.Fetcher{Guard: httpfetch.Guard{Allow: cfg.AllowCIDRs()}, Timeout: cfg.CardFetchTimeout},
		Sealer:         sealer,
		Clock:          clock,
		AutoApprove:    cfg.AutoApproveOn(),
		DefaultRefresh: time.Duration(cfg.CardRefreshSeconds) * time.Second,
	}
	ln, baseURL, err := serve.Listen(cfg.Addr)
	if err != nil {
		return fail(err)
	}
	usageStore, closeUsage, err := serve.UsageStore(ctx, cfg)
	if err != nil {
		ln.Close()
		return fail(err)
	}
	closers = append(closers, func() { closeUsage() })
	subs := &contracts.Subscriptions{Store: accountStore, Listings: serve.CatalogTerms{Catalog: catalog}, Policies: authz, Clock: clock}
	srv := &api.Server{Accounts: accounts, Listings: catalog, Subscriptions: subs, Usage: &metering.Reports{Store: usageStore, Clock: clock},
		Authorizer: authz, Logger: log, PublicMeterURL: baseURL}
	ops := api.NewOps("marketplace")
	ops.Checks = append(ops.Checks, api.Check{Name: "database", Check: db.Ping})
	app := serve.App("marketplace", srv.ErrorHandler, 4<<20)
	app.Use(ops.Middleware)
	ops.Mount(app)

	meterCtx, stopMeter := context.WithCancel(context.WithoutCancel(ctx))
	meter, err := serve.StartMeter(meterCtx, serve.MeterDeps{Config: cfg, DB: db, Store: usageStore, Accounts: accounts, Authz: authz,
		Catalog: catalog, Listings: listingStore, Registry: ops.Registry, Logger: log, Clock: clock, PublicURL: baseURL})
	if err != nil {
		stopMeter()
		ln.Close()
		return fail(err)
	}
	closers = append(closers, func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		meter.Close(flushCtx)
		stopMeter()
	})
	meter.Proxy.Mount(app)
	srv.Mount(app)

	m := &market{URL: baseURL, done: make(chan error, 1)}
	go func() {
		err := serve.Run(ctx, app, ln)
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
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

// subscription is what a buyer needs to call a listing through the meter.
type subscription struct {
	Endpoint string
	Key      string
}

// subscribe goes through the REST API as people would: a seller signs up
// and lists the agent by its card URL (with credentials for the agent), a
// buyer signs up and subscribes.
func subscribe(ctx context.Context, apiBase, agentURL string) (*subscription, error) {
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
	var listing struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := c.do(ctx, seller, "POST", "/listings", map[string]any{"card_url": agentURL, "pricing": pricing,
		"upstream_auth": map[string]string{"header": "Authorization", "value": "Bearer seller-secret-for-the-agent"}}, &listing); err != nil {
		return nil, fmt.Errorf("list the agent: %w", err)
	}
	if err := c.do(ctx, "", "POST", "/signup", map[string]any{"org_name": "Bench Buyer", "email": "buyer@bench.example", "password": "correct horse battery"}, &signup); err != nil {
		return nil, fmt.Errorf("buyer signup: %w", err)
	}
	var sub struct {
		Endpoint string `json:"endpoint"`
	}
	if err := c.do(ctx, signup.APIKey.Key, "POST", "/subscriptions", map[string]any{"listing_id": listing.ID}, &sub); err != nil {
		return nil, fmt.Errorf("subscribe (listing %s is %s): %w", listing.ID, listing.Status, err)
	}
	return &subscription{Endpoint: sub.Endpoint, Key: signup.APIKey.Key}, nil
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
	return json.Unmarshal(body, out)
}
