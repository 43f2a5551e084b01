package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestChaos: three taskgate processes on one redis-server with AOF
// (appendfsync always), an upstream of one era (see below), and one
// 2026-07-28 client spreading 500 tasks of mixed tools round robin over the
// replicas, at most chaosConcurrency at a time. Mid-run one replica is
// killed with SIGKILL and restarted on the same port; later Redis is killed,
// left down for longer than the lease plus its grace, and restarted
// (reloading its AOF). Then:
//
//   - every task the client was given is terminal, and stays so;
//   - a completed task's result is exactly what the upstream makes of its
//     arguments (every task's arguments are unique: the index is in them);
//   - a failed task is explained: rpcerror fails with the upstream's
//     JSON-RPC error; a task whose worker was on the killed replica fails
//     with -32603 and the recoverer's "replica … stopped" message naming
//     that replica; nothing else fails, nothing is cancelled; no task of
//     the killed replica ended after it died but by the recoverer;
//   - a tools/call refused with -32603 "task store unavailable" (during the
//     Redis outage) is retried later by the client; such a refusal, like a
//     connection refused by the dead replica, created no task: every task
//     in Redis is one the client knows, except at most one per call cut
//     off by the SIGKILL (its answer was lost), and those are terminal too;
//   - another owner (another Authorization) gets "not found" for
//     tasks/get, tasks/update and tasks/cancel of every task, while it runs
//     and at the end: no leak, nothing cancelled or answered by them.
//
// With appendfsync always, Redis fsyncs before it answers, so its SIGKILL
// can land between running a write and replying: the gateway retries
// writes that already landed, and must take them as done (write ids,
// taskstore.Outcome.WriteID). A slow disk widens that window; CI met it.
//
// Speed is never asserted; deadlines only bound a hang.
//
// It runs once per upstream era (upstreamEras), one after the other: a
// legacy (session) upstream asks for the elicit tool's name with a
// server→client request on the call's stream, which the worker holds; a
// modern stateless 2026-07-28 upstream answers the first call with an MRTR
// input_required round, which the worker turns into the task's
// inputRequests, and is called again with the client's answer. Where the
// eras differ, chaosRounds says why.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, three gateways and runs 500 tasks per upstream era through a replica crash and a Redis restart")
	}
	t.Parallel()
	for _, era := range upstreamEras {
		t.Run(era.name, func(t *testing.T) { testChaos(t, era.stateless) })
	}
}

func testChaos(t *testing.T, stateless bool) {
	rig := newChaosRig(t, chaosRigOptions{
		stateless: stateless,
		owner:     "chaos",
		transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		tasks:     chaosTasks, concurrency: chaosConcurrency,
	})
	const victim = chaosVictim
	// Before the kill: the victim's replica id, from the lease of one of
	// its unfinished tasks. On a slow machine the client sees tasks finish
	// late, and every task it still counts as live there may have released
	// its lease already: look again while new ones start.
	deadID := ""
	rig.run(func() {
		seen := ""
		for deadline := time.Now().Add(10 * time.Second); deadID == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			deadID, seen = leaseHolderOf(t, rig.srv.Addr, rig.st.liveIDs(victim))
		}
		if deadID == "" {
			t.Fatalf("none of the tasks replica %d holds, as the client sees them, has a lease holder in Redis: %s", victim, seen)
		}
	})
	ctx, start, srv, rec, st, tasks, alice, mallory := rig.ctx, rig.start, rig.srv, rig.rec, rig.st, rig.tasks, rig.alice, rig.mallory
	liveAtKill, killedAt, createdAtKill, restartedAt := rig.liveAtKill, rig.killedAt, rig.createdAtKill, rig.restartedAt
	createdAtRedis, redisDownAt, redisUpAt := rig.createdAtRedis, rig.redisDownAt, rig.redisUpAt
	runTook := rig.doneAt.Sub(start)

	// The cross-owner probe once more, on every task, now terminal; and the
	// owner's own reading, which must not have changed.
	var ids []string
	for _, tk := range tasks {
		if tk.id != "" {
			ids = append(ids, tk.id)
		}
	}
	final := map[string]mTask{}
	var fmu sync.Mutex
	parallel(ctx, ids, 16, func(id string) {
		mallory.probe(ctx, id, "at the end")
		r, _, err := alice.do(ctx, "tasks/get", map[string]any{"taskId": id}, nil)
		var tk mTask
		if err == nil && r.Error == nil {
			err = json.Unmarshal(r.Result, &tk)
		} else if err == nil {
			err = fmt.Errorf("%s", r)
		}
		if err != nil {
			st.problem("final tasks/get %s: %v", id, err)
			return
		}
		fmu.Lock()
		final[id] = tk
		fmu.Unlock()
	})

	// Check every task.
	wantStopped := "the gateway replica running the task (" + deadID + ") stopped before the upstream answered"
	count := map[string]int{}
	byTool := map[string]map[string]int{}
	createdOf := map[string]int{}    // tasks the client holds, by tool
	fromUpstream := map[string]int{} // tasks whose outcome is the upstream's, by tool
	// The upstream calls the tasks account for, at least and at most, by
	// tool (upstreamCalls).
	callsLo, callsHi := map[string]int{}, map[string]int{}
	for _, tk := range tasks {
		if tk.problem != "" {
			t.Errorf("task %d (%s %v): %s", tk.i, tk.tool, tk.args, tk.problem)
			continue
		}
		createdOf[tk.tool]++
		if byTool[tk.tool] == nil {
			byTool[tk.tool] = map[string]int{}
		}
		got := tk.final
		recovered := got.Status == "failed" && strings.Contains(got.StatusMessage, "the gateway replica running the task")
		lo, hi := tk.upstreamCalls(stateless, recovered)
		callsLo[tk.tool] += lo
		callsHi[tk.tool] += hi
		if again, ok := final[tk.id]; ok && (again.Status != got.Status || canonicalJSON(again.Result) != canonicalJSON(got.Result) ||
			again.Error.String() != got.Error.String() || again.StatusMessage != got.StatusMessage) {
			t.Errorf("task %d (%s) changed after it was terminal: %s %q %s %s, then %s %q %s %s", tk.i, tk.id,
				got.Status, got.StatusMessage, got.Result, got.Error, again.Status, again.StatusMessage, again.Result, again.Error)
		}
		if recovered {
			// The same on both eras: between two MRTR rounds the worker
			// holds the task's lease just as it holds a legacy call, so a
			// modern elicit task waiting for its answer on the killed
			// replica is failed by the recoverer too (nothing resumes it
			// elsewhere), with the same message.
			kind := "recovered"
			switch {
			case got.StatusMessage != wantStopped:
				t.Errorf("task %d (%s %s on replica %d) failed %q, want the killed replica's %q", tk.i, tk.tool, tk.id, tk.replica, got.StatusMessage, wantStopped)
			case tk.replica != victim || !tk.sentAt.Before(killedAt):
				t.Errorf("task %d (%s %s) created on replica %d by a tools/call sent at %s failed as if on the replica killed at %s: %q",
					tk.i, tk.tool, tk.id, tk.replica, tk.sentAt.Format(time.StampMilli), killedAt.Format(time.StampMilli), got.StatusMessage)
			case got.Error == nil || got.Error.Code != -32603 || got.Error.Message != wantStopped:
				t.Errorf("task %d (%s) recovered with error %s, want -32603 %q", tk.i, tk.id, got.Error, wantStopped)
			}
			count[kind]++
			byTool[tk.tool][kind]++
			continue
		}
		if msg := tk.check(got); msg != "" {
			t.Errorf("task %d (%s %v, %s, created on replica %d): %s", tk.i, tk.tool, tk.args, tk.id, tk.replica, msg)
			continue
		}
		if tk.replica == victim && tk.sentAt.Before(killedAt) {
			if at, err := time.Parse(time.RFC3339Nano, got.LastUpdatedAt); err != nil || at.After(killedAt) {
				t.Errorf("task %d (%s) of the killed replica ended %s at %s, after the kill at %s", tk.i, tk.id, got.Status,
					got.LastUpdatedAt, killedAt.UTC().Format(time.RFC3339Nano))
			}
		}
		fromUpstream[tk.tool]++
		kind := got.Status
		if tk.tool == "fail" {
			kind = "completed-isError"
		}
		count[kind]++
		byTool[tk.tool][kind]++
	}
	if count["recovered"] == 0 {
		t.Errorf("no task was failed by the recoverer, though replica %d was killed holding %d unfinished tasks", victim, liveAtKill)
	}

	// The upstream ran each tool as often as the tasks the client holds
	// account for (upstreamCalls: exactly chaosRounds per task whose
	// outcome it made), plus at most once per tools/call whose answer was
	// lost (its task, unknown to the client, was never answered, so never
	// got past the first round): a refused call never reached it.
	for _, tool := range []string{"echo", "slow", "elicit", "fail", "rpcerror"} {
		n := rec.Count(tool, testupstream.Called)
		if lo, hi := callsLo[tool], callsHi[tool]+int(st.cutCalls(tool)); n < lo || n > hi {
			t.Errorf("the upstream ran %s %d times, want %d to %d: %d tasks (%d outcomes from it, %d rounds each), %d tools/calls cut off",
				tool, n, lo, hi, createdOf[tool], fromUpstream[tool], chaosRounds(tool, stateless), st.cutCalls(tool))
		}
	}

	// Redis holds only tasks the client knows (or that a cut-off call
	// created), all terminal.
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	// A task the client never got can only come from a tools/call cut off
	// by the SIGKILL: the replica created it and died before answering,
	// so the recoverer failed it. A refused call ("task store
	// unavailable") leaves nothing, even when Redis ran the write and only
	// its reply was lost (the store removes it).
	orphans := checkStoreTasks(t, srv.Addr, known)
	for id, msg := range orphans {
		if msg != wantStopped {
			t.Errorf("task %s is in Redis but unknown to the client, with status message %q: only a call cut off by the kill may leave one, failed %q",
				id, msg, wantStopped)
		}
	}
	if cut := int(st.cut.Load()); len(orphans) > cut {
		t.Errorf("%d tasks in Redis the client never got, but only %d tools/calls were cut off: a refused call created a task", len(orphans), cut)
	}

	if n := st.leaks.Load(); n != 0 {
		t.Errorf("%d cross-owner requests did not answer \"not found\"", n)
	}
	for _, p := range st.problems() {
		t.Error(p)
	}

	t.Logf("replica %d (%s) SIGKILLed at %v with %d unfinished tasks on it, %d tasks created by then; restarted %v later",
		victim, deadID, killedAt.Sub(start).Round(time.Millisecond), liveAtKill, createdAtKill, restartedAt.Sub(killedAt).Round(time.Millisecond))
	t.Logf("Redis down at %v for %v (%d tasks created by then)", redisDownAt.Sub(start).Round(time.Millisecond),
		redisUpAt.Sub(redisDownAt).Round(time.Millisecond), createdAtRedis)
	tools := make([]string, 0, len(byTool))
	for tool := range byTool {
		tools = append(tools, tool)
	}
	sort.Strings(tools)
	for _, tool := range tools {
		t.Logf("  %-8s %v; upstream calls %d (%d to %d)", tool, byTool[tool], rec.Count(tool, testupstream.Called),
			callsLo[tool], callsHi[tool]+int(st.cutCalls(tool)))
	}
	t.Logf("client: %d requests; transient: %d connection refused, %d cut off (%d of them tools/call), %d store unavailable (%d of them tools/call, retried), %d rate limited",
		st.requests.Load(), st.connRefused.Load(), st.cutAll.Load(), st.cut.Load(), st.storeDown.Load(), st.refusedCalls.Load(), st.rateLimited.Load())
	t.Logf("chaos summary: upstream=%s tasks=%d completed=%d completed-isError=%d failed-upstream=%d recovered=%d refused-then-retried=%d orphans=%d probes=%d leaks=%d run=%v total=%v",
		strings.TrimPrefix(t.Name(), "TestChaos/"), len(ids), count["completed"], count["completed-isError"], count["failed"], count["recovered"], st.refusedCalls.Load(), len(orphans),
		st.probes.Load(), st.leaks.Load(), runTook.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

const (
	chaosTasks       = 500
	chaosConcurrency = 40
	// chaosLease is the workers' lease: the dead replica's tasks fail
	// about chaosLease + 2 s (grace) + a sweep after the kill.
	chaosLease = 3 * time.Second
	// chaosRedisOutage is how long Redis stays down.
	chaosRedisOutage = 6 * time.Second
)

// chaosVictim is the replica the chaos kills and restarts.
const chaosVictim = 1

// chaosRig is the run TestChaos and TestChaosRerun share: a redis-server
// with AOF (appendfsync always), an upstream of one era with a recorder,
// three taskgate processes on both, and two owners spreading their
// requests round robin over the replicas: alice runs every task of the
// plan, concurrency at a time, and mallory probes each of them. run brings
// the chaos and waits for the client; what it saw stays in the rig.
type chaosRig struct {
	t              *testing.T
	ctx            context.Context // bounds a hang only
	start          time.Time
	srv            *redistest.Server
	rec            *testupstream.Recorder
	up             string
	args           []string
	gws            []*gateway // gws[chaosVictim] is the restarted replica after run
	st             *chaosStats
	alice, mallory *chaosClient
	tasks          []*chaosTask
	allDone        chan struct{} // closed once every client goroutine ended

	// What run saw.
	liveAtKill, createdAtKill, createdAtRedis             int64
	killedAt, restartedAt, redisDownAt, redisUpAt, doneAt time.Time
}

// chaosRigOptions is what differs between the chaos runs.
type chaosRigOptions struct {
	stateless          bool            // the upstream's era
	extraArgs          []string        // taskgate flags beyond the common ones
	owner              string          // the tokens are "Bearer <owner>-alice" and "Bearer <owner>-mallory"
	transport          *http.Transport // the clients' connection pool
	tasks, concurrency int
}

// newChaosRig starts Redis, the upstream and the gateways, and alice's
// tasks; no client goroutine outlives the test.
func newChaosRig(t *testing.T, o chaosRigOptions) *chaosRig {
	r := &chaosRig{t: t, start: time.Now()}
	// Only a bound on a hang: a run takes 20-30 s here, but a shared CI
	// machine with a slow disk (the AOF is fsynced on every write) was
	// seen to take four times as long.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx

	r.srv = redistest.NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always")
	r.rec = &testupstream.Recorder{}
	r.up = newUpstream(t, testupstream.Options{Stateless: o.stateless, Recorder: r.rec})
	r.args = []string{
		"--redis-url", "redis://" + r.srv.Addr,
		"--task", "echo", "--task", "slow", "--task", "elicit", "--task", "fail", "--task", "rpcerror",
	}
	r.args = append(r.args, o.extraArgs...)
	r.args = append(r.args,
		"--poll-interval", "100ms",
		"--lease", chaosLease.String(), "--lease-renew", "500ms",
		"--log-level", "warn", // the failure dump stays readable
	)
	r.gws = make([]*gateway, 3)
	urls := make([]string, 3)
	for i := range r.gws {
		r.gws[i] = startGateway(t, r.up, r.args...)
		urls[i] = r.gws[i].URL
	}

	hc := &http.Client{Timeout: 30 * time.Second, Transport: o.transport}
	t.Cleanup(hc.CloseIdleConnections)
	r.st = &chaosStats{}
	r.alice = &chaosClient{c: newMClient(t, urls, "Bearer "+o.owner+"-alice", true), st: r.st}
	r.alice.c.hc = hc
	r.mallory = &chaosClient{c: newMClient(t, urls, "Bearer "+o.owner+"-mallory", true), st: r.st}
	r.mallory.c.hc = hc

	r.tasks = chaosPlan(o.tasks)
	jobs := make(chan *chaosTask)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tk := range jobs {
				r.alice.run(ctx, tk, r.mallory)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, tk := range r.tasks {
			select {
			case jobs <- tk:
			case <-ctx.Done():
				return
			}
		}
	}()
	r.allDone = make(chan struct{})
	go func() { wg.Wait(); close(r.allDone) }()
	// Registered last, so run first: before the gateways and Redis stop.
	t.Cleanup(func() { cancel(); <-r.allDone })
	return r
}

// run is the chaos, from the test's goroutine (it may fail the test): once
// a fifth of the tasks are created and replica chaosVictim holds a few
// unfinished ones, beforeKill (if any), then SIGKILL that replica and
// restart it on its port; once three fifths are created, kill Redis for
// chaosRedisOutage and restart it on its AOF. Then wait for the client.
func (r *chaosRig) run(beforeKill func()) {
	t, st, n := r.t, r.st, int64(len(r.tasks))
	t.Helper()
	waitFor(r.ctx, r.allDone, func() bool { return st.created.Load() >= n/5 && st.live[chaosVictim].Load() >= 5 })
	if beforeKill != nil {
		beforeKill()
	}
	r.liveAtKill = st.live[chaosVictim].Load()
	if err := r.gws[chaosVictim].cmd.Process.Kill(); err != nil { // SIGKILL, by the PID we started
		t.Fatal(err)
	}
	<-r.gws[chaosVictim].done
	r.killedAt = time.Now()
	r.createdAtKill = st.created.Load()
	time.Sleep(time.Second) // down: its clients are refused and move on
	addr := strings.TrimPrefix(r.gws[chaosVictim].base, "http://")
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		var g *gateway
		if g, err = startGatewayAt(t, addr, r.up, r.args); err == nil {
			r.gws[chaosVictim] = g
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restarting replica %d on %s: %v", chaosVictim, addr, err)
	}
	r.restartedAt = time.Now()

	waitFor(r.ctx, r.allDone, func() bool { return st.created.Load() >= n*3/5 })
	r.createdAtRedis = st.created.Load()
	r.redisDownAt = time.Now()
	r.srv.Stop() // SIGKILL
	time.Sleep(chaosRedisOutage)
	r.srv.Start() // same port and dir: reloads the AOF
	r.redisUpAt = time.Now()

	select {
	case <-r.allDone:
	case <-r.ctx.Done():
		t.Fatalf("the client did not finish in time (%d of %d tasks created; %d requests, %d connection refused, %d cut off, %d store unavailable, %d rate limited); unfinished tasks, as last seen: %s",
			st.created.Load(), n, st.requests.Load(), st.connRefused.Load(), st.cutAll.Load(), st.storeDown.Load(), st.rateLimited.Load(), st.unfinished(10))
	}
	r.doneAt = time.Now()
}

// chaosTask is one task of the run: what the client asks for, and what
// happened to it.
type chaosTask struct {
	i    int
	tool string
	args map[string]any
	name string // the elicit tool's answer

	id       string
	replica  int       // where it was created: its worker's replica
	sentAt   time.Time // when the tools/call that created it was sent (run)
	final    mTask     // as first seen terminal
	problem  string    // why the client gave up on it: a test failure
	asked    bool      // the client saw it input_required: the upstream asked
	answered bool      // a tasks/update answering it was acknowledged
}

// chaosRounds is how many times the upstream is called for one task of
// tool that it runs to the end: once, except the elicit tool on a modern
// (stateless) upstream: its first call ends with an MRTR input_required
// round (which becomes the task's inputRequests), and the worker calls it
// again with the client's answer in inputResponses, which that second call
// turns into the result. A legacy upstream asks with a server→client
// request on the first call's stream and answers on it: one call.
func chaosRounds(tool string, stateless bool) int {
	if stateless && tool == "elicit" {
		return 2
	}
	return 1
}

// upstreamCalls bounds how many times the upstream was called for the task
// (recorder's Called events). When its outcome is the upstream's, exactly
// chaosRounds. When the recoverer failed it (its replica was killed), the
// kill may have come before its call left the replica: at least once if the
// client saw the question (the upstream asked it), else at least none; at
// most once, except on a modern upstream once the client's answer was
// taken, whose retry round may have started before the kill: twice.
func (tk *chaosTask) upstreamCalls(stateless, recovered bool) (lo, hi int) {
	rounds := chaosRounds(tk.tool, stateless)
	if !recovered {
		return rounds, rounds
	}
	if tk.asked {
		lo = 1
	}
	hi = 1
	if rounds > 1 && tk.answered {
		hi = rounds
	}
	return lo, hi
}

// chaosPlan mixes the tools: per 20 tasks, 8 echo, 5 slow (1–5 s), 4
// elicit, 1 fail and 2 rpcerror.
func chaosPlan(n int) []*chaosTask {
	out := make([]*chaosTask, n)
	for i := range out {
		tk := &chaosTask{i: i}
		tag := fmt.Sprintf("chaos-%d", i)
		switch k := i % 20; {
		case k < 8:
			tk.tool, tk.args = "echo", map[string]any{"text": tag}
		case k < 13:
			tk.tool, tk.args = "slow", map[string]any{"seconds": float64(1 + i%5), "text": tag}
		case k < 17:
			tk.tool, tk.args, tk.name = "elicit", map[string]any{}, tag
		case k < 18:
			tk.tool, tk.args = "fail", map[string]any{}
		default:
			tk.tool, tk.args = "rpcerror", map[string]any{}
		}
		out[i] = tk
	}
	return out
}

// check compares a terminal task with what the upstream makes of the
// task's arguments; "" when it matches.
func (tk *chaosTask) check(got mTask) string {
	switch tk.tool {
	case "rpcerror":
		if got.Status != "failed" || got.Error == nil || got.Error.Code != testupstream.RPCErrorCode ||
			got.Error.Message != testupstream.RPCErrorMessage || canonicalJSON(got.Error.Data) != `{"tool":"rpcerror"}` {
			return fmt.Sprintf("ended %s %q error %s, want failed with the upstream's %d %q", got.Status, got.StatusMessage, got.Error,
				testupstream.RPCErrorCode, testupstream.RPCErrorMessage)
		}
		return ""
	}
	if got.Status != "completed" {
		return fmt.Sprintf("ended %s %q error %s, want completed", got.Status, got.StatusMessage, got.Error)
	}
	var want string
	isError := false
	switch tk.tool {
	case "echo":
		want = tk.args["text"].(string)
	case "slow":
		want = fmt.Sprintf("slept %g s: %s", tk.args["seconds"], tk.args["text"])
	case "elicit":
		want = "Hello, " + tk.name + "!"
	case "fail":
		want, isError = testupstream.FailText, true
	}
	var r callResult
	if err := json.Unmarshal(got.Result, &r); err != nil {
		return fmt.Sprintf("result %s: %v", got.Result, err)
	}
	if r.text() != want || r.IsError != isError || r.ResultType != "complete" {
		return fmt.Sprintf("result %s, want %q (isError %t, resultType complete)", got.Result, want, isError)
	}
	return ""
}

// chaosStats counts what the client met, from every goroutine.
type chaosStats struct {
	created     atomic.Int64
	live        [3]atomic.Int64 // created, not yet seen terminal, by replica
	requests    atomic.Int64
	connRefused atomic.Int64
	cutAll      atomic.Int64 // any request cut off (no answer)
	cut         atomic.Int64 // tools/calls cut off: a task may exist unseen
	storeDown   atomic.Int64
	rateLimited atomic.Int64
	// refusedCalls are tools/calls answered "task store unavailable",
	// retried later.
	refusedCalls atomic.Int64
	probes       atomic.Int64
	leaks        atomic.Int64

	mu       sync.Mutex
	last     map[int]string     // unfinished tasks: what the client last saw
	liveOn   [3]map[string]bool // the ids counted in live
	cutTools map[string]int64
	probs    []string
}

func (s *chaosStats) setLive(replica int, id string, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.liveOn[replica] == nil {
		s.liveOn[replica] = map[string]bool{}
	}
	if live {
		s.live[replica].Add(1)
		s.liveOn[replica][id] = true
	} else {
		s.live[replica].Add(-1)
		delete(s.liveOn[replica], id)
	}
}

// saw notes what the client last saw of task i ("" once it is done).
func (s *chaosStats) saw(i int, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[int]string{}
	}
	if what == "" {
		delete(s.last, i)
	} else {
		s.last[i] = what
	}
}

// unfinished lists up to n unfinished tasks and what was last seen of them.
func (s *chaosStats) unfinished(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, what := range s.last {
		if len(out) == n {
			out = append(out, fmt.Sprintf("… %d in all", len(s.last)))
			break
		}
		out = append(out, fmt.Sprintf("task %d: %s", i, what))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func (s *chaosStats) liveIDs(replica int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.liveOn[replica] {
		ids = append(ids, id)
	}
	return ids
}

func (s *chaosStats) cutCall(tool string) {
	s.cut.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutTools == nil {
		s.cutTools = map[string]int64{}
	}
	s.cutTools[tool]++
}

func (s *chaosStats) cutCalls(tool string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cutTools[tool]
}

// problem records a test failure found on a client goroutine (only the
// test's goroutine may fail it).
func (s *chaosStats) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.probs) < 50 {
		s.probs = append(s.probs, fmt.Sprintf(format, args...))
	}
}

func (s *chaosStats) problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.probs)
}

// chaosClient is one client identity spreading its requests round robin.
type chaosClient struct {
	c  *mClient
	rr atomic.Uint64
	st *chaosStats
}

// transient says what kind of passing trouble an answer is, if any: the
// replica is down (refused) or died mid-request (cut), Redis is down
// (store), or the poll came too fast (limited).
func transient(r mReply, err error) (kind string, wait time.Duration) {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused", 20 * time.Millisecond
	case err != nil:
		return "cut", 20 * time.Millisecond
	case r.Error != nil && r.Error.Code == -32603 && strings.HasPrefix(r.Error.Message, "task store unavailable"):
		return "store", 100 * time.Millisecond
	case r.Status == http.StatusTooManyRequests:
		var d struct {
			RetryAfterMs int64 `json:"retryAfterMs"`
		}
		if r.Error != nil {
			_ = json.Unmarshal(r.Error.Data, &d)
		}
		return "limited", time.Duration(max(d.RetryAfterMs, 10)) * time.Millisecond
	}
	return "", 0
}

// do sends method to the next replica, and again to the next one after
// each transient failure (counted, and passed to seen), until an answer
// comes or ctx ends. It returns the answer and the replica that gave it.
func (cc *chaosClient) do(ctx context.Context, method string, params map[string]any, seen func(kind string)) (mReply, int, error) {
	r, i, _, err := cc.doAt(ctx, method, params, seen)
	return r, i, err
}

// doAt is do that also returns when the answered attempt was sent.
func (cc *chaosClient) doAt(ctx context.Context, method string, params map[string]any, seen func(kind string)) (mReply, int, time.Time, error) {
	for {
		i := int(cc.rr.Add(1) % uint64(len(cc.c.urls)))
		cc.st.requests.Add(1)
		sent := time.Now()
		r, err := cc.c.trySend(i, cc.c.build(method, params))
		kind, wait := transient(r, err)
		switch kind {
		case "":
			return r, i, sent, err
		case "refused":
			cc.st.connRefused.Add(1)
		case "cut":
			cc.st.cutAll.Add(1)
		case "store":
			cc.st.storeDown.Add(1)
		case "limited":
			cc.st.rateLimited.Add(1)
		}
		if seen != nil {
			seen(kind)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%s", r)
			}
			return r, i, sent, fmt.Errorf("%s: still failing when the test's time ran out: %v", method, err)
		case <-time.After(wait):
		}
	}
}

// run drives one task: create it, let the other owner probe it, poll it
// until terminal, answering its input requests.
func (cc *chaosClient) run(ctx context.Context, tk *chaosTask, other *chaosClient) {
	cc.st.saw(tk.i, "tools/call "+tk.tool+" sent")
	defer cc.st.saw(tk.i, "")
	r, rep, sent, err := cc.doAt(ctx, "tools/call", map[string]any{"name": tk.tool, "arguments": tk.args}, func(kind string) {
		cc.st.saw(tk.i, "tools/call "+tk.tool+" retried after: "+kind)
		switch kind {
		case "cut":
			cc.st.cutCall(tk.tool)
		case "store":
			cc.st.refusedCalls.Add(1)
		}
	})
	if err != nil {
		tk.problem = err.Error()
		return
	}
	var created mTask
	if r.Error != nil || json.Unmarshal(r.Result, &created) != nil || created.ResultType != "task" || !uuidRE.MatchString(created.TaskID) {
		tk.problem = fmt.Sprintf("tools/call on replica %d: %s, want a CreateTaskResult", rep, r)
		return
	}
	// The task was created after the answered attempt was sent, and before
	// its answer came; the time the answer is read here is no bound: a
	// CreateTaskResult read just after the SIGKILL may come from the
	// replica just killed.
	tk.id, tk.replica, tk.sentAt = created.TaskID, rep, sent
	cc.st.created.Add(1)
	cc.st.setLive(rep, tk.id, true)
	defer cc.st.setLive(rep, tk.id, false)

	other.probe(ctx, tk.id, "while it runs")

	var answered time.Time
	for polls := 0; ; polls++ {
		r, rep, err := cc.do(ctx, "tasks/get", map[string]any{"taskId": tk.id}, nil)
		if err != nil {
			tk.problem = err.Error()
			return
		}
		var got mTask
		if r.Error != nil || json.Unmarshal(r.Result, &got) != nil || got.TaskID != tk.id {
			// Not found here is a lost task.
			tk.problem = fmt.Sprintf("tasks/get %s on replica %d after %d polls: %s", tk.id, rep, polls, r)
			return
		}
		if terminal(got.Status) {
			tk.final = got
			return
		}
		cc.st.saw(tk.i, fmt.Sprintf("%s %s %s %q on replica %d after %d polls", tk.tool, tk.id, got.Status, got.StatusMessage, rep, polls))
		if got.Status == "input_required" {
			tk.asked = true
		}
		if got.Status == "input_required" && time.Since(answered) > 500*time.Millisecond {
			responses := map[string]any{}
			for k, in := range got.InputRequests {
				if tk.tool != "elicit" || in.Method != "elicitation/create" || in.message() != "What is your name?" {
					tk.problem = fmt.Sprintf("unexpected input request %s: %s %s", k, in.Method, in.Params)
					return
				}
				responses[k] = accept("name", tk.name)
			}
			r, rep, err := cc.do(ctx, "tasks/update", map[string]any{"taskId": tk.id, "inputResponses": responses}, nil)
			if err != nil || r.Error != nil {
				tk.problem = fmt.Sprintf("tasks/update %s on replica %d: %s %v", tk.id, rep, r, err)
				return
			}
			answered, tk.answered = time.Now(), true
		}
		wait := 100 * time.Millisecond
		if got.PollIntervalMs != nil {
			wait = time.Duration(*got.PollIntervalMs) * time.Millisecond
		}
		select {
		case <-ctx.Done():
			tk.problem = fmt.Sprintf("still %s when the test's time ran out", got.Status)
			return
		case <-time.After(wait):
		}
	}
}

// probe is another owner's tasks/get, tasks/update (answering as
// "mallory") and tasks/cancel of task id: each must be "not found".
func (cc *chaosClient) probe(ctx context.Context, id, when string) {
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		params := map[string]any{"taskId": id}
		if m == "tasks/update" {
			params["inputResponses"] = map[string]any{"1": accept("name", "mallory")}
		}
		cc.st.probes.Add(1)
		r, rep, err := cc.do(ctx, m, params, nil)
		if err != nil {
			cc.st.problem("cross-owner %s of %s %s: %v", m, id, when, err)
			continue
		}
		if r.Error == nil || r.Error.Code != codeInvalidParams || r.Error.Message != "Failed to retrieve task: Task not found" {
			cc.st.leaks.Add(1)
			cc.st.problem("cross-owner %s of %s on replica %d %s = %s, want -32602 \"Failed to retrieve task: Task not found\"", m, id, rep, when, r)
		}
	}
}

// waitFor waits until cond holds, the clients are done, or ctx ends.
func waitFor(ctx context.Context, done <-chan struct{}, cond func() bool) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// parallel runs f on every item, n at a time.
func parallel(ctx context.Context, items []string, n int, f func(string)) {
	ch := make(chan string)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				f(it)
			}
		}()
	}
	for _, it := range items {
		select {
		case ch <- it:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
}

// leaseHolderOf reads, in Redis, the lease holder of the first of ids that
// still has one: the replica id of the process running its worker. "" when
// none has, with the statuses it saw.
func leaseHolderOf(t *testing.T, addr string, ids []string) (holder, seen string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var statuses []string
	for _, id := range ids {
		keys, err := rdb.Keys(ctx, "tg:{*}:t:"+id).Result()
		if err != nil {
			t.Fatalf("KEYS: %v", err)
		}
		for _, k := range keys {
			v, _ := rdb.HMGet(ctx, k, "lease_holder", "status").Result()
			if h, _ := v[0].(string); h != "" {
				return h, ""
			}
			st, _ := v[1].(string)
			statuses = append(statuses, id+" "+st)
		}
	}
	return "", fmt.Sprintf("%d tasks: %s", len(ids), strings.Join(statuses, ", "))
}

// checkStoreTasks reads every task hash in Redis: each must be terminal;
// it returns the status messages of those the client does not know
// (known) by id, and fails the test for any of the client's tasks that is
// missing.
func checkStoreTasks(t *testing.T, addr string, known map[string]bool) (orphans map[string]string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]bool{}
	orphans = map[string]string{}
	iter := rdb.Scan(ctx, 0, "tg:{*}:t:*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if strings.HasSuffix(key, ":gone") {
			continue
		}
		v, err := rdb.HMGet(ctx, key, "id", "tool", "status", "message").Result()
		if err != nil {
			t.Fatalf("HMGET %s: %v", key, err)
		}
		id, _ := v[0].(string)
		tool, _ := v[1].(string)
		status, _ := v[2].(string)
		msg, _ := v[3].(string)
		seen[id] = true
		if !terminal(status) {
			t.Errorf("task %s (%s) is %s in Redis after the run", id, tool, status)
		}
		if !known[id] {
			orphans[id] = msg
			t.Logf("task %s (%s) in Redis is unknown to the client (its tools/call was cut off): %s %q", id, tool, status, msg)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	for id := range known {
		if !seen[id] {
			t.Errorf("task %s is not in Redis any more", id)
		}
	}
	return orphans
}
