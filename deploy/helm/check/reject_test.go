package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestRejectedValues: values with a typo or a contradiction fail the
// render with a message naming it, instead of rendering something else.
func TestRejectedValues(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"misspelt top-level key", `replicaCont: 2`, "replicaCont"},
		{"misspelt nested key", `{redis: {sentinal: {addresses: [s:26379]}}}`, "sentinal"},
		{"misspelt flag", `{flags: {max-inflite: 5}}`, "max-inflite"},
		{"flag the chart sets", `{flags: {redis-url: "redis://x"}}`, "redis-url"},
		{"unknown redis mode", `{redis: {mode: sentinels}}`, "/redis/mode"},
		{"wrong type", `{replicaCount: three}`, "replicaCount"},
		{"unknown webhook event", `{webhooks: {events: [task.done]}}`, "/webhooks/events/0"},
		{"embedded with replicas", `{redis: {mode: embedded}}`, "replicaCount 1"},
		{"embedded with an HPA", `{redis: {mode: embedded}, replicaCount: 1, autoscaling: {enabled: true}}`, "autoscaling.enabled false"},
		{"sentinel without sentinels", `{redis: {mode: sentinel}}`, "redis.sentinel.addresses"},
		{"url without a URL", `{redis: {url: {existingSecret: ""}}}`, "redis.url.existingSecret"},
		{"console without token", `{console: {enabled: true}}`, "console.token.existingSecret"},
		{"webhook without secret", `{webhooks: {url: "https://h.example"}}`, "webhooks.secret.existingSecret"},
		{"two upstreams", `{upstream: {command: "node s.js"}}`, "not both"},
		{"no upstream", `{upstream: {url: ""}}`, "upstream.url"},
		{"upstream without scheme", `{upstream: {url: "mcp-server:3000/mcp"}}`, "/upstream/url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, chartDir, tc.values)
			if err == nil {
				t.Fatalf("rendered; want an error naming %q:\n%.400s", tc.want, out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one naming %q", err, tc.want)
			}
		})
	}
}

// TestStrictDecodingCatchesTypos plants misspelt fields, in a rendered
// object and in a copy of the chart's templates, and wants the decoding
// to reject each, naming the field.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	out, err := render(t, chartDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(split(out)); err != nil {
		t.Fatalf("the defaults do not decode: %v", err)
	}
	for _, plant := range []struct{ from, to string }{
		{"readinessProbe:", "readinesProbe:"},
		{"terminationGracePeriodSeconds:", "terminationGracePeriodSecond:"},
		{"maxUnavailable: 1\n  selector:", "maxUnavailble: 1\n  selector:"},
		{"targetPort: http", "targetport: http"},
		{"containerPort: 8080", "containerPort: \"8080\""},
		{"readinessProbe:", "ReadinessProbe:"},
		{"readinessProbe:", "readinessProbe: {}\n          readinessProbe:"},
	} {
		bad := strings.Replace(out, plant.from, plant.to, 1)
		if bad == out {
			t.Fatalf("%q not in the render", plant.from)
		}
		if _, err := decode(split(bad)); err == nil {
			t.Errorf("%q → %q decoded without error", plant.from, plant.to)
		} else {
			t.Logf("%q → %q: %v", plant.from, plant.to, err)
		}
	}

	// The Prometheus Operator's kinds, through the local structs.
	out, err = render(t, chartDir, `{metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, plant := range []struct{ from, to, field string }{
		{"path: /metrics", "pathh: /metrics", "pathh"},
		{"- alert: TaskgateStoreErrors", "- alertt: TaskgateStoreErrors", "alertt"},
	} {
		bad := strings.Replace(out, plant.from, plant.to, 1)
		if bad == out {
			t.Fatalf("%q not in the render", plant.from)
		}
		if _, err := decode(split(bad)); err == nil || !strings.Contains(err.Error(), plant.field) {
			t.Errorf("%q → %q: error %v, want one naming the field", plant.from, plant.to, err)
		}
	}

	// A typo in a template (a copy of the chart): helm renders it, the
	// decoding refuses it.
	chart := copyChart(t)
	dep := filepath.Join(chart, "templates", "deployment.yaml")
	text, err := os.ReadFile(dep)
	if err != nil {
		t.Fatal(err)
	}
	planted := strings.Replace(string(text), "imagePullPolicy:", "imagePullPolicyy:", 1)
	if planted == string(text) {
		t.Fatal("imagePullPolicy not in the template")
	}
	if err := os.WriteFile(dep, []byte(planted), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = render(t, chart, "")
	if err != nil {
		t.Fatalf("helm refused the planted template itself: %v", err)
	}
	if _, err := decode(split(out)); err == nil || !strings.Contains(err.Error(), "imagePullPolicyy") {
		t.Errorf("a misspelt field in a template: error %v, want one naming imagePullPolicyy", err)
	}
}

// copyChart copies the chart into a temporary directory.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "taskgate")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// managedFlags are the serve flags the chart sets from values of their
// own (or must not be set per Deployment), so values.schema.json leaves
// them out of flags:.
var managedFlags = []string{
	"upstream", "upstream-ca", "upstream-client-cert", "upstream-client-key", "upstream-header", "upstream-command",
	"upstream-per-session", "listen", "shutdown-timeout", "drain-timeout", "advertise-url", "tls-cert", "tls-key",
	"public-url", "trusted-proxies", "auth-issuer", "auth-audience", "auth-introspection-url", "auth-client-id",
	"auth-client-secret", "auth-required-scopes", "auth-forward", "task", "task-required", "sync", "rerun", "no-rerun",
	"policy", "replica-id", "redis-url", "webhook-url", "webhook-secret", "webhook-events", "webhook-tools",
	"webhook-principals", "webhooks", "console-url", "metrics-listen", "console-listen", "console-token",
	"console-host", "console-trace-url",
}

// TestSchemaFlags: values.schema.json's flags: names every serve flag
// the chart does not set itself, and nothing else, so a flag added to
// taskgate fails here until the chart takes it (in flags: or a value).
func TestSchemaFlags(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Flags struct {
				AdditionalProperties *bool                      `json:"additionalProperties"`
				Properties           map[string]json.RawMessage `json:"properties"`
			} `json:"flags"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	f := schema.Properties.Flags
	if f.AdditionalProperties == nil || *f.AdditionalProperties {
		t.Error("flags: allows names the schema does not list")
	}
	serve := serveFlags(t)
	var missing, extra []string
	for name := range serve {
		if _, ok := f.Properties[name]; !ok && !slices.Contains(managedFlags, name) {
			missing = append(missing, name)
		}
	}
	for name := range f.Properties {
		if !serve[name] || slices.Contains(managedFlags, name) {
			extra = append(extra, name)
		}
	}
	for _, name := range managedFlags {
		if !serve[name] {
			extra = append(extra, name+" (managed)")
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("serve flags neither in values.schema.json's flags nor set by the chart: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("names that are not serve flags, or that the chart sets itself: %v", extra)
	}
}
