package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestRecoveryAfterSIGKILL (docs/ARCHITECTURE.md invariant 4): two replicas
// on one redis-server with a 2 s lease renewed every 500 ms. Replica A
// holds tasks of both flavours (slow calls running upstream, a task waiting
// for input); A is killed with SIGKILL, so nothing of it runs its shutdown.
// Replica B's recoverer must fail every one of A's unfinished tasks with
// -32603 and a statusMessage naming A as the replica that stopped, once the
// lease (plus the store's 2 s clock-skew grace) has run out. A's finished
// task stays as it was, and B's own task completes: the sweep takes only
// expired leases.
//
// Clock skew between replicas is not simulated here (the binary reads the
// real clock); gateway.TestRecovererFailsTasksOfADeadReplica drives the
// recoverer with an injected clock through the grace period.
func TestRecoveryAfterSIGKILL(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Recorder: rec}) // a legacy (session) upstream
	args := append(slices.Clone(twoReplicaFlags),
		"--redis-url", "redis://"+redistest.Start(t),
		"--lease", lease.String(), "--lease-renew", "500ms")
	a := startGateway(t, up, args...)
	b := startGateway(t, up, args...)
	urls := []string{a.URL, b.URL}

	// 2026-07-28 tasks on A: two running slow calls and an elicitation
	// waiting for its answer; and one that is over before the kill.
	mc := newMClient(t, urls, "Bearer recovery", true)
	var modernIDs []string
	for _, text := range []string{"m1", "m2"} {
		modernIDs = append(modernIDs, mc.createTask(replicaA, "slow", map[string]any{"seconds": 60, "text": text}).TaskID)
	}
	elicit := mc.createTask(replicaA, "elicit", map[string]any{}).TaskID
	modernIDs = append(modernIDs, elicit)
	early := mc.createTask(replicaA, "slow", map[string]any{"seconds": 0, "text": "early"}).TaskID
	earlyDone, _ := mc.waitTask(replicaB, early, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if earlyDone.Status != "completed" {
		t.Fatalf("the early task ended %s: %+v", earlyDone.Status, earlyDone)
	}
	mc.waitStatus(replicaB, elicit, "input_required")

	// A 2025-11-25 session's running task on A.
	ls := newRawSession(t, a.URL, "Bearer recovery-legacy")
	ls.initialize()
	var created struct {
		Task tsTask `json:"task"`
	}
	mustDecode(t, ls.mustResult("tools/call", map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": 60, "text": "legacy"}, "task": map[string]any{"ttl": taskTTLMs},
	}), &created)
	legacyID := created.Task.TaskID

	// B's own task, running across A's death.
	onB := mc.createTask(replicaB, "slow", map[string]any{"seconds": lease.Seconds() + 3, "text": "survivor"}).TaskID

	// Every slow call (3 on A, the early one, B's) reached the upstream.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 5); err != nil {
		t.Fatalf("the slow calls did not all reach the upstream: %v", err)
	}

	deadID := replicaIDOf(t, a)
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL, by the PID we started
		t.Fatal(err)
	}
	<-a.done

	want := "the gateway replica running the task (" + deadID + ") stopped before the upstream answered"
	for _, id := range modernIDs {
		// A generous bound only against a hang: lease + grace + a sweep is
		// about 4.5 s.
		tk := pollUntilTerminal(t, mc, replicaB, id, 30*time.Second)
		switch {
		case tk.Status != "failed":
			t.Errorf("A's task %s ended %s (%+v), want failed by the recoverer", id, tk.Status, tk)
		case tk.Error == nil || tk.Error.Code != -32603 || tk.Error.Message != want:
			t.Errorf("A's task %s error = %s, want -32603 %q", id, tk.Error, want)
		case tk.StatusMessage != want:
			t.Errorf("A's task %s statusMessage = %q, want %q", id, tk.StatusMessage, want)
		}
	}
	t.Logf("A's 2026-07-28 tasks failed by B %v after the SIGKILL (lease %v)", time.Since(killed).Round(100*time.Millisecond), lease)

	// The 2025-11-25 task, on the same session, from B.
	ls.url = b.URL
	var tk tsTask
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		mustDecode(t, ls.mustResult("tasks/get", map[string]any{"taskId": legacyID}), &tk)
		if terminal(tk.Status) || time.Now().After(deadline) {
			break
		}
	}
	if tk.Status != "failed" || tk.StatusMessage != want {
		t.Errorf("A's 2025-11-25 task = %s %q, want failed %q", tk.Status, tk.StatusMessage, want)
	}
	if m := ls.call("tasks/result", map[string]any{"taskId": legacyID}); m.Error == nil || m.Error.Code != -32603 || m.Error.Message != want {
		t.Errorf("tasks/result of A's 2025-11-25 task = result %s error %s, want -32603 %q", m.Result, m.Error, want)
	}

	// What A finished stays finished; what B runs is B's to finish.
	if tk := mc.get(replicaB, early); tk.Status != "completed" {
		t.Errorf("A's finished task became %s after A died: %+v", tk.Status, tk)
	} else {
		checkInlinedResult(t, "A's finished task", tk.Result, "slept 0 s: early", false)
	}
	done := pollUntilTerminal(t, mc, replicaB, onB, 30*time.Second)
	if done.Status != "completed" {
		t.Errorf("B's own task ended %s (%+v): the recoverer must take only expired leases", done.Status, done)
	} else {
		checkInlinedResult(t, "B's task", done.Result, "slept 5 s: survivor", false)
	}
	if out := b.stderr.String(); strings.Count(out, `"op":"recovered"`) != len(modernIDs)+1 {
		t.Errorf("B logged %d recoveries, want %d", strings.Count(out, `"op":"recovered"`), len(modernIDs)+1)
	}
}

// pollUntilTerminal polls tasks/get on replica i until the task is
// terminal; limit only guards against a hang.
func pollUntilTerminal(t *testing.T, c *mClient, i int, id string, limit time.Duration) mTask {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		tk := c.get(i, id)
		if terminal(tk.Status) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after %v", id, tk.Status, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicaIDOf reads the replica id g's process put in its leases from its
// log ("task created" lines carry it).
func replicaIDOf(t *testing.T, g *gateway) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(g.stderr.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			Op      string `json:"op"`
			Replica string `json:"replica"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Op == "created" && l.Replica != "" {
			return l.Replica
		}
	}
	t.Fatalf("no task created in the log of %s, so no replica id", g.URL)
	return ""
}
