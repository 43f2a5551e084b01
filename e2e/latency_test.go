package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestLatencyLearnedAcrossReplicas: two replicas share a redis-server. A
// tool whose upstream latency grows from 50ms is promoted by the replica
// that serves it within a few calls (2025-11-25 clients see taskSupport
// "optional"), the other replica learns it at its next merge and gives a
// 2026-07-28 client a task for it, and `taskgate tools --redis-url` shows
// what they learned.
func TestLatencyLearnedAcrossReplicas(t *testing.T) {
	t.Parallel()
	redisURL := "redis://" + redistest.Start(t)
	up := newUpstream(t, testupstream.Options{})
	flags := []string{"--redis-url", redisURL, "--auto-after", "200ms", "--latency-sync", "200ms"}
	a := startGateway(t, up, flags...)
	b := startGateway(t, up, flags...)

	sa := newRawSession(t, a.URL, "")
	sa.initialize()
	if ts := reloadTaskSupport(t, sa)["slow"]; ts != "" {
		t.Fatalf("slow before any call: taskSupport %q", ts)
	}
	calls := 0
	for secs := 0.05; reloadTaskSupport(t, sa)["slow"] != "optional"; secs *= 2 {
		if calls++; calls > 6 {
			t.Fatalf("replica A did not promote slow after %d calls", calls-1)
		}
		sa.mustResult("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": secs}})
	}
	t.Logf("replica A promoted slow after %d calls", calls)

	sb := newRawSession(t, b.URL, "")
	sb.initialize()
	deadline := time.Now().Add(5 * time.Second)
	for reloadTaskSupport(t, sb)["slow"] != "optional" {
		if time.Now().After(deadline) {
			t.Fatal("replica B never learned slow through Redis")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rt := reloadModernCall(t, b.URL, 0.8); rt != "task" {
		t.Errorf("modern call of slow on replica B: resultType %q, want task", rt)
	}

	// The operator's view, from the same Redis.
	var out, errOut bytes.Buffer
	cmd := exec.Command(taskgateBin, "tools", "--upstream", up, "--redis-url", redisURL, "--auto-after", "200ms")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("taskgate tools: %v\n%s", err, errOut.String())
	}
	var row string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "slow ") {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) < 9 || f[1] != "optional" || f[2] != "auto" || !strings.Contains(row, "> auto-after 200ms") {
		t.Errorf("taskgate tools row for slow = %q\n%s", row, out.String())
	}
}
