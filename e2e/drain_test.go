package e2e

import (
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestSIGTERMDrains pins graceful shutdown: on SIGTERM the gateway stops
// accepting at once (new connections are refused: load balancers move on,
// and the port is free for a new gateway), lets the held call finish, and
// exits 0.
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
	// Draining: a new connection is refused while the held call runs.
	addr := strings.TrimPrefix(g.base, "http://")
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		select {
		case <-g.done:
			t.Fatal("taskgate exited before it refused new connections")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if out := g.stderr.String(); strings.Contains(out, `"op":"completed"`) {
		t.Errorf("new connections were refused only after the held task completed; output:\n%s", out)
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
