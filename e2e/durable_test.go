package e2e

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// Durable tasks (docs/durable.md), through the built binary.

// durableArgs are the flags of a fleet whose dead replicas' tasks are
// taken over quickly: a short lease, renewed (and swept) often.
func durableArgs(redisAddr string, extra ...string) []string {
	return append([]string{"--redis-url", "redis://" + redisAddr, "--poll-interval", "100ms",
		"--lease", "1s", "--lease-renew", "300ms", "--rerun-backoff", "200ms"}, extra...)
}

// taskField reads one field of task id's record in Redis.
func taskField(t *testing.T, addr, id, field string) string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := rdb.Keys(ctx, "tg:{*}:t:"+id).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the record of task %s: %v %v", id, keys, err)
	}
	return rdb.HGet(ctx, keys[0], field).Val()
}

// TestDurableReattachNativeTask: a gateway task holds the TypeScript SDK
// server's own task (registerToolTask; --task slow takes the native tool
// over). The replica holding it is killed with SIGKILL mid-task. The other
// replica re-attaches to the upstream's task (tasks/result on the recorded
// session): the task completes with the upstream's result, and the
// upstream ran the tool once: nothing was run again. The tool has no
// rerun rule nor annotation: re-attaching holds for every tool.
func TestDurableReattachNativeTask(t *testing.T) {
	node := ensureJS(t)
	srv := startNativeServer(t, node)
	addr := redistest.Start(t)
	args := durableArgs(addr, "--task", "slow")
	held := make(chan struct{}, 4)
	holder := startGateway(t, srv.URL(), args...)
	holder.stderr.setTap(func(line string) {
		if strings.Contains(line, `"upstream task held"`) {
			select {
			case held <- struct{}{}:
			default:
			}
		}
	})
	other := startGateway(t, srv.URL(), args...)
	c := newMClient(t, []string{holder.URL, other.URL}, "Bearer durable-native", true)

	tk := c.createTask(0, "slow", map[string]any{"ms": 4000})
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the replica never held the upstream's task")
	}
	waitUntil(t, 10*time.Second, func() bool { return taskField(t, addr, tk.TaskID, "up_task") != "" })
	if err := holder.cmd.Process.Kill(); err != nil { // SIGKILL, by the PID we started
		t.Fatal(err)
	}
	<-holder.done

	done, seen := c.waitTask(1, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if done.Status != "completed" {
		t.Fatalf("task ended %s %q (statuses %v), want completed by the other replica", done.Status, done.StatusMessage, seen)
	}
	checkInlinedResult(t, "slow", done.Result, "slow done after 4000ms", false)
	if n := len(srv.created); n != 1 {
		t.Errorf("the upstream created %d slow tasks, want 1: the task was run again, not re-attached", n)
	}
	if !strings.Contains(other.stderr.String(), "task re-attached to the upstream's own task") {
		t.Errorf("the surviving replica did not log the re-attach:\n%s", other.stderr.String())
	}
	if a := taskField(t, addr, tk.TaskID, "attempts"); a != "1" {
		t.Errorf("attempts = %q: a re-attach is no new attempt", a)
	}
}

// TestDurableStdioChildKilled: the shared stdio child running a task's
// call is killed mid-call (SIGKILL). The bridge fails the call as a child
// that exited, not as the server's answer: with the tool rerunnable, the
// worker runs it again once the child is back and the task completes with
// its own result; on a fleet where it is not, the task fails as before,
// saying why.
func TestDurableStdioChildKilled(t *testing.T) {
	type fleet struct {
		g   *gateway
		rec *testupstream.Recorder
		c   *mClient
		id  string
	}
	start := func(rerun bool) *fleet {
		args := durableArgs(redistest.Start(t), "--upstream-shared", "--task", "slow", "--max-attempts", "5")
		if rerun {
			args = append(args, "--rerun", "slow")
		}
		f := &fleet{g: startGateway(t, stdioUpstream(t), args...), rec: &testupstream.Recorder{}}
		recordChild(f.g, f.rec)
		f.c = newMClient(t, []string{f.g.URL}, "Bearer durable-stdio", true)
		return f
	}
	durable, once := start(true), start(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range []*fleet{durable, once} {
		f.id = f.c.createTask(0, "slow", map[string]any{"seconds": 3.0, "text": "mine"}).TaskID
		if err := f.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatalf("the child never started the call: %v", err)
		}
		pids := childPIDs(f.g.stderr.String())
		if len(pids) != 1 {
			t.Fatalf("children started: %v, want the shared one", pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil { // the child the gateway we started started
			t.Fatal(err)
		}
	}

	got, seen := durable.c.waitTask(0, durable.id, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if got.Status != "completed" {
		t.Fatalf("rerunnable task ended %s %q (statuses %v), want completed after a rerun", got.Status, got.StatusMessage, seen)
	}
	checkInlinedResult(t, "slow", got.Result, "slept 3 s: mine", false)
	if n := durable.rec.Count("slow", testupstream.Called); n < 2 {
		t.Errorf("the child ran slow %d times, want at least 2 (the killed call and the rerun)", n)
	}
	if !strings.Contains(durable.g.stderr.String(), `"cause":"process_exited"`) {
		t.Errorf("no rerun logged with cause process_exited:\n%s", durable.g.stderr.String())
	}

	got, _ = once.c.waitTask(0, once.id, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if got.Status != "failed" || !strings.Contains(got.StatusMessage, "upstream process") {
		t.Errorf("a task of a tool not rerunnable ended %s %q, want failed naming the upstream process", got.Status, got.StatusMessage)
	}
	if n := once.rec.Count("slow", testupstream.Called); n != 1 {
		t.Errorf("the tool that is not rerunnable ran %d times, want 1", n)
	}
}

// TestDurableUpstreamRestart: the upstream process restarts under a
// rerunnable task of a 2026-07-28 client: its connection breaks, then it
// refuses connections, then it no longer knows the owner session (404).
// The worker runs the call again through all of it, on a new owner
// session, and the task completes with its own result.
func TestDurableUpstreamRestart(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := newStoppableHTTP(t, func() http.Handler { return testupstream.Handler(testupstream.Options{Recorder: rec}) })
	g := startGateway(t, "http://"+up.addr+"/mcp", durableArgs(redistest.Start(t), "--task", "slow", "--rerun", "slow", "--max-attempts", "6")...)
	c := newMClient(t, []string{g.URL}, "Bearer durable-restart", true)
	tk := c.createTask(0, "slow", map[string]any{"seconds": 2.0, "text": "survives"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	up.stop()
	time.Sleep(300 * time.Millisecond) // the outage; nothing waits on it
	up.start(t)

	got, seen := c.waitTask(0, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if got.Status != "completed" {
		t.Fatalf("task ended %s %q (statuses %v), want completed after the upstream came back", got.Status, got.StatusMessage, seen)
	}
	checkInlinedResult(t, "slow", got.Result, "slept 2 s: survives", false)
	if !strings.Contains(g.stderr.String(), `"cause":"session_gone"`) {
		t.Errorf("no rerun for the lost session was logged:\n%s", g.stderr.String())
	}
}

// TestDurableStdioSessionChildKilled: a 2025-11-25 client's own stdio
// child (one per session, the default) is killed mid-call (SIGKILL).
// With the tool rerunnable, the session lives on with a fresh child, the
// rerun runs there and the task completes with its own result, on its
// second attempt, and the client's session still answers. Where the tool
// is not rerunnable, the task fails naming the child's exit and the
// session ends as before.
func TestDurableStdioSessionChildKilled(t *testing.T) {
	type fleet struct {
		g     *gateway
		rec   *testupstream.Recorder
		s     *rawSession
		redis string
		id    string
	}
	start := func(rerun bool) *fleet {
		f := &fleet{redis: redistest.Start(t), rec: &testupstream.Recorder{}}
		args := durableArgs(f.redis, "--task", "slow", "--max-attempts", "3", "--upstream-warm", "0")
		if rerun {
			args = append(args, "--rerun", "slow")
		}
		f.g = startGateway(t, stdioUpstream(t), args...)
		recordChild(f.g, f.rec)
		f.s = newRawSession(t, f.g.URL, "Bearer durable-child")
		f.s.initialize()
		return f
	}
	durable, once := start(true), start(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range []*fleet{durable, once} {
		var created struct {
			Task tsTask `json:"task"`
		}
		mustDecode(t, f.s.mustResult("tools/call", map[string]any{
			"name": "slow", "arguments": map[string]any{"seconds": 3, "text": "mine"}, "task": map[string]any{"ttl": 60000},
		}), &created)
		f.id = created.Task.TaskID
		if err := f.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatalf("the child never started the call: %v", err)
		}
		pids := childPIDs(f.g.stderr.String())
		if len(pids) != 1 {
			t.Fatalf("children started: %v, want the session's own", pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil { // the child the gateway we started started
			t.Fatal(err)
		}
	}
	wait := func(f *fleet) tsTask {
		deadline := time.Now().Add(25 * time.Second)
		for {
			var tk tsTask
			mustDecode(t, f.s.mustResult("tasks/get", map[string]any{"taskId": f.id}), &tk)
			if tk.Status != "working" && tk.Status != "input_required" {
				return tk
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s still %s %q", f.id, tk.Status, tk.StatusMessage)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	got := wait(durable)
	if got.Status != "completed" {
		t.Fatalf("rerunnable task ended %s %q, want completed in a fresh child\n%s", got.Status, got.StatusMessage, durable.g.stderr.String())
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	mustDecode(t, durable.s.mustResult("tasks/result", map[string]any{"taskId": durable.id}), &res)
	if len(res.Content) == 0 || res.Content[0].Text != "slept 3 s: mine" {
		t.Errorf("the task's result: %+v", res)
	}
	if a := taskField(t, durable.redis, durable.id, "attempts"); a != "2" {
		t.Errorf("attempts = %q, want 2 (the killed call and the rerun)", a)
	}
	if pids := childPIDs(durable.g.stderr.String()); len(pids) != 2 {
		t.Errorf("children started: %v, want the session's first and its fresh one", pids)
	}
	for _, want := range []string{`"cause":"process_exited"`, "the session lives on with a fresh process"} {
		if !strings.Contains(durable.g.stderr.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, durable.g.stderr.String())
		}
	}
	var echo struct {
		Content []struct{ Text string } `json:"content"`
	}
	mustDecode(t, durable.s.mustResult("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "still here"}}), &echo)
	if len(echo.Content) == 0 || echo.Content[0].Text != "still here" {
		t.Errorf("the session after the rerun: %+v", echo)
	}

	got = wait(once)
	if got.Status != "failed" || !strings.Contains(got.StatusMessage, "the upstream process was killed by signal killed") {
		t.Errorf("a task of a tool not rerunnable ended %s %q, want failed naming the child's exit", got.Status, got.StatusMessage)
	}
	if n := once.rec.Count("slow", testupstream.Called); n != 1 {
		t.Errorf("the tool that is not rerunnable ran %d times, want 1", n)
	}
	if status, _ := once.s.post(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": map[string]any{}}); status != http.StatusNotFound {
		t.Errorf("the session whose child died with no rerunnable task: HTTP %d, want 404 (it ended)", status)
	}
}
