package check

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRenderedArgsStartTaskgate runs the taskgate binary (built from this
// repository) with the args and environment the chart renders, the
// Secrets replaced by test values and the listen addresses by free
// loopback ports, and wants it to serve: /healthz on the MCP port,
// /metrics on the metrics port, the console on its port. So the chart
// writes flags and values the binary accepts, not only names it has.
func TestRenderedArgsStartTaskgate(t *testing.T) {
	helmBinary(t) // skip without helm, like the other tests
	out, err := render(t, chartDir, `
redis: {mode: embedded}
replicaCount: 1
upstream: {url: "http://127.0.0.1:9/mcp", headers: ["X-Token: ${UPSTREAM_TOKEN}"]}
console: {enabled: true, token: {existingSecret: console}, url: "https://console.example.com", traceURL: "http://jaeger:16686/trace/{trace_id}"}
webhooks: {url: "http://127.0.0.1:9/hook", secret: {existingSecret: hooks}, events: [task.failed, task.completed], tools: ["deploy_*"]}
publicURL: "https://mcp.example.com/mcp"
trustedProxies: [10.0.0.0/8]
policy: {task: [slow], sync: ["admin_*"], noRerun: [pay], rerun: [fetch]}
metrics: {port: 9102}
drainTimeoutSeconds: 1
shutdownTimeoutSeconds: 1
flags: {max-inflight: 50, log-level: debug, fallback-tools: true, allowed-origins: ["https://a.example"], max-body: 8MiB, lease: 20s, poll-limit: 0}
extraEnv: [{name: UPSTREAM_TOKEN, valueFrom: {secretKeyRef: {name: upstream-token, key: token}}}]
`)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(split(out))
	if err != nil {
		t.Fatal(err)
	}
	r := newRendered(t, objs)
	secrets := map[string]string{
		"console":        "console-token",
		"hooks":          "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32)),
		"upstream-token": "t0ken",
	}

	// The environment as the kubelet builds it: Secrets' values, and
	// $(VAR) expanded from the entries before.
	dir := t.TempDir()
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "TASKGATE_") {
			env = append(env, e)
		}
	}
	defined := map[string]string{}
	expand := func(s string) string {
		return regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := defined[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	for _, e := range r.c.Env {
		v := expand(e.Value)
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil || secrets[ref.Name] == "" {
				t.Fatalf("env %s: no test value for %+v", e.Name, e.ValueFrom)
			}
			v = secrets[ref.Name]
		}
		defined[e.Name] = v
		env = append(env, e.Name+"="+v)
	}

	// The args, with the pod's paths and ports made this machine's.
	ports := map[string]string{} // container port → 127.0.0.1:free
	var args []string
	for _, a := range r.c.Args {
		a = expand(a)
		if m := regexp.MustCompile(`0\.0\.0\.0:(\d+)`).FindStringSubmatch(a); m != nil {
			ports[m[1]] = freeAddr(t)
			a = strings.Replace(a, m[0], ports[m[1]], 1)
		}
		if p, ok := strings.CutPrefix(a, "--policy="); ok {
			cm := objs.configMaps["taskgate-policy"]
			file := filepath.Join(dir, filepath.Base(p))
			if err := os.WriteFile(file, []byte(cm.Data[filepath.Base(p)]), 0o600); err != nil {
				t.Fatal(err)
			}
			a = "--policy=" + file
		}
		args = append(args, a)
	}

	bin := buildTaskgate(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // the process this test started, by its PID
		<-exited
	})

	mcp, console, metrics := ports[itoa(containerPort(t, r.c, "http"))], ports[itoa(containerPort(t, r.c, "console"))], ports[itoa(containerPort(t, r.c, "metrics"))]
	if mcp == "" || console == "" || metrics == "" {
		t.Fatalf("listen addresses %v: want the MCP, console and metrics ports", ports)
	}
	for _, probe := range []struct {
		url, token string
		want       int
	}{
		{"http://" + mcp + "/healthz", "", http.StatusOK},
		{"http://" + metrics + "/metrics", "", http.StatusOK},
		{"http://" + console + "/", "", http.StatusSeeOther},                  // to the login form
		{"http://" + console + "/", "console-token", http.StatusOK},           // the token from TASKGATE_CONSOLE_TOKEN
		{"http://" + console + "/", "another-token", http.StatusUnauthorized}, // and only it
	} {
		status, err := getWhileStarting(probe.url, probe.token, exited)
		if err != nil || status != probe.want {
			t.Fatalf("GET %s: %d %v, want %d; taskgate's output:\n%s", probe.url, status, err, probe.want, logs.String())
		}
	}
}

// getWhileStarting GETs url (with the bearer token unless "") until it answers, the process exits, or a
// minute passes (a loaded machine starts a binary slowly); it returns the
// status.
func getWhileStarting(url, token string, exited <-chan error) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("taskgate exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, err
		}
	}
}

// freeAddr is a loopback address with a port free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// buildTaskgate builds ./cmd/taskgate of the repository around this
// module into a temporary directory.
func buildTaskgate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "taskgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/taskgate")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/taskgate: %v\n%s", err, out)
	}
	return bin
}
