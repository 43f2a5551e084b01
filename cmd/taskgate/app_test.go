package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestFlagErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	up := "--upstream=http://127.0.0.1:1/mcp"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "missing --upstream"},
		{[]string{"serve", "--upstream", "ftp://x/mcp"}, "invalid --upstream"},
		{[]string{"serve", "--upstream", "http:///mcp"}, "has no host"},
		{[]string{"serve", up, "--default-ttl", "soon"}, `--default-ttl wants a duration such as 500ms, 30s or 2m, got "soon"`},
		{[]string{"serve", up, "--max-body", "lots"}, `invalid --max-body "lots"`},
		{[]string{"serve", up, "--log-level", "loud"}, "invalid --log-level"},
		{[]string{"serve", up, "--log-format", "xml"}, "invalid --log-format"},
		{[]string{"serve", up, "--path", "mcp"}, "must start with /"},
		{[]string{"serve", up, "--default-ttl", "48h"}, "longer than --max-ttl"},
		{[]string{"serve", up, "--redis-url", "nope://x"}, "invalid --redis-url"},
		{[]string{"serve", up, "--listen", busy.Addr().String()}, "address already in use"},
		{[]string{"serve", "--bogus"}, "unknown flag --bogus"},
		{[]string{"serve", up, "--latency-sync", "0s"}, "invalid --latency-sync 0s"},
		{[]string{"serve", up, "--latency-sync", "often"}, `--latency-sync wants a duration such as 500ms, 30s or 2m, got "often"`},
		{[]string{"serve", up, "--drain-timeout", "-1s"}, "invalid --drain-timeout -1s"},
		{[]string{"serve", up, "--upstream-restart-grace", "0s"}, "invalid --upstream-restart-grace 0s: want a positive duration, e.g. 60s"},
		{[]string{"serve", up, "--poll-limit", "-1"}, "invalid --poll-limit -1"},
		{[]string{"serve", up, "--poll-limit", "fast"}, `--poll-limit wants a number such as 10 or 0.5, got "fast"`},
		{[]string{"serve", up, "--max-inflight-per-principal", "-1"}, "invalid --max-inflight-per-principal -1"},
		{[]string{"serve", up, "--max-task-rate", "-1"}, "invalid --max-task-rate -1"},
		{[]string{"serve", up, "--listen", "127.0.0.1:0", "--metrics-listen", "256.1.1.1:1"}, "cannot listen on --metrics-listen 256.1.1.1:1"}, // not the default port: a gateway running on this machine would take it
		{[]string{"serve", up, "--drain-timeout", "later"}, `--drain-timeout wants a duration such as 500ms, 30s or 2m, got "later"`},
		{[]string{"serve", up, "--lease", "0s"}, "invalid --lease 0s"},
		{[]string{"serve", up, "--listen", "127.0.0.1:0", "--console-listen", "0.0.0.0:0"}, "not a loopback address, without a token"},
		{[]string{"serve", up, "--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--console-trace-url", "javascript:x"}, "invalid trace URL"},
		{[]string{"serve", up, "--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--console-host", "https://console.example/"}, `invalid --console-host "https://console.example/": want NAME or NAME:PORT`},
		{[]string{"serve", up, "--lease", "2s", "--lease-renew", "2s"}, "invalid --lease-renew 2s: it must be positive and shorter than --lease 2s"},
		{[]string{"serve", up, "--lease-renew", "-1s"}, "invalid --lease-renew -1s"},
		{[]string{"serve", up, "--read-timeout", "-1s"}, "invalid --read-timeout -1s"},
		{[]string{"serve", up, "--keepalive", "-1s"}, "invalid --keepalive -1s"},
		{[]string{"serve", "extra", "--upstream", "http://127.0.0.1:1/mcp"}, `unexpected argument "extra"`},
		{[]string{"serve", up, "--allowed-origins", "https://x/path"}, `allowed origin "https://x/path" is not an origin`},
		{[]string{"serve", up, "--anonymous-tasks-max", "0"}, "invalid --anonymous-tasks-max 0"},
		{[]string{"serve", up, "--anonymous-tasks-per-address", "-5"}, "invalid --anonymous-tasks-per-address -5"},
		{[]string{"serve", up, "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"serve", up, "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, "invalid --tls-cert/--tls-key"},
		{[]string{"serve", up, "--upstream-ca", "/nonexistent/ca.pem"}, "invalid --upstream-ca"},
		{[]string{"serve", up, "--upstream-client-key", "k.pem"}, "--upstream-client-cert and --upstream-client-key go together"},
		{[]string{"serve", up, "--upstream-header", "NoColon"}, `invalid --upstream-header "NoColon": want 'Name: value'`},
		{[]string{"serve", up, "--upstream-header", "X-Key: ${TASKGATE_TEST_SURELY_UNSET}"}, "the environment has no ${TASKGATE_TEST_SURELY_UNSET}"},
		{[]string{"serve", "--upstream", "http://u:s3cret@[::1/mcp"}, "invalid --upstream"},
		{[]string{"serve", up, "--fallback-tools", "--fallback-prefix", "my tools "}, "invalid --fallback-prefix"},
		{[]string{"serve", "--upstream", "127.0.0.1:3000/mcp"}, `upstream URL "127.0.0.1:3000/mcp" has no scheme: did you mean http://127.0.0.1:3000/mcp?`},
		{[]string{"serve", up, "--listen", "8081"}, "invalid --listen 8081: want HOST:PORT, e.g. 127.0.0.1:8081 (or :8081 for every interface)"},
		{[]string{"serve", up, "--listen", "localhost"}, `invalid --listen "localhost": want HOST:PORT`},
		{[]string{"serve", up, "--listen", "127.0.0.1:0", "--metrics-listen", "9090"}, "invalid --metrics-listen 9090: want HOST:PORT, e.g. 127.0.0.1:9090"},
		{[]string{"serve", up, "--listen", busy.Addr().String()}, "another process listens there (stop it, or give another --listen)"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		args := tt.args
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--listen") }) {
			// Never the default port: a gateway running on this machine
			// may hold it, and serve listens before it starts anything.
			args = append([]string{args[0], "--listen=127.0.0.1:0"}, args[1:]...)
		}
		err := run(append([]string{"taskgate"}, args...), &out, &errOut)
		if err == nil {
			t.Errorf("%v: no error", tt.args)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %q, want one line containing %q", tt.args, err, tt.want)
		}
		if strings.Contains(out.String()+errOut.String(), "USAGE") {
			t.Errorf("%v: printed the help text", tt.args)
		}
		if strings.Contains(err.Error()+out.String()+errOut.String(), "s3cret") {
			t.Errorf("%v: a password shows: %v", tt.args, err)
		}
	}
}

func TestEnvVarSetsFlag(t *testing.T) {
	t.Setenv("TASKGATE_UPSTREAM", "ftp://from-env/mcp")
	t.Setenv("TASKGATE_LISTEN", "127.0.0.1:0")
	err := run([]string{"taskgate", "serve"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ftp://from-env/mcp") {
		t.Fatalf("TASKGATE_UPSTREAM not read: %v", err)
	}
}

// TestConsoleHostEnv: TASKGATE_CONSOLE_HOST sets --console-host, checked
// before the gateway starts.
func TestConsoleHostEnv(t *testing.T) {
	t.Setenv("TASKGATE_CONSOLE_HOST", "console.example,evil.example/x")
	err := run([]string{"taskgate", "serve", "--upstream", "http://127.0.0.1:1/mcp", "--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0"},
		&bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `invalid --console-host "evil.example/x"`) {
		t.Fatalf("TASKGATE_CONSOLE_HOST not read: %v", err)
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"taskgate", "version"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "taskgate ") {
		t.Errorf("version printed %q", out.String())
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"4194304": 4 << 20, "4MiB": 4 << 20, "512KiB": 512 << 10, "1GB": 1e9, "10kb": 10e3, " 7 B ": 7}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "4XB", "MiB", "99999999999GiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestUpstreamHeaders(t *testing.T) {
	env := map[string]string{"KEY": "k-123"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	h, err := upstreamHeaders([]string{"X-Api-Key: ${KEY}", "X-Plain:  two words ", "X-Api-Key: second"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Values("X-Api-Key"); len(got) != 2 || got[0] != "k-123" || got[1] != "second" {
		t.Errorf("X-Api-Key = %q", got)
	}
	if got := h.Get("X-Plain"); got != "two words" {
		t.Errorf("X-Plain = %q", got)
	}
	for _, bad := range []string{": v", "Bad Name: v", "X: ${MISSING}"} {
		if _, err := upstreamHeaders([]string{bad}, lookup); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"ready":false,"checks":{"store":"task store unavailable"}}`)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if err := run([]string{"taskgate", "healthcheck", "--url", srv.URL + "/readyz"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "ready") {
		t.Errorf("ready gateway: %v %q", err, out.String())
	}
	status = http.StatusServiceUnavailable
	err := run([]string{"taskgate", "healthcheck", "--url", srv.URL + "/readyz"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "not ready: HTTP 503") || !strings.Contains(err.Error(), "task store unavailable") {
		t.Errorf("unready gateway: %v, want the reason", err)
	}
	srv.Close()
	if err := run([]string{"taskgate", "healthcheck", "--url", srv.URL + "/readyz"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("no gateway: %v", err)
	}
}

// TestLogFormat: timestamps carry milliseconds; a console log written to a
// file (not a terminal) has no colour codes.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("json", "info", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("x")
	if !regexp.MustCompile(`"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}`).Match(buf.Bytes()) {
		t.Errorf("json line %s: want a millisecond timestamp", buf.String())
	}
	buf.Reset()
	if log, err = newLogger("console", "info", &buf); err != nil {
		t.Fatal(err)
	}
	log.Info().Str("k", "v").Msg("x")
	if bytes.Contains(buf.Bytes(), []byte("\x1b[")) {
		t.Errorf("console line to a buffer has colour codes: %q", buf.String())
	}
}

// TestHelpText: placeholders say what a flag takes; tools, which reads the
// rules file once, does not promise reloads.
func TestHelpText(t *testing.T) {
	var out, errOut bytes.Buffer
	_ = run([]string{"taskgate", "serve", "--help"}, &out, &errOut)
	for _, want := range []string{"--upstream URL", "--task GLOB", "--policy FILE", "reloaded on SIGHUP"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	out.Reset()
	_ = run([]string{"taskgate", "tools", "--help"}, &out, &errOut)
	if !strings.Contains(out.String(), "--policy FILE") || strings.Contains(out.String(), "SIGHUP") {
		t.Errorf("tools --help: want --policy FILE and no SIGHUP promise:\n%s", out.String())
	}
}

// TestBusyPortBeforeChild: a busy --listen is reported before the stdio
// child starts (it would have created the file).
func TestBusyPortBeforeChild(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	marker := filepath.Join(t.TempDir(), "child-ran")
	err = run([]string{"taskgate", "serve", "--listen", busy.Addr().String(), "--upstream-command", "touch " + marker}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "another process listens there") {
		t.Fatalf("serve on a busy port: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the stdio child was started before the busy port was found")
	}
}
