// Package deploy holds the deployment kit (docker-compose, the Helm chart
// and the Kubernetes manifests rendered from it, Prometheus, Grafana); this
// test checks what can be checked without them: every file parses, every
// metric the dashboard and the alerts use is one a running gateway exports,
// the PrometheusRule holds the alerts file's rules, the grace periods cover
// the drain, and every TASKGATE_* variable and flag names a flag. The chart
// itself is checked by its own module, deploy/helm/check (helm and the
// Kubernetes API types).
package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/stdio"
	"github.com/taskgate/taskgate/webhook"
)

// files parses every YAML and JSON file of the kit: path → documents.
func files(t *testing.T) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The chart's templates are Go templates, not YAML yet.
			if path == "helm/taskgate/templates" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".json":
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			out[path] = []any{v}
		case ".yml", ".yaml":
			dec := yaml.NewDecoder(bytes.NewReader(data))
			for {
				var v any
				err := dec.Decode(&v)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("%s: %v", path, err)
					break
				}
				out[path] = append(out[path], v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFilesParse(t *testing.T) {
	got := files(t)
	for _, want := range []string{"docker-compose.yml", "policy.json", "prometheus/prometheus.yml", alertsFile,
		"grafana/dashboards/taskgate.json", "kubernetes/deployment.yaml", "kubernetes/prometheusrule.yaml",
		"kubernetes/servicemonitor.yaml", "kubernetes/pdb.yaml", "kubernetes/service.yaml", "kubernetes/configmap.yaml"} {
		if len(got[want]) == 0 {
			t.Errorf("%s: missing or empty", want)
		}
	}
	// The policy file (JSON, as --policy takes it) is one taskgate accepts.
	if _, err := policy.ParseFile("policy.json", mustRead(t, "policy.json")); err != nil {
		t.Errorf("policy.json: %v", err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	_ = yaml.Unmarshal(mustRead(t, "kubernetes/configmap.yaml"), &cm)
	if _, err := policy.ParseFile("policy.json", []byte(cm.Data["policy.json"])); err != nil {
		t.Errorf("kubernetes/configmap.yaml policy.json: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var metricRef = regexp.MustCompile(`\btaskgate_[a-z_]+`)

// usedMetrics are the taskgate_* series the dashboard and the alerts query.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "expr" {
					for _, m := range metricRef.FindAllString(s, -1) {
						used[m] = append(used[m], where)
					}
					continue
				}
				walk(where, e)
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	all := files(t)
	for _, path := range []string{"grafana/dashboards/taskgate.json", alertsFile, "kubernetes/prometheusrule.yaml"} {
		for _, doc := range all[path] {
			walk(path, doc)
		}
	}
	if len(used) < 10 {
		t.Fatalf("only %d metrics used by the dashboard and alerts: %v", len(used), used)
	}
	return used
}

// TestMetricsExist runs a gateway (embedded store, the test upstream),
// gives it some work, and checks each metric the kit uses against its
// /metrics, or, for a family that has no series yet (labelled counters
// before their first event), against the families it registers.
func TestMetricsExist(t *testing.T) {
	h, base := runningGateway(t)
	work(t, base+"/mcp")

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
		}
	}
	registered := h.MetricNames()
	for name, where := range usedMetrics(t) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && (exported[b] || slices.Contains(registered, b)) {
				base = b
			}
		}
		switch {
		case exported[base]:
		case slices.Contains(registered, base):
			t.Logf("%s: registered, no series after the test's work", base)
		default:
			t.Errorf("%s (used in %v) is not a metric taskgate exports", name, slices.Compact(where))
		}
	}
	for _, always := range []string{"taskgate_requests_total", "taskgate_tasks_created_total", "taskgate_held_calls", "taskgate_max_inflight", "taskgate_build_info"} {
		if !exported[always] {
			t.Errorf("%s missing from /metrics after the work", always)
		}
	}
}

// runningGateway is a gateway (embedded store, a task rule for slow) in
// front of the test upstream; it returns the Handler and its base URL.
func runningGateway(t *testing.T) (*gateway.Handler, string) {
	t.Helper()
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	emb, err := taskstore.OpenEmbedded(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := policy.NewRule("slow", policy.Task)
	store := taskstore.New(emb.Client(), taskstore.Options{})
	// A webhook endpoint, so the webhook metrics are registered too (the
	// store records no events: nothing is sent).
	hooks, err := webhook.New(webhook.Config{Store: store, Endpoints: []webhook.Endpoint{{Name: "ops", URL: "http://127.0.0.1:9/",
		Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))}}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := gateway.New(gateway.Config{Upstream: client, Store: store, Webhooks: hooks,
		Collectors: stdio.NewMetrics().Collectors(), // a stdio upstream's (taskgate_stdio_*)
		Policy:     policy.NewCurrent(&policy.Config{Rules: policy.Rules{rules}}), MaxInflight: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	return h, gw.URL
}

// clusterMetricNames are the metric families of a gateway whose store is
// a Redis Cluster client (here on a miniredis, which answers the cluster
// commands as one node holding every slot): the Cluster-only families are
// registered only there.
func clusterMetricNames(t *testing.T) []string {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { _ = store.Close() })
	if !store.Cluster() {
		t.Fatal("a store on a ClusterClient is not a Cluster store")
	}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := gateway.New(gateway.Config{Upstream: client, Store: store, MaxInflight: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h.MetricNames()
}

// TestMetricTable: the metric table of docs/operations.md names exactly
// the taskgate_* metric families a gateway registers.
func TestMetricTable(t *testing.T) {
	h, _ := runningGateway(t)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(taskgate_[a-z_]+)` \\|").FindAllStringSubmatch(string(mustRead(t, "../docs/operations.md")), -1) {
		documented[m[1]] = true
	}
	registered := map[string]bool{}
	for _, name := range append(h.MetricNames(), clusterMetricNames(t)...) {
		if strings.HasPrefix(name, "taskgate_") {
			registered[name] = true
			if !documented[name] {
				t.Errorf("%s is registered but not in docs/operations.md's metric table", name)
			}
		}
	}
	for name := range documented {
		if !registered[name] {
			t.Errorf("docs/operations.md's metric table has %s, which no gateway registers", name)
		}
	}
	if len(registered) < 10 {
		t.Fatalf("only %d taskgate_ metrics registered: %v", len(registered), h.MetricNames())
	}
}

// work opens a 2025-11-25 session, lists the tools and runs a task.
func work(t *testing.T, url string) {
	t.Helper()
	sid := ""
	post := func(body string) string {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			sid = s
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"deploy-test","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	created := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"seconds":0.05,"text":"x"},"task":{"ttl":60000}}}`)
	m := regexp.MustCompile(`"taskId":"([^"]+)"`).FindStringSubmatch(created)
	if m == nil {
		t.Fatalf("no task created: %s", created)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil && !strings.Contains(post(`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"`+m[1]+`"}}`), `"completed"`) {
		time.Sleep(20 * time.Millisecond)
	}
}

// alertsFile is the one copy of the alerts: Prometheus' rule file in
// docker compose, and the chart's PrometheusRule.
const alertsFile = "helm/taskgate/files/alerts.yml"

// TestAlertsAgree: the Prometheus rule file and the PrometheusRule
// rendered from the chart hold the same groups.
func TestAlertsAgree(t *testing.T) {
	var file struct {
		Groups any `yaml:"groups"`
	}
	var rule struct {
		Spec struct {
			Groups any `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(mustRead(t, alertsFile), &file); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(mustRead(t, "kubernetes/prometheusrule.yaml"), &rule); err != nil {
		t.Fatal(err)
	}
	if file.Groups == nil || !reflect.DeepEqual(file.Groups, rule.Spec.Groups) {
		t.Fatalf("%s and kubernetes/prometheusrule.yaml differ", alertsFile)
	}
	for _, name := range []string{"TaskgateFailedTasksHigh", "TaskgateLeasesRecovered", "TaskgateStoreErrors", "TaskgateHeldCallsNearLimit", "TaskgatePollsRateLimited"} {
		if !bytes.Contains(mustRead(t, alertsFile), []byte("alert: "+name)) {
			t.Errorf("alert %s missing", name)
		}
	}
}

// deployment is the part of kubernetes/deployment.yaml the tests read.
type deployment struct {
	Spec struct {
		Template struct {
			Spec struct {
				Grace      int `yaml:"terminationGracePeriodSeconds"`
				Containers []struct {
					Args      []string `yaml:"args"`
					Lifecycle struct {
						PreStop struct {
							Sleep struct {
								Seconds int `yaml:"seconds"`
							} `yaml:"sleep"`
						} `yaml:"preStop"`
					} `yaml:"lifecycle"`
					Env []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func readDeployment(t *testing.T) deployment {
	t.Helper()
	var dep deployment
	if err := yaml.Unmarshal(mustRead(t, "kubernetes/deployment.yaml"), &dep); err != nil {
		t.Fatal(err)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("kubernetes/deployment.yaml: want one container, got %d", len(dep.Spec.Template.Spec.Containers))
	}
	return dep
}

// TestGracePeriods: the time a replica is given to stop covers its
// preStop sleep, drain and shutdown timeouts (else held tasks are cut and
// wait for a lease to expire on another replica).
func TestGracePeriods(t *testing.T) {
	dep := readDeployment(t)
	c := dep.Spec.Template.Spec.Containers[0]
	set := map[string]string{"drain-timeout": "30s", "shutdown-timeout": "10s"} // the defaults
	for _, e := range c.Env {
		if name, ok := strings.CutPrefix(e.Name, "TASKGATE_"); ok && e.Value != "" {
			set[strings.ToLower(strings.ReplaceAll(name, "_", "-"))] = e.Value
		}
	}
	for _, a := range c.Args { // a flag wins over its variable
		if name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			set[name] = value
		}
	}
	drain, err1 := time.ParseDuration(set["drain-timeout"])
	shutdown, err2 := time.ParseDuration(set["shutdown-timeout"])
	if err1 != nil || err2 != nil {
		t.Fatalf("kubernetes/deployment.yaml: %v %v", err1, err2)
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if grace := time.Duration(dep.Spec.Template.Spec.Grace) * time.Second; grace <= preStop+drain+shutdown {
		t.Errorf("terminationGracePeriodSeconds %s <= preStop %s + drain %s + shutdown %s", grace, preStop, drain, shutdown)
	}
	var compose struct {
		Services map[string]struct {
			StopGrace string `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(mustRead(t, "docker-compose.yml"), &compose); err != nil {
		t.Fatal(err)
	}
	if g, _ := time.ParseDuration(compose.Services["taskgate"].StopGrace); g < 40*time.Second {
		t.Errorf("compose stop_grace_period %q < drain 30s + shutdown 10s", compose.Services["taskgate"].StopGrace)
	}
}

// TestEnvNamesFlags: every TASKGATE_* variable the kit sets is one that
// taskgate reads (TASKGATE_<FLAG> for a flag in docs/flags.md's table),
// and every --flag in the Deployment's args is a flag.
func TestEnvNamesFlags(t *testing.T) {
	readme := string(mustRead(t, "../docs/flags.md"))
	seen := 0
	for _, path := range []string{"docker-compose.yml", "kubernetes/deployment.yaml"} {
		for _, v := range regexp.MustCompile(`TASKGATE_[A-Z_]+`).FindAllString(string(mustRead(t, path)), -1) {
			seen++
			flag := "--" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(v, "TASKGATE_"), "_", "-"))
			if !strings.Contains(readme, "| `"+flag) {
				t.Errorf("%s: %s names no flag (%s is not in docs/flags.md's flag table)", path, v, flag)
			}
		}
	}
	for _, a := range readDeployment(t).Spec.Template.Spec.Containers[0].Args[1:] {
		seen++
		flag, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(flag, "--") || !strings.Contains(readme, "| `"+flag+" ") && !strings.Contains(readme, "| `"+flag+"`") {
			t.Errorf("kubernetes/deployment.yaml: arg %q names no flag in docs/flags.md's flag table", a)
		}
	}
	if seen < 5 {
		t.Fatalf("only %d TASKGATE_ variables and flags found", seen)
	}
}
