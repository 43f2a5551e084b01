//go:build linux

package stdio

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var (
	hogOnce sync.Once
	hogBin  string
	hogErr  error
)

// hog builds testdata/hog once.
func hog(t *testing.T) string {
	t.Helper()
	hogOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stdio-hog")
		if err != nil {
			hogErr = err
			return
		}
		hogBin = filepath.Join(dir, "hog")
		if out, err := exec.Command("go", "build", "-o", hogBin, "./testdata/hog").CombinedOutput(); err != nil {
			hogErr = fmt.Errorf("building testdata/hog: %v\n%s", err, out)
		}
	})
	if hogErr != nil {
		t.Fatal(hogErr)
	}
	return hogBin
}

// selfRSS is the test process' resident memory, in bytes.
func selfRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	_, u, ok := parseStat(b)
	if !ok {
		t.Fatalf("cannot parse /proc/self/stat: %q", b)
	}
	return u.rss
}

// gone waits for c's session to end (404), as after a crash.
func gone(t *testing.T, c *client) {
	t.Helper()
	waitFor(t, "the session to end", func() bool {
		r := c.post(map[string]any{"jsonrpc": "2.0", "id": 50, "method": "tools/list"})
		r.Body.Close()
		return r.StatusCode == http.StatusNotFound
	})
}

// TestBudgetMemoryLimit: a child that allocates without end is stopped
// at its memory limit, its session ends as after a crash, the log and
// taskgate_stdio_kills_total{limit="memory"} say so, the other session's
// child keeps answering, and the gateway's own memory stays flat.
func TestBudgetMemoryLimit(t *testing.T) {
	bin := hog(t)
	runtime.GC()
	before := selfRSS(t)
	b, logs := startBridge(t, func(o *Options) {
		o.Command = []string{bin}
		o.MemoryLimit = 96 << 20
		o.BudgetEvery = 50 * time.Millisecond
	})
	a, z := newClient(t, b), newClient(t, b)
	if got := a.tool(1, "grow", nil); got != "growing" {
		t.Fatalf("grow: %q", got)
	}
	gone(t, a)
	waitFor(t, "the kill logged", func() bool { return strings.Contains(logs.String(), `"limit":"memory"`) })
	if !strings.Contains(logs.String(), "went over --upstream-memory-limit (96 MiB)") {
		t.Fatalf("the log does not name the limit:\n%s", logs)
	}
	if n := testutil.ToFloat64(b.Metrics().kills.WithLabelValues(limitMemory)); n != 1 {
		t.Fatalf("kills{memory}: %v, want 1", n)
	}
	for i := range 5 {
		if got := z.tool(2+i, "echo", map[string]any{"text": "still"}); got != "still" {
			t.Fatalf("the other session: %q", got)
		}
	}
	runtime.GC()
	// The child held about 96 MiB when it was stopped; the gateway read
	// nothing of it. 48 MiB is a generous bound for the test's own growth.
	if after := selfRSS(t); after-before > 48<<20 {
		t.Fatalf("the gateway's resident memory grew from %d MiB to %d MiB", before>>20, after>>20)
	}
	if v := testutil.ToFloat64(b.Metrics().resident.WithLabelValues("total")); v <= 0 {
		t.Fatalf("resident total: %v, want the children's", v)
	}
}

// TestBudgetMemoryTotal: over the total, the idle child whose stop brings
// it back under gives way; the others keep answering.
func TestBudgetMemoryTotal(t *testing.T) {
	bin := hog(t)
	b, logs := startBridge(t, func(o *Options) {
		o.Command = []string{bin}
		o.MemoryTotal = 128 << 20
		o.BudgetEvery = 50 * time.Millisecond
	})
	a, y, z := newClient(t, b), newClient(t, b), newClient(t, b)
	if got := a.tool(1, "grow", nil); got != "growing" {
		t.Fatalf("grow: %q", got)
	}
	// No request of a's meanwhile: its child is the largest idle one.
	waitFor(t, "a child stopped", func() bool {
		return testutil.ToFloat64(b.Metrics().kills.WithLabelValues(limitMemoryTotal)) > 0
	})
	gone(t, a)
	if n := testutil.ToFloat64(b.Metrics().kills.WithLabelValues(limitMemoryTotal)); n != 1 {
		t.Fatalf("kills{memory_total}: %v, want 1\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), `"session":"`+a.sid+`","limit":"memory_total"`) {
		t.Fatalf("the child stopped is not the one that grew:\n%s", logs)
	}
	for _, c := range []*client{y, z} {
		if got := c.tool(2, "echo", map[string]any{"text": "ok"}); got != "ok" {
			t.Fatalf("another session: %q", got)
		}
	}
}

// TestBudgetOpenFiles: a child cannot hold more than its open-file limit
// (RLIMIT_NOFILE, its stdio included), and keeps running past it.
func TestBudgetOpenFiles(t *testing.T) {
	bin := hog(t)
	b, _ := startBridge(t, func(o *Options) { o.Command = []string{bin}; o.OpenFiles = 24 })
	c := newClient(t, b)
	got := c.tool(1, "open", map[string]any{"n": 100})
	n, err := strconv.Atoi(strings.Fields(got)[0])
	if err != nil || n >= 24 || n == 0 || !strings.Contains(got, "too many open files") {
		t.Fatalf("open 100 under a limit of 24: %q", got)
	}
	b.mu.Lock()
	pid := b.sessions[c.sid].proc.cmd.Process.Pid
	b.mu.Unlock()
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(limits, []byte("Max open files            24                   24")) {
		t.Fatalf("limits of the child:\n%s", limits)
	}
	if got := c.tool(2, "echo", map[string]any{"text": "alive"}); got != "alive" {
		t.Fatalf("after the limit: %q", got)
	}
}

// TestBudgetCPU: a child that spins past its CPU limit, averaged over
// the window, is stopped; one that idles is not.
func TestBudgetCPU(t *testing.T) {
	bin := hog(t)
	b, logs := startBridge(t, func(o *Options) {
		o.Command = []string{bin}
		o.CPULimit = 0.3
		o.BudgetEvery = 50 * time.Millisecond
	})
	b.fleet.budget.mu.Lock()
	b.fleet.budget.window = time.Second
	b.fleet.budget.mu.Unlock()
	a, z := newClient(t, b), newClient(t, b)
	if got := a.tool(1, "spin", nil); got != "spinning" {
		t.Fatalf("spin: %q", got)
	}
	gone(t, a)
	if n := testutil.ToFloat64(b.Metrics().kills.WithLabelValues(limitCPU)); n != 1 {
		t.Fatalf("kills{cpu}: %v, want 1\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "more than --upstream-cpu-limit (0.3)") {
		t.Fatalf("the log does not name the limit:\n%s", logs)
	}
	if got := z.tool(2, "echo", map[string]any{"text": "idle"}); got != "idle" {
		t.Fatalf("the idle session: %q", got)
	}
}

// TestBudgetOptionErrors: limits that cannot hold are refused at Start.
func TestBudgetOptionErrors(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{MemoryLimit: -1}, "memory limit -1"},
		{Options{MemoryTotal: -5}, "memory total -5"},
		{Options{CPULimit: -0.5}, "CPU limit -0.5"},
		{Options{OpenFiles: -2}, "open-file limit -2"},
		{Options{MemoryLimit: 2 << 20, MemoryTotal: 1 << 20}, "over the total for all children"},
	} {
		tt.o.Command = []string{serverBin, "--stdio"}
		if _, err := Start(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.o, err, tt.want)
		}
	}
}

// FuzzParseStat: any line parses or is refused, never a panic; a
// well-formed one gives its fields.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("123 (node) S 1 123 123 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 11 0 100 1000000 2560 18446744073709551615"))
	f.Add([]byte("7 (a) b) c) R 1 9 9"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		pgrp, u, ok := parseStat(b)
		if ok && u.rss < 0 {
			t.Fatalf("%q: %d %+v", b, pgrp, u)
		}
	})
	if pgrp, u, ok := parseStat([]byte("123 (no de) S 1 77 123 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 11 0 100 1000000 2560 1")); !ok || pgrp != 77 || u.cpu != 300 || u.rss != 2560*pageSize {
		f.Fatalf("parseStat: %d %+v %v", pgrp, u, ok)
	}
}

// TestBudgetMemoryTotalPrincipal: --upstream-memory-total bounds the
// principals' children too (--upstream-scope principal): over the total,
// the largest principal's child whose stop suffices gives way, an idle one
// before one with a call in flight, so that one principal's child cannot
// take the replica's memory from the others'. (Usage made up: a child
// that grows without end would take the machine's memory when the test
// fails.)
func TestBudgetMemoryTotalPrincipal(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) {
		o.PerPrincipal = true
		o.MemoryTotal = 128 << 20
		o.BudgetEvery = time.Hour // no tick of its own: victim is asked below
	})
	alice, bob, carol := newClientAs(t, b, "alice"), newClientAs(t, b, "bob"), newClientAs(t, b, "carol")
	pa, pb, pc := childOf(b, alice.sid), childOf(b, bob.sid), childOf(b, carol.sid)
	procs := []*proc{pa, pb, pc}
	use := map[*proc]usage{pa: {rss: 20 << 20}, pb: {rss: 200 << 20}, pc: {rss: 30 << 20}}
	if v := b.fleet.budget.victim(procs, use, 250<<20-128<<20); v != pb {
		t.Fatalf("over the total by bob's child: victim %p, want bob's %p (alice's %p, carol's %p)", v, pb, pa, pc)
	}
	// A call in flight on bob's child: carol's idle one goes first when its
	// stop suffices.
	done := make(chan string, 1)
	go func() { done <- bob.tool(2, "slow", map[string]any{"seconds": 30, "text": "b"}) }()
	waitFor(t, "bob's call in flight", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.calls.CallsOfPeerLocked(pb)) == 1
	})
	if v := b.fleet.budget.victim(procs, use, 25<<20); v != pc {
		t.Fatalf("over the total by 25 MiB with bob's call in flight: victim %p, want carol's idle %p", v, pc)
	}
	deleteSession(t, b, bob.sid)
	<-done
}
