// Package config reads AgentMarket's settings: every setting is a flag and
// an environment variable AGENTMARKET_<NAME>, the flag winning, checked at
// start with an error that names the setting.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Formats check the settings whose format an adapter owns: the sealer's
// key, the SSRF allowlist, ClickHouse's DSN and cluster name. The wiring
// passes its adapters' (serve.ConfigFormats), so that config imports none
// and still reports every bad setting at once.
type Formats struct {
	SecretKey         func(string) ([]byte, error)
	AllowCIDRs        func(string) ([]netip.Prefix, error)
	ClickHouseDSN     func(string) error
	ClickHouseCluster func(string) bool
	// SMTPURL checks AGENTMARKET_SMTP_URL; MailFrom AGENTMARKET_MAIL_FROM.
	SMTPURL  func(string) error
	MailFrom func(string) error
}

// Config is every setting of both binaries.
type Config struct {
	Addr                string
	MeterAddr           string
	PublicMeterURL      string
	DataDir             string
	DatabaseURL         string
	ClickHouseURL       string
	ClickHouseCluster   string // cluster mode: the cluster's name in the servers' remote_servers
	StripeSecretKey     string
	StripeWebhookSecret string
	StripeAPIBase       string
	FetchAllowCIDRs     string
	SecretKey           string
	OperatorKey         string
	AutoApprove         string // "auto" (on when embedded), "true" or "false"
	EmbeddedMeter       bool
	// SpoolSync is when a meter answers a call whose usage record it
	// spooled: 0 once a group-committed fdatasync covers the record, else
	// after write(2), with an fdatasync every SpoolSync.
	SpoolSync time.Duration
	// MeterState is where a meter keeps the state its calls decide on
	// (tasks' bills): "memory" (the only meter) or "database" (shared with
	// other meters); "auto" is memory on the embedded database.
	MeterState string
	// RedisURL is the Redis server the meters of a deployment share their
	// hot state through (task owners, sent messages); empty: the database.
	RedisURL string
	// MetricsAddr is the operator listener: /metrics is served there and
	// not on the public listener (empty: on the public listener).
	MetricsAddr string
	// MetricsListingCost exports the meter's per-listing cost series
	// (only on the operator listener).
	MetricsListingCost bool
	// OTel is where traces go (empty Endpoint: no tracing).
	OTel               OTel
	CardRefreshSeconds int
	CardFetchTimeout   time.Duration
	// HealthCheckInterval is how often the marketplace probes each
	// published listing's agent (0: never; health then reflects only the
	// card).
	HealthCheckInterval time.Duration
	PolicyReload        time.Duration
	MeterLimits         MeterLimits
	PlatformFeeBasisPts int           // the platform's fee on each sale, in hundredths of a percent
	BillingGrace        time.Duration // how long a past-due contract keeps working
	// AuditRetention is how long audit entries are kept (0: forever);
	// AuditCheckpointEvery how often the audit chain's head is signed.
	AuditRetention       time.Duration
	AuditCheckpointEvery time.Duration
	UsageReportWindow    time.Duration // the windows usage is reported to Stripe in
	LogLevel             string
	// GCPercent is the garbage collector's target (debug.SetGCPercent),
	// applied at start; 0 leaves the runtime's.
	GCPercent       int
	ShutdownTimeout time.Duration // the whole way down after SIGTERM
	Demo            bool
	// DemoPort is the port of --demo's first agent on 127.0.0.1, the
	// others on the ports after it; 0: free ports; -1 (auto): from Addr's
	// port + DemoPortOffset (DemoAddrs).
	DemoPort int
	// AnonymousReadsPerMinute is how many catalog reads without a key one
	// client address may make a minute; 0: they need a key.
	AnonymousReadsPerMinute int
	// TrustedProxies are the load balancers in front of the marketplace,
	// whose X-Forwarded-For names the client the per-address limits count.
	TrustedProxies contracts.TrustedProxies
	// Signup is the sign-up mode: "open" (the org is made at once, its
	// first key in the answer) or "confirm" (a mailed link first; the
	// answer does not tell a registered e-mail from a new one); "auto" is
	// confirm with an SMTP server, open without (SignupMode).
	Signup string
	// SMTPURL is the mail server (smtp:// or smtps://); empty: mails go
	// to the pickup directory MailboxDir.
	SMTPURL  string
	MailFrom string
	// PublicURL is the marketplace as its users reach it (links in
	// mails); empty: the listener's URL.
	PublicURL  string
	allowCIDRs []netip.Prefix // FetchAllowCIDRs, parsed by Formats.AllowCIDRs
}

// SignupMode resolves the sign-up setting: "open" or "confirm".
func (c *Config) SignupMode() string {
	if c.Signup == "auto" {
		if c.SMTPURL != "" {
			return "confirm"
		}
		return "open"
	}
	return c.Signup
}

// MailboxDir is where mails are written when no SMTP server is set.
func (c *Config) MailboxDir() string { return filepath.Join(c.DataDir, "mailbox") }

// DefaultMailFrom is the From of mails written to the mailbox directory
// when AGENTMARKET_MAIL_FROM is not set.
const DefaultMailFrom = "AgentMarket <no-reply@localhost>"

// OTel are the OpenTelemetry trace export's settings.
type OTel struct {
	Endpoint    string // an http(s) URL or host:port; empty: no tracing
	Protocol    string // "http/protobuf" or "grpc"
	Insecure    bool   // plaintext to a host:port endpoint
	Headers     map[string]string
	SampleRatio float64
}

// parseOTelHeaders reads name=value pairs separated by commas, values
// percent-decoded (as OTEL_EXPORTER_OTLP_HEADERS).
func parseOTelHeaders(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	h := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		name, value, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, errors.New("must be name=value pairs separated by commas, like x-api-key=abc,x-team=ops")
		}
		if !headerToken(name) {
			return nil, fmt.Errorf("header %q: a header name is letters, digits and !#$%%&'*+-.^_`|~ only", name)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("header %s: the value is not validly percent-encoded", name)
		}
		// A CR or LF would split the request the exporter sends (or the
		// exporter refuses it at every export, spans lost in silence).
		if strings.ContainsAny(dec, "\r\n\x00") {
			return nil, fmt.Errorf("header %s: the value has a line break or NUL", name)
		}
		h[name] = dec
	}
	return h, nil
}

// headerToken reports whether name is an HTTP header name (RFC 9110's
// token).
func headerToken(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return name != ""
}

// otelEndpoint checks an OTLP endpoint: an http(s) URL without
// credentials (the exporter would drop them: they go in
// --otel-headers), query or fragment, or host:port; a port, when given,
// a number from 1 to 65535.
func otelEndpoint(v string) error {
	const form = "must be an http(s) URL like http://127.0.0.1:4318, or host:port"
	host := v
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New(form)
		}
		if u.User != nil {
			return errors.New("must not carry credentials (user:password@ is not sent): give them with --otel-headers, like Authorization=Basic%20…")
		}
		if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return errors.New(form + " (no query or fragment)")
		}
		if u.Port() == "" {
			return nil
		}
		host = u.Host
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil || h == "" {
		return errors.New(form)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: must be a number from 1 to 65535", port)
	}
	return nil
}

// MeterLimits are the meter's timeouts and size limits.
type MeterLimits struct {
	RequestTimeout    time.Duration
	StreamIdleTimeout time.Duration
	SettleTimeout     time.Duration
	MaxRequestBytes   int
	MaxResultBytes    int
	TaskTimeout       time.Duration // end-to-end budget of a task; 0 = none
	MaxPause          time.Duration // longest input-required / auth-required pause
	TaskSweep         time.Duration // how often overdue tasks are looked for
	KillSwitchPoll    time.Duration // how often the meter reads the kill switches' version
	// LimitShare is the share of each rate limit, session cap, budget and
	// credit balance a meter admits while it holds them on its own (no
	// Redis, or while Redis fails); 1 = the whole limit.
	LimitShare      float64
	PushMaxAttempts int
	PushRetryBase   time.Duration
	PushRetention   time.Duration
	PushRetryMax    time.Duration
	EventRetention  time.Duration
	// PushKeyRotation is how long a push signing key signs before the
	// next one takes over; PushKeyRetention how long a replaced key stays
	// in the JWKS after that.
	PushKeyRotation  time.Duration
	PushKeyRetention time.Duration
	// IdempotencyWindow is how long a send's messageId holds (idempotent
	// sends); 0 = off (listings may set their own).
	IdempotencyWindow time.Duration
	// StallAfter is how long a task may show no progress before the meter
	// marks it stalled; 0 = off (listings may set their own).
	StallAfter time.Duration
	// PushDestination is what one webhook server (scheme, host, port)
	// receives from all the meters together: deliveries in flight and
	// started per second; PushDestinations the operator's own for some.
	// PushMeters is how many meters share them when there is no Redis
	// (each keeps 1/PushMeters). A destination failing every attempt for
	// PushPauseAfter is paused for PushPauseFor between probes.
	PushDestination  contracts.PushLimit
	PushDestinations map[string]contracts.PushLimit
	PushMeters       int
	PushPauseAfter   time.Duration
	PushPauseFor     time.Duration
}

// parseDestinationCaps reads push-destination-caps: url=concurrency/rate,
// comma-separated; the key is the URL's destination (scheme, host, port).
func parseDestinationCaps(v string) (map[string]contracts.PushLimit, error) {
	out := map[string]contracts.PushLimit{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		u, spec, ok := strings.Cut(item, "=")
		conc, rate, ok2 := strings.Cut(spec, "/")
		dest := contracts.Destination(strings.TrimSpace(u))
		n, err1 := strconv.Atoi(strings.TrimSpace(conc))
		r, err2 := strconv.ParseFloat(strings.TrimSpace(rate), 64)
		if !ok || !ok2 || dest == "" || err1 != nil || err2 != nil || n < 1 || r < 0.01 {
			return nil, fmt.Errorf("%q must be url=concurrency/rate, like https://hooks.example.com=32/200", item)
		}
		out[dest] = contracts.PushLimit{Concurrency: n, PerSecond: r}
	}
	return out, nil
}

func duration(min time.Duration, f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < min {
			return fmt.Errorf("must be a duration of at least %s, like 30s", min)
		}
		*f(c) = d
		return nil
	}
}

func size(min int, f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("must be a whole number of bytes, at least %d", min)
		}
		*f(c) = n
		return nil
	}
}

// MeterInMemory reports whether the meter keeps its state in memory
// (MeterState, with auto resolved).
func (c *Config) MeterInMemory() bool {
	return c.MeterState == "memory" || (c.MeterState == "auto" && c.DatabaseURL == "")
}

// Setting describes one setting, for flags, environment and docs.
type Setting struct {
	Name    string // flag name; the variable is AGENTMARKET_ + upper(name with - as _)
	Usage   string
	Default string
	set     func(c *Config, v string) error
}

// secretSettings are never echoed in an error.
var secretSettings = map[string]bool{"secret-key": true, "operator-key": true, "stripe-secret-key": true, "stripe-webhook-secret": true,
	"database-url": true, "clickhouse-url": true, "redis-url": true, "smtp-url": true}

// Env is the environment variable of a setting.
func (s Setting) Env() string {
	return "AGENTMARKET_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

func str(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = v; return nil }
}

// Settings lists every setting of the binary named bin ("marketplace" or
// "meter").
func Settings(bin string) []Setting {
	common := []Setting{
		{"data-dir", "directory for local data: the embedded default's SQLite files and generated keys, and the meter's usage spool (keep it on a disk that survives restarts)", "./agentmarket-data", str(func(c *Config) *string { return &c.DataDir })},
		{"database-url", "PostgreSQL DSN; empty = embedded SQLite in the data dir", "", str(func(c *Config) *string { return &c.DatabaseURL })},
		{"clickhouse-url", "ClickHouse native DSN (clickhouse://host:9000/db); empty = embedded usage store", "", str(func(c *Config) *string { return &c.ClickHouseURL })},
		{"spool-sync", "when a meter answers a call, given its usage record: each (after a group-committed fdatasync covers the record: a power loss loses no answered call) or a duration like 5ms (after write(2), and an fdatasync that often: a crash of the process loses nothing, a power loss the calls of the last interval or so)", "each", func(c *Config, v string) error {
			if v == "each" {
				c.SpoolSync = 0
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d > time.Second {
				return errors.New("must be each, or a duration from 1ms to 1s, like 5ms")
			}
			c.SpoolSync = d
			return nil
		}},
		{"meter-state", "where a meter keeps the state its calls decide on (what each task was billed): memory (this meter is the only one that bills its listings' tasks: decided in memory, on the call path, no SQL per call), database (several meters share the database: every call's bill is settled there, one relational row per call), or auto: memory on the embedded database, database with a database URL", "auto", func(c *Config, v string) error {
			switch v {
			case "auto", "memory", "database":
				c.MeterState = v
				return nil
			}
			return errors.New("must be auto, memory or database")
		}},
		{"redis-url", "Redis the meters of a deployment share their hot state through (redis://host:6379/0): a task created through one meter is found on every other at once, a send retried through another meter is answered from the first, each call's bill is decided there, without a database row per call; empty = through the database (correct, slower). A Redis outage falls back to the database path (no call refused for it); refused with --meter-state memory (that meter is the only one)", "", str(func(c *Config) *string { return &c.RedisURL })},
		{"clickhouse-cluster", "name of the ClickHouse cluster (in the servers' remote_servers) to run on: tables are created ON CLUSTER as replicated tables behind Distributed ones; empty = a single server", "", str(func(c *Config) *string { return &c.ClickHouseCluster })},
		{"secret-key", "32-byte key (base64) that encrypts stored seller credentials; generated into the data dir when embedded, required with a database URL", "", str(func(c *Config) *string { return &c.SecretKey })},
		{"fetch-allow-cidrs", "address ranges that card fetches, agents' endpoints (calls from the meter) and webhooks may reach despite the SSRF rules, e.g. 127.0.0.0/8 (--demo adds 127.0.0.1, where its agents listen)", "", str(func(c *Config) *string { return &c.FetchAllowCIDRs })},
		{"policy-reload", "how often policies are re-read from the database", "2s", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 100*time.Millisecond {
				return errors.New("must be a duration of at least 100ms, like 2s")
			}
			c.PolicyReload = d
			return nil
		}},
		{"meter-request-timeout", "longest wait for an agent's answer to a non-streaming call", "30s", duration(100*time.Millisecond, func(c *Config) *time.Duration { return &c.MeterLimits.RequestTimeout })},
		{"meter-stream-idle-timeout", "longest silence of an agent's stream before the meter ends it", "120s", duration(100*time.Millisecond, func(c *Config) *time.Duration { return &c.MeterLimits.StreamIdleTimeout })},
		{"meter-settle-timeout", "how long a task is followed after its buyer left a stream", "10m", duration(time.Second, func(c *Config) *time.Duration { return &c.MeterLimits.SettleTimeout })},
		{"meter-max-request-bytes", "largest request body the meter forwards", "1048576", size(1024, func(c *Config) *int { return &c.MeterLimits.MaxRequestBytes })},
		{"meter-max-result-bytes", "largest non-streaming answer the meter relays", "262144", size(1024, func(c *Config) *int { return &c.MeterLimits.MaxResultBytes })},
		{"meter-task-timeout", "end-to-end time budget of a task, after which the meter cancels it at the agent; 0 = none (listings and contracts may set their own)", "0", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || (d != 0 && d < time.Second) {
				return errors.New("must be 0 or a duration of at least 1s, like 1h")
			}
			c.MeterLimits.TaskTimeout = d
			return nil
		}},
		{"meter-max-pause", "longest a task may wait in input-required or auth-required before the meter cancels it at the agent", "24h", duration(time.Second, func(c *Config) *time.Duration { return &c.MeterLimits.MaxPause })},
		{"meter-idempotency-window", "how long a send's messageId holds: a send whose messageId the same buyer org already sent to the same listing within it is answered with what the first send created (its task, waited for while it runs) instead of being forwarded and billed again, and one with another message is a new send (forwarded, billed, its usage row's method reused-id:…); 0 = off (listings may set their own)", "24h", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || (d != 0 && d < time.Second) || d > 7*24*time.Hour {
				return errors.New("must be 0 or a duration from 1s to 168h, like 24h")
			}
			c.MeterLimits.IdempotencyWindow = d
			return nil
		}},
		{"meter-stall-after", "how long a task may show no progress (no status change, artifact or message the meter relayed or saw) before the meter marks it stalled: a stalled event in its record, a metric, a notification to the buyer's webhook; 0 = off (listings may set their own)", "10m", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || (d != 0 && d < time.Second) || d > 24*time.Hour {
				return errors.New("must be 0 or a duration from 1s to 24h, like 10m")
			}
			c.MeterLimits.StallAfter = d
			return nil
		}},
		{"task-event-retention", "how long the events of ended tasks (pauses, resumes, cancels) are kept", "2160h", duration(time.Hour, func(c *Config) *time.Duration { return &c.MeterLimits.EventRetention })},
		{"meter-kill-switch-poll", "how often the meter reads the kill switches' version from the database (one row), so a switch set anywhere acts on it within this interval; with Redis a change is also published and acts at once", "200ms", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 10*time.Millisecond || d > time.Second {
				return errors.New("must be a duration from 10ms to 1s, like 200ms: a switch must act within a second")
			}
			c.MeterLimits.KillSwitchPoll = d
			return nil
		}},
		{"meter-limit-share", "the share of each rate limit, session cap, budget and credit balance this meter admits while it holds them on its own (no AGENTMARKET_REDIS_URL, or while Redis fails): 1/N for N meters keeps them together within each limit; 1 = each meter admits the whole limit (N meters: up to N times it)", "1", func(c *Config, v string) error {
			f, err := parseShare(v)
			if err != nil {
				return err
			}
			c.MeterLimits.LimitShare = f
			return nil
		}},
		{"meter-task-sweep", "how often the meter looks for tasks whose pause or time budget ran out", "5s", duration(100*time.Millisecond, func(c *Config) *time.Duration { return &c.MeterLimits.TaskSweep })},
		{"push-max-attempts", "attempts to deliver a push notification to a buyer's webhook before it is marked failed", "8", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return errors.New("must be a whole number from 1 to 100")
			}
			c.MeterLimits.PushMaxAttempts = n
			return nil
		}},
		{"push-retention", "how long delivered and failed push deliveries are kept (GET /api/v1/push-deliveries shows them)", "720h", duration(time.Hour, func(c *Config) *time.Duration { return &c.MeterLimits.PushRetention })},
		{"push-retry-base", "delay before the first retry of a push delivery; doubled each attempt (with jitter), up to push-retry-max", "1s", duration(10*time.Millisecond, func(c *Config) *time.Duration { return &c.MeterLimits.PushRetryBase })},
		{"push-retry-max", "longest delay between two attempts of a push delivery", "5m", duration(10*time.Millisecond, func(c *Config) *time.Duration { return &c.MeterLimits.PushRetryMax })},
		{"push-destination-concurrency", "push deliveries in flight at once to one webhook server (scheme, host and port), from all the meters together", "8", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 10000 {
				return errors.New("must be a whole number from 1 to 10000")
			}
			c.MeterLimits.PushDestination.Concurrency = n
			return nil
		}},
		{"push-destination-rate", "push deliveries started per second to one webhook server, from all the meters together", "50", func(c *Config, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || r < 0.01 || r > 100000 {
				return errors.New("must be a number of deliveries per second from 0.01 to 100000")
			}
			c.MeterLimits.PushDestination.PerSecond = r
			return nil
		}},
		{"push-destination-caps", "the caps of named webhook servers, instead of push-destination-concurrency and -rate: url=concurrency/rate, comma-separated, like https://hooks.example.com=32/200", "", func(c *Config, v string) error {
			caps, err := parseDestinationCaps(v)
			c.MeterLimits.PushDestinations = caps
			return err
		}},
		{"push-meters", "how many meters deliver push notifications when there is no Redis (AGENTMARKET_REDIS_URL): each keeps that share of every webhook server's caps", "1", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				return errors.New("must be a whole number from 1 to 1000")
			}
			c.MeterLimits.PushMeters = n
			return nil
		}},
		{"push-pause-after", "a webhook server that fails every push delivery attempt (5 at least) for this long is paused, and the orgs concerned told at their alert webhooks", "10m", duration(time.Second, func(c *Config) *time.Duration { return &c.MeterLimits.PushPauseAfter })},
		{"push-pause-for", "how long a paused webhook server gets nothing before one delivery probes it (a success resumes it)", "5m", duration(time.Second, func(c *Config) *time.Duration { return &c.MeterLimits.PushPauseFor })},
		{"push-key-rotation", "how long a key that signs push deliveries signs before the next one takes over (the next is published in the JWKS an hour before)", "720h", duration(2*time.Hour, func(c *Config) *time.Duration { return &c.MeterLimits.PushKeyRotation })},
		{"push-key-retention", "how long a replaced push signing key stays in the JWKS (GET /api/v1/push/jwks), so that what it signed still verifies; longer than a delivery's retries last", "168h", duration(time.Hour, func(c *Config) *time.Duration { return &c.MeterLimits.PushKeyRetention })},
		{"shutdown-timeout", "longest the process takes to stop after SIGTERM (half of it to finish requests under way, the rest to flush usage and close); then it exits anyway", "10s", duration(time.Second, func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
		{"otel-endpoint", "OpenTelemetry traces: the OTLP endpoint spans are exported to (a collector, Jaeger, Tempo, a vendor's), like http://127.0.0.1:4318 (OTLP/HTTP, /v1/traces added when the URL has no path) or http://127.0.0.1:4317 with --otel-protocol grpc; https:// is TLS, a bare host:port is TLS unless --otel-insecure; empty = no tracing, at no cost (the buyer's traceparent is still carried to the agent and its trace id recorded on the usage rows)", "", func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			if err := otelEndpoint(v); err != nil {
				return err
			}
			c.OTel.Endpoint = v
			return nil
		}},
		{"otel-protocol", "the OTLP protocol of --otel-endpoint: http/protobuf (port 4318 by convention) or grpc (4317)", "http/protobuf", func(c *Config, v string) error {
			switch v {
			case "http/protobuf", "grpc":
				c.OTel.Protocol = v
				return nil
			}
			return errors.New("must be http/protobuf or grpc")
		}},
		{"otel-insecure", "send spans in plaintext to a --otel-endpoint given as host:port (an http:// URL is plaintext anyway)", "false", boolean(func(c *Config) *bool { return &c.OTel.Insecure })},
		{"otel-headers", "headers sent with every export, as name=value pairs separated by commas (a vendor's API key: x-honeycomb-team=KEY, Authorization=Basic …); values may be percent-encoded", "", func(c *Config, v string) error {
			h, err := parseOTelHeaders(v)
			if err != nil {
				return err
			}
			c.OTel.Headers = h
			return nil
		}},
		{"otel-sample-ratio", "the share of traces the meter starts that are recorded (0 to 1); a buyer's traceparent decides for its own trace (parent-based: its sampled flag is followed)", "1", func(c *Config, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || !(r >= 0 && r <= 1) { // NaN is neither
				return errors.New("must be a number from 0 to 1, like 0.1")
			}
			c.OTel.SampleRatio = r
			return nil
		}},
		{"log-level", "debug, info, warn or error", "info", func(c *Config, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				c.LogLevel = v
				return nil
			}
			return errors.New("must be debug, info, warn or error")
		}},
		{"gc-percent", "the Go garbage collector's heap growth target the binary sets at start (what GOGC sets; it overrides GOGC): 200 lets the heap grow by twice its live size between collections, for about a tenth less CPU per metered call than Go's 100; 0 leaves the runtime's own (GOGC, else 100)", "200", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 10_000 {
				return errors.New("must be a whole number from 0 to 10000, like 200")
			}
			c.GCPercent = n
			return nil
		}},
	}
	meterAddr := Setting{"meter-addr", "meter listen address (cmd/meter); a marketplace without its embedded meter derives the meter's public URL from it when that is not set", "127.0.0.1:8081", addr(func(c *Config) *string { return &c.MeterAddr })}
	metricsAddr := Setting{"metrics-addr", "operator listen address (host:port, like 0.0.0.0:9090) for /metrics, /healthz and /readyz: when set, /metrics is served there only and the public listener answers it 404 (keep this address off the load balancer and ingress: it is for Prometheus); empty = /metrics on the public listener, for a try-out on one machine", "", func(c *Config, v string) error {
		if v == "" {
			return nil
		}
		return addr(func(c *Config) *string { return &c.MetricsAddr })(c, v)
	}}
	listingCost := Setting{"metrics-listing-cost", "also export agentmarket_meter_cost_micros_total{listing}, the list price billed on each listing (each seller's revenue, and with few buyers each buyer's spend); needs --metrics-addr, so that only the operator reads it", "false", boolean(func(c *Config) *bool { return &c.MetricsListingCost })}
	publicMeter := Setting{"public-meter-url", "base URL buyers use to reach the meter (written into proxied cards); derived from the address when empty", "", func(c *Config, v string) error {
		if v == "" {
			return nil
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("must be an absolute http(s) URL")
		}
		c.PublicMeterURL = strings.TrimRight(v, "/")
		return nil
	}}
	if bin == "meter" {
		return append([]Setting{meterAddr, metricsAddr, listingCost, publicMeter}, common...)
	}
	return append([]Setting{
		{"addr", "marketplace listen address (API, web UI; the meter too when embedded)", "127.0.0.1:8080", addr(func(c *Config) *string { return &c.Addr })},
		publicMeter,
		{"embedded-meter", "serve the meter from the marketplace process; false when meters run apart (cmd/meter)", "true", boolean(func(c *Config) *bool { return &c.EmbeddedMeter })},
		{"stripe-secret-key", "Stripe secret key; empty = the platform's own ledger", "", str(func(c *Config) *string { return &c.StripeSecretKey })},
		{"stripe-webhook-secret", "Stripe webhook signing secret", "", str(func(c *Config) *string { return &c.StripeWebhookSecret })},
		{"stripe-api-base", "Stripe API base URL (stripe-mock in tests)", "", str(func(c *Config) *string { return &c.StripeAPIBase })},
		{"operator-key", "the platform operator's API key (amk_…) to create on first start; generated into the data dir when empty", "", func(c *Config, v string) error {
			if v != "" && (!strings.HasPrefix(v, "amk_") || len(v) < 24) {
				return errors.New("must start with amk_ and be at least 24 characters")
			}
			c.OperatorKey = v
			return nil
		}},
		{"auto-approve", "publish new listings without operator review: auto (on when embedded), true or false", "auto", func(c *Config, v string) error {
			switch v {
			case "auto", "true", "false":
				c.AutoApprove = v
				return nil
			}
			return errors.New("must be auto, true or false")
		}},
		{"platform-fee-percent", "the platform's fee on each sale, in percent (two decimals at most), taken through Stripe Connect", "10", func(c *Config, v string) error {
			whole, frac, _ := strings.Cut(v, ".")
			if len(frac) > 2 {
				return errors.New("must have at most two decimals")
			}
			frac += strings.Repeat("0", 2-len(frac))
			w, err1 := strconv.Atoi(whole)
			f, err2 := strconv.Atoi(frac)
			if err1 != nil || err2 != nil || w < 0 || w*100+f > 10000 {
				return errors.New("must be a percentage between 0 and 100, like 10 or 12.5")
			}
			c.PlatformFeeBasisPts = w*100 + f
			return nil
		}},
		{"audit-retention", "how long the audit log keeps its entries (0 = forever); older ones are pruned behind a signed checkpoint, from which what is left still verifies", "0", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > 0 && d < time.Hour {
				return errors.New("must be 0 (keep forever) or a duration of at least 1h, like 8760h")
			}
			c.AuditRetention = d
			return nil
		}},
		{"audit-checkpoint-every", "how often the audit chain's head is signed into a checkpoint with the marketplace's audit key (and old entries pruned)", "1h", duration(time.Second, func(c *Config) *time.Duration { return &c.AuditCheckpointEvery })},
		{"billing-grace", "how long a contract whose payment failed keeps working before it is suspended", "72h", duration(0, func(c *Config) *time.Duration { return &c.BillingGrace })},
		{"usage-report-window", "the windows usage is reported to Stripe in (whole minutes that divide a day)", "1h", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Minute || d%time.Minute != 0 || (24*time.Hour)%d != 0 {
				return errors.New("must be a whole number of minutes that divides a day, like 1h or 15m")
			}
			c.UsageReportWindow = d
			return nil
		}},
		{"card-refresh-seconds", "default card refresh interval in seconds (0 disables, minimum 60)", "3600", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (n > 0 && n < 60) {
				return errors.New("must be 0 or a whole number of seconds of at least 60")
			}
			c.CardRefreshSeconds = n
			return nil
		}},
		{"card-fetch-timeout", "time allowed for one card fetch", "10s", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return errors.New("must be a positive duration, like 10s")
			}
			c.CardFetchTimeout = d
			return nil
		}},
		{"health-check-interval", "how often the marketplace probes each published listing's agent with a cheap A2A call (GetTask of a task that does not exist), to show in the catalog whether it answers and to alert its seller when it stops; 0 = never (health then reflects only the card)", "30s", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || (d != 0 && d < time.Second) {
				return errors.New("must be 0 (never) or a duration of at least 1s, like 30s")
			}
			c.HealthCheckInterval = d
			return nil
		}},
		{"demo-port", "where --demo's agents listen on 127.0.0.1: auto (from --addr's port + 100: 8180, 8181, 8182 for the default, clear of cmd/meter's 8081; free ones when --addr's port is 0), a port (the first agent's; the others on the ports after it), or 0 (free ports, new at every start: listings made from the agents' URLs then fail after a restart)", "auto", func(c *Config, v string) error {
			if v == "auto" {
				c.DemoPort = -1
				return nil
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return errors.New("must be auto, 0 or a port from 1 to 65535")
			}
			c.DemoPort = n
			return nil
		}},
		{"anonymous-reads-per-minute", "how many requests a minute one client address may make to the API's catalog reads without a key (GET /api/v1/listings, /api/v1/listings/{id} and its /stats: published listings only, as the web catalog shows them); more are answered 429 with Retry-After until the minute ends (counted in Redis when --redis-url is set, so across processes); 0 = those reads need a key too", "120", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1_000_000 {
				return errors.New("must be a whole number from 0 to 1000000")
			}
			c.AnonymousReadsPerMinute = n
			return nil
		}},
		{"trusted-proxies", "address ranges (CIDR, comma-separated, like 10.0.0.0/8,fd00::/8) of the load balancers and reverse proxies in front of the marketplace: a request whose connection comes from one is counted, by the per-address limits (anonymous catalog reads, sign-in and sign-up), under the rightmost X-Forwarded-For address that is not in them (what a client writes further left is never believed); empty = X-Forwarded-For is ignored and the connection's peer is the client. IPv6 clients are counted per /64", "", func(c *Config, v string) error {
			p, err := contracts.ParseTrustedProxies(v)
			if err != nil {
				return err
			}
			c.TrustedProxies = p
			return nil
		}},
		{"signup", "how sign-ups are answered: open (the organisation is created at once and the answer holds its first API key: 201), confirm (the answer is the same 202 whether the e-mail is new or already has an account, and a mail follows: to a new address a link that works once, within 24 hours, to finish the sign-up; to a registered one a note that it has an account), or auto: confirm when --smtp-url is set, open otherwise. Without --smtp-url, confirm mode writes its mails into the data dir's mailbox/ directory (development)", "auto", func(c *Config, v string) error {
			switch v {
			case "auto", "open", "confirm":
				c.Signup = v
				return nil
			}
			return errors.New("must be auto, open or confirm")
		}},
		{"smtp-url", "the mail server the confirm sign-up mode sends through: smtp://user:password@host:port (STARTTLS when the server offers it; the password is sent only over TLS or to localhost) or smtps://user:password@host:465 (TLS from the start); empty = mails are written to the data dir's mailbox/ directory", "", str(func(c *Config) *string { return &c.SMTPURL })},
		{"mail-from", "the From of the marketplace's mails, like AgentMarket <no-reply@market.example.com>; required with --smtp-url", "", str(func(c *Config) *string { return &c.MailFrom })},
		{"public-url", "base URL users reach the marketplace at (the links in its mails), like https://market.example.com; derived from the address when empty", "", func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return errors.New("must be an absolute http(s) URL without query, like https://market.example.com")
			}
			c.PublicURL = strings.TrimRight(v, "/")
			return nil
		}},
		meterAddr,
		metricsAddr,
		listingCost,
	}, common...)
}

func addr(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return errors.New("must be host:port, like 127.0.0.1:8080")
		}
		*f(c) = v
		return nil
	}
}

func boolean(f func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("must be true or false")
		}
		*f(c) = b
		return nil
	}
}

// Load reads the settings of bin from args and getenv; flags win over the
// environment, which wins over defaults. Every bad setting is reported,
// each by its flag and variable name; f checks the adapters' formats.
func Load(bin string, f Formats, args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	settings := Settings(bin)
	fs := flag.NewFlagSet(bin, flag.ContinueOnError)
	fs.SetOutput(out)
	values := map[string]*string{}
	for _, s := range settings {
		v := s.Default
		if e := getenv(s.Env()); e != "" {
			v = e
		}
		values[s.Name] = fs.String(s.Name, v, s.Usage+" ($"+s.Env()+")")
	}
	c := &Config{}
	if bin == "marketplace" {
		fs.BoolVar(&c.Demo, "demo", false, "also start built-in demo agents (on 127.0.0.1, which this allows) and a demo buyer, and print what to try")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (settings are flags like --addr, or AGENTMARKET_* variables)", fs.Arg(0))
	}
	// Every setting is read and every rule checked, so that one run lists
	// all that is wrong. (The rules between settings read only settings
	// that any value fits, so they never judge a value that failed above.)
	var errs []string
	for _, s := range settings {
		if err := s.set(c, *values[s.Name]); err != nil {
			got := fmt.Sprintf("%q", *values[s.Name])
			if secretSettings[s.Name] {
				got = "a value that is not shown"
			}
			errs = append(errs, fmt.Sprintf("--%s / %s: %v (got %s)", s.Name, s.Env(), err, got))
		}
	}
	errs = append(errs, c.validate(bin, f)...)
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("invalid configuration:\n  %s", strings.Join(errs, "\n  "))
	}
	return c, nil
}

// Embedded reports whether the relational store is the embedded SQLite.
func (c *Config) Embedded() bool { return c.DatabaseURL == "" }

// DatabaseWhere names the database c uses, without credentials.
func (c *Config) DatabaseWhere() string {
	if c.Embedded() {
		return "SQLite at " + filepath.Join(c.DataDir, "agentmarket.db")
	}
	u, err := url.Parse(c.DatabaseURL)
	if err != nil {
		return "PostgreSQL"
	}
	return "PostgreSQL at " + u.Host + u.Path
}

// UsageWhere names the usage store c uses, without credentials;
// describeClickHouse names a ClickHouse DSN (the adapter's Describe).
func (c *Config) UsageWhere(describeClickHouse func(dsn string) string) string {
	if c.ClickHouseURL == "" {
		return "embedded (SQLite) at " + filepath.Join(c.DataDir, "usage.db")
	}
	if c.ClickHouseCluster != "" {
		return describeClickHouse(c.ClickHouseURL) + " (cluster " + c.ClickHouseCluster + ")"
	}
	return describeClickHouse(c.ClickHouseURL)
}

// StripeWhere names the Stripe API c uses.
func (c *Config) StripeWhere() string {
	if c.StripeAPIBase == "" {
		return "Stripe at api.stripe.com"
	}
	u, err := url.Parse(c.StripeAPIBase)
	if err != nil {
		return "Stripe"
	}
	return "Stripe at " + strings.TrimSuffix(u.Host+u.Path, "/")
}

// ProxyDuration is a duration setting in the meter's form: 0 (off) in the
// settings is negative there, where 0 takes the default
// (meter-idempotency-window, meter-stall-after).
func ProxyDuration(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// AutoApproveOn resolves the auto-approve setting.
func (c *Config) AutoApproveOn() bool {
	return c.AutoApprove == "true" || (c.AutoApprove == "auto" && c.Embedded())
}

// AllowCIDRs parses the SSRF allowlist (already validated). With --demo
// it also holds 127.0.0.1, where the demo agents listen: a demo is a
// try-out on one machine, and its agents must be reachable.
func (c *Config) AllowCIDRs() []netip.Prefix {
	p := append([]netip.Prefix(nil), c.allowCIDRs...)
	if c.Demo {
		p = append(p, netip.MustParsePrefix("127.0.0.1/32"))
	}
	return p
}

// DemoPortOffset is how far above --addr's port --demo's agents listen by
// default: clear of the ports after it (8081 is cmd/meter's default).
const DemoPortOffset = 100

// DemoAddrs returns where --demo's n agents listen: on 127.0.0.1 (the
// address --demo lets the SSRF guard reach), on ports that stay the same
// from one start to the next, so that a listing made from an agent's URL
// survives a restart; port 0 (free ports) only when DemoPort says so or
// the marketplace itself takes a free port.
func (c *Config) DemoAddrs(n int) ([]string, error) {
	first := c.DemoPort
	if first < 0 {
		_, p, err := net.SplitHostPort(c.Addr)
		if err == nil {
			first, err = strconv.Atoi(p)
		}
		if err != nil {
			return nil, fmt.Errorf("--demo-port / AGENTMARKET_DEMO_PORT: auto needs a numeric port in --addr (got %q); set a port", c.Addr)
		}
		if first != 0 {
			first += DemoPortOffset
		}
	}
	if first != 0 && first+n-1 > 65535 {
		return nil, fmt.Errorf("--demo-port / AGENTMARKET_DEMO_PORT: the %d demo agents need ports %d to %d, past 65535; set a lower port", n, first, first+n-1)
	}
	addrs := make([]string, n)
	for i := range addrs {
		p := 0
		if first != 0 {
			p = first + i
		}
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

func (c *Config) validate(bin string, f Formats) []string {
	var errs []string
	var err error
	if c.allowCIDRs, err = f.AllowCIDRs(c.FetchAllowCIDRs); err != nil {
		errs = append(errs, fmt.Sprintf("--fetch-allow-cidrs / AGENTMARKET_FETCH_ALLOW_CIDRS: %v", err))
	}
	if c.SecretKey != "" {
		if _, err := f.SecretKey(c.SecretKey); err != nil {
			errs = append(errs, fmt.Sprintf("--secret-key / AGENTMARKET_SECRET_KEY: %v", err))
		}
	} else if !c.Embedded() {
		errs = append(errs, "--secret-key / AGENTMARKET_SECRET_KEY: required when AGENTMARKET_DATABASE_URL is set (32 random bytes in base64)")
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		errs = append(errs, "--database-url / AGENTMARKET_DATABASE_URL: must be a postgres:// URL (leave empty for embedded SQLite)")
	}
	if c.ClickHouseURL != "" {
		if !strings.HasPrefix(c.ClickHouseURL, "clickhouse://") {
			errs = append(errs, "--clickhouse-url / AGENTMARKET_CLICKHOUSE_URL: must be a clickhouse:// native DSN")
		} else if err := f.ClickHouseDSN(c.ClickHouseURL); err != nil {
			var ae *agentmarket.Error
			errors.As(err, &ae)
			errs = append(errs, "--clickhouse-url / AGENTMARKET_CLICKHOUSE_URL: "+ae.Message)
		}
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			errs = append(errs, "--redis-url / AGENTMARKET_REDIS_URL: must be a redis:// URL like redis://127.0.0.1:6379/0")
		} else if c.MeterInMemory() {
			errs = append(errs, "--redis-url / AGENTMARKET_REDIS_URL: shares a meter's state with other meters, but this meter keeps it in memory as the only one (AGENTMARKET_METER_STATE=memory, or auto on the embedded database); use a database URL for several meters")
		}
	}
	if bin == "meter" && c.Embedded() {
		errs = append(errs, "--database-url / AGENTMARKET_DATABASE_URL: the standalone meter needs the shared PostgreSQL (the embedded default runs the meter inside cmd/marketplace)")
	}
	if c.OTel.Protocol == "grpc" && strings.Contains(c.OTel.Endpoint, "://") {
		// gRPC has no path to send to: the exporter would drop it.
		if u, err := url.Parse(c.OTel.Endpoint); err == nil && u.Path != "" && u.Path != "/" {
			errs = append(errs, "--otel-endpoint / AGENTMARKET_OTEL_ENDPOINT: a URL path ("+u.Path+") is not used with --otel-protocol grpc: give scheme://host:port")
		}
	}
	if c.ClickHouseCluster != "" {
		if c.ClickHouseURL == "" {
			errs = append(errs, "--clickhouse-cluster / AGENTMARKET_CLICKHOUSE_CLUSTER: needs AGENTMARKET_CLICKHOUSE_URL (a node of the cluster)")
		}
		if !f.ClickHouseCluster(c.ClickHouseCluster) {
			errs = append(errs, "--clickhouse-cluster / AGENTMARKET_CLICKHOUSE_CLUSTER: must be a plain name (letters, digits, _)")
		}
	}
	if l := c.MeterLimits; l.PushKeyRetention > 0 && l.PushKeyRetention <= PushRetrySpan(l) {
		errs = append(errs, fmt.Sprintf("--push-key-retention / AGENTMARKET_PUSH_KEY_RETENTION: must be longer than a push delivery's retries may last (%s: push-max-attempts × (push-retry-max + %s per attempt)), so that every attempt's signature still verifies at the end",
			PushRetrySpan(l), PushAttemptTimeout))
	}
	if c.MetricsAddr != "" {
		listen, setting := c.Addr, "--addr / AGENTMARKET_ADDR"
		if bin == "meter" {
			listen, setting = c.MeterAddr, "--meter-addr / AGENTMARKET_METER_ADDR"
		}
		if sameListener(c.MetricsAddr, listen) {
			errs = append(errs, "--metrics-addr / AGENTMARKET_METRICS_ADDR: must differ from "+setting+" (the operator listener is a listener of its own)")
		}
	}
	if c.MetricsListingCost && c.MetricsAddr == "" {
		errs = append(errs, "--metrics-listing-cost / AGENTMARKET_METRICS_LISTING_COST: needs AGENTMARKET_METRICS_ADDR (money per listing is served on the operator listener only, never on the public one)")
	}
	if bin == "marketplace" {
		errs = append(errs, c.validateMail(f)...)
	}
	if c.StripeSecretKey != "" && c.StripeWebhookSecret == "" {
		errs = append(errs, "--stripe-webhook-secret / AGENTMARKET_STRIPE_WEBHOOK_SECRET: required with a Stripe secret key")
	}
	if c.StripeAPIBase != "" {
		if u, err := url.Parse(c.StripeAPIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, "--stripe-api-base / AGENTMARKET_STRIPE_API_BASE: must be an http(s) URL like https://api.stripe.com")
		}
	}
	return errs
}

// validateMail checks the sign-up mode's mail settings.
func (c *Config) validateMail(f Formats) []string {
	var errs []string
	if c.SMTPURL != "" && f.SMTPURL != nil {
		if err := f.SMTPURL(c.SMTPURL); err != nil {
			errs = append(errs, fmt.Sprintf("--smtp-url / AGENTMARKET_SMTP_URL: %v (got a value that is not shown)", err))
		}
	}
	if c.MailFrom != "" && f.MailFrom != nil {
		if err := f.MailFrom(c.MailFrom); err != nil {
			errs = append(errs, fmt.Sprintf("--mail-from / AGENTMARKET_MAIL_FROM: %v (got %q)", err, c.MailFrom))
		}
	}
	if c.SMTPURL != "" && c.MailFrom == "" {
		errs = append(errs, "--mail-from / AGENTMARKET_MAIL_FROM: required with AGENTMARKET_SMTP_URL (the From of the marketplace's mails, like AgentMarket <no-reply@market.example.com>)")
	}
	return errs
}

// sameListener reports whether two host:port settings name the same
// listener (port 0 picks a free port each time: never the same).
func sameListener(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	return err1 == nil && err2 == nil && ap == bp && ap != "0" && (ah == bh || ah == "" || bh == "" || ah == "0.0.0.0" || bh == "0.0.0.0")
}

// PushAttemptTimeout is how long one attempt of a push delivery may take
// (a2aproxy.Push's default Timeout).
const PushAttemptTimeout = 10 * time.Second

// PushRetrySpan is the longest a push delivery's attempts may go on: each
// attempt, and the longest wait before each.
func PushRetrySpan(l MeterLimits) time.Duration {
	return time.Duration(l.PushMaxAttempts) * (l.PushRetryMax + PushAttemptTimeout)
}

// parseShare reads a share of a limit: a fraction "1/N" or a decimal
// number, more than 0 and at most 1.
func parseShare(v string) (float64, error) {
	bad := errors.New("must be a share more than 0 and at most 1: 1/N for N meters, or a decimal like 0.5")
	var f float64
	if num, den, ok := strings.Cut(strings.TrimSpace(v), "/"); ok {
		n, err1 := strconv.Atoi(strings.TrimSpace(num))
		d, err2 := strconv.Atoi(strings.TrimSpace(den))
		if err1 != nil || err2 != nil || d <= 0 {
			return 0, bad
		}
		f = float64(n) / float64(d)
	} else {
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return 0, bad
		}
	}
	if !(f > 0 && f <= 1) {
		return 0, bad
	}
	return f, nil
}
