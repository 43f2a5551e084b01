package e2e

import (
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestSIGTERMDrains pins graceful shutdown: on SIGTERM the gateway goes
// unready, refuses new tasks, lets the held call finish, and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, testupstream.Options{})
	g := startGateway(t, up, append(slices.Clone(taskFlags), "--drain-timeout", "20s")...)
	s := newRawSession(t, g.URL, "")
	s.initialize()
	s.mustResult("tools/call", map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": 1.5, "text": "drain"}, "task": map[string]any{"ttl": taskTTLMs},
	})
	start := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Draining: not ready, and a new task is refused.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(g.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said 503 after SIGTERM (last: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := s.call("tools/call", map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": 0.1}, "task": map[string]any{"ttl": taskTTLMs},
	})
	if want := "this gateway replica is shutting down; retry on another replica"; m.Error == nil || m.Error.Code != -32603 || m.Error.Message != want {
		t.Errorf("tools/call while draining = result %s error %s, want the shutting-down error", m.Result, m.Error)
	}
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		t.Fatal("taskgate did not exit after draining")
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("exited %v after SIGTERM, before the 1.5 s call could finish", d)
	}
	if out := g.stderr.String(); !strings.Contains(out, `"op":"completed"`) {
		t.Errorf("the held task did not complete during the drain; output:\n%s", out)
	}
}
