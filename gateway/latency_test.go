package gateway

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// waitLearned waits until h has n observations of tool: a call's latency
// is recorded just after its answer is relayed, so the client may see the
// answer first.
func waitLearned(t *testing.T, h *Handler, tool string, n int) policy.Stats {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := h.decider.Latency(tool)
		if st.Count == n {
			return st
		}
		if st.Count > n || time.Now().After(deadline) {
			t.Fatalf("%s: %d observations (%+v), want %d", tool, st.Count, st, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func testUpstream(t *testing.T, stateless bool) string {
	t.Helper()
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless}))
	t.Cleanup(up.Close)
	return up.URL + "/mcp"
}

// learnedPolicy is a policy that promotes a tool at a p95 above 200ms:
// four times the 50ms calls that must not promote it, so that a loaded
// machine (the race detector, the other packages' tests) does not.
func learnedPolicy(c *Config) {
	c.Policy = policy.NewCurrent(&policy.Config{AutoAfter: 200 * time.Millisecond, HybridWait: time.Second})
}

// TestLatencyThresholdFlipsDecisions: a tool no rule matches, whose
// upstream latency grows from 50ms, is promoted within a few calls once its
// p95 passes --auto-after: 2025-11-25 clients see taskSupport "optional" on
// the next tools/list and may call it as a task; a modern client's call is
// held only about twice its p50 before it becomes a task, which suggests
// pollInterval p50/4 (at least 250ms).
func TestLatencyThresholdFlipsDecisions(t *testing.T) {
	f := newFleet(t, testUpstream(t, false))
	h := f.add(learnedPolicy)
	legacy := &gwtest.Client{T: t, URLs: f.URLs}
	legacy.Initialize()
	modern := &gwtest.ModernClient{T: t, URLs: f.URLs}

	// Never seen: auto for modern clients (direct within --hybrid-wait),
	// unchanged (no taskSupport) for legacy ones.
	if ts := legacyTaskSupport(t, legacy)["slow"]; ts != "" {
		t.Fatalf("slow before any call: taskSupport %q", ts)
	}
	if rt := resultType(t, modern.Call("tools/call", slowArgs(0.05))); rt != "complete" {
		t.Fatalf("first modern call of slow (50ms): resultType %q, want complete", rt)
	}
	if st := h.decider.Latency("slow"); st.Count != 1 || st.P50 < 40*time.Millisecond {
		t.Fatalf("after one hybrid call: %+v", st)
	}
	if ts := legacyTaskSupport(t, legacy)["slow"]; ts != "" {
		t.Fatalf("slow at 50ms: taskSupport %q", ts)
	}

	// Growing latency, through plain 2025-11-25 calls (sync pass-through).
	calls := 0
	for secs := 0.05; legacyTaskSupport(t, legacy)["slow"] != "optional"; secs *= 1.5 {
		if calls++; calls > 8 {
			t.Fatalf("slow not promoted after %d calls up to %.2fs: %+v", calls-1, secs, h.decider.Latency("slow"))
		}
		if r := legacy.Call("tools/call", slowArgs(secs)); r.Error != nil {
			t.Fatalf("sync call: %+v", r.Error)
		}
	}
	st := h.decider.Latency("slow")
	t.Logf("promoted after %d sync calls: %+v", calls, st)

	// Legacy clients may now ask for a task.
	task := legacy.StartTask("slow", map[string]any{"seconds": 0.05}, nil)
	legacy.WaitStatus(task.TaskID, "completed")

	// Modern clients: held about 2×p50 (not the 1s --hybrid-wait), so a
	// 600ms call becomes a task, polled every p50/4 ≥ 250ms.
	st = h.decider.Latency("slow") // the worker learned before it completed the task
	d := gwtest.DecodeDetailed(t, modern.Call("tools/call", slowArgs(0.6)))
	if d.ResultType != "task" {
		t.Fatalf("modern call of the promoted tool: %+v", d)
	}
	if want := min(max(st.P50/4, policy.MinPollInterval), policy.MaxPollInterval); *d.PollIntervalMs != want.Milliseconds() {
		t.Errorf("pollIntervalMs = %d, want %d (p50 %v)", *d.PollIntervalMs, want.Milliseconds(), st.P50)
	}
	modern.WaitTask(d.TaskID, "completed")
	// Every path taught the tool: 1 hybrid + the sync calls + 2 tasks.
	waitLearned(t, h, "slow", 1+calls+2)
}

// TestLatencyInputWaitExcluded: the time a task waits for the client's
// answer is not the tool's latency.
func TestLatencyInputWaitExcluded(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		f := newFleet(t, testUpstream(t, stateless))
		h := f.add(func(c *Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "elicit", policy.Task)) })
		c := &gwtest.ModernClient{T: t, URLs: f.URLs}
		c.Call("tools/list", nil)
		start := time.Now()
		task := c.ToolTask("elicit", map[string]any{})
		d := c.WaitTask(task.TaskID, "input_required")
		asked := time.Now()
		time.Sleep(600 * time.Millisecond) // the user thinks
		thought := time.Since(asked)
		for key := range d.InputRequests {
			c.Call("tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{
				key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}})
		}
		c.WaitTask(task.TaskID, "completed")
		total := time.Since(start)
		st := waitLearned(t, h, "elicit", 1)
		// The worker learns its call's time less the input wait it
		// observes (taskgate_task_input_wait_seconds), both before the
		// task reads completed: the tool's own time is at most what the
		// client saw less that wait, however slow the machine (the
		// sketch's quantile reads up to about 19% high). Counted, the wait
		// would make it about the whole.
		waited := inputWaitObserved(t, f.URLs[0], "elicit")
		if waited <= 0 {
			t.Errorf("no input wait observed; the user thought for %v", thought)
		}
		if limit := (total - waited) * 6 / 5; st.P95 > limit {
			t.Errorf("elicit learned %+v, more than %v (%v in all, %v of it the input wait): the input wait was counted", st, limit, total, waited)
		}
	})
}

// inputWaitObserved is the input wait replica url observed for tool
// (the sum of taskgate_task_input_wait_seconds).
func inputWaitObserved(t *testing.T, url, tool string) time.Duration {
	t.Helper()
	for _, m := range scrape(t, url)["taskgate_task_input_wait_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "tool" && l.GetValue() == tool {
				return time.Duration(m.GetHistogram().GetSampleSum() * float64(time.Second))
			}
		}
	}
	t.Fatalf("no taskgate_task_input_wait_seconds for %s", tool)
	return 0
}

// TestLatencyOnlyListedTools: a name the upstream never listed (a typo, a
// client probing) teaches nothing, so it cannot crowd the bounded table; a
// tool the upstream lists teaches even before a client listed it (the
// gateway lists the upstream's tools itself on a call of a tool it does
// not know: catalog.go, toolDeclared).
func TestLatencyOnlyListedTools(t *testing.T) {
	f := newFleet(t, testUpstream(t, false))
	h := f.add(nil)
	legacy := &gwtest.Client{T: t, URLs: f.URLs}
	legacy.Initialize()
	legacy.Call("tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
	legacy.Call("tools/call", slowArgs(0))
	if st := h.decider.Latency("no_such_tool"); st.Count != 0 {
		t.Errorf("unlisted tool learned: %+v", st)
	}
	waitLearned(t, h, "slow", 1)
	legacyTaskSupport(t, legacy)
	legacy.Call("tools/call", slowArgs(0))
	waitLearned(t, h, "slow", 2)
}

// TestLatencySharedBetweenReplicas: what one replica learns reaches
// another at its next merge, and a replica started later starts warm.
func TestLatencySharedBetweenReplicas(t *testing.T) {
	f := newFleet(t, testUpstream(t, false))
	share := func(c *Config) { learnedPolicy(c); c.LatencySync = 50 * time.Millisecond }
	a := f.add(share)
	b := f.add(share)
	la := &gwtest.Client{T: t, URLs: f.URLs[:1]}
	la.Initialize()
	legacyTaskSupport(t, la)
	for i := 0; i < 3; i++ {
		la.Call("tools/call", slowArgs(0.25))
	}
	waitLearned(t, a, "slow", 3)

	// B has not served slow, yet decides with A's knowledge after a merge.
	lb := &gwtest.Client{T: t, URLs: f.URLs[1:2]}
	lb.Initialize()
	deadline := time.Now().Add(5 * time.Second)
	for legacyTaskSupport(t, lb)["slow"] != "optional" || b.decider.Latency("slow").Count != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("replica B never learned all of slow: %+v", b.decider.Latency("slow"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := b.decider.Latency("slow"); st.P50 < 200*time.Millisecond {
		t.Errorf("replica B's view of slow: %+v", st)
	}

	// A replica started now knows slow before it serves anything.
	c := f.add(func(c *Config) { learnedPolicy(c); c.LatencySync = time.Hour })
	if st := c.decider.Latency("slow"); st.Count != 3 {
		t.Errorf("new replica C is not warm: %+v", st)
	}
	// Its own observations are not published twice: A's 3 stay 3.
	if st := a.decider.Latency("slow"); st.Count != 3 {
		t.Errorf("replica A now counts %+v", st)
	}
}

// TestLatencyLearningAddsNoRedisCommand: learning is in memory; sharing is
// on a timer. A call costs no Redis command once the tool's catalogue
// entry and the session are cached: sync pass-through, a modern hybrid
// call that answers in time, and a modern sync call.
func TestLatencyLearningAddsNoRedisCommand(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		f := newFleet(t, testUpstream(t, stateless))
		h := f.add(func(c *Config) {
			c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "progress", policy.Sync))
			c.LatencySync = time.Hour // no merge during the test
			c.Lease = time.Hour       // nor a recovery sweep
		})
		modern := &gwtest.ModernClient{T: t, URLs: f.URLs}
		modern.Call("tools/list", nil)
		var legacy *gwtest.Client
		if !stateless {
			legacy = &gwtest.Client{T: t, URLs: f.URLs}
			legacy.Initialize()
			legacyTaskSupport(t, legacy)
		}
		round := func() {
			if legacy != nil {
				legacy.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}})
			}
			modern.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}})
			modern.Call("tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 1}})
		}
		perRound := 2
		if legacy != nil {
			perRound = 3
		}
		learned := func() int { return h.decider.Latency("echo").Count + h.decider.Latency("progress").Count }
		waitTotal := func(n int) {
			t.Helper()
			deadline := time.Now().Add(2 * time.Second)
			for learned() != n {
				if time.Now().After(deadline) {
					t.Fatalf("learned %d calls, want %d", learned(), n)
				}
				time.Sleep(time.Millisecond)
			}
		}
		round() // warm: era, held session, catalogue entries
		waitTotal(perRound)
		before := f.Cmds[0].Load()
		const rounds = 20
		for i := 0; i < rounds; i++ {
			round()
		}
		waitTotal((rounds + 1) * perRound)
		if n := f.Cmds[0].Load() - before; n != 0 {
			t.Errorf("%d Redis commands for %d calls, want 0", n, rounds*perRound)
		}
		t.Logf("%d calls, %d Redis commands", rounds*perRound, f.Cmds[0].Load()-before)
	})
}
