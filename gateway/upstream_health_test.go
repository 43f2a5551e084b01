package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/upstream"
)

// healthRig is one gateway (with a store) in front of a real test
// upstream served at /mcp, given the upstream URL path, and its log.
type healthRig struct {
	h    *Handler
	base string
	mu   sync.Mutex
	logs bytes.Buffer
}

func newHealthRig(t *testing.T, path string, mod func(*Config)) *healthRig {
	t.Helper()
	up := httptest.NewServer(testupstream.Mux(testupstream.Options{}))
	t.Cleanup(up.Close)
	client, err := upstream.New(up.URL+path, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rig := &healthRig{}
	cfg := Config{Upstream: client, Store: newMiniStore(t), Logger: zerolog.New(gwtest.LockedWriter{W: &rig.logs, Mu: &rig.mu})}
	if mod != nil {
		mod(&cfg)
	}
	rig.h, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rig.h.Close() })
	gw := httptest.NewServer(rig.h)
	t.Cleanup(gw.Close)
	rig.base = gw.URL
	return rig
}

// lines are the log lines containing s.
func (r *healthRig) lines(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func (r *healthRig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(r.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func upstreamUpMetric(t *testing.T, r *healthRig) string {
	t.Helper()
	_, body := r.get(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "taskgate_upstream_up "); ok {
			return v
		}
	}
	return "missing"
}

// TestUpstreamWrongPath: an upstream URL without the server's /mcp
// reaches the server, whose every MCP answer is a 404. The start check
// logs it at error with the fix, /readyz stays 200 (the store answers)
// but says the upstream is not an MCP endpoint, taskgate_upstream_up is
// 0, and the 404s clients' requests then get are logged again only once
// per notMCPLogEvery.
func TestUpstreamWrongPath(t *testing.T) {
	rig := newHealthRig(t, "", nil)
	err := rig.h.CheckUpstream(context.Background())
	var se *upstream.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Fatalf("CheckUpstream = %v, want the 404", err)
	}
	lines := rig.lines("not an MCP endpoint")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level":"error"`) || !strings.Contains(lines[0], "did you mean "+rig.h.cfg.Upstream.URL()+"/mcp?") {
		t.Fatalf("log after the check = %q, want one error line with the fix", lines)
	}
	status, body := rig.get(t, "/readyz")
	if status != http.StatusOK || !strings.Contains(body, "not an MCP endpoint") || strings.Contains(body, rig.h.cfg.Upstream.URL()) {
		t.Errorf("/readyz = %d %s, want 200 saying the upstream is not an MCP endpoint, without its address", status, body)
	}
	if up := upstreamUpMetric(t, rig); up != "0" {
		t.Errorf("taskgate_upstream_up = %s, want 0", up)
	}
	for i := 0; i < 3; i++ {
		resp := gwtest.Post(t, rig.base+"/mcp", "application/json", gwtest.InitBody("2025-11-25"), http.Header{"Accept": {"application/json, text/event-stream"}})
		resp.Body.Close()
	}
	if n := len(rig.lines("not an MCP endpoint")); n != 1 {
		t.Errorf("%d log lines after three more 404s, want still 1 (rate-limited)", n)
	}
}

// TestUpstreamRightPath: the same upstream at its /mcp: the check passes,
// /readyz and taskgate_upstream_up say so, nothing is logged at error.
func TestUpstreamRightPath(t *testing.T) {
	rig := newHealthRig(t, "/mcp", nil)
	if err := rig.h.CheckUpstream(context.Background()); err != nil {
		t.Fatalf("CheckUpstream = %v", err)
	}
	if l := rig.lines(`"level":"error"`); len(l) != 0 {
		t.Errorf("error lines: %q", l)
	}
	if status, body := rig.get(t, "/readyz"); status != http.StatusOK || !strings.Contains(body, `"upstream":"ok"`) {
		t.Errorf("/readyz = %d %s", status, body)
	}
	if up := upstreamUpMetric(t, rig); up != "1" {
		t.Errorf("taskgate_upstream_up = %s, want 1", up)
	}
}

// TestReadyRequiresUpstream: with Config.ReadyRequiresUpstream a wrong
// upstream makes the replica unready.
func TestReadyRequiresUpstream(t *testing.T) {
	rig := newHealthRig(t, "/", func(c *Config) { c.ReadyRequiresUpstream = true })
	_ = rig.h.CheckUpstream(context.Background())
	if status, body := rig.get(t, "/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "not an MCP endpoint") {
		t.Errorf("/readyz = %d %s, want 503 naming the upstream", status, body)
	}
}

// TestUpstreamUnreachableAtStart: the check warns and returns the
// unreachable error; the gateway still answers /readyz 200.
func TestUpstreamUnreachableAtStart(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/mcp"
	dead.Close()
	client, err := upstream.New(url, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	h, err := New(Config{Upstream: client, Store: newMiniStore(t), Logger: zerolog.New(gwtest.LockedWriter{W: &logs, Mu: &mu})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.CheckUpstream(context.Background()); !errors.Is(err, upstream.ErrUnreachable) {
		t.Fatalf("CheckUpstream = %v, want unreachable", err)
	}
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	if !strings.Contains(log, `"level":"warn"`) || !strings.Contains(log, "serving anyway") || !strings.Contains(log, url) {
		t.Errorf("log = %s, want a warning naming the URL", log)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "unreachable") {
		t.Errorf("/readyz = %d %s, want 200 saying the upstream is unreachable", rec.Code, rec.Body)
	}
}
