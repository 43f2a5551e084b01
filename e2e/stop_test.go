package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// lostPhrase is the part of gateway.LostMessage a client and the log see
// when a replica with the embedded store stops under a running task.
const lostPhrase = "with the embedded store no other replica can run the task again"

// TestSIGTERMEmbeddedFreesPortAndSaysTaskIsLost: with the embedded store
// (no --redis-url) and a task still running, SIGTERM frees the listening
// port at once (a new gateway could bind it while this one drains), and
// the task the drain could not finish is failed saying it is lost: the
// client waiting on its tasks/result reads that, and the log says it,
// with no promise of another replica.
func TestSIGTERMEmbeddedFreesPortAndSaysTaskIsLost(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, testupstream.Options{})
	g := startGateway(t, up, append(slices.Clone(taskFlags), "--drain-timeout", "6s")...)
	s := newRawSession(t, g.URL, "")
	s.initialize()
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	mustDecode(t, s.mustResult("tools/call", map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": 60, "text": "lost"}, "task": map[string]any{"ttl": taskTTLMs},
	}), &created)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(g.base, "http://")
	ln := bindWhileDraining(t, g, addr)
	if out := g.stderr.String(); strings.Contains(out, "drain timed out") {
		t.Fatalf("the port was freed only after the drain; output:\n%s", out)
	}
	_ = ln.Close()

	// The connection the session already has is still served: its
	// tasks/result waits for the task's end, which the drain's end brings.
	m := s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID})
	got, _ := json.Marshal(m)
	if !strings.Contains(string(got), lostPhrase) {
		t.Errorf("tasks/result after the stop = %s, want the task failed saying %q", got, lostPhrase)
	}
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		t.Fatal("taskgate did not exit after draining")
	}
	out := g.stderr.String()
	if !strings.Contains(out, "the tasks still held are failed and lost") || !strings.Contains(out, lostPhrase) {
		t.Errorf("the log does not say the task is lost; output:\n%s", out)
	}
	if strings.Contains(out, "another replica runs the task again") {
		t.Errorf("the log promises another replica with the embedded store; output:\n%s", out)
	}
}

// bindWhileDraining listens on addr as soon as the stopping gateway g
// freed it, failing the test if g exits first.
func bindWhileDraining(t *testing.T, g *gateway, addr string) net.Listener {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		select {
		case <-g.done:
			t.Fatalf("taskgate exited before its port was free for another (%v)", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSecondSignalStopsAtOnce: a second SIGTERM during the drain ends the
// process at once, saying so, without waiting for the held task; a stdio
// child goes with it.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	for name, stdio := range map[string]bool{"http": false, "stdio": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up := func() string {
				if stdio {
					return stdioUpstream(t)
				}
				return newUpstream(t, testupstream.Options{})
			}()
			g := startGateway(t, up, append(slices.Clone(taskFlags), "--drain-timeout", "60s")...)
			s := newRawSession(t, g.URL, "")
			s.initialize()
			s.mustResult("tools/call", map[string]any{
				"name": "slow", "arguments": map[string]any{"seconds": 60, "text": "held"}, "task": map[string]any{"ttl": taskTTLMs},
			})
			secondSignal(t, g)
			if out := g.stderr.String(); !strings.Contains(out, "second signal: stopping at once") {
				t.Errorf("the second signal's stop is not in the log; output:\n%s", out)
			}
			if code := g.cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit code %d after a second signal, want 1", code)
			}
			if !stdio {
				return
			}
			pids := childPIDs(g.stderr.String())
			if len(pids) == 0 {
				t.Fatalf("no stdio child in the log:\n%s", g.stderr.String())
			}
			waitUntil(t, 10*time.Second, func() bool {
				for _, pid := range pids {
					if syscall.Kill(pid, 0) == nil && !zombie(pid) {
						return false
					}
				}
				return true
			})
		})
	}
}

// secondSignal sends g SIGTERM, waits until it drains, sends it again and
// waits for it to exit.
func secondSignal(t *testing.T, g *gateway) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(g.stderr.String(), "shutting down: draining") {
		select {
		case <-g.done:
			t.Fatalf("taskgate exited on the first signal with a task held; output:\n%s", g.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("taskgate still drains after a second SIGTERM")
	}
}

// TestSIGTERMOnRedisLeavesTaskToOtherReplica: on Redis with two replicas,
// a rerunnable task whose replica is stopped (SIGTERM) past its drain is
// not failed, nor called lost: its lease runs out and the other replica
// runs it again to completion, as before the port closed at once.
func TestSIGTERMOnRedisLeavesTaskToOtherReplica(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, testupstream.Options{})
	args := durableArgs(redistest.Start(t), "--task", "slow", "--rerun", "slow", "--drain-timeout", "200ms")
	holder := startGateway(t, up, args...)
	other := startGateway(t, up, args...)
	c := newMClient(t, []string{holder.URL, other.URL}, "Bearer stop-redis", true)
	tk := c.createTask(0, "slow", map[string]any{"seconds": 3.0, "text": "again"})
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-holder.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the stopped replica did not exit")
	}
	got, seen := c.waitTask(1, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if got.Status != "completed" {
		t.Fatalf("task ended %s %q (statuses %v), want completed by the other replica", got.Status, got.StatusMessage, seen)
	}
	checkInlinedResult(t, "slow", got.Result, "slept 3 s: again", false)
	out := holder.stderr.String()
	if !strings.Contains(out, "another replica runs the task again once its lease runs out") || strings.Contains(out, lostPhrase) {
		t.Errorf("the stopped replica's log: want the task left to another replica, not lost; output:\n%s", out)
	}
}
