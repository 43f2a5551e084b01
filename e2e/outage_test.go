package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// Outages against the built binary: its own --redis-url client options
// (fail fast), its /readyz, and its worker's retry of a result written
// while Redis is down. gateway/outage_test.go covers the same ground
// in-process, method by method.

// readyz returns the gateway's /readyz status and checks.
func (g *gateway) readyz(t *testing.T) (int, map[string]string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(g.base + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Checks
}

// waitReadyz polls /readyz until it answers status and returns the checks.
func (g *gateway) waitReadyz(t *testing.T, status int) map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, checks := g.readyz(t)
		if got == status {
			return checks
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %v, want %d", got, checks, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTerminal polls tasks/get until the task is terminal.
func waitTerminal(t *testing.T, s *rawSession, id string) (status, message string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var tk struct {
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		}
		mustDecode(t, s.mustResult("tasks/get", map[string]any{"taskId": id}), &tk)
		switch tk.Status {
		case "completed", "failed", "cancelled":
			return tk.Status, tk.StatusMessage
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s (%s)", id, tk.Status, tk.StatusMessage)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func startTask(t *testing.T, s *rawSession, tool string, args map[string]any) string {
	t.Helper()
	var ct struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	mustDecode(t, s.mustResult("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": taskTTLMs}}), &ct)
	if ct.Task.TaskID == "" {
		t.Fatalf("tools/call %s: no task", tool)
	}
	return ct.Task.TaskID
}

func callText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	mustDecode(t, raw, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// wantInternal checks a -32603 whose message has every one of want.
func wantInternal(t *testing.T, what string, m rpcMsg, want ...string) {
	t.Helper()
	if m.Error == nil || m.Error.Code != -32603 {
		t.Errorf("%s = result %s error %s, want -32603", what, m.Result, m.Error)
		return
	}
	for _, w := range want {
		if !strings.Contains(m.Error.Message, w) {
			t.Errorf("%s: message %q does not say %q", what, m.Error.Message, w)
		}
	}
}

// TestRedisOutageBinary: Redis stops while a task runs. The binary stays
// up: /readyz says 503 naming the store, a new task is refused at once with
// -32603 "task store unavailable", plain calls still pass through; the
// upstream finishes during the outage, and once Redis is back (with its
// data, AOF) the task reads completed with the upstream's result.
func TestRedisOutageBinary(t *testing.T) {
	t.Parallel()
	srv := redistest.NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always")
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Recorder: rec})
	g := startGateway(t, up, append(slices.Clone(taskFlags), "--redis-url", "redis://"+srv.Addr)...)
	s := newRawSession(t, g.URL, "")
	s.hc.Timeout = 10 * time.Second // the hang guard of every request below
	s.initialize()

	id := startTask(t, s, "slow", map[string]any{"seconds": 1, "text": "e2e kept"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	checks := g.waitReadyz(t, http.StatusServiceUnavailable)
	if !strings.Contains(checks["store"], "task store unavailable") || checks["upstream"] != "ok" {
		t.Errorf("/readyz checks during the outage = %v", checks)
	}
	m := s.call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{"ttl": taskTTLMs}})
	wantInternal(t, "task-augmented tools/call during the outage", m, "task store unavailable")
	wantInternal(t, "tasks/get during the outage", s.call("tasks/get", map[string]any{"taskId": id}), "task store unavailable")
	if got := callText(t, s.mustResult("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "through"}})); got != "through" {
		t.Errorf("echo during the outage = %q", got)
	}
	older := newRawSession(t, g.URL, "")
	older.hc.Timeout = 10 * time.Second
	older.mustResult("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "older", "version": "1"}})
	if got := callText(t, older.mustResult("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "older"}})); got != "older" {
		t.Errorf("2025-06-18 echo during the outage = %q", got)
	}

	if err := rec.WaitFor(ctx, "slow", testupstream.Completed, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the worker holds the result and cannot write it
	srv.Start()
	g.waitReadyz(t, http.StatusOK)
	if status, msg := waitTerminal(t, s, id); status != "completed" {
		t.Fatalf("task across the outage: %s (%s), want completed", status, msg)
	}
	if got := callText(t, s.mustResult("tasks/result", map[string]any{"taskId": id})); got != "slept 1 s: e2e kept" {
		t.Errorf("tasks/result = %q", got)
	}
}

// stoppableHTTP serves h on a fixed loopback address, and can stop (as if
// the process died) and start again there.
type stoppableHTTP struct {
	addr string
	h    func() http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func newStoppableHTTP(t *testing.T, h func() http.Handler) *stoppableHTTP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stoppableHTTP{addr: ln.Addr().String(), h: h}
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *stoppableHTTP) serve(ln net.Listener) {
	srv := &http.Server{Handler: s.h()}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (s *stoppableHTTP) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (s *stoppableHTTP) start(t *testing.T) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ln net.Listener
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			s.serve(ln)
			return
		}
	}
	t.Fatalf("restart on %s: %v", s.addr, err)
}

// TestUpstreamOutageBinary: the upstream dies mid-task. The task ends
// failed naming the upstream (not stuck working), a plain call gets HTTP
// 200 with -32603 naming it; /readyz stays 200 (the store answers, so the
// replica stays in its load balancer and clients can read their tasks)
// and says "upstream" unreachable in its body until it is back.
func TestUpstreamOutageBinary(t *testing.T) {
	t.Parallel()
	rec := &testupstream.Recorder{}
	up := newStoppableHTTP(t, func() http.Handler { return testupstream.Handler(testupstream.Options{Recorder: rec}) })
	upURL := "http://" + up.addr + "/mcp"
	g := startGateway(t, upURL, taskFlags...)
	s := newRawSession(t, g.URL, "")
	s.hc.Timeout = 10 * time.Second
	s.initialize()

	id := startTask(t, s, "slow", map[string]any{"seconds": 30, "text": "never"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	up.stop()
	// Clients learn it was the upstream, not where it is.
	if status, msg := waitTerminal(t, s, id); status != "failed" || !strings.Contains(msg, "the upstream") || strings.Contains(msg, upURL) {
		t.Errorf("task whose upstream died: %s %q, want failed naming the upstream, not its address", status, msg)
	}
	status, msgs := s.post(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/call",
		"params": map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}})
	if status != http.StatusOK || len(msgs) != 1 {
		t.Fatalf("echo with the upstream down: HTTP %d %+v, want 200 and one response", status, msgs)
	}
	wantInternal(t, "echo with the upstream down", msgs[0], "the upstream", "unreachable")
	code, checks := g.readyz(t)
	if code != http.StatusOK || !strings.Contains(checks["upstream"], "unreachable") || strings.Contains(checks["upstream"], upURL) || checks["store"] != "ok" {
		t.Errorf("/readyz with the upstream down = %d %v, want 200 saying the upstream is unreachable", code, checks)
	}
	if status, msg := waitTerminal(t, s, id); status != "failed" || msg == "" {
		t.Errorf("the failed task is not readable with the upstream down: %s %q", status, msg)
	}
	up.start(t)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, checks = g.readyz(t); code == http.StatusOK && checks["upstream"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the upstream came back = %d %v", code, checks)
		}
	}
}
