package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// The fault tests of issue 38's webhooks, against the built binary: two
// replicas on one real redis-server (AOF, appendfsync always), a stateless
// upstream, and js/webhook-receiver.mjs, which verifies every delivery
// with npm standardwebhooks (an unsigned, wrongly signed or stale one is
// recorded as refused, and any refusal fails the test). What every test
// checks at the end (whRig.check):
//
//   - exactly one delivery per event id (webhook-id), none refused;
//   - per task, the event types in the order the task went through them;
//   - per task, the ids evt_<task>_1 … evt_<task>_<whseq> and no other,
//     whseq being the task's own event count in Redis: nothing the store
//     recorded was lost, nothing was made up.
//
// Deadlines only bound a hang; speed is never asserted.

// whRig is one run: Redis, the upstream, the gateways, the receiver and
// the clients (chaosClient: round robin over the replicas, transient
// failures retried, every task probed by another owner).
type whRig struct {
	t              *testing.T
	ctx            context.Context
	srv            *redistest.Server
	up             string
	args           []string
	gws            []*gateway
	node, file     string
	rcv            *nodeReceiver
	st             *chaosStats
	alice, mallory *chaosClient
	m              *mClient // alice, for the test goroutine's own calls
}

// whLease is the workers' lease: a killed replica's rerunnable task runs
// again about whLease + 2 s (grace) after the kill.
const whLease = 3 * time.Second

func newWHRig(t *testing.T, replicas int, extra ...string) *whRig {
	t.Helper()
	r := &whRig{t: t, node: ensureReceiverJS(t), file: filepath.Join(t.TempDir(), "received.jsonl")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.rcv = startReceiver(t, r.node, r.file, 0)
	r.srv = redistest.NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always")
	r.up = newUpstream(t, testupstream.Options{Stateless: true})
	r.args = append([]string{
		"--redis-url", "redis://" + r.srv.Addr,
		"--task", "echo", "--task", "slow", "--task", "elicit", "--task", "fail", "--task", "rpcerror",
		"--poll-interval", "100ms", "--lease", whLease.String(), "--lease-renew", "500ms",
		"--webhook-url", r.rcv.url(), "--webhook-secret", e2eWebhookSecret,
		"--console-url", "http://console.test", "--webhook-timeout", "2s",
		"--log-level", "warn",
	}, extra...)
	urls := make([]string, replicas)
	for i := range replicas {
		r.gws = append(r.gws, startGateway(t, r.up, r.args...))
		urls[i] = r.gws[i].URL
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	t.Cleanup(hc.CloseIdleConnections)
	r.st = &chaosStats{}
	r.alice = &chaosClient{c: newMClient(t, urls, "Bearer wh-alice", true), st: r.st}
	r.alice.c.hc = hc
	r.mallory = &chaosClient{c: newMClient(t, urls, "Bearer wh-mallory", true), st: r.st}
	r.mallory.c.hc = hc
	r.m = newMClient(t, urls, "Bearer wh-alice", true)
	return r
}

func (r *whRig) bases() []string {
	var out []string
	for _, g := range r.gws {
		select {
		case <-g.done: // killed: its metrics are gone with it
		default:
			out = append(out, g.base)
		}
	}
	return out
}

// receiverDown stops the receiver: deliveries are refused connections.
func (r *whRig) receiverDown() { r.rcv.stop() }

// receiverUp starts it again on its port (the URL the gateways have).
func (r *whRig) receiverUp() { r.rcv = startReceiver(r.t, r.node, r.file, r.rcv.port) }

// runTasks runs tasks on the client goroutines, concurrency at a time, and
// returns once every one ended (terminal, or given up: tk.problem). mid,
// if any, runs on the test's goroutine once half the tasks are created.
func (r *whRig) runTasks(tasks []*chaosTask, concurrency int, mid func()) {
	r.t.Helper()
	jobs := make(chan *chaosTask)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tk := range jobs {
				r.alice.run(r.ctx, tk, r.mallory)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, tk := range tasks {
			select {
			case jobs <- tk:
			case <-r.ctx.Done():
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if mid != nil {
		waitFor(r.ctx, done, func() bool { return r.st.created.Load() >= int64(len(tasks)/2) })
		mid()
	}
	select {
	case <-done:
	case <-r.ctx.Done():
		<-done
		r.t.Fatalf("the client did not finish in time; unfinished: %s", r.st.unfinished(10))
	}
	for _, p := range r.st.problems() {
		r.t.Error(p)
	}
	if n := r.st.leaks.Load(); n != 0 {
		r.t.Errorf("%d cross-owner requests did not answer \"not found\"", n)
	}
}

// expect adds what each task of the plan must have sent, from its tool
// and its final status (checked against the upstream's answer first).
func (r *whRig) expect(want map[string][]string, tasks []*chaosTask) {
	r.t.Helper()
	for _, tk := range tasks {
		if tk.problem != "" {
			continue // runTasks failed the test already
		}
		if msg := tk.check(tk.final); msg != "" {
			r.t.Errorf("task %d (%s %s): %s", tk.i, tk.tool, tk.id, msg)
			continue
		}
		types := []string{"task.created"}
		if tk.tool == "elicit" {
			types = append(types, "task.input_required")
		}
		want[tk.id] = append(types, "task."+tk.final.Status)
	}
}

// waitDelivered waits until every task of want has as many verified
// deliveries as it has events, and each replica's metrics counted them.
func (r *whRig) waitDelivered(want map[string][]string, d time.Duration) {
	r.t.Helper()
	total := 0
	for _, ts := range want {
		total += len(ts)
	}
	waitWebhooks(r.t, fmt.Sprintf("the %d events of %d tasks delivered", total, len(want)), d, func() bool {
		got := map[string]int{}
		for _, l := range r.rcv.lines() {
			if l.OK {
				got[l.TaskID]++
			}
		}
		for id, ts := range want {
			if got[id] < len(ts) {
				return false
			}
		}
		return true
	})
}

// check is what every test asserts at the end (see the top of the file).
func (r *whRig) check(want map[string][]string) {
	r.t.Helper()
	checkReceived(r.t, r.rcv, 0, want)
	seqs := storeTaskInts(r.t, r.srv.Addr, "whseq")
	ids := map[string]map[string]bool{}
	for _, l := range r.rcv.lines() {
		if l.OK {
			if ids[l.TaskID] == nil {
				ids[l.TaskID] = map[string]bool{}
			}
			ids[l.TaskID][l.ID] = true
		}
	}
	for task := range want {
		n := seqs[task]
		if n != len(want[task]) {
			r.t.Errorf("task %s: %d events in Redis (whseq), want %d %v", task, n, len(want[task]), want[task])
		}
		for i := 1; i <= n; i++ {
			if id := fmt.Sprintf("evt_%s_%d", task, i); !ids[task][id] {
				r.t.Errorf("task %s: event %s recorded in Redis, never delivered", task, id)
			}
		}
		if len(ids[task]) != n {
			r.t.Errorf("task %s: %d event ids delivered, %d recorded", task, len(ids[task]), n)
		}
	}
}

// cancelled creates n slow tasks on the test's goroutine and cancels each:
// task.created then task.cancelled.
func (r *whRig) cancelled(want map[string][]string, n int) {
	r.t.Helper()
	for i := range n {
		tk := r.m.createTask(i%len(r.gws), "slow", map[string]any{"seconds": 20, "text": "cancel-" + strconv.Itoa(i)})
		r.m.cancel((i+1)%len(r.gws), tk.TaskID)
		r.m.waitStatus(i%len(r.gws), tk.TaskID, "cancelled")
		want[tk.TaskID] = []string{"task.created", "task.cancelled"}
	}
}

// failed2025 runs n fail tasks as a 2025-11-25 client (params.task): the
// tool's isError result is a failed task there (MCP 2025-11-25, Tasks),
// so task.failed with result.isError true.
func (r *whRig) failed2025(want map[string][]string, n int) []string {
	r.t.Helper()
	var ids []string
	for i := range n {
		s := newRawSession(r.t, r.gws[i%len(r.gws)].URL, "Bearer wh-alice")
		s.initialize()
		var created struct {
			Task tsTask `json:"task"`
		}
		mustDecode(r.t, s.mustResult("tools/call", map[string]any{"name": "fail", "arguments": map[string]any{},
			"task": map[string]any{"ttl": taskTTLMs}}), &created)
		id := created.Task.TaskID
		s.url = r.gws[(i+1)%len(r.gws)].URL
		_ = s.call("tasks/result", map[string]any{"taskId": id}) // blocks until terminal
		var tk tsTask
		mustDecode(r.t, s.mustResult("tasks/get", map[string]any{"taskId": id}), &tk)
		if tk.Status != "failed" {
			r.t.Errorf("2025-11-25 fail task %s ended %s, want failed (isError)", id, tk.Status)
		}
		want[id] = []string{"task.created", "task.failed"}
		ids = append(ids, id)
	}
	return ids
}

// TestWebhooksVolume: 500 tasks of a 2026-07-28 client over two replicas,
// of every outcome (echo and slow complete, elicit asks and completes once
// answered, fail completes with isError, rpcerror fails), plus cancelled
// tasks and 2025-11-25 isError tasks (failed there): every event delivered
// once, verified, in order per task, and nothing dead.
func TestWebhooksVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, two gateways and a node receiver and runs 500 tasks")
	}
	r := newWHRig(t, 2)
	start := time.Now()
	tasks := chaosPlan(500)
	r.runTasks(tasks, 24, nil)
	want := map[string][]string{}
	r.expect(want, tasks)
	r.cancelled(want, 5)
	isErr := r.failed2025(want, 5)
	ran := time.Since(start)
	r.waitDelivered(want, 60*time.Second)
	r.check(want)
	for _, l := range r.rcv.lines() {
		for _, id := range isErr {
			if l.TaskID == id && l.Type == "task.failed" && (l.Payload.Data.Result == nil || !l.Payload.Data.Result.IsError) {
				t.Errorf("2025-11-25 isError task %s: task.failed without result.isError: %+v", id, l.Payload.Data)
			}
		}
	}
	if n := deliveredCount(t, r.bases(), "dead"); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	events := 0
	for _, ts := range want {
		events += len(ts)
	}
	t.Logf("webhooks volume: %d tasks, %d events delivered; tasks ran in %v, all delivered %v after the start (measured, not asserted)",
		len(want), events, ran.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// whSettle creates a task of tool on replica i and runs it to its end
// from the test's goroutine (answering an elicit); it returns its events.
func (r *whRig) whSettle(want map[string][]string, i int, tool string, args map[string]any) string {
	r.t.Helper()
	tk := r.m.createTask(i, tool, args)
	types := []string{"task.created"}
	if tool == "elicit" {
		r.m.waitStatus(i, tk.TaskID, "input_required")
		r.m.update(i, tk.TaskID, map[string]any{"1": accept("name", "Ada")})
		types = append(types, "task.input_required")
	}
	final, _ := r.m.waitTask(i, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	want[tk.TaskID] = append(types, "task."+final.Status)
	return tk.TaskID
}

// whBatch settles a few tasks of each outcome on replica i.
func (r *whRig) whBatch(want map[string][]string, i int, tag string) {
	r.t.Helper()
	for k := range 3 {
		r.whSettle(want, i, "echo", map[string]any{"text": fmt.Sprintf("%s-%d", tag, k)})
	}
	r.whSettle(want, i, "elicit", map[string]any{})
	r.whSettle(want, i, "fail", map[string]any{})
	r.whSettle(want, i, "rpcerror", map[string]any{})
}

// TestWebhooksReplicaKilled: the replica holding tasks is SIGKILLed after
// their status changes and before their delivery (the receiver is down
// until after the kill, so every event is recorded, and queued or not,
// but none delivered): the other replica delivers them all. Rerunnable
// tasks (--rerun slow) killed mid-call run again on the survivor: each
// sends task.created, task.rerun, task.completed, in that order.
func TestWebhooksReplicaKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, two gateways and a node receiver, and kills a gateway")
	}
	r := newWHRig(t, 2, "--rerun", "slow", "--rerun-backoff", "200ms")
	const victim, survivor = 1, 0
	want := map[string][]string{}
	r.receiverDown()
	r.whBatch(want, victim, "killed")
	var reruns []string
	for k := range 3 {
		tk := r.m.createTask(victim, "slow", map[string]any{"seconds": 3, "text": fmt.Sprintf("rerun-%d", k)})
		reruns = append(reruns, tk.TaskID)
	}
	// The victim is mid-call on the slow tasks, and has tried (and failed)
	// to deliver, or not yet: either way nothing is delivered.
	if err := r.gws[victim].cmd.Process.Kill(); err != nil { // SIGKILL, by the PID we started
		t.Fatal(err)
	}
	<-r.gws[victim].done
	killedAt := time.Now()
	if n := len(r.rcv.lines()); n != 0 {
		t.Fatalf("%d deliveries recorded while the receiver was down", n)
	}
	time.Sleep(time.Second) // the receiver comes back after the kill
	r.receiverUp()
	for _, id := range reruns {
		final, _ := r.m.waitTask(survivor, id, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
		if final.Status != "completed" {
			t.Errorf("rerunnable task %s of the killed replica ended %s %q, want completed by a rerun", id, final.Status, final.StatusMessage)
		}
		want[id] = []string{"task.created", "task.rerun", "task.completed"}
	}
	r.waitDelivered(want, 90*time.Second)
	r.check(want)
	events := 0
	for _, ts := range want {
		events += len(ts)
	}
	if n := deliveredCount(t, r.bases(), "delivered"); n < events {
		t.Errorf("the surviving replica counts %d deliveries, want all %d", n, events)
	}
	t.Logf("replica killed: %d events of %d tasks delivered by the survivor within %v of the kill (measured, not asserted)",
		events, len(want), time.Since(killedAt).Round(100*time.Millisecond))
}

// whReceiverOutage is how long TestWebhooksReceiverDown keeps the
// receiver down: the 30 s, several retries of the first events.
const whReceiverOutage = 30 * time.Second

// TestWebhooksReceiverDown: the receiver down for 30 s while tasks of
// every outcome run (some before, some halfway): deliveries fail and are
// retried with backoff; once it is up, everything arrives, once, in order
// per task, and nothing is dead.
func TestWebhooksReceiverDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, two gateways and a node receiver, and keeps the receiver down for 30 s")
	}
	t.Parallel() // it mostly waits
	r := newWHRig(t, 2)
	want := map[string][]string{}
	r.receiverDown()
	downAt := time.Now()
	r.whBatch(want, 0, "early")
	waitWebhooks(t, "a delivery retried", 20*time.Second, func() bool { return deliveredCount(t, r.bases(), "retried") > 0 })
	time.Sleep(time.Until(downAt.Add(whReceiverOutage / 2)))
	r.whBatch(want, 1, "halfway")
	time.Sleep(time.Until(downAt.Add(whReceiverOutage)))
	if n := len(r.rcv.lines()); n != 0 {
		t.Fatalf("%d deliveries recorded while the receiver was down", n)
	}
	r.receiverUp()
	upAt := time.Now()
	// Full jitter: an event first tried at the start is at its 4th or 5th
	// retry by now, due within up to 40 s more (webhook/backoff.go).
	r.waitDelivered(want, 100*time.Second)
	r.check(want)
	if n := deliveredCount(t, r.bases(), "dead"); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	t.Logf("receiver down %v: %d tasks' events delivered %v after it came back, after %d failed attempts (measured, not asserted)",
		upAt.Sub(downAt).Round(100*time.Millisecond), len(want), time.Since(upAt).Round(100*time.Millisecond), deliveredCount(t, r.bases(), "retried"))
}

// TestWebhooksRedisRestart: Redis (AOF, appendfsync always) SIGKILLed
// halfway through 200 tasks of every outcome and restarted on its AOF
// after a few seconds: every event of every task that ended is delivered
// exactly once per event id, in order, and the ids are exactly those the
// store recorded (whseq). A tools/call refused while Redis is down is
// retried by the client; a task it may have left (its reply was lost) is
// no task of the client's and is not checked.
func TestWebhooksRedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, two gateways and a node receiver, and restarts Redis")
	}
	r := newWHRig(t, 2)
	tasks := chaosPlan(200)
	var downAt, upAt time.Time
	r.runTasks(tasks, 16, func() {
		downAt = time.Now()
		r.srv.Stop() // SIGKILL
		time.Sleep(3 * time.Second)
		r.srv.Start() // same port and dir: reloads the AOF
		upAt = time.Now()
	})
	want := map[string][]string{}
	r.expect(want, tasks)
	r.waitDelivered(want, 100*time.Second)
	r.check(want)
	if n := deliveredCount(t, r.bases(), "dead"); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	t.Logf("Redis down %v; %d tasks (%d tools/calls refused and retried); all delivered %v after it came back (measured, not asserted)",
		upAt.Sub(downAt).Round(100*time.Millisecond), len(want), r.st.refusedCalls.Load(), time.Since(upAt).Round(100*time.Millisecond))
}
