package chartcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const chart = "../../docs/deploy/helm/agentmarket"

// kubeVersion is the Kubernetes version the chart is rendered for in the
// checks of the manifests (TestNewcomersTemplate renders without one).
const kubeVersion = "1.31.0"

// helm returns the helm binary scripts/test.sh installed. Without it the
// test skips, unless AGENTMARKET_TEST_REQUIRE_SERVICES=1 makes it fail.
func helm(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AGENTMARKET_TEST_HELM")
	if bin == "" {
		if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("AGENTMARKET_TEST_HELM is not set: run the tests through scripts/test.sh with helm in AGENTMARKET_TEST_SERVICES")
		}
		t.Skip("AGENTMARKET_TEST_HELM not set: chart checks skipped (scripts/test.sh sets it)")
	}
	return bin
}

// runHelm runs helm with args, isolated from the user's helm config.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// manifests is what helm template rendered, each decoded into its API type.
type manifests struct {
	Deployments     []appsv1.Deployment
	StatefulSets    []appsv1.StatefulSet
	Services        []corev1.Service
	Secrets         []corev1.Secret
	PDBs            []policyv1.PodDisruptionBudget
	ServiceMonitors []monitoringv1.ServiceMonitor
}

// render runs helm template with the values files and decodes every
// manifest strictly: a field the API type does not have fails the test.
func render(t *testing.T, values ...string) manifests {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "am", "--kube-version", kubeVersion}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", values, err, out)
	}
	var m manifests
	for _, doc := range strings.Split(out, "\n---\n") {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("a manifest is not YAML: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // only comments
		}
		var into any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			into = add(&m.Deployments)
		case "apps/v1 StatefulSet":
			into = add(&m.StatefulSets)
		case "v1 Service":
			into = add(&m.Services)
		case "v1 Secret":
			into = add(&m.Secrets)
		case "policy/v1 PodDisruptionBudget":
			into = add(&m.PDBs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			into = add(&m.ServiceMonitors)
		default:
			t.Fatalf("the chart renders a %s %s, which this check does not know: add its type", head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s does not decode strictly into its API type: %v\n%s", head.Kind, err, doc)
		}
	}
	return m
}

// add appends a zero T to *list and returns it, to decode into.
func add[T any](list *[]T) *T {
	*list = append(*list, *new(T))
	return &(*list)[len(*list)-1]
}

// TestLint: helm lint --strict passes with a try-out's values and with
// production's.
func TestLint(t *testing.T) {
	for _, v := range []string{"testdata/minimal.yaml", "testdata/full.yaml"} {
		if out, err := runHelm(t, "lint", "--strict", "--kube-version", kubeVersion, chart, "--values", v); err != nil {
			t.Errorf("helm lint --strict --values %s: %v\n%s", v, err, out)
		}
	}
}

// TestNewcomersTemplate: helm template renders the chart as a newcomer
// runs it, with a helm built by go install and no --kube-version (that
// helm says Kubernetes 1.20), and with the README's values.
func TestNewcomersTemplate(t *testing.T) {
	out, err := runHelm(t, "template", "agentmarket", chart, "--values", "testdata/minimal.yaml")
	if err != nil {
		t.Fatalf("helm template without --kube-version: %v\n%s", err, out)
	}
	if !strings.Contains(out, "kind: StatefulSet") || !strings.Contains(out, "kind: Deployment") {
		t.Errorf("helm template rendered no meters or marketplace:\n%s", out)
	}
}

// TestRendered: the manifests are valid API objects and hold the chart's
// promises: the marketplace as a Deployment without its meter, meters as
// a StatefulSet with a volume each for the spool, probes on /readyz, a
// PodDisruptionBudget and Services that select the right pods, settings
// from the Secret, /metrics on an operator listener of its own with
// ClusterIP Services apart from the public ones, a ServiceMonitor on
// those when asked for.
func TestRendered(t *testing.T) {
	for _, tc := range []struct {
		values     string
		secret     string
		monitor    bool
		meters     int32
		grace      int64
		shutdown   string
		spool      string
		storage    string
		clusterEnv string
		metrics    int32
		cost       string
	}{
		{"testdata/minimal.yaml", "rel-agentmarket", false, 2, 30, "20s", "10Gi", "", "", 9090, "false"},
		{"testdata/full.yaml", "agentmarket-prod", true, 4, 40, "30s", "50Gi", "fast-ssd", "agentmarket_prod", 9100, "true"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			m := render(t, tc.values)
			if len(m.Deployments) != 1 || len(m.StatefulSets) != 1 || len(m.PDBs) != 1 || len(m.Services) != 5 {
				t.Fatalf("rendered %d Deployments, %d StatefulSets, %d PDBs, %d Services; want 1, 1, 1, 5",
					len(m.Deployments), len(m.StatefulSets), len(m.PDBs), len(m.Services))
			}
			if tc.secret == "rel-agentmarket" && (len(m.Secrets) != 1 || m.Secrets[0].Name != tc.secret) {
				t.Errorf("the chart's own Secret: %+v", m.Secrets)
			}
			if tc.secret != "rel-agentmarket" && len(m.Secrets) != 0 {
				t.Errorf("with existingSecret the chart renders a Secret anyway")
			}
			market, meter := m.Deployments[0], m.StatefulSets[0]
			checkPod(t, "marketplace", market.Spec.Template.Spec, "marketplace", tc.secret, tc.grace, tc.shutdown, tc.clusterEnv, tc.metrics, tc.cost)
			checkPod(t, "meter", meter.Spec.Template.Spec, "meter", tc.secret, tc.grace, tc.shutdown, tc.clusterEnv, tc.metrics, tc.cost)
			if env := envOf(market.Spec.Template.Spec.Containers[0]); env["AGENTMARKET_EMBEDDED_METER"] != "false" {
				t.Errorf("the marketplace runs its embedded meter: %v", env)
			}

			// Meters: a volume each for the spool, at the data dir.
			if *meter.Spec.Replicas != tc.meters || meter.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Errorf("meters: %d replicas, %s; want %d, Parallel", *meter.Spec.Replicas, meter.Spec.PodManagementPolicy, tc.meters)
			}
			if len(meter.Spec.VolumeClaimTemplates) != 1 {
				t.Fatalf("meters have %d volume claim templates", len(meter.Spec.VolumeClaimTemplates))
			}
			pvc := meter.Spec.VolumeClaimTemplates[0]
			size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			if size.String() != tc.spool || (tc.storage != "" && (pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != tc.storage)) {
				t.Errorf("spool claim: %s, class %v", size.String(), pvc.Spec.StorageClassName)
			}
			mounted := false
			for _, vm := range meter.Spec.Template.Spec.Containers[0].VolumeMounts {
				mounted = mounted || (vm.Name == pvc.Name && vm.MountPath == "/data")
			}
			if !mounted || envOf(meter.Spec.Template.Spec.Containers[0])["AGENTMARKET_DATA_DIR"] != "/data" {
				t.Errorf("the spool volume is not the meter's data dir")
			}

			// Who selects what.
			meterPods := labels.Set(meter.Spec.Template.Labels)
			marketPods := labels.Set(market.Spec.Template.Labels)
			if sel := selector(t, market.Spec.Selector); !sel.Matches(marketPods) {
				t.Error("the Deployment's selector misses its pods")
			}
			if sel := selector(t, meter.Spec.Selector); !sel.Matches(meterPods) || sel.Matches(marketPods) {
				t.Error("the StatefulSet's selector is wrong")
			}
			pdb := m.PDBs[0]
			if sel := selector(t, pdb.Spec.Selector); !sel.Matches(meterPods) || sel.Matches(marketPods) || pdb.Spec.MaxUnavailable == nil {
				t.Errorf("the PodDisruptionBudget does not hold the meters: %+v", pdb.Spec)
			}
			var headless bool
			for _, svc := range m.Services {
				sel := labels.SelectorFromSet(svc.Spec.Selector)
				if !sel.Matches(meterPods) && !sel.Matches(marketPods) {
					t.Errorf("Service %s selects no pods", svc.Name)
				}
				if svc.Name == meter.Spec.ServiceName {
					headless = svc.Spec.ClusterIP == corev1.ClusterIPNone
				}
				// A Service is public (http) or the operator's (metrics,
				// ClusterIP), never both.
				want := "http"
				if strings.HasSuffix(svc.Name, "-metrics") {
					want = "metrics"
					if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != tc.metrics {
						t.Errorf("operator Service %s: %s, ports %+v; want ClusterIP on %d", svc.Name, svc.Spec.Type, svc.Spec.Ports, tc.metrics)
					}
				}
				for _, p := range svc.Spec.Ports {
					if p.TargetPort.StrVal != want {
						t.Errorf("Service %s targets port %v, want %s", svc.Name, p.TargetPort, want)
					}
				}
			}
			if !headless {
				t.Errorf("the StatefulSet's service %s is not a headless Service", meter.Spec.ServiceName)
			}

			if !tc.monitor {
				if len(m.ServiceMonitors) != 0 {
					t.Error("a ServiceMonitor though serviceMonitor.enabled is false")
				}
				return
			}
			if len(m.ServiceMonitors) != 1 {
				t.Fatalf("%d ServiceMonitors", len(m.ServiceMonitors))
			}
			sm := m.ServiceMonitors[0]
			if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Port != "metrics" {
				t.Errorf("ServiceMonitor endpoints: %+v", sm.Spec.Endpoints)
			}
			sel := selector(t, &sm.Spec.Selector)
			scraped := 0
			for _, svc := range m.Services {
				if sel.Matches(labels.Set(svc.Labels)) {
					scraped++
					if svc.Spec.ClusterIP == corev1.ClusterIPNone {
						t.Error("the ServiceMonitor scrapes the headless Service too (each meter twice)")
					}
					if !strings.HasSuffix(svc.Name, "-metrics") {
						t.Errorf("the ServiceMonitor scrapes the public Service %s (its /metrics answers 404)", svc.Name)
					}
				}
			}
			if scraped != 2 {
				t.Errorf("the ServiceMonitor selects %d Services, want the marketplace's and the meters' operator Services", scraped)
			}
		})
	}
}

// checkPod checks what both processes' pods share.
func checkPod(t *testing.T, name string, pod corev1.PodSpec, command, secret string, grace int64, shutdown, cluster string, metrics int32, cost string) {
	t.Helper()
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != command {
		t.Errorf("%s: command %v", name, c.Command)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.StrVal != "http" {
		t.Errorf("%s: readiness probe %+v, want GET /readyz on http", name, p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: liveness probe %+v, want GET /healthz", name, p)
	}
	if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[1].Name != "metrics" || c.Ports[1].ContainerPort != metrics {
		t.Errorf("%s: ports %+v, want http and metrics on %d", name, c.Ports, metrics)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != grace {
		t.Errorf("%s: grace period %v, want %d (the shutdown timeout and 10 s)", name, pod.TerminationGracePeriodSeconds, grace)
	}
	if sc := c.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: security context %+v", name, sc)
	}
	env := envOf(c)
	if env["AGENTMARKET_SHUTDOWN_TIMEOUT"] != shutdown || env["AGENTMARKET_CLICKHOUSE_CLUSTER"] != cluster ||
		!strings.HasPrefix(env["AGENTMARKET_PUBLIC_METER_URL"], "https://") || env["AGENTMARKET_METRICS_ADDR"] != fmt.Sprintf("0.0.0.0:%d", metrics) ||
		env["AGENTMARKET_METRICS_LISTING_COST"] != cost {
		t.Errorf("%s: env %v", name, env)
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "AGENTMARKET_") {
			t.Errorf("%s: %s is no AgentMarket setting", name, e.Name)
		}
		if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret) {
			t.Errorf("%s: %s comes from %+v, want the Secret %s", name, e.Name, e.ValueFrom, secret)
		}
	}
	for _, must := range []string{"AGENTMARKET_DATABASE_URL", "AGENTMARKET_CLICKHOUSE_URL", "AGENTMARKET_SECRET_KEY"} {
		if env[must] != "secret:"+secret {
			t.Errorf("%s: %s = %q, want it from the Secret", name, must, env[must])
		}
	}
}

// envOf maps a container's variables to their values, "secret:NAME" for
// those read from a Secret.
func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name
		default:
			out[e.Name] = e.Value
		}
	}
	return out
}

func selector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %+v: %v", s, err)
	}
	return sel
}

// TestRefused: what the chart must not render: no meter URL, no database,
// values its schema refuses.
func TestRefused(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		values, want string
	}{
		{"secrets: {databaseURL: 'postgres://x/y', clickhouseURL: 'clickhouse://c:9000/d', secretKey: k}\nmarketplace: {signup: open}", "meter.publicURL is required"},
		// Sign-ups confirmed by mail need the server, a From and the links' URL.
		{"secrets: {databaseURL: 'postgres://x/y', clickhouseURL: 'clickhouse://c:9000/d', secretKey: k}\nmeter: {publicURL: 'https://m.example.com'}\n" +
			"marketplace: {mailFrom: 'a@b.example', publicURL: 'https://market.example.com'}", "secrets.smtpURL (or existingSecret) is required"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nmarketplace: {publicURL: 'https://market.example.com'}", "marketplace.mailFrom is required"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nmarketplace: {mailFrom: 'a@b.example'}", "marketplace.publicURL is required"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nmarketplace: {signup: closed}", "/marketplace/signup"},
		{"meter: {publicURL: 'https://m.example.com'}", "secrets.databaseURL (or existingSecret) is required"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nclickhouse: {cluster: 'a; DROP'}", "/clickhouse/cluster"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nshutdownTimeoutSeconds: soon", "/shutdownTimeoutSeconds"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com', spool: {size: lots}}", "/meter/spool/size"},
		{"existingSecret: s\nmetre: {publicURL: 'https://m.example.com'}", "metre"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com', env: {LOG_LEVEL: debug}}", "LOG_LEVEL"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nmetrics: {port: 8081}", "/metrics/port"},
		{"existingSecret: s\nmeter: {publicURL: 'https://m.example.com'}\nmetrics: {port: 9090, listingCost: 'yes'}", "/metrics/listingCost"},
	} {
		f := filepath.Join(dir, fmt.Sprintf("v%d.yaml", i))
		if err := os.WriteFile(f, []byte(tc.values), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runHelm(t, "template", "rel", chart, "--kube-version", kubeVersion, "--values", f)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("values %q: err %v, output lacks %q:\n%.600s", tc.values, err, tc.want, out)
		}
	}
}
