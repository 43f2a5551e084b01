package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/upstream"
)

// callMarked sends a tools/call of session c on ctx and returns its last
// message (the answer).
func (c *client) callMarked(ctx context.Context, id int, name string, args map[string]any) msg {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", c.sid)
	resp, err := c.h.Do(req)
	if err != nil {
		c.t.Error(err)
		return msg{}
	}
	ms := readAll(c.t, resp)
	if len(ms) == 0 {
		c.t.Errorf("%s: no answer", name)
		return msg{}
	}
	return ms[len(ms)-1]
}

// childPID is the pid of session c's own child, once a call is in flight
// on it.
func childPID(t *testing.T, b *Bridge, c *client) int {
	t.Helper()
	var pid int
	waitFor(t, "the call in flight on the session's child", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		s := b.sessions[c.sid]
		if s == nil || s.proc == nil || s.Inflight != 1 {
			return false
		}
		pid = s.proc.cmd.Process.Pid
		return true
	})
	return pid
}

// killMidCall starts a 30 s call of session c (marked rerunnable or not),
// SIGKILLs the session's child under it (a process the bridge we started
// started), and returns the call's answer and the killed pid.
func killMidCall(t *testing.T, b *Bridge, c *client, rerunnable bool) (msg, int) {
	t.Helper()
	ctx := context.Background()
	if rerunnable {
		ctx = upstream.WithRerunnable(ctx)
	}
	done := make(chan msg, 1)
	go func() { done <- c.callMarked(ctx, 7, "slow", map[string]any{"seconds": 30.0, "text": "x"}) }()
	pid := childPID(t, b, c)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return <-done, pid
}

// exitedAnswer checks that m is the bridge's answer for a child killed
// under the call: a JSON-RPC error naming the signal, marked as the
// bridge's (the gateway counts it as a failure on the way).
func exitedAnswer(t *testing.T, m msg) {
	t.Helper()
	if m.Error == nil || !strings.Contains(m.Error.Message, "the upstream process was killed by signal killed") {
		t.Fatalf("the killed call's answer: %+v, want an error naming the signal", m)
	}
}

// TestBridgeRespawnForRerun: a session whose own child is killed under a
// call marked rerunnable lives on: the call fails naming the signal, and
// the session's next call runs in a fresh child (another pid), started
// with the session's own initialize (its capabilities: the fresh child
// can ask the client for elicitation).
func TestBridgeRespawnForRerun(t *testing.T) {
	b, logs := startBridge(t, nil)
	c := newClient(t, b)
	m, pid := killMidCall(t, b, c, true)
	exitedAnswer(t, m)
	if got := c.tool(8, "echo", map[string]any{"text": "again"}); got != "again" {
		t.Fatalf("the session's call after the kill: %q, want its fresh child's answer", got)
	}
	b.mu.Lock()
	s := b.sessions[c.sid]
	var now int
	var caps json.RawMessage
	if s != nil && s.proc != nil {
		now, caps = s.proc.cmd.Process.Pid, s.params
	}
	b.mu.Unlock()
	if s == nil || now == 0 || now == pid {
		t.Fatalf("the session's child after the kill: pid %d (killed %d), session %v", now, pid, s != nil)
	}
	if !strings.Contains(string(caps), `"elicitation"`) {
		t.Fatalf("the session's recorded initialize: %s", caps)
	}
	if !strings.Contains(logs.String(), "the session lives on with a fresh process") {
		t.Fatalf("the respawn is not logged:\n%s", logs)
	}
	// A rerun of the killed call completes on the fresh child.
	m = c.callMarked(upstream.WithRerunnable(context.Background()), 9, "slow", map[string]any{"seconds": 0.05, "text": "rerun"})
	if m.Error != nil || !strings.Contains(string(m.Result), "slept 0.05 s: rerun") {
		t.Fatalf("the rerun: %+v", m)
	}
	b.mu.Lock()
	reruns := s.reruns
	b.mu.Unlock()
	if reruns != 0 {
		t.Fatalf("rerunnable calls counted in flight after they ended: %d", reruns)
	}
}

// TestBridgeNoRespawnWithoutRerun: a session whose child is killed under
// a call not marked rerunnable ends as before: the call fails naming the
// signal, the session answers 404, and no fresh child is started for it.
func TestBridgeNoRespawnWithoutRerun(t *testing.T) {
	b, logs := startBridge(t, nil)
	c := newClient(t, b)
	m, _ := killMidCall(t, b, c, false)
	exitedAnswer(t, m)
	gone(t, c)
	if strings.Contains(logs.String(), "lives on with a fresh process") {
		t.Fatalf("a session with no rerunnable call was kept:\n%s", logs)
	}
}

// TestBridgeRespawnOverBudget: a rerunnable call's child stopped over its
// memory limit is replaced too: the call fails naming the limit, and the
// session's next call is answered by a fresh child.
func TestBridgeRespawnOverBudget(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) {
		o.Command = []string{hog(t)}
		o.MemoryLimit = 96 << 20
		o.BudgetEvery = 50 * time.Millisecond
	})
	c := newClient(t, b)
	m := c.callMarked(upstream.WithRerunnable(context.Background()), 3, "growhold", nil)
	if m.Error == nil || !strings.Contains(m.Error.Message, "went over --upstream-memory-limit (96 MiB)") {
		t.Fatalf("the call whose child went over its budget: %+v, want an error naming the limit", m)
	}
	if got := c.tool(4, "echo", map[string]any{"text": "fresh"}); got != "fresh" {
		t.Fatalf("the session's call after the kill: %q, want its fresh child's answer", got)
	}
}

// TestBridgePrincipalRespawnForRerun (issue 37, item 5): a principal's
// child killed under a call marked rerunnable is replaced, and the
// principal's sessions live on: the call fails naming the signal; both of
// her sessions (the one with the call, and the other) answer from one
// fresh child, which a new session of hers joins; the rerun completes
// there; another principal's child is left alone.
func TestBridgePrincipalRespawnForRerun(t *testing.T) {
	b, logs := startBridge(t, func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour })
	a1, a2, bob := newClientAs(t, b, "alice"), newClientAs(t, b, "alice"), newClientAs(t, b, "bob")
	pbob := childOf(b, bob.sid)
	m, pid := killMidCall(t, b, a1, true)
	exitedAnswer(t, m)
	if got := a2.tool(8, "echo", map[string]any{"text": "other"}); got != "other" {
		t.Fatalf("alice's other session after the kill: %q, want the fresh child's answer", got)
	}
	if got := a1.tool(9, "echo", map[string]any{"text": "again"}); got != "again" {
		t.Fatalf("alice's session after the kill: %q, want the fresh child's answer", got)
	}
	fresh := childOf(b, a1.sid)
	if fresh == nil || fresh.cmd.Process.Pid == pid || childOf(b, a2.sid) != fresh {
		t.Fatalf("alice's sessions after the kill are not on one fresh child (killed pid %d)", pid)
	}
	b.mu.Lock()
	pc := b.fleet.principals["alice"]
	b.mu.Unlock()
	if pc == nil || pc.proc != fresh {
		t.Fatal("alice's principal child is not the fresh one")
	}
	if a3 := newClientAs(t, b, "alice"); childOf(b, a3.sid) != fresh {
		t.Fatal("a new session of alice is not on her fresh child")
	}
	if !strings.Contains(logs.String(), "its sessions live on with a fresh process") {
		t.Fatalf("the respawn is not logged:\n%s", logs)
	}
	m = a1.callMarked(upstream.WithRerunnable(context.Background()), 10, "slow", map[string]any{"seconds": 0.05, "text": "rerun"})
	if m.Error != nil || !strings.Contains(string(m.Result), "slept 0.05 s: rerun") {
		t.Fatalf("the rerun: %+v", m)
	}
	if childOf(b, bob.sid) != pbob || !pbob.alive() {
		t.Fatal("bob's child was touched")
	}
	if n := running(b); n != 2 {
		t.Fatalf("%d children, want 2 (alice's fresh one, bob's)", n)
	}
}

// TestBridgePrincipalNoRespawnWithoutRerun: a principal's child killed
// under a call not marked rerunnable ends all of its sessions as before
// (404), and no fresh child is started.
func TestBridgePrincipalNoRespawnWithoutRerun(t *testing.T) {
	b, logs := startBridge(t, func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour })
	a1, a2 := newClientAs(t, b, "alice"), newClientAs(t, b, "alice")
	m, _ := killMidCall(t, b, a1, false)
	exitedAnswer(t, m)
	gone(t, a1)
	gone(t, a2)
	if strings.Contains(logs.String(), "live on with a fresh process") {
		t.Fatalf("a principal's sessions with no rerunnable call were kept:\n%s", logs)
	}
	b.mu.Lock()
	_, kept := b.fleet.principals["alice"]
	b.mu.Unlock()
	if kept {
		t.Fatal("alice's principal child is still recorded")
	}
}

// TestBridgePrincipalRespawnOverBudget: a principal's child stopped over
// its memory limit under a rerunnable call is replaced too.
func TestBridgePrincipalRespawnOverBudget(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) {
		o.Command = []string{hog(t)}
		o.PerPrincipal = true
		o.MemoryLimit = 96 << 20
		o.BudgetEvery = 50 * time.Millisecond
	})
	a1, a2 := newClientAs(t, b, "alice"), newClientAs(t, b, "alice")
	m := a1.callMarked(upstream.WithRerunnable(context.Background()), 3, "growhold", nil)
	if m.Error == nil || !strings.Contains(m.Error.Message, "went over --upstream-memory-limit (96 MiB)") {
		t.Fatalf("the call whose child went over its budget: %+v, want an error naming the limit", m)
	}
	for i, c := range []*client{a1, a2} {
		if got := c.tool(4+i, "echo", map[string]any{"text": "fresh"}); got != "fresh" {
			t.Fatalf("alice's session %d after the kill: %q, want the fresh child's answer", i+1, got)
		}
	}
}
