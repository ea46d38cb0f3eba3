package config_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

// TestHelmChartSettings keeps the Helm chart's environment right, like
// TestComposeFile keeps docker-compose.yml's: every variable a container
// of `helm template` gets is a setting of the binary it runs, and with the
// values a try-out gives (the Secret's values read in) each binary's own
// configuration checks pass in production mode, /metrics on the operator
// listener. (scripts/chartcheck
// checks the manifests against the Kubernetes API types.)
func TestHelmChartSettings(t *testing.T) {
	bin := os.Getenv("AGENTMARKET_TEST_HELM")
	if bin == "" {
		if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("AGENTMARKET_TEST_HELM is not set: run the tests through scripts/test.sh with helm in AGENTMARKET_TEST_SERVICES")
		}
		t.Skip("AGENTMARKET_TEST_HELM not set: chart checks skipped (scripts/test.sh sets it)")
	}
	home := t.TempDir()
	cmd := exec.Command(bin, "template", "rel", "../../../docs/deploy/helm/agentmarket", "--kube-version", "1.31.0",
		"--values", "../../../scripts/chartcheck/testdata/minimal.yaml", "--set", "secrets.operatorKey=amk_operator_key_for_the_test_0001")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "c"), "HELM_CONFIG_HOME="+filepath.Join(home, "f"), "HELM_DATA_HOME="+filepath.Join(home, "d"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	type envVar struct {
		Name      string
		Value     string
		ValueFrom struct {
			SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	type manifest struct {
		Kind       string
		StringData map[string]string `yaml:"stringData"`
		Spec       struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Command []string
						Env     []envVar
					}
				}
			}
		}
	}
	secret := map[string]string{}
	var workloads []manifest
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		switch m.Kind {
		case "Secret":
			secret = m.StringData
		case "Deployment", "StatefulSet":
			workloads = append(workloads, m)
		}
	}
	if len(workloads) != 2 {
		t.Fatalf("%d workloads rendered, want the marketplace's and the meters'", len(workloads))
	}
	for _, w := range workloads {
		c := w.Spec.Template.Spec.Containers[0]
		binary := c.Command[0]
		known := map[string]bool{}
		for _, s := range config.Settings(binary) {
			known[s.Env()] = true
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if !known[e.Name] {
				t.Errorf("%s: %s is not a setting of the %s binary", w.Kind, e.Name, binary)
			}
			env[e.Name] = e.Value
			if ref := e.ValueFrom.SecretKeyRef; ref.Key != "" {
				env[e.Name] = secret[ref.Key]
			}
		}
		cfg, err := config.Load(binary, serve.ConfigFormats(), nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Errorf("%s: the chart's environment fails the %s binary's checks: %v", w.Kind, binary, err)
			continue
		}
		if cfg.Embedded() || cfg.ClickHouseURL == "" || cfg.DataDir != "/data" || cfg.PublicMeterURL != "https://meter.example.com" ||
			cfg.MetricsAddr != "0.0.0.0:9090" || cfg.MetricsListingCost {
			t.Errorf("%s: not production's shape: %+v", binary, cfg)
		}
		if binary == "marketplace" && (cfg.EmbeddedMeter || cfg.AutoApproveOn() || cfg.OperatorKey == "") {
			t.Errorf("marketplace: embedded meter %v, auto-approve %v, operator key %q", cfg.EmbeddedMeter, cfg.AutoApproveOn(), cfg.OperatorKey)
		}
		// Sign-up does not tell which e-mails have accounts: confirmed by
		// mail through the Secret's server, with links to the public URL.
		if binary == "marketplace" && (cfg.SignupMode() != "confirm" || cfg.SMTPURL == "" || cfg.MailFrom == "" || cfg.PublicURL != "https://market.example.com") {
			t.Errorf("marketplace: sign-up %q, SMTP set %v, mail from %q, public URL %q: want confirm mode through an SMTP server", cfg.SignupMode(),
				cfg.SMTPURL != "", cfg.MailFrom, cfg.PublicURL)
		}
	}
}
