package stdio

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// warmPids are the pids of the warm children waiting now.
func warmPids(b *Bridge) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var pids []int
	for _, p := range b.fleet.warm.ready {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func sessionPid(b *Bridge, c *client) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[c.sid].proc.cmd.Process.Pid
}

// TestBridgeWarm: a new session takes the child started ahead (a warm
// start, counted as one), the pool is refilled with another process, no
// two sessions share one, a warm child that exits while it waits is
// replaced and logged, the pool never holds more than MaxSessions allows,
// and Close stops the warm children.
func TestBridgeWarm(t *testing.T) {
	b, logs := startBridge(t, func(o *Options) { o.Warm = 1; o.MaxSessions = 3 })
	waitFor(t, "a warm child", func() bool { return b.WarmReady() == 1 })
	first := warmPids(b)[0]

	a := newClient(t, b)
	if got := sessionPid(b, a); got != first {
		t.Fatalf("session a's child is pid %d, want the warm one %d", got, first)
	}
	if got := a.tool(1, "counter", nil); got != "1" {
		t.Fatalf("a counter: %q", got)
	}
	waitFor(t, "the pool refilled", func() bool { return b.WarmReady() == 1 })
	second := warmPids(b)[0]
	if second == first {
		t.Fatal("the pool kept the child a session took")
	}
	m := b.Metrics()
	if n := testutil.ToFloat64(m.starts.WithLabelValues(startWarm)); n != 1 {
		t.Fatalf("warm starts: %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.starts.WithLabelValues(startCold)); n != 0 {
		t.Fatalf("cold starts: %v, want 0", n)
	}
	if n := testutil.CollectAndCount(m.seconds); n != 2 {
		t.Fatalf("start latency series: %d, want 2 (cold, warm)", n)
	}

	// A warm child that exits while it waits is replaced.
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the exit logged", func() bool {
		return strings.Contains(logs.String(), "a warm upstream process exited while it waited for a session")
	})
	waitFor(t, "a replacement", func() bool { p := warmPids(b); return len(p) == 1 && p[0] != second })
	third := warmPids(b)[0]

	z := newClient(t, b)
	if got := sessionPid(b, z); got != third || got == sessionPid(b, a) {
		t.Fatalf("session z's child is pid %d, want the warm %d (a's is %d)", got, third, sessionPid(b, a))
	}
	if got := z.tool(1, "counter", nil); got != "1" {
		t.Fatalf("z counter: %q, want its own 1", got)
	}
	// Two sessions of three: one warm child fills the replica.
	waitFor(t, "the pool refilled", func() bool { return b.WarmReady() == 1 })
	y := newClient(t, b) // takes the last warm child; none is started beyond MaxSessions
	if got := y.tool(1, "counter", nil); got != "1" {
		t.Fatalf("y counter: %q", got)
	}
	b.mu.Lock()
	want := b.fleet.warmWantedLocked()
	n := len(b.fleet.procs)
	b.mu.Unlock()
	if want != 0 || n != 3 {
		t.Fatalf("at MaxSessions: %d warm wanted, %d children; want 0 and 3", want, n)
	}
	if err := testutil.CollectAndCompare(m.children, strings.NewReader(`
# HELP taskgate_stdio_children Running children of --upstream-command on this replica: session (a client session's own), principal (a principal's, --upstream-scope principal), shared (--upstream-shared, or the 2026-07-28 child), warm (started ahead, waiting for a session).
# TYPE taskgate_stdio_children gauge
taskgate_stdio_children{scope="principal"} 0
taskgate_stdio_children{scope="session"} 3
taskgate_stdio_children{scope="shared"} 0
taskgate_stdio_children{scope="warm"} 0
`)); err != nil {
		t.Fatal(err)
	}

	// Ending a session makes room: the pool is refilled, and Close stops it.
	req := a.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "exit", "arguments": map[string]any{"code": 3}}})
	req.Body.Close()
	waitFor(t, "the pool refilled after a session ended", func() bool { return b.WarmReady() == 1 })
	last := warmPids(b)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(last, 0); err == nil {
		t.Fatalf("warm child %d still running after Close", last)
	}
}

// TestBridgeWarmNotShared: Shared keeps its one child and no pool.
func TestBridgeWarmNotShared(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.Warm = 2; o.Shared = true })
	newClient(t, b)
	if n := b.WarmReady(); n != 0 {
		t.Fatalf("%d warm children with Shared", n)
	}
}
