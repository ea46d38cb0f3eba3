package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	contractsredis "github.com/agentmarket/agentmarket/contracts/redis"
	"github.com/agentmarket/agentmarket/contracts/sentlog"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/cardsig"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/gormledger"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// UsageStore opens the usage store: ClickHouse when configured, else the
// embedded store in the data dir.
func UsageStore(ctx context.Context, cfg *config.Config) (metering.Store, func() error, error) {
	if cfg.ClickHouseURL != "" {
		// A server that does not answer in time is opened later, like one
		// that is down: the process must start (and spool) without it.
		var opts []clickhouse.Option
		if cfg.ClickHouseCluster != "" {
			opts = append(opts, clickhouse.WithCluster(cfg.ClickHouseCluster))
		}
		s, closeStore, err := clickhouse.OpenOrLazy(ctx, cfg.ClickHouseURL, StartPingTimeout, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("clickhouse: %w", err)
		}
		return s, closeStore, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, err
	}
	s, err := embedded.Open(filepath.Join(cfg.DataDir, "usage.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("embedded usage store: %w", err)
	}
	return s, s.Close, nil
}

// MeterDeps is what a meter is built from.
type MeterDeps struct {
	Config   *config.Config
	DB       *relational.DB
	Store    metering.Store
	Accounts *contracts.Accounts
	Authz    *casbin.Authorizer
	Catalog  *listings.Service
	Listings listings.Store
	Sealer   listings.Sealer
	// PushKeys signs every push delivery attempt (Core.PushKeys); nil
	// sends them unsigned.
	PushKeys a2aproxy.DeliverySigner
	// CardKeys sign the proxied cards (Core.CardKeys); nil serves them
	// unsigned.
	CardKeys cardsig.Keys
	Registry prometheus.Registerer
	Logger   *slog.Logger
	Clock    agentmarket.Clock
	// PublicURL is the meter's base URL as buyers reach it.
	PublicURL string
	// Dialer is the base dialer toward agents and webhooks (Core.Dialer);
	// nil: a 30 s connect timeout.
	Dialer *net.Dialer
	// Shared is the Redis the meters share (Core.Shared); nil: none.
	Shared *contractsredis.Store
	// Traces makes the meter's spans (Core.Traces); nil: no tracing.
	Traces *sdktrace.TracerProvider
}

// Meter is a running meter: the proxy and its usage pipeline.
type Meter struct {
	Proxy   *a2aproxy.Proxy
	Spool   *spool.Spool
	Shipper *spool.Shipper
	// stopLoops ends the task sweeper and the push delivery, and waits.
	stopLoops func()
	// closeStores closes the log of sent messages, if the meter keeps one,
	// and the task store's own connection, if it has one.
	closeStores func() error
}

// StartMeter opens the spool, starts shipping it to the usage store and
// builds the proxy. The pipeline stops when ctx ends; Close then flushes
// what it can and closes the spool.
func StartMeter(ctx context.Context, d MeterDeps) (*Meter, error) {
	opts := spool.Options{}
	if d.Config.SpoolSync > 0 {
		opts = spool.Options{Durability: spool.SyncInterval, SyncInterval: d.Config.SpoolSync}
	}
	sp, err := spool.Open(filepath.Join(d.Config.DataDir, "spool"), opts)
	if err != nil {
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	// The ledger is a projection of the spool: the shipper settles every
	// row (the proxy's Project) ahead of storing it.
	ledger := gormledger.New(d.DB.DB, d.Clock)
	store := contractsgorm.New(d.DB.DB)
	if d.DB.Path != "" {
		// The projections' task rows through the store's own connection to
		// the SQLite file, not the driver (about a third of the cost).
		if err := store.WriteTasksDirect(d.DB.Path); err != nil {
			sp.Close()
			return nil, fmt.Errorf("task bindings' writer: %w", err)
		}
	}
	// The records of sent messages: the meter's own log when it is the
	// only one (no relational row per send), else the shared database's.
	var sent contracts.SentMessages = store
	closeSent := func() error { return nil }
	if d.Config.MeterInMemory() {
		sl, err := sentlog.Open(filepath.Join(d.Config.DataDir, "sent"))
		if err != nil {
			store.Close()
			sp.Close()
			return nil, fmt.Errorf("sent messages' log: %w", err)
		}
		sent, closeSent = sl, sl.Close
	}
	// The hot state several meters share, when there is a Redis: bindings,
	// sent messages and bills there, the database their durable projection
	// (and the fallback while Redis is down).
	shared := d.Shared
	if d.Config.MeterInMemory() {
		shared = nil // the only meter (config refuses a Redis URL with it)
	}
	// alone: no other meter reads this one's projections from the
	// database to find its tasks (it is the only one, or they share Redis).
	alone := d.Config.MeterInMemory() || shared != nil
	guard := Guard(d.Config, d.Dialer)
	p := &a2aproxy.Proxy{
		PublicURL: d.PublicURL,
		Limits: a2aproxy.Limits{
			RequestTimeout:    d.Config.MeterLimits.RequestTimeout,
			StreamIdleTimeout: d.Config.MeterLimits.StreamIdleTimeout,
			SettleTimeout:     d.Config.MeterLimits.SettleTimeout,
			MaxRequestBytes:   d.Config.MeterLimits.MaxRequestBytes,
			MaxResultBytes:    d.Config.MeterLimits.MaxResultBytes,
			TaskTimeout:       d.Config.MeterLimits.TaskTimeout,
			MaxPause:          d.Config.MeterLimits.MaxPause,
			EventRetention:    d.Config.MeterLimits.EventRetention,
			IdempotencyWindow: config.ProxyDuration(d.Config.MeterLimits.IdempotencyWindow),
			StallAfter:        config.ProxyDuration(d.Config.MeterLimits.StallAfter),
			LocalShare:        d.Config.MeterLimits.LimitShare,
		},
		Auth:         d.Accounts,
		Resolver:     MeterTargets{Store: d.Listings, Catalog: d.Catalog},
		Plans:        d.Listings,
		Contracts:    store,
		Entitlements: d.Authz,
		Owners:       store,
		Ledger:       ledger,
		BillInMemory: d.Config.MeterInMemory(),
		Recorder:     sp,
		Spend:        metering.Spend{Store: d.Store, Clock: d.Clock},
		OrgSpend:     OrgSpend{Store: d.Store, Clock: d.Clock},
		Tasks:        store,
		Sent:         sent,
		Incidents:    d.Catalog,
		Sealer:       d.Sealer,
		Push: &a2aproxy.Push{Store: store, Sealer: d.Sealer, Signer: d.PushKeys, Guard: guard, Allow: guard.Allow,
			MaxAttempts: d.Config.MeterLimits.PushMaxAttempts, RetryBase: d.Config.MeterLimits.PushRetryBase, RetryMax: d.Config.MeterLimits.PushRetryMax, Retention: d.Config.MeterLimits.PushRetention,
			Caps: d.Config.MeterLimits.PushDestination, DestinationCaps: d.Config.MeterLimits.PushDestinations, Meters: d.Config.MeterLimits.PushMeters,
			PauseAfter: d.Config.MeterLimits.PushPauseAfter, PauseFor: d.Config.MeterLimits.PushPauseFor, OwnCaps: store},
		Guard:   guard,
		Dialer:  d.Dialer,
		Clock:   d.Clock,
		Logger:  d.Logger,
		Metrics: a2aproxy.NewMetrics(d.Registry, a2aproxy.MetricsOptions{ListingCost: d.Config.MetricsListingCost}),
		Base:    ctx,
	}
	if shared != nil {
		p.Push.Gate = shared // every meter keeps the webhooks' caps together
		p.Shared, p.SharedBills, p.SharedBudgets, p.SharedRates = shared, shared, shared, shared
		p.Sent = &contracts.SentFallback{Hot: shared, Durable: sent, Window: listings.MaxIdempotencyWindow, OnFallback: func(op string, err error) {
			p.Metrics.SharedFallback(op)
			d.Logger.Debug("sent message not in the shared state; the database holds it", "op", op, "err", err)
		}}
	}
	if d.Traces != nil {
		p.Tracer = d.Traces.Tracer("github.com/agentmarket/agentmarket/a2aproxy")
	}
	p.Switches = &a2aproxy.Switchboard{Store: store, Interval: d.Config.MeterLimits.KillSwitchPoll}
	p.Credit = store
	if shared != nil {
		p.Switches.Wake = shared.WatchSwitches(ctx)
	}
	if d.CardKeys != nil {
		p.CardSigner = &a2aproxy.SignedCards{Signer: cardsig.Signer{Keys: d.CardKeys, JKU: strings.TrimRight(d.PublicURL, "/") + a2aproxy.CardKeysPath}}
	}
	if alone {
		p.Limits.MaxUnsettled = maxUnsettledAlone
	}
	p.Init()
	// Retries of a failing database or usage store back off to 5 s at
	// most: the projections must catch up soon after an outage ends.
	shipOpts := spool.ShipperOptions{Settle: p.Project, SettleAhead: true, Stored: p.Stored, MaxBackoff: 5 * time.Second,
		OnError: spool.LogFailures(d.Logger)}
	if d.Traces != nil {
		shipOpts.Tracer = d.Traces.Tracer("github.com/agentmarket/agentmarket/metering/spool")
	}
	if alone {
		// No other meter waits for the database to find a task this one
		// bound (it is the only one, or they share Redis): the projections
		// are settled in larger transactions. A new task's row is a write
		// at a random page of the primary key, and a page holds many rows:
		// batches of hundreds, not tens, write fewer pages per task.
		shipOpts.SettleWait, shipOpts.SettleRows = settleWaitAlone, settleRowsAlone
		shipOpts.BatchWait = settleWaitAlone
	}
	ship := spool.NewShipper(sp, d.Store, shipOpts)
	p.Unsettled = ship.Backpressure
	// What the spool held at the start is projected before the meter bills
	// a task it does not hold from the task's stored bill.
	backlog := sp.AppendedRows()
	p.Warm = func() bool { return ship.SettledThrough() >= backlog }
	go ship.Run(ctx)
	registerPipelineMetrics(d.Registry, sp, ship)
	registerEjectionMetrics(d.Registry, p)
	// Read before the meter serves: a switched-off call is refused from
	// the first one. A database not answering now is the poll's to retry
	// (logged, and on /readyz).
	_ = p.LoadKillSwitches(ctx)
	loopsCtx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loops.Add(4)
	go func() { defer loops.Done(); p.RunCredit(loopsCtx) }()
	go func() { defer loops.Done(); p.RunTaskSweeper(loopsCtx, d.Config.MeterLimits.TaskSweep) }()
	go func() { defer loops.Done(); p.RunKillSwitches(loopsCtx) }()
	go func() { defer loops.Done(); p.RunPushDelivery(loopsCtx) }()
	return &Meter{Proxy: p, Spool: sp, Shipper: ship, stopLoops: func() { stop(); loops.Wait() },
		closeStores: func() error { return errors.Join(closeSent(), store.Close()) }}, nil
}

// The projections' settle batches when no other meter reads them from the
// database to find a task (spool.ShipperOptions.SettleWait, SettleRows):
// 50 ms at most behind the calls, well within what the marketplace's pages
// and the task sweeper need, and below the meter's pacing point
// (a2aproxy.Limits.MaxUnsettled) at its max rate.
const (
	settleWaitAlone   = 500 * time.Millisecond
	settleRowsAlone   = 4096
	maxUnsettledAlone = 4 * settleRowsAlone
)

// Close flushes the spool to the store (bounded by ctx) and closes it.
// Whatever is not shipped stays in the spool for the next start.
//
// The sweeper and the push delivery stop first (what they were doing is
// leased, and taken up again by any meter), then the cascades of cancels
// under way get until ctx ends, so that their usage rows reach the spool.
func (m *Meter) Close(ctx context.Context) error {
	m.stopLoops()
	waited := make(chan struct{})
	go func() { m.Proxy.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
	}
	_ = m.Shipper.Flush(ctx)
	return errors.Join(m.Spool.Close(), m.closeStores())
}

func registerPipelineMetrics(reg prometheus.Registerer, sp *spool.Spool, ship *spool.Shipper) {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "agentmarket", Subsystem: "meter", Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: name, Help: help}, f)
	}
	reg.MustRegister(
		gauge("spool_rows", "Usage rows in the local spool not yet shipped to the usage store.", func() float64 { return float64(sp.Stats().Rows) }),
		gauge("spool_bytes", "Bytes of usage rows in the spool not yet shipped.", func() float64 { return float64(sp.Stats().Bytes) }),
		counter("usage_rows_shipped_total", "Usage rows shipped to the usage store.", func() float64 { return float64(ship.Stats().ShippedRows) }),
		counter("usage_ship_failures_total", "Failed attempts to ship a batch of usage rows.", func() float64 { return float64(ship.Stats().Failures) }),
	)
}
