package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/pushsign"
	"github.com/agentmarket/agentmarket/billing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/ops"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	contractsredis "github.com/agentmarket/agentmarket/contracts/redis"
	"github.com/agentmarket/agentmarket/contracts/smtpmail"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	"github.com/agentmarket/agentmarket/listings/cardsig"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/web"
	"github.com/agentmarket/agentmarket/web/api"
)

// Core is what every binary builds first: the database and the stores and
// services over it, the policies, and the usage store.
type Core struct {
	Config       *config.Config
	Log          *slog.Logger
	Clock        agentmarket.Clock
	DB           *relational.DB
	AccountStore *contractsgorm.Store
	Accounts     *contracts.Accounts
	Authz        *casbin.Authorizer
	ListingStore *listingsgorm.Store
	Catalog      *listings.Service
	Sealer       listings.Sealer
	Usage        metering.Store
	// Dialer is the base of every connection toward agents and buyers'
	// webhooks; Guard(cfg, Dialer) is installed on it everywhere.
	Dialer *net.Dialer
	// PushKeys signs the meters' push deliveries and publishes the keys
	// (the marketplace's JWKS); every process shares them through the
	// database.
	PushKeys *pushsign.Keys
	// CardKeys sign the proxied Agent Cards every meter serves (their own
	// keys, in their own table), published at each meter's
	// a2aproxy.CardKeysPath.
	CardKeys *pushsign.Keys
	// Audit is the audit log every service records its changes in;
	// AuditKeys sign its checkpoints (their own keys, kept as the card
	// keys are, never retired while a checkpoint may name them).
	Audit     *audit.Log
	AuditKeys *pushsign.Keys
	// Dependencies are the services the process talks to (the database,
	// the usage store; the marketplace adds Stripe), for the banner and
	// /readyz.
	Dependencies []ops.Dependency
	pushKeyClock agentmarket.Clock
	closeMu      sync.Mutex
	closers      []func() error
	// Shared is the Redis the processes of a deployment share
	// (AGENTMARKET_REDIS_URL); nil without one.
	Shared *contractsredis.Store
	// Traces makes the spans of the process's meter (AGENTMARKET_OTEL_*);
	// nil: no tracing. Shut down last (Close), after the meter.
	Traces *sdktrace.TracerProvider
	// service names the process in its spans ("meter", "marketplace").
	service string
}

// Option adjusts a Core before OpenCore builds anything over it.
type Option func(*Core)

// WithService names the binary in the spans it exports
// (service.name agentmarket-<name>).
func WithService(name string) Option { return func(c *Core) { c.service = name } }

// WithDialer makes d the base dialer of every connection toward agents
// and webhooks, and its Resolver the one that answers the listing-time
// checks of agent endpoints. Tests give it an in-memory resolver and a
// loopback-only safety net.
func WithDialer(d *net.Dialer) Option { return func(c *Core) { c.Dialer = d } }

// WithPushKeyClock gives the push signing keys their own clock: tests move
// it to rotate keys and let them expire.
func WithPushKeyClock(clock agentmarket.Clock) Option {
	return func(c *Core) { c.pushKeyClock = clock }
}

// Guard is the one SSRF policy of every connection the processes make to
// agents and buyers' webhooks: card fetches, the listing-time checks of a
// card's endpoints, the meter's calls, streams, polls, cancels, probes and
// push-config calls, and push deliveries. AGENTMARKET_FETCH_ALLOW_CIDRS is
// its only opening.
func Guard(cfg *config.Config, dialer *net.Dialer) httpfetch.Guard {
	g := httpfetch.Guard{Allow: cfg.AllowCIDRs()}
	if dialer != nil {
		g.Resolver = dialer.Resolver
	}
	return g
}

// ConfigFormats are the adapters' checks of their settings (config.Load).
func ConfigFormats() config.Formats {
	return config.Formats{SecretKey: aesgcm.ParseKey, AllowCIDRs: httpfetch.ParseCIDRs,
		ClickHouseDSN: clickhouse.CheckDSN, ClickHouseCluster: clickhouse.ValidCluster,
		SMTPURL: smtpmail.CheckURL, MailFrom: func(v string) error { _, err := smtpmail.ParseFrom(v); return err }}
}

// SealerKey returns the credential-encryption key: the configured one, or
// (embedded only) the one generated into the data dir.
func SealerKey(cfg *config.Config) ([]byte, error) {
	if cfg.SecretKey != "" {
		return aesgcm.ParseKey(cfg.SecretKey)
	}
	return aesgcm.LoadOrCreateKeyFile(cfg.DataDir + "/secret.key")
}

var _ contracts.HostChecker = httpfetch.Guard{}

// WithClock makes c the clock of everything the core builds (tests move
// it through trials and billing periods).
func WithClock(c agentmarket.Clock) Option { return func(core *Core) { core.Clock = c } }

// OpenCore opens everything cfg names and starts the policy reload; Close
// releases it.
func OpenCore(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (_ *Core, err error) {
	c := &Core{Config: cfg, Log: log, Clock: agentmarket.SystemClock{}, Dialer: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, service: "marketplace"}
	for _, o := range opts {
		o(c)
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if cfg.GCPercent > 0 {
		// The meter allocates a few KiB a call and keeps large indexes
		// live: collecting when the heap reaches three times its live size
		// rather than twice costs about a tenth less CPU per call
		// (BENCHMARKS.md).
		debug.SetGCPercent(cfg.GCPercent)
	}
	// The first closer, so the last to run: the spans of the meter's last
	// work (its flush, a cascade) are exported before the process exits.
	if c.Traces, err = Tracing(ctx, cfg.OTel, c.service); err != nil {
		return nil, err
	}
	if c.Traces != nil {
		c.closers = append(c.closers, func() error {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return c.Traces.Shutdown(ctx)
		})
	}
	if c.DB, err = OpenDB(ctx, cfg); err != nil {
		return nil, err
	}
	c.closers = append(c.closers, c.DB.Close)
	key, err := SealerKey(cfg)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	sealer, err := aesgcm.New(key)
	if err != nil {
		return nil, err
	}
	c.Sealer = sealer
	c.AccountStore = contractsgorm.New(c.DB.DB)
	c.Accounts = &contracts.Accounts{Store: c.AccountStore, Clock: c.Clock}
	if cfg.RedisURL != "" {
		// The state processes share: sign-in throttling here, bindings,
		// sent messages and bills in the meter.
		if c.Shared, err = contractsredis.Open(cfg.RedisURL, contractsredis.Options{}); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		c.closers = append(c.closers, c.Shared.Close)
		pctx, cancel := context.WithTimeout(ctx, StartPingTimeout)
		if err := c.Shared.Ping(pctx); err != nil {
			// Not fatal: each process counts on its own until it answers.
			log.Warn("Redis does not answer; each process keeps its own state until it does", "err", err)
		}
		cancel()
		c.Accounts.Throttle = &contracts.Throttle{Store: c.Shared, Clock: c.Clock}
	}
	if c.Authz, err = casbin.New(ctx, c.AccountStore); err != nil {
		return nil, err
	}
	go c.Authz.Run(ctx, cfg.PolicyReload, func(err error) { log.Warn("policy reload failed", "err", err) })
	keyClock := c.pushKeyClock
	if keyClock == nil {
		keyClock = c.Clock
	}
	c.PushKeys = &pushsign.Keys{Store: c.AccountStore, Sealer: sealer, Clock: keyClock, Logger: log,
		RotateEvery: cfg.MeterLimits.PushKeyRotation, Retention: cfg.MeterLimits.PushKeyRetention}
	c.CardKeys = &pushsign.Keys{Store: c.AccountStore.CardKeys(), Purpose: "card", Sealer: sealer, Clock: keyClock, Logger: log,
		RotateEvery: cfg.MeterLimits.PushKeyRotation, Retention: cfg.MeterLimits.PushKeyRetention}
	// The audit keys stay published (and so verify old checkpoints) for
	// as long as anything may keep the log.
	c.AuditKeys = &pushsign.Keys{Store: c.AccountStore.AuditKeys(), Purpose: "audit", Sealer: sealer, Clock: keyClock, Logger: log,
		RotateEvery: cfg.MeterLimits.PushKeyRotation, Retention: AuditKeyRetention}
	c.Audit = &audit.Log{Store: c.AccountStore, Clock: c.Clock, Signer: c.AuditKeys, Keys: AuditKeys(c.AccountStore, sealer),
		CheckpointEvery: cfg.AuditCheckpointEvery, Retention: cfg.AuditRetention, Logger: log,
		TenantViews: map[string]func(json.RawMessage) json.RawMessage{"kill_switch": contracts.SwitchTenantView}}
	c.Accounts.Audit = c.Audit
	c.ListingStore = listingsgorm.New(c.DB.DB)
	// Listings stored before the search index existed (migration 0030).
	if _, err := c.ListingStore.IndexMissing(ctx); err != nil {
		return nil, fmt.Errorf("index listings for search: %w", err)
	}
	guard := Guard(cfg, c.Dialer)
	fetcher := &httpfetch.Fetcher{Guard: guard, Dialer: c.Dialer, Timeout: cfg.CardFetchTimeout}
	c.Catalog = &listings.Service{
		Store:          c.ListingStore,
		Fetcher:        fetcher,
		Verifier:       &cardsig.Verifier{Fetch: fetcher},
		Endpoints:      guard,
		Sealer:         sealer,
		Clock:          c.Clock,
		AutoApprove:    cfg.AutoApproveOn(),
		DefaultRefresh: time.Duration(cfg.CardRefreshSeconds) * time.Second,
		Audit:          c.Audit,
	}
	usage, closeUsage, err := UsageStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.Usage = usage
	c.closers = append(c.closers, closeUsage)
	c.Accounts.Spend = metering.Spend{Store: usage, Clock: c.Clock}
	c.Dependencies = []ops.Dependency{
		{Name: "database", Where: cfg.DatabaseWhere(), Ping: c.DB.Version},
		{Name: "usage_store", Where: cfg.UsageWhere(clickhouse.Describe), Optional: cfg.ClickHouseURL != "", Ping: metering.PingOf(usage),
			Impact: "usage reports, invoice previews and budget checks fail until it answers; metered calls go on, their usage waits in the meter's spool"},
	}
	return c, nil
}

// AuditKeys are the keys audit checkpoints verify with: those of the
// store whose private half opens with sealer (a key written into the table
// without the secret key is none).
func AuditKeys(store *contractsgorm.Store, sealer listings.Sealer) audit.Keys {
	return audit.SealedKeys{Keys: store.AuditKeys(), Open: sealer.Open,
		// pushsign.Keys seals a key of Purpose "audit" to this (its
		// sealContext); TestAuditLog verifies real checkpoints through it.
		Context: func(kid string) []byte { return []byte("audit-signing-key|" + kid) }}
}

// AuditKeyRetention is how long a replaced audit signing key stays: a
// century, so that every checkpoint it signed still verifies.
const AuditKeyRetention = 100 * 365 * 24 * time.Hour

// Close releases what OpenCore opened, last first. Only the first call
// does anything; another one (a deferred Close after the shutdown step)
// returns at once.
func (c *Core) Close() {
	c.closeMu.Lock()
	closers := c.closers
	c.closers = nil
	c.closeMu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}

// MeterBodyLimit is the largest request body the meter's routes take in:
// one byte over the meter's limit and over any listing's own, so that the
// meter answers such a body itself, in JSON-RPC.
func (c *Core) MeterBodyLimit() int {
	return max(c.Config.MeterLimits.MaxRequestBytes+1, listings.MaxBodyBytes+1)
}

// Marketplace is the marketplace app: the REST API, billing, and (in the
// embedded default) the meter, on one Fiber app.
type Marketplace struct {
	App            *fiber.App
	Subscriptions  *contracts.Subscriptions
	Ops            *ops.Ops
	PublicMeterURL string
	// Dependencies are the core's and Stripe's (when configured).
	Dependencies []ops.Dependency
	stop         atomic.Pointer[func(context.Context) error]
}

// NewMarketplace assembles the marketplace app for a server listening at
// baseURL and starts its background work (billing; the embedded meter's
// pipeline). Close stops it, flushing the meter's spool.
func NewMarketplace(ctx context.Context, c *Core, baseURL string) (*Marketplace, error) {
	cfg := c.Config
	m := &Marketplace{PublicMeterURL: cfg.PublicMeterURL}
	if m.PublicMeterURL == "" {
		m.PublicMeterURL = baseURL // the embedded meter shares the marketplace's address
		if !cfg.EmbeddedMeter {
			m.PublicMeterURL = "http://" + cfg.MeterAddr
		}
	}
	offers := &listings.Offers{Store: c.ListingStore, Listings: c.ListingStore, Orgs: AccountOrgs{Store: c.AccountStore}, Clock: c.Clock, Audit: c.Audit}
	m.Subscriptions = &contracts.Subscriptions{Store: c.AccountStore, Listings: CatalogTerms{Catalog: c.Catalog}, Policies: c.Authz, Clock: c.Clock,
		Offers: CatalogOffers{Offers: offers}, Changes: c.AccountStore, Audit: c.Audit}
	bill, hooks, err := Billing(ctx, cfg, BillingDeps{DB: c.DB, Usage: c.Usage, Contracts: c.AccountStore, Listings: c.ListingStore,
		States: m.Subscriptions, Clock: c.Clock, Logger: c.Log})
	if err != nil {
		return nil, err
	}
	m.Subscriptions.Billing = hooks
	sched := &billing.Scheduler{Service: bill.Service, Reporter: bill.Reporter, States: m.Subscriptions, Grace: cfg.BillingGrace,
		Clock: c.Clock, Logger: c.Log}
	go sched.Run(ctx)
	// The marketplace publishes the push signing keys: it makes the first
	// at start, and rotates on time even while no meter signs.
	if err := c.PushKeys.Ensure(ctx); err != nil {
		c.Log.Warn("push signing keys not ready; retried every minute", "err", err)
	}
	go c.PushKeys.Run(ctx)
	if err := c.CardKeys.Ensure(ctx); err != nil {
		c.Log.Warn("card signing keys not ready; retried every minute", "err", err)
	}
	go c.CardKeys.Run(ctx)
	// The marketplace signs the audit log's checkpoints and prunes it.
	c.Audit.JKU = strings.TrimRight(baseURL, "/") + "/api/v1/audit/jwks"
	if err := c.AuditKeys.Ensure(ctx); err != nil {
		c.Log.Warn("audit signing keys not ready; retried every minute", "err", err)
	}
	go c.AuditKeys.Run(ctx)
	go c.Audit.Run(ctx)

	guard := Guard(cfg, c.Dialer)
	tasks := &contracts.Tasks{Life: c.AccountStore, Push: c.AccountStore, Listings: CatalogTerms{Catalog: c.Catalog}, Clock: c.Clock}
	alerts := &contracts.Alerts{Store: c.AccountStore, Push: c.AccountStore, Spend: metering.Spend{Store: c.Usage, Clock: c.Clock}, Clock: c.Clock, Sealer: c.Sealer,
		URLs: contracts.WebhookRule{Hosts: guard, Allow: guard.Allow}, Audit: c.Audit, Credit: c.AccountStore}
	alertSweeper := &contracts.AlertSweeper{Alerts: alerts, Every: billing.SweepEvery(cfg.BillingGrace), Logger: c.Log}
	go alertSweeper.Run(ctx)
	var verified *metering.Verified
	if stats, ok := c.Usage.(metering.StatsStore); ok {
		verified = &metering.Verified{Store: stats, Clock: c.Clock, TTL: 5 * time.Minute}
	}
	srv := &api.Server{Accounts: c.Accounts, InvokeRoles: &contracts.InvokeRoles{Store: c.AccountStore, Policies: c.Authz}, Listings: c.Catalog, Subscriptions: m.Subscriptions,
		Usage: &metering.Reports{Store: c.Usage, Clock: c.Clock},
		Invoices: &billing.Previews{Contracts: m.Subscriptions, Plans: c.ListingStore, Usage: c.Usage, Clock: c.Clock, History: c.AccountStore, Stays: c.AccountStore,
			Credit: c.AccountStore},
		Billing: bill.Service, Webhooks: bill.Webhooks,
		Authorizer: c.Authz, Logger: c.Log, PublicMeterURL: m.PublicMeterURL,
		Tasks: tasks, Offers: offers, Alerts: alerts, Focus: bill.Focus, Verified: verified, PushKeys: c.PushKeys,
		Audit: c.Audit, AuditKeys: c.AuditKeys}
	// The meters clamp an org's own caps to the destination's; the answer
	// says what they get.
	destCaps := &a2aproxy.Push{Caps: cfg.MeterLimits.PushDestination, DestinationCaps: cfg.MeterLimits.PushDestinations}
	srv.PushCaps = &contracts.PushCapsService{Store: c.AccountStore, Configs: c.AccountStore, DestinationCaps: destCaps.EffectiveCaps, Clock: c.Clock}
	srv.Switches = &contracts.Switches{Store: c.AccountStore, Clock: c.Clock, Audit: c.Audit, CancelAfter: 2 * c.Config.MeterLimits.KillSwitchPoll}
	srv.Credits = &contracts.Credits{Store: c.AccountStore, Clock: c.Clock, Audit: c.Audit}
	if bill.Stripe != nil {
		srv.Credits.Checkouts = bill.Stripe
	}
	if bill.Webhooks != nil {
		bill.Webhooks.Credits = srv.Credits
	}
	if c.Shared != nil {
		srv.Switches.Signal = c.Shared // the meters read a change at once
	}
	if n := cfg.AnonymousReadsPerMinute; n > 0 {
		reads := &contracts.RateLimit{Clock: c.Clock, Limit: n, Window: time.Minute}
		if c.Shared != nil {
			reads.Store = c.Shared // one count per address across the deployment
		}
		srv.AnonymousReads = reads
	}
	srv.Proxies = cfg.TrustedProxies
	if cfg.SignupMode() == contracts.SignupConfirm {
		mailer, err := Mailer(cfg, c.Clock)
		if err != nil {
			return nil, err
		}
		publicURL := cfg.PublicURL
		if publicURL == "" {
			publicURL = baseURL
		}
		mails := &contracts.SignupMails{Store: c.AccountStore, Users: c.AccountStore, Mailer: mailer, Clock: c.Clock, BaseURL: publicURL, Logger: c.Log}
		c.Accounts.Mails = mails
		go mails.Run(ctx)
	}
	m.Dependencies = append([]ops.Dependency(nil), c.Dependencies...)
	if cfg.ClickHouseURL != "" && !cfg.EmbeddedMeter {
		m.Dependencies[1].Impact = "usage reports, invoice previews and budget checks fail until it answers"
	}
	if bill.Stripe != nil {
		m.Dependencies = append(m.Dependencies, ops.Dependency{Name: "stripe", Where: cfg.StripeWhere(), Optional: true, Ping: bill.Stripe.Ping,
			Impact: "new subscriptions fail and usage reports wait in the outbox until it answers"})
	}
	m.Ops = ops.New("marketplace")
	m.Ops.Log = c.Log
	m.App = App("marketplace", srv.ErrorHandler, c.MeterBodyLimit())
	m.App.Use(m.Ops.Middleware)
	MountOps(cfg, m.Ops, m.App)

	var meterChecks []ops.Check
	if cfg.EmbeddedMeter {
		meterCtx, stopMeter := context.WithCancel(context.WithoutCancel(ctx))
		meter, err := StartMeter(meterCtx, MeterDeps{Config: cfg, DB: c.DB, Store: c.Usage, Accounts: c.Accounts, Authz: c.Authz, Shared: c.Shared,
			Catalog: c.Catalog, Listings: c.ListingStore, Sealer: c.Sealer, PushKeys: c.PushKeys, CardKeys: c.CardKeys, Registry: m.Ops.Registry, Logger: c.Log, Clock: c.Clock,
			PublicURL: m.PublicMeterURL, Dialer: c.Dialer, Traces: c.Traces})
		if err != nil {
			stopMeter()
			return nil, err
		}
		stop := func(ctx context.Context) error {
			defer stopMeter()
			return CloseMeter(ctx, meter)
		}
		m.stop.Store(&stop)
		meter.Proxy.Mount(m.App)
		// The meter's routes are served ahead of Fiber (a2aproxy.Front).
		m.App.Server().Handler = meter.Proxy.Front(m.App.Server().Handler)
		m.Dependencies = append(m.Dependencies, spoolDependency(cfg, meter))
		meterChecks = append(meterChecks, EjectedCheck(meter), LimitsCheck(meter), KillSwitchCheck(meter))
	}
	m.Ops.Checks = append(ops.Checks(m.Dependencies), meterChecks...)
	startHealthChecks(ctx, c, m.Ops, SellerAlerts{Alerts: alerts})
	srv.Mount(m.App)
	web.New(web.Deps{Accounts: c.Accounts, Proxies: cfg.TrustedProxies, Sessions: c.AccountStore, Listings: c.Catalog, Subscriptions: m.Subscriptions,
		Usage: srv.Usage, Invoices: srv.Invoices, Billing: bill.Service, Authorizer: c.Authz, Logger: c.Log, Clock: c.Clock,
		PublicMeterURL: m.PublicMeterURL, Tasks: tasks, Offers: offers, Alerts: alerts, Focus: bill.Focus, Verified: verified, Audit: c.Audit,
		Switches: srv.Switches, Credits: srv.Credits}).Mount(m.App)
	return m, nil
}

// Mailer is what sends the marketplace's mails: the SMTP server of
// AGENTMARKET_SMTP_URL, else the data dir's mailbox directory.
func Mailer(cfg *config.Config, clock agentmarket.Clock) (contracts.Mailer, error) {
	if cfg.SMTPURL != "" {
		s, err := smtpmail.New(cfg.SMTPURL, cfg.MailFrom)
		if err != nil {
			return nil, fmt.Errorf("smtp: %w", err)
		}
		s.Now = clock.Now
		return s, nil
	}
	from := cfg.MailFrom
	if from == "" {
		from = config.DefaultMailFrom
	}
	addr, err := smtpmail.ParseFrom(from)
	if err != nil {
		return nil, fmt.Errorf("mail from: %w", err)
	}
	return &smtpmail.Dir{Path: cfg.MailboxDir(), From: addr, Now: clock.Now}, nil
}

// MailNote says where sign-ups' mails go, for the banner.
func MailNote(cfg *config.Config) [2]string {
	if cfg.SignupMode() != contracts.SignupConfirm {
		return [2]string{"sign-up", "open: an organisation is created at once (AGENTMARKET_SIGNUP=confirm mails a link first)"}
	}
	if cfg.SMTPURL != "" {
		s, err := smtpmail.New(cfg.SMTPURL, cfg.MailFrom)
		if err == nil {
			return [2]string{"sign-up", "confirmed by mail, sent through " + s.Where()}
		}
	}
	return [2]string{"sign-up", "confirmed by mail, written to " + cfg.MailboxDir() + " (no AGENTMARKET_SMTP_URL)"}
}

// Close stops the marketplace's background work, flushing the meter for
// at most 5 s.
func (m *Marketplace) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.Stop(ctx)
}

// Stop stops the marketplace's background work, flushing the embedded
// meter's spool until ctx ends; what is not shipped by then stays in the
// spool for the next start, and the error says how much.
func (m *Marketplace) Stop(ctx context.Context) error {
	if stop := m.stop.Swap(nil); stop != nil {
		return (*stop)(ctx)
	}
	return nil
}
