package config_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := config.Load("marketplace", serve.ConfigFormats(), nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.MeterAddr != "127.0.0.1:8081" || c.DataDir != "./agentmarket-data" || !c.Embedded() ||
		!c.AutoApproveOn() || c.CardRefreshSeconds != 3600 || c.HealthCheckInterval != 30*time.Second || !c.EmbeddedMeter || c.AuditRetention != 0 ||
		c.AuditCheckpointEvery != time.Hour {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestFlagWinsOverEnv(t *testing.T) {
	c, err := config.Load("marketplace", serve.ConfigFormats(), []string{"--addr", "127.0.0.1:9999"}, env(map[string]string{"AGENTMARKET_ADDR": "127.0.0.1:7777", "AGENTMARKET_DATA_DIR": "/tmp/x"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9999" || c.DataDir != "/tmp/x" {
		t.Fatalf("addr %s data %s", c.Addr, c.DataDir)
	}
}

// TestErrorsNameTheSetting: every bad setting is reported by flag and
// variable, all at once.
func TestErrorsNameTheSetting(t *testing.T) {
	cases := []struct {
		bin  string
		env  map[string]string
		want []string
	}{
		{"marketplace", map[string]string{"AGENTMARKET_ADDR": "nope", "AGENTMARKET_CARD_REFRESH_SECONDS": "30"},
			[]string{"AGENTMARKET_ADDR", "AGENTMARKET_CARD_REFRESH_SECONDS"}},
		{"marketplace", map[string]string{"AGENTMARKET_DATABASE_URL": "postgres://x/y"}, []string{"AGENTMARKET_SECRET_KEY: required"}},
		{"marketplace", map[string]string{"AGENTMARKET_SECRET_KEY": "short"}, []string{"AGENTMARKET_SECRET_KEY"}},
		{"marketplace", map[string]string{"AGENTMARKET_FETCH_ALLOW_CIDRS": "10.0.0.0/33"}, []string{"AGENTMARKET_FETCH_ALLOW_CIDRS"}},
		{"marketplace", map[string]string{"AGENTMARKET_TRUSTED_PROXIES": "10.0.0.0/8, lb.internal"}, []string{"AGENTMARKET_TRUSTED_PROXIES", "--trusted-proxies", `"lb.internal"`}},
		{"marketplace", map[string]string{"AGENTMARKET_DATABASE_URL": "mysql://x", "AGENTMARKET_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, []string{"AGENTMARKET_DATABASE_URL"}},
		{"marketplace", map[string]string{"AGENTMARKET_PUBLIC_METER_URL": "ftp://x"}, []string{"AGENTMARKET_PUBLIC_METER_URL"}},
		{"marketplace", map[string]string{"AGENTMARKET_STRIPE_SECRET_KEY": "sk_test_1"}, []string{"AGENTMARKET_STRIPE_WEBHOOK_SECRET"}},
		{"meter", map[string]string{}, []string{"AGENTMARKET_DATABASE_URL"}},
		{"meter", map[string]string{"AGENTMARKET_METER_ADDR": "x"}, []string{"AGENTMARKET_METER_ADDR"}},
		{"marketplace", map[string]string{"AGENTMARKET_DEMO_PORT": "65536"}, []string{"AGENTMARKET_DEMO_PORT: must be auto, 0 or a port"}},
		{"marketplace", map[string]string{"AGENTMARKET_HEALTH_CHECK_INTERVAL": "10ms"}, []string{"AGENTMARKET_HEALTH_CHECK_INTERVAL: must be 0 (never) or a duration of at least 1s"}},
		{"marketplace", map[string]string{"AGENTMARKET_HEALTH_CHECK_INTERVAL": "often"}, []string{"AGENTMARKET_HEALTH_CHECK_INTERVAL", "--health-check-interval"}},
		{"marketplace", map[string]string{"AGENTMARKET_DEMO_PORT": "next"}, []string{"AGENTMARKET_DEMO_PORT: must be auto, 0 or a port"}},
		// A bad value and a broken rule between settings, in one run.
		{"marketplace", map[string]string{"AGENTMARKET_ADDR": "nope", "AGENTMARKET_DATABASE_URL": "postgres://x/y", "AGENTMARKET_SHUTDOWN_TIMEOUT": "1ms",
			"AGENTMARKET_CLICKHOUSE_URL": "clickhouse://127.0.0.1:9000/db?dial_timeout=soon", "AGENTMARKET_STRIPE_SECRET_KEY": "sk_test_1",
			"AGENTMARKET_STRIPE_API_BASE": "stripe-mock:12111"},
			[]string{"AGENTMARKET_ADDR", "AGENTMARKET_SECRET_KEY: required", "AGENTMARKET_SHUTDOWN_TIMEOUT", "AGENTMARKET_CLICKHOUSE_URL: the ClickHouse URL is not valid",
				"AGENTMARKET_STRIPE_WEBHOOK_SECRET", "AGENTMARKET_STRIPE_API_BASE"}},
		{"meter", map[string]string{"AGENTMARKET_DATABASE_URL": "postgres://x/y", "AGENTMARKET_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"AGENTMARKET_CLICKHOUSE_CLUSTER": "am"}, []string{"AGENTMARKET_CLICKHOUSE_CLUSTER: needs AGENTMARKET_CLICKHOUSE_URL"}},
		{"marketplace", map[string]string{"AGENTMARKET_CLICKHOUSE_URL": "clickhouse://127.0.0.1:9000/db", "AGENTMARKET_CLICKHOUSE_CLUSTER": "am; DROP"},
			[]string{"AGENTMARKET_CLICKHOUSE_CLUSTER: must be a plain name"}},
		{"meter", map[string]string{"AGENTMARKET_METER_ADDR": "x", "AGENTMARKET_LOG_LEVEL": "loud"}, []string{"AGENTMARKET_METER_ADDR", "AGENTMARKET_LOG_LEVEL", "AGENTMARKET_DATABASE_URL"}},
		{"meter", map[string]string{"AGENTMARKET_GC_PERCENT": "-5"}, []string{"AGENTMARKET_GC_PERCENT: must be a whole number from 0 to 10000", "AGENTMARKET_DATABASE_URL"}},
		{"marketplace", map[string]string{"AGENTMARKET_GC_PERCENT": "off"}, []string{"AGENTMARKET_GC_PERCENT"}},
		{"marketplace", map[string]string{"AGENTMARKET_METER_LIMIT_SHARE": "3/2"}, []string{"AGENTMARKET_METER_LIMIT_SHARE: must be a share more than 0 and at most 1"}},
		{"marketplace", map[string]string{"AGENTMARKET_METER_LIMIT_SHARE": "0"}, []string{"AGENTMARKET_METER_LIMIT_SHARE: must be a share"}},
		{"marketplace", map[string]string{"AGENTMARKET_METER_LIMIT_SHARE": "1/0"}, []string{"AGENTMARKET_METER_LIMIT_SHARE: must be a share"}},
		// A replaced signing key must outlive every attempt it may have signed.
		{"marketplace", map[string]string{"AGENTMARKET_PUSH_KEY_RETENTION": "2h", "AGENTMARKET_PUSH_MAX_ATTEMPTS": "30"},
			[]string{"AGENTMARKET_PUSH_KEY_RETENTION: must be longer than a push delivery's retries may last (2h35m0s"}},
		{"marketplace", map[string]string{"AGENTMARKET_PUSH_KEY_ROTATION": "1h"}, []string{"AGENTMARKET_PUSH_KEY_ROTATION"}},
		// The audit log is kept forever or at least an hour, and signed no
		// more often than every second.
		{"marketplace", map[string]string{"AGENTMARKET_AUDIT_RETENTION": "30m", "AGENTMARKET_AUDIT_CHECKPOINT_EVERY": "10ms"},
			[]string{"AGENTMARKET_AUDIT_RETENTION: must be 0 (keep forever) or a duration of at least 1h", "AGENTMARKET_AUDIT_CHECKPOINT_EVERY"}},
		{"marketplace", map[string]string{"AGENTMARKET_AUDIT_RETENTION": "-1h"}, []string{"AGENTMARKET_AUDIT_RETENTION"}},
		// Money per listing on the public listener: refused.
		{"marketplace", map[string]string{"AGENTMARKET_METRICS_LISTING_COST": "true"}, []string{"AGENTMARKET_METRICS_LISTING_COST: needs AGENTMARKET_METRICS_ADDR"}},
		{"marketplace", map[string]string{"AGENTMARKET_METRICS_LISTING_COST": "yes"}, []string{"AGENTMARKET_METRICS_LISTING_COST: must be true or false"}},
		// The operator listener is a listener of its own.
		{"marketplace", map[string]string{"AGENTMARKET_METRICS_ADDR": "9090"}, []string{"AGENTMARKET_METRICS_ADDR: must be host:port"}},
		{"marketplace", map[string]string{"AGENTMARKET_ADDR": "0.0.0.0:8080", "AGENTMARKET_METRICS_ADDR": "127.0.0.1:8080"},
			[]string{"AGENTMARKET_METRICS_ADDR: must differ from --addr / AGENTMARKET_ADDR"}},
		{"meter", map[string]string{"AGENTMARKET_DATABASE_URL": "postgres://x/y", "AGENTMARKET_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"AGENTMARKET_METER_ADDR": "0.0.0.0:8081", "AGENTMARKET_METRICS_ADDR": "0.0.0.0:8081"},
			[]string{"AGENTMARKET_METRICS_ADDR: must differ from --meter-addr / AGENTMARKET_METER_ADDR"}},
		// OpenTelemetry's export: refused at start rather than spans lost.
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_SAMPLE_RATIO": "NaN"}, []string{"AGENTMARKET_OTEL_SAMPLE_RATIO: must be a number from 0 to 1"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_SAMPLE_RATIO": "+Inf"}, []string{"AGENTMARKET_OTEL_SAMPLE_RATIO"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_HEADERS": "x-api-key=abc%0D%0AX-Evil: 1"}, []string{"AGENTMARKET_OTEL_HEADERS", "line break"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_HEADERS": "x-api-key=abc\nx"}, []string{"AGENTMARKET_OTEL_HEADERS", "line break"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_HEADERS": "bad name=1"}, []string{"AGENTMARKET_OTEL_HEADERS", "header name"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_HEADERS": "x:y=1"}, []string{"AGENTMARKET_OTEL_HEADERS", "header name"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": "collector:notaport"}, []string{"AGENTMARKET_OTEL_ENDPOINT", "port"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": "collector:0"}, []string{"AGENTMARKET_OTEL_ENDPOINT", "port"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": "http://collector:99999"}, []string{"AGENTMARKET_OTEL_ENDPOINT", "port"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": ":4318"}, []string{"AGENTMARKET_OTEL_ENDPOINT"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": "http://user:pw@collector:4318"}, []string{"AGENTMARKET_OTEL_ENDPOINT", "credentials", "--otel-headers"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": "http://collector:4318/v1/traces?x=1"}, []string{"AGENTMARKET_OTEL_ENDPOINT", "query"}},
		{"marketplace", map[string]string{"AGENTMARKET_OTEL_ENDPOINT": "http://collector:4317/otlp", "AGENTMARKET_OTEL_PROTOCOL": "grpc"},
			[]string{"AGENTMARKET_OTEL_ENDPOINT: a URL path (/otlp) is not used with --otel-protocol grpc"}},
		// The sign-up mode and its mail server.
		{"marketplace", map[string]string{"AGENTMARKET_SIGNUP": "closed"}, []string{"AGENTMARKET_SIGNUP: must be auto, open or confirm"}},
		{"marketplace", map[string]string{"AGENTMARKET_SMTP_URL": "http://user:hunter2@mail.example:25", "AGENTMARKET_MAIL_FROM": "a@b.example"},
			[]string{"AGENTMARKET_SMTP_URL: must be smtp://"}},
		{"marketplace", map[string]string{"AGENTMARKET_SMTP_URL": "smtp://mail.example:99999", "AGENTMARKET_MAIL_FROM": "a@b.example"}, []string{"AGENTMARKET_SMTP_URL", "port"}},
		{"marketplace", map[string]string{"AGENTMARKET_SMTP_URL": "smtp://mail.example:587"}, []string{"AGENTMARKET_MAIL_FROM: required with AGENTMARKET_SMTP_URL"}},
		{"marketplace", map[string]string{"AGENTMARKET_MAIL_FROM": "no address"}, []string{"AGENTMARKET_MAIL_FROM: must be an e-mail address"}},
		{"marketplace", map[string]string{"AGENTMARKET_PUBLIC_URL": "market.example.com"}, []string{"AGENTMARKET_PUBLIC_URL: must be an absolute http(s) URL"}},
	}
	for _, tc := range cases {
		_, err := config.Load(tc.bin, serve.ConfigFormats(), nil, env(tc.env), io.Discard)
		if err == nil {
			t.Errorf("%s %v: no error", tc.bin, tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: error %q does not name %s", tc.bin, tc.env, err, w)
			}
		}
	}
}

// TestMetricsAddr: no operator listener and no cost per listing by
// default; an operator listener on any address but the process's own
// listener (port 0 picks a port of its own), and the cost per listing
// with it.
func TestMetricsAddr(t *testing.T) {
	for _, tc := range []struct {
		bin  string
		env  map[string]string
		want string
	}{
		{"marketplace", nil, ""},
		{"marketplace", map[string]string{"AGENTMARKET_METRICS_ADDR": "0.0.0.0:9090"}, "0.0.0.0:9090"},
		{"marketplace", map[string]string{"AGENTMARKET_ADDR": "127.0.0.1:0", "AGENTMARKET_METRICS_ADDR": "127.0.0.1:0"}, "127.0.0.1:0"},
		// The marketplace does not listen on the meter's address.
		{"marketplace", map[string]string{"AGENTMARKET_METRICS_ADDR": "127.0.0.1:8081"}, "127.0.0.1:8081"},
		{"meter", map[string]string{"AGENTMARKET_DATABASE_URL": "postgres://x/y", "AGENTMARKET_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"AGENTMARKET_METRICS_ADDR": "0.0.0.0:9090"}, "0.0.0.0:9090"},
	} {
		c, err := config.Load(tc.bin, serve.ConfigFormats(), nil, env(tc.env), io.Discard)
		if err != nil {
			t.Errorf("%s %v: %v", tc.bin, tc.env, err)
			continue
		}
		if c.MetricsAddr != tc.want || c.MetricsListingCost {
			t.Errorf("%s %v: MetricsAddr = %q, listing cost %v; want %q, false", tc.bin, tc.env, c.MetricsAddr, c.MetricsListingCost, tc.want)
		}
	}
	c, err := config.Load("meter", serve.ConfigFormats(), nil, env(map[string]string{"AGENTMARKET_DATABASE_URL": "postgres://x/y",
		"AGENTMARKET_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "AGENTMARKET_METRICS_ADDR": "0.0.0.0:9090",
		"AGENTMARKET_METRICS_LISTING_COST": "true"}), io.Discard)
	if err != nil || !c.MetricsListingCost {
		t.Errorf("listing cost on the operator listener: %v, %v", c, err)
	}
}

func TestUnknownArgument(t *testing.T) {
	if _, err := config.Load("marketplace", serve.ConfigFormats(), []string{"serve"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "serve") {
		t.Fatalf("err = %v", err)
	}
}

// TestAllowCIDRs: the SSRF allowlist is the setting's, plus 127.0.0.1 for
// the demo's agents with --demo, and nothing else.
func TestAllowCIDRs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "[]"},
		{nil, map[string]string{"AGENTMARKET_FETCH_ALLOW_CIDRS": "10.1.2.3/8, fc00::/7"}, "[10.0.0.0/8 fc00::/7]"},
		{[]string{"--demo"}, nil, "[127.0.0.1/32]"},
		{[]string{"--demo"}, map[string]string{"AGENTMARKET_FETCH_ALLOW_CIDRS": "192.0.2.0/24"}, "[192.0.2.0/24 127.0.0.1/32]"},
	} {
		c, err := config.Load("marketplace", serve.ConfigFormats(), tc.args, env(tc.env), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(c.AllowCIDRs()); got != tc.want {
			t.Errorf("%v %v: AllowCIDRs = %s, want %s", tc.args, tc.env, got, tc.want)
		}
	}
}

// TestDemoAddrs: --demo's agents take the same ports at every start (the
// ones after the marketplace's, or the setting's), free ones only when
// asked or when the marketplace itself takes a free port.
func TestDemoAddrs(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // or the error's start
	}{
		{nil, "[127.0.0.1:8180 127.0.0.1:8181 127.0.0.1:8182]"},
		{map[string]string{"AGENTMARKET_ADDR": "0.0.0.0:9000"}, "[127.0.0.1:9100 127.0.0.1:9101 127.0.0.1:9102]"},
		{map[string]string{"AGENTMARKET_ADDR": "127.0.0.1:0"}, "[127.0.0.1:0 127.0.0.1:0 127.0.0.1:0]"},
		{map[string]string{"AGENTMARKET_DEMO_PORT": "7001"}, "[127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003]"},
		{map[string]string{"AGENTMARKET_ADDR": "127.0.0.1:0", "AGENTMARKET_DEMO_PORT": "7001"}, "[127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003]"},
		{map[string]string{"AGENTMARKET_DEMO_PORT": "0"}, "[127.0.0.1:0 127.0.0.1:0 127.0.0.1:0]"},
		{map[string]string{"AGENTMARKET_DEMO_PORT": "65534"}, "--demo-port / AGENTMARKET_DEMO_PORT: the 3 demo agents need ports 65534 to 65536"},
		{map[string]string{"AGENTMARKET_ADDR": "127.0.0.1:65435"}, "--demo-port / AGENTMARKET_DEMO_PORT: the 3 demo agents need ports 65535 to 65537"},
		{map[string]string{"AGENTMARKET_ADDR": "localhost:http"}, "--demo-port / AGENTMARKET_DEMO_PORT: auto needs a numeric port in --addr"},
	} {
		c, err := config.Load("marketplace", serve.ConfigFormats(), []string{"--demo"}, env(tc.env), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		addrs, err := c.DemoAddrs(3)
		got := fmt.Sprint(addrs)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: DemoAddrs(3) = %s, want %s", tc.env, got, tc.want)
		}
	}
}

// TestSecretsAreNotEchoed: a bad secret is named, its value never shown.
func TestSecretsAreNotEchoed(t *testing.T) {
	_, err := config.Load("marketplace", serve.ConfigFormats(), nil, env(map[string]string{"AGENTMARKET_OPERATOR_KEY": "hunter2-not-a-key",
		"AGENTMARKET_CLICKHOUSE_URL": "clickhouse://u:hunter3@127.0.0.1:9000/db?dial_timeout=soon"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "AGENTMARKET_OPERATOR_KEY") || !strings.Contains(err.Error(), "AGENTMARKET_CLICKHOUSE_URL") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "hunter") {
		t.Fatalf("the error shows a secret: %v", err)
	}
}

// TestOTelSettingsAccepted: the OTLP settings the docs show load.
func TestOTelSettingsAccepted(t *testing.T) {
	for _, e := range []map[string]string{
		{"AGENTMARKET_OTEL_ENDPOINT": "http://127.0.0.1:4318", "AGENTMARKET_OTEL_SAMPLE_RATIO": "0.1"},
		{"AGENTMARKET_OTEL_ENDPOINT": "https://api.honeycomb.io", "AGENTMARKET_OTEL_HEADERS": "x-honeycomb-team=KEY,Authorization=Basic%20dTpw"},
		{"AGENTMARKET_OTEL_ENDPOINT": "http://collector:4318/custom/traces"},
		{"AGENTMARKET_OTEL_ENDPOINT": "collector:4317", "AGENTMARKET_OTEL_PROTOCOL": "grpc", "AGENTMARKET_OTEL_INSECURE": "true"},
		{"AGENTMARKET_OTEL_ENDPOINT": "http://collector:4317/", "AGENTMARKET_OTEL_PROTOCOL": "grpc", "AGENTMARKET_OTEL_SAMPLE_RATIO": "0"},
		{"AGENTMARKET_OTEL_ENDPOINT": "http://[::1]:4318"},
	} {
		if _, err := config.Load("marketplace", serve.ConfigFormats(), nil, env(e), io.Discard); err != nil {
			t.Errorf("%v: %v", e, err)
		}
	}
}

// TestLimitShare: a meter's share of the limits it holds on its own is
// read as 1/N or as a decimal; 1 by default.
func TestLimitShare(t *testing.T) {
	for v, want := range map[string]float64{"": 1, "1/3": 1.0 / 3, " 1 / 2 ": 0.5, "0.25": 0.25, "1": 1} {
		env := map[string]string{}
		if v != "" {
			env["AGENTMARKET_METER_LIMIT_SHARE"] = v
		}
		cfg, err := config.Load("marketplace", serve.ConfigFormats(), nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if cfg.MeterLimits.LimitShare != want {
			t.Errorf("%q: share %v, want %v", v, cfg.MeterLimits.LimitShare, want)
		}
	}
}

// TestSignupMode: sign-ups stay open (201 with the first key, the API
// contract) unless a mail server is configured or the confirm mode is
// asked for; a bad SMTP URL's password is never echoed.
func TestSignupMode(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "open"},
		{map[string]string{"AGENTMARKET_SMTP_URL": "smtp://u:p@mail.example:587", "AGENTMARKET_MAIL_FROM": "AgentMarket <no-reply@market.example>"}, "confirm"},
		{map[string]string{"AGENTMARKET_SMTP_URL": "smtps://mail.example", "AGENTMARKET_MAIL_FROM": "no-reply@market.example", "AGENTMARKET_SIGNUP": "open"}, "open"},
		{map[string]string{"AGENTMARKET_SIGNUP": "confirm"}, "confirm"},
	} {
		c, err := config.Load("marketplace", serve.ConfigFormats(), nil, env(tc.env), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got := c.SignupMode(); got != tc.want {
			t.Errorf("%v: sign-up mode %q, want %q", tc.env, got, tc.want)
		}
	}
	_, err := config.Load("marketplace", serve.ConfigFormats(), nil, env(map[string]string{"AGENTMARKET_SMTP_URL": "smtp://u:hunter2@mail.example:port"}), io.Discard)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad SMTP URL: %v (the password must not be shown)", err)
	}
}
