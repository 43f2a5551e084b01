package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestLint: helm lint passes on the chart, also with --strict (warnings
// fail), with the defaults and with every toggle on.
func TestLint(t *testing.T) {
	f := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(f, []byte(allOn), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lint", chartDir},
		{"lint", "--strict", chartDir},
		{"lint", "--strict", chartDir, "--values", f},
	} {
		out, err := helm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm %s: %s", strings.Join(args, " "), out)
		}
	}
}

// allOn turns every toggle on at once.
const allOn = `
replicaCount: 4
redis:
  mode: sentinel
  sentinel: {addresses: [s1:26379, s2:26379, s3:26379], master: main, db: 2}
  username: app
  password: {existingSecret: redis-auth, key: pw}
  sentinelAuth: {username: watcher, existingSecret: sentinel-auth, key: spw}
  options: {pool_size: 20}
auth:
  issuer: https://login.example.com
  audience: [https://mcp.example.com/mcp]
  requiredScopes: [mcp:tools]
  clientID: taskgate
  clientSecret: {existingSecret: oidc, key: secret}
publicURL: https://mcp.example.com/mcp
trustedProxies: [10.0.0.0/8]
console:
  enabled: true
  token: {existingSecret: console, key: token}
  hosts: [console.example.com]
  url: https://console.example.com
  traceURL: http://jaeger:16686/trace/{trace_id}
webhooks:
  url: https://hooks.example.com/taskgate
  secret: {existingSecret: hooks, key: whsec}
  events: [task.failed, task.completed]
  tools: ["deploy_*"]
  fileSecret: {name: hooks-file, key: webhooks.json}
upstream:
  url: https://mcp-server:3443/mcp
  headers: ["Authorization: Bearer ${UPSTREAM_TOKEN}"]
  ca: {secretName: upstream-ca, key: ca.pem}
  clientCertSecret: upstream-client
policy:
  task: ["slow_*"]
  sync: ["admin_*"]
  noRerun: [pay]
flags: {max-inflight: 2000, log-level: debug, fallback-tools: true, allowed-origins: [https://a.example, https://b.example], max-body: 8MiB}
extraEnv:
  - name: UPSTREAM_TOKEN
    valueFrom: {secretKeyRef: {name: upstream-token, key: token}}
metrics:
  port: 9102
  serviceMonitor: {enabled: true, labels: {release: prom}}
  prometheusRule: {enabled: true, labels: {release: prom}}
autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 12, targetMemoryUtilizationPercentage: 80}
networkPolicy:
  enabled: true
  ingressFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: agents}}}]
  consoleFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ops}}}]
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8}}]}]
`

// TestValuesMatrix renders the chart with each toggle (and all at once),
// decodes every object strictly into its Kubernetes type, and checks
// what the values promise: the flags in args, the secrets' names, the
// probes, the Services and the objects each toggle adds.
func TestValuesMatrix(t *testing.T) {
	cases := []struct {
		name   string
		values string
		check  func(t *testing.T, r *rendered)
	}{
		{"defaults", "", func(t *testing.T, r *rendered) {
			r.wantKinds(t, "ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount")
			if got := *r.dep.Spec.Replicas; got != 3 {
				t.Errorf("replicas %d, want 3", got)
			}
			r.wantSecretEnv(t, "TASKGATE_REDIS_URL", "taskgate-redis", "url")
			r.wantArg(t, "--upstream=http://mcp-server:3000/mcp")
			r.wantArg(t, "--max-inflight=1000")
			r.noArgPrefix(t, "--console-listen", "--auth-", "--webhook", "--metrics-listen")
		}},
		{"redis url", `
redis:
  url: {existingSecret: "", value: "redis://:$(REDIS_PASSWORD)@redis:6379/1"}
  password: {existingSecret: redis-auth, key: pw}
`, func(t *testing.T, r *rendered) {
			r.wantSecretEnv(t, "REDIS_PASSWORD", "redis-auth", "pw")
			r.wantEnvValue(t, "TASKGATE_REDIS_URL", "redis://:$(REDIS_PASSWORD)@redis:6379/1")
		}},
		{"sentinel", `
redis:
  mode: sentinel
  sentinel: {addresses: [s1:26379, s2:26379], master: main, db: 2}
  tls: true
  username: app
  password: {existingSecret: redis-auth, key: pw}
  sentinelAuth: {username: watcher, existingSecret: sentinel-auth, key: spw}
  options: {pool_size: 20, dial_timeout: 2s}
`, func(t *testing.T, r *rendered) {
			r.wantSecretEnv(t, "REDIS_PASSWORD", "redis-auth", "pw")
			r.wantSecretEnv(t, "REDIS_SENTINEL_PASSWORD", "sentinel-auth", "spw")
			r.wantEnvValue(t, "TASKGATE_REDIS_URL", "rediss+sentinel://app:$(REDIS_PASSWORD)@s1:26379,s2:26379/main/2"+
				"?dial_timeout=2s&pool_size=20&sentinel_username=watcher&sentinel_password=$(REDIS_SENTINEL_PASSWORD)")
		}},
		{"cluster", `
redis:
  mode: cluster
  cluster: {addresses: [n1:6379, n2:6379, n3:6379]}
  password: {existingSecret: redis-auth}
`, func(t *testing.T, r *rendered) {
			r.wantSecretEnv(t, "REDIS_PASSWORD", "redis-auth", "password")
			r.wantEnvValue(t, "TASKGATE_REDIS_URL", "redis+cluster://:$(REDIS_PASSWORD)@n1:6379,n2:6379,n3:6379")
			r.noEnv(t, "REDIS_SENTINEL_PASSWORD")
		}},
		{"embedded", `{redis: {mode: embedded}, replicaCount: 1}`, func(t *testing.T, r *rendered) {
			r.noEnv(t, "TASKGATE_REDIS_URL")
			r.noEnv(t, "REDIS_PASSWORD")
		}},
		{"auth", `
auth:
  issuer: https://login.example.com
  audience: [https://mcp.example.com/mcp, api://taskgate]
  requiredScopes: [mcp:tools]
  clientID: taskgate
  clientSecret: {existingSecret: oidc, key: secret}
  forward: false
publicURL: https://mcp.example.com/mcp
trustedProxies: [10.0.0.0/8, 192.168.1.1]
`, func(t *testing.T, r *rendered) {
			r.wantArg(t, "--auth-issuer=https://login.example.com")
			r.wantArg(t, "--auth-audience=https://mcp.example.com/mcp")
			r.wantArg(t, "--auth-audience=api://taskgate")
			r.wantArg(t, "--auth-required-scopes=mcp:tools")
			r.wantArg(t, "--auth-client-id=taskgate")
			r.wantArg(t, "--auth-forward=false")
			r.wantArg(t, "--public-url=https://mcp.example.com/mcp")
			r.wantArg(t, "--trusted-proxies=192.168.1.1")
			r.wantSecretEnv(t, "TASKGATE_AUTH_CLIENT_SECRET", "oidc", "secret")
		}},
		{"console", `{console: {enabled: true, port: 9191, token: {existingSecret: console}, hosts: [console.example.com]}}`, func(t *testing.T, r *rendered) {
			r.wantKinds(t, "ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "Service", "ServiceAccount")
			r.wantArg(t, "--console-listen=0.0.0.0:9191")
			r.wantArg(t, "--console-host=taskgate-console,taskgate-console.tg,taskgate-console.tg.svc,taskgate-console.tg.svc.cluster.local,console.example.com")
			r.wantSecretEnv(t, "TASKGATE_CONSOLE_TOKEN", "console", "token")
			r.wantServicePort(t, "taskgate-console", "console", 9191)
			if p := r.objs.services["taskgate"].Spec.Ports; len(p) != 1 || p[0].Name != "http" {
				t.Errorf("the MCP Service carries the console too: %+v", p)
			}
		}},
		{"monitoring", `{metrics: {serviceMonitor: {enabled: true, interval: 30s}, prometheusRule: {enabled: true}}}`, func(t *testing.T, r *rendered) {
			r.wantKinds(t, "ConfigMap", "Deployment", "PodDisruptionBudget", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor")
			sm := r.objs.monitors["taskgate"]
			if e := sm.Spec.Endpoints; len(e) != 1 || e[0].Port != "http" || e[0].Path != "/metrics" || e[0].Interval != "30s" {
				t.Errorf("ServiceMonitor endpoints %+v", e)
			}
			r.selects(t, "ServiceMonitor", sm.Spec.Selector.MatchLabels, r.objs.services["taskgate"].Labels)
			r.wantAlerts(t)
		}},
		{"metrics port", `{metrics: {port: 9102, serviceMonitor: {enabled: true}}}`, func(t *testing.T, r *rendered) {
			r.wantArg(t, "--metrics-listen=0.0.0.0:9102")
			r.wantServicePort(t, "taskgate", "metrics", 9102)
			if e := r.objs.monitors["taskgate"].Spec.Endpoints; len(e) != 1 || e[0].Port != "metrics" {
				t.Errorf("ServiceMonitor endpoints %+v, want the metrics port", e)
			}
		}},
		{"networkpolicy", `{networkPolicy: {enabled: true}}`, func(t *testing.T, r *rendered) {
			np := r.objs.netpols["taskgate"]
			if np == nil {
				t.Fatal("no NetworkPolicy")
			}
			r.selects(t, "NetworkPolicy", np.Spec.PodSelector.MatchLabels, r.dep.Spec.Template.Labels)
			if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 0 || np.Spec.Ingress[0].Ports[0].Port.StrVal != "http" {
				t.Errorf("ingress %+v, want the http port open to all", np.Spec.Ingress)
			}
			if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress"}) {
				t.Errorf("policyTypes %v: egress should stay open without networkPolicy.egress", np.Spec.PolicyTypes)
			}
		}},
		{"hpa", `{autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 7}}`, func(t *testing.T, r *rendered) {
			if r.dep.Spec.Replicas != nil {
				t.Errorf("replicas %d set with the HPA on: each upgrade would reset the HPA's count", *r.dep.Spec.Replicas)
			}
			h := r.objs.hpas["taskgate"]
			if h == nil || h.Spec.ScaleTargetRef.Name != "taskgate" || h.Spec.ScaleTargetRef.Kind != "Deployment" ||
				*h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 7 || len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Resource.Name != "cpu" {
				t.Errorf("HPA %+v", h)
			}
		}},
		{"webhooks", `
webhooks:
  url: https://hooks.example.com/taskgate
  secret: {existingSecret: hooks}
  events: [task.failed]
  fileSecret: {name: hooks-file}
`, func(t *testing.T, r *rendered) {
			r.wantArg(t, "--webhook-url=https://hooks.example.com/taskgate")
			r.wantArg(t, "--webhook-events=task.failed")
			r.wantArg(t, "--webhooks=/etc/taskgate/webhooks/webhooks.json")
			r.wantSecretEnv(t, "TASKGATE_WEBHOOK_SECRET", "hooks", "secret")
			r.wantVolume(t, "webhooks", "/etc/taskgate/webhooks", "hooks-file")
		}},
		{"stdio upstream and TLS", `
upstream:
  url: ""
  command: node /srv/server.js
  ca: {configMapName: corp-ca}
  clientCertSecret: upstream-client
`, func(t *testing.T, r *rendered) {
			r.wantArg(t, "--upstream-command=node /srv/server.js")
			r.wantArg(t, "--advertise-url=http://$(POD_IP):8080")
			r.wantArg(t, "--upstream-ca=/etc/taskgate/upstream-ca/ca.crt")
			r.wantArg(t, "--upstream-client-cert=/etc/taskgate/upstream-client/tls.crt")
			r.wantVolume(t, "upstream-client", "/etc/taskgate/upstream-client", "upstream-client")
			if e := r.env("POD_IP"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Errorf("POD_IP %+v, want the downward API's status.podIP", e)
			}
			r.noArgPrefix(t, "--upstream=")
		}},
		{"policy", `{policy: {rules: [{tool: "x_*", mode: task}], task: [a, b], sync: [c], rerun: [d]}, drainTimeoutSeconds: 120, preStopSleepSeconds: 0}`, func(t *testing.T, r *rendered) {
			// The env variables' order: --sync, --task-required, --task.
			if got := r.argsWith("--sync=", "--task=", "--rerun="); !slices.Equal(got, []string{"--sync=c", "--task=a", "--task=b", "--rerun=d"}) {
				t.Errorf("rule flags %v", got)
			}
			if r.dep.Spec.Template.Spec.Containers[0].Lifecycle != nil {
				t.Error("a preStop hook with preStopSleepSeconds 0")
			}
			if g := *r.dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 135 {
				t.Errorf("grace %d, want 120+10+5", g)
			}
		}},
		{"all on", allOn, func(t *testing.T, r *rendered) {
			r.wantKinds(t, "ConfigMap", "Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget",
				"PrometheusRule", "Service", "Service", "ServiceAccount", "ServiceMonitor")
			r.wantArg(t, "--allowed-origins=https://b.example")
			r.wantArg(t, "--fallback-tools=true")
			r.wantArg(t, "--max-inflight=2000")
			r.wantArg(t, "--upstream-header=Authorization: Bearer ${UPSTREAM_TOKEN}")
			r.wantArg(t, "--upstream-ca=/etc/taskgate/upstream-ca/ca.pem")
			r.wantSecretEnv(t, "UPSTREAM_TOKEN", "upstream-token", "token")
			r.wantVolume(t, "upstream-ca", "/etc/taskgate/upstream-ca", "upstream-ca")
			np := r.objs.netpols["taskgate"]
			if len(np.Spec.Ingress) != 3 || len(np.Spec.Egress) != 2 || len(np.Spec.PolicyTypes) != 2 {
				t.Errorf("NetworkPolicy: %d ingress rules (want MCP, console, metrics), %d egress (want DNS and one), types %v",
					len(np.Spec.Ingress), len(np.Spec.Egress), np.Spec.PolicyTypes)
			}
			if from := np.Spec.Ingress[0].From; len(from) != 2 || from[0].PodSelector == nil {
				t.Errorf("MCP ingress from %+v: want the release's own pods, then ingressFrom", from)
			}
			r.wantAlerts(t)
			if l := r.objs.rules["taskgate"].Labels["release"]; l != "prom" {
				t.Errorf("PrometheusRule label release=%q", l)
			}
		}},
	}
	flags := serveFlags(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, chartDir, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decode(split(out))
			if err != nil {
				t.Fatal(err)
			}
			r := newRendered(t, objs)
			r.common(t, flags)
			tc.check(t, r)
		})
	}
}

// rendered is one render's objects, with the Deployment's container.
type rendered struct {
	objs *objects
	dep  *appsv1.Deployment
	c    corev1.Container
}

func newRendered(t *testing.T, objs *objects) *rendered {
	t.Helper()
	dep := objs.deployments["taskgate"]
	if dep == nil || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one Deployment taskgate with one container, got %v", objs.deployments)
	}
	return &rendered{objs: objs, dep: dep, c: dep.Spec.Template.Spec.Containers[0]}
}

// common checks what every render must hold.
func (r *rendered) common(t *testing.T, flags map[string]bool) {
	t.Helper()
	c, pod := r.c, r.dep.Spec.Template.Spec
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %v: want serve first", c.Args)
	}
	// Every flag is one `taskgate serve` takes, in --name=value form.
	for _, a := range c.Args[1:] {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok || !flags[name] {
			t.Errorf("arg %q: not --FLAG=VALUE of a serve flag in docs/flags.md", a)
		}
	}
	// Every TASKGATE_ variable names a flag; a $(VAR) in a value names a
	// variable defined before it (the kubelet expands only those).
	defined := map[string]bool{}
	for _, e := range c.Env {
		if n, ok := strings.CutPrefix(e.Name, "TASKGATE_"); ok && !flags[strings.ToLower(strings.ReplaceAll(n, "_", "-"))] {
			t.Errorf("env %s names no serve flag", e.Name)
		}
		for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(e.Value, -1) {
			if !defined[m[1]] {
				t.Errorf("env %s uses $(%s), not defined before it", e.Name, m[1])
			}
		}
		defined[e.Name] = true
	}
	for _, a := range c.Args {
		for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(a, -1) {
			if !defined[m[1]] {
				t.Errorf("arg %s uses $(%s), not in env", a, m[1])
			}
		}
	}

	// The MCP port, the probes on it.
	port := containerPort(t, c, "http")
	r.wantArg(t, "--listen=0.0.0.0:"+itoa(port))
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}
	svc := r.objs.services["taskgate"]
	if svc == nil || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Fatalf("Service taskgate %+v: want its first port to target http", svc)
	}
	r.selects(t, "Service", svc.Spec.Selector, r.dep.Spec.Template.Labels)
	if pdb := r.objs.pdbs["taskgate"]; pdb != nil {
		r.selects(t, "PodDisruptionBudget", pdb.Spec.Selector.MatchLabels, r.dep.Spec.Template.Labels)
	}
	// Each named port a Service targets is one the container has.
	for _, s := range r.objs.services {
		for _, p := range s.Spec.Ports {
			containerPort(t, c, p.TargetPort.StrVal)
		}
	}

	// Restricted: the Pod Security Standard's "restricted" profile.
	sc, psc := c.SecurityContext, pod.SecurityContext
	if sc == nil || psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("security context not restricted: pod %+v, container %+v", psc, sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted; taskgate never calls the API")
	}

	// The rules file: the mounted ConfigMap, a directory (not a subPath,
	// which never sees the kubelet's updates), holding the --policy file.
	policyArg := r.argValue(t, "--policy")
	dir, file := filepath.Split(policyArg)
	vol := r.wantVolume(t, "policy", filepath.Clean(dir), "")
	if vol.ConfigMap == nil {
		t.Fatalf("policy volume %+v is not a ConfigMap", vol)
	}
	if cm := r.objs.configMaps[vol.ConfigMap.Name]; cm != nil {
		var rules struct {
			Rules []map[string]any `json:"rules"`
		}
		if err := json.Unmarshal([]byte(cm.Data[file]), &rules); err != nil || len(rules.Rules) == 0 {
			t.Errorf("ConfigMap %s %s: %v %q", cm.Name, file, err, cm.Data[file])
		}
	}

	// The grace period covers the preStop sleep, the drain and the shutdown.
	wait := r.duration(t, "--drain-timeout") + r.duration(t, "--shutdown-timeout")
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		wait += time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if g := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; g <= wait {
		t.Errorf("terminationGracePeriodSeconds %s <= preStop + drain + shutdown %s", g, wait)
	}
}

func (r *rendered) wantKinds(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	for range r.objs.configMaps {
		got = append(got, "ConfigMap")
	}
	for range r.objs.deployments {
		got = append(got, "Deployment")
	}
	for range r.objs.hpas {
		got = append(got, "HorizontalPodAutoscaler")
	}
	for range r.objs.netpols {
		got = append(got, "NetworkPolicy")
	}
	for range r.objs.pdbs {
		got = append(got, "PodDisruptionBudget")
	}
	for range r.objs.rules {
		got = append(got, "PrometheusRule")
	}
	for range r.objs.services {
		got = append(got, "Service")
	}
	for range r.objs.accounts {
		got = append(got, "ServiceAccount")
	}
	for range r.objs.monitors {
		got = append(got, "ServiceMonitor")
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("objects %v, want %v", got, want)
	}
}

func (r *rendered) wantArg(t *testing.T, arg string) {
	t.Helper()
	if !slices.Contains(r.c.Args, arg) {
		t.Errorf("args lack %q: %v", arg, r.c.Args)
	}
}

func (r *rendered) noArgPrefix(t *testing.T, prefixes ...string) {
	t.Helper()
	for _, a := range r.c.Args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, p) {
				t.Errorf("arg %q is set", a)
			}
		}
	}
}

// argsWith are the args starting with one of prefixes, in order.
func (r *rendered) argsWith(prefixes ...string) []string {
	var out []string
	for _, a := range r.c.Args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, p) {
				out = append(out, a)
			}
		}
	}
	return out
}

// argValue is the value of the one --name=value arg.
func (r *rendered) argValue(t *testing.T, name string) string {
	t.Helper()
	got := r.argsWith(name + "=")
	if len(got) != 1 {
		t.Fatalf("want one %s, got %v", name, got)
	}
	return strings.TrimPrefix(got[0], name+"=")
}

func (r *rendered) duration(t *testing.T, name string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(r.argValue(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (r *rendered) env(name string) *corev1.EnvVar {
	for i, e := range r.c.Env {
		if e.Name == name {
			return &r.c.Env[i]
		}
	}
	return nil
}

func (r *rendered) wantSecretEnv(t *testing.T, name, secret, key string) {
	t.Helper()
	e := r.env(name)
	if e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != secret || e.ValueFrom.SecretKeyRef.Key != key {
		t.Errorf("env %s = %+v, want secretKeyRef %s/%s", name, e, secret, key)
	}
}

func (r *rendered) wantEnvValue(t *testing.T, name, value string) {
	t.Helper()
	if e := r.env(name); e == nil || e.Value != value || e.ValueFrom != nil {
		t.Errorf("env %s = %+v, want the value %q", name, e, value)
	}
}

func (r *rendered) noEnv(t *testing.T, name string) {
	t.Helper()
	if e := r.env(name); e != nil {
		t.Errorf("env %s is set: %+v", name, e)
	}
}

// wantVolume checks the volume mounted at path (read-only) and, when
// source is not "", that it comes from that Secret or ConfigMap.
func (r *rendered) wantVolume(t *testing.T, name, path, source string) corev1.Volume {
	t.Helper()
	mounted := false
	for _, m := range r.c.VolumeMounts {
		if m.Name == name && m.MountPath == path && m.ReadOnly && m.SubPath == "" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("volume %s not mounted read-only (without subPath) at %s: %+v", name, path, r.c.VolumeMounts)
	}
	for _, v := range r.dep.Spec.Template.Spec.Volumes {
		if v.Name != name {
			continue
		}
		got := ""
		if v.Secret != nil {
			got = v.Secret.SecretName
		} else if v.ConfigMap != nil {
			got = v.ConfigMap.Name
		}
		if source != "" && got != source {
			t.Errorf("volume %s from %q, want %q", name, got, source)
		}
		return v
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

func (r *rendered) wantServicePort(t *testing.T, service, port string, number int32) {
	t.Helper()
	s := r.objs.services[service]
	if s == nil {
		t.Fatalf("no Service %s", service)
	}
	for _, p := range s.Spec.Ports {
		if p.Name == port && p.TargetPort == intstr.FromString(port) && containerPort(t, r.c, port) == number {
			r.selects(t, "Service "+service, s.Spec.Selector, r.dep.Spec.Template.Labels)
			return
		}
	}
	t.Errorf("Service %s has no port %s to container port %d: %+v", service, port, number, s.Spec.Ports)
}

// selects checks that selector picks the pods (labels).
func (r *rendered) selects(t *testing.T, what string, selector, labels map[string]string) {
	t.Helper()
	if len(selector) == 0 {
		t.Errorf("%s: empty selector", what)
	}
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("%s selects %s=%s, the pods have %q", what, k, v, labels[k])
		}
	}
}

// wantAlerts: the PrometheusRule holds exactly files/alerts.yml's groups.
func (r *rendered) wantAlerts(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "files/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file ruleFile
	if err := strictUnmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	pr := r.objs.rules["taskgate"]
	if pr == nil || len(file.Groups) == 0 || !reflect.DeepEqual(pr.Spec, file) {
		t.Errorf("PrometheusRule's groups differ from files/alerts.yml")
	}
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Errorf("container has no port %q: %+v", name, c.Ports)
	return 0
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// serveFlags are the flag names `taskgate serve` takes, from the
// generated tables of docs/flags.md (a test of the main module keeps them
// equal to the binary's).
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	_, serve, _ := strings.Cut(string(data), "\n### serve\n")
	serve, _, _ = strings.Cut(serve, "\n### ")
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)").FindAllStringSubmatch(serve, -1) {
		flags[m[1]] = true
	}
	if len(flags) < 50 {
		t.Fatalf("only %d serve flags in docs/flags.md", len(flags))
	}
	return flags
}
