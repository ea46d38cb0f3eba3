package config_test

import (
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

// TestComposeFile keeps docker-compose.yml correct by construction (no
// Docker engine runs here): every service the binaries need is there, and
// each binary's environment passes the binary's own configuration checks
// in production mode.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			DependsOn   map[string]any    `yaml:"depends_on"`
			Healthcheck map[string]any    `yaml:"healthcheck"`
			Ports       []string          `yaml:"ports"`
			Expose      []string          `yaml:"expose"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "clickhouse", "stripe-mock", "marketplace", "meter"} {
		if _, ok := doc.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
	if img := doc.Services["stripe-mock"].Image; !strings.HasSuffix(img, ":v0.162.0") {
		t.Errorf("stripe-mock image %q: must be pinned to v0.162.0", img)
	}
	// Each service's version is one the tests run, or docs/operations.md says it is not.
	ops, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, versions, _ := strings.Cut(string(ops), "\n## Versions\n")
	versions, _, _ = strings.Cut(versions, "\n## ")
	for _, name := range []string{"postgres", "clickhouse", "stripe-mock"} {
		if img := doc.Services[name].Image; !strings.Contains(versions, "`"+img+"`") {
			t.Errorf("service %s runs %s, which the versions table of docs/operations.md does not name", name, img)
		}
	}
	for _, name := range []string{"postgres", "clickhouse", "stripe-mock"} {
		if doc.Services[name].Healthcheck == nil {
			t.Errorf("service %s has no healthcheck (the binaries wait for service_healthy)", name)
		}
	}
	for _, bin := range []string{"marketplace", "meter"} {
		svc := doc.Services[bin]
		if len(svc.Command) == 0 || svc.Command[0] != bin {
			t.Errorf("%s: command %v does not start the %s binary", bin, svc.Command, bin)
		}
		for _, dep := range []string{"postgres", "clickhouse"} {
			if _, ok := svc.DependsOn[dep]; !ok {
				t.Errorf("%s does not depend on %s", bin, dep)
			}
		}
		known := map[string]bool{}
		for _, s := range config.Settings(bin) {
			known[s.Env()] = true
		}
		for k := range svc.Environment {
			if !known[k] {
				t.Errorf("%s: %s is not a setting of the %s binary", bin, k, bin)
			}
		}
		c, err := config.Load(bin, serve.ConfigFormats(), nil, func(k string) string { return svc.Environment[k] }, io.Discard)
		if err != nil {
			t.Errorf("%s: its compose environment fails the binary's checks: %v", bin, err)
			continue
		}
		if c.Embedded() || c.ClickHouseURL == "" {
			t.Errorf("%s: compose must run on PostgreSQL and ClickHouse, got database %q clickhouse %q", bin, c.DatabaseURL, c.ClickHouseURL)
		}
		// /metrics on an operator listener, reachable on the compose
		// network and not published.
		_, port, _ := net.SplitHostPort(c.MetricsAddr)
		if port == "" || !slices.Contains(svc.Expose, port) || c.MetricsListingCost {
			t.Errorf("%s: metrics address %q (listing cost %v), exposed %v: want an operator listener on an exposed port, no cost per listing",
				bin, c.MetricsAddr, c.MetricsListingCost, svc.Expose)
		}
		for _, p := range svc.Ports {
			if port != "" && strings.HasSuffix(p, ":"+port) {
				t.Errorf("%s publishes its operator listener: %s", bin, p)
			}
		}
		if bin == "marketplace" && (c.StripeSecretKey == "" || c.StripeAPIBase == "" || c.EmbeddedMeter) {
			t.Errorf("marketplace: Stripe settings and a separate meter expected, got %+v", c)
		}
		if bin == "marketplace" && (c.SignupMode() != "confirm" || c.PublicURL != "http://localhost:8080") {
			t.Errorf("marketplace: sign-up %q, public URL %q: want sign-ups confirmed by mail, with links to the published port", c.SignupMode(), c.PublicURL)
		}
	}
}
