package e2e

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestCluster: a 3-master Redis Cluster built like an operator would
// (`redis-server --cluster-enabled yes` ×3, `redis-cli --cluster create`),
// two taskgate processes with --redis-url redis+cluster://…, and the task
// flows of both protocol eras across the replicas, for several Authorization
// headers, so the owners' tasks sit in different slots on different masters.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and two gateways")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not in PATH (Debian's redis-server package ships it; see internal/redistest/install-redis.sh): skipping the Redis Cluster e2e")
	}
	t.Parallel()
	addrs := redistest.StartClusterCLI(t, 3)
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Elicit2: true, Recorder: rec}) // a legacy (session) upstream
	args := append([]string{"--redis-url", "redis+cluster://" + strings.Join(addrs, ",")}, twoReplicaFlags...)
	// Replica A serves the console: its records must not get in the way
	// of any task flow on a Cluster (docs/console.md, "Redis Cluster").
	caddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	urls := []string{startGateway(t, up, append(slices.Clone(args), "--console-listen", caddr)...).URL, startGateway(t, up, args...).URL}

	// 2025-11-25: tools/call with params.task on A; tasks/get, tasks/result
	// and tasks/list on B; another owner sees nothing.
	t.Run("2025-11-25", func(t *testing.T) {
		s := newRawSession(t, urls[replicaA], "Bearer cluster-alice")
		s.initialize()
		var created struct {
			Task tsTask `json:"task"`
		}
		mustDecode(t, s.mustResult("tools/call", map[string]any{
			"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "cluster"}, "task": map[string]any{"ttl": taskTTLMs},
		}), &created)
		checkNewTask(t, "cluster slow", created.Task, taskTTLMs)
		id := created.Task.TaskID

		s.url = urls[replicaB] // the same session, on the other replica
		var tk tsTask
		mustDecode(t, s.mustResult("tasks/get", map[string]any{"taskId": id}), &tk)
		if tk.TaskID != id || (tk.Status != "working" && tk.Status != "completed") {
			t.Errorf("tasks/get on B = %+v, want task %s working", tk, id)
		}
		res := s.mustResult("tasks/result", map[string]any{"taskId": id})
		var cres tsCallResult
		mustDecode(t, res, &cres)
		if cres.text() != "slept 1 s: cluster" || cres.IsError {
			t.Errorf("tasks/result on B = %s, want the upstream's result", res)
		}
		if got := relatedTask(res); got != id {
			t.Errorf("tasks/result _meta related-task = %q, want %q", got, id)
		}
		var page tsListResult
		mustDecode(t, s.mustResult("tasks/list", map[string]any{}), &page)
		if len(page.Tasks) != 1 || page.Tasks[0].TaskID != id || page.Tasks[0].Status != "completed" {
			t.Errorf("tasks/list on B = %+v, want just the completed task", page.Tasks)
		}

		other := newRawSession(t, urls[replicaB], "Bearer cluster-mallory")
		other.initialize()
		other.wantError("tasks/get", map[string]any{"taskId": id}, codeInvalidParams)
	})

	// 2026-07-28: an elicitation task per owner, created on A, answered on
	// B, read back on both.
	for _, auth := range []string{"Bearer cluster-bob", "Bearer cluster-dave", "Bearer cluster-erin", "Basic Y2x1c3RlcjpmcmFuaw=="} {
		t.Run("2026-07-28-elicit/"+auth, func(t *testing.T) {
			c := newMClient(t, urls, auth, true)
			created := c.createTask(replicaA, "elicit", map[string]any{})
			ir, seen := c.waitTask(replicaB, created.TaskID, "input_required", func(tk mTask) bool { return tk.Status != "working" })
			if ir.Status != "input_required" || len(ir.InputRequests) != 1 {
				t.Fatalf("after %v: %+v, want input_required with one input request", seen, ir)
			}
			key := inputKeys(t, "tasks/get", ir.InputRequests)["What is your name?"]
			if key == "" {
				t.Fatalf("input requests %+v, want the name question", ir.InputRequests)
			}
			c.update(replicaB, created.TaskID, map[string]any{key: accept("name", "Luca")})
			done, seen := c.waitTask(replicaA, created.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
			if done.Status != "completed" {
				t.Fatalf("task ended %s (statuses %v): %+v", done.Status, seen, done)
			}
			checkInlinedResult(t, "cluster elicit", done.Result, "Hello, Luca!", false)
			if onB := c.get(replicaB, created.TaskID); onB.Status != "completed" || canonicalJSON(onB.Result) != canonicalJSON(done.Result) {
				t.Errorf("replica B sees %+v, replica A %+v", onB, done)
			}
			other := newMClient(t, urls, auth+"-not", true)
			if r := other.call(replicaB, "tasks/get", map[string]any{"taskId": created.TaskID}); r.Error == nil || r.Error.Code != codeInvalidParams {
				t.Errorf("tasks/get by another owner = %s, want -32602", r)
			}
		})
	}

	// 2026-07-28: a running 30-second task created on A, cancelled on B;
	// the upstream sees the cancellation.
	t.Run("2026-07-28-cancel", func(t *testing.T) {
		c := newMClient(t, urls, "Bearer cluster-carol", true)
		called, cancelled := rec.Count("slow", testupstream.Called), rec.Count("slow", testupstream.Cancelled)
		created := c.createTask(replicaA, "slow", map[string]any{"seconds": 30, "text": "never"})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rec.WaitFor(ctx, "slow", testupstream.Called, called+1); err != nil {
			t.Fatalf("the upstream did not start slow: %v", err)
		}
		c.cancel(replicaB, created.TaskID)
		done, seen := c.waitTask(replicaA, created.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
		if done.Status != "cancelled" {
			t.Errorf("cancelled task is %s (statuses %v), want cancelled", done.Status, seen)
		}
		if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, cancelled+1); err != nil {
			t.Errorf("the upstream never saw the cancellation: %v", err)
		}
		if tk := c.get(replicaB, created.TaskID); tk.Status != "cancelled" {
			t.Errorf("replica B sees %s, want cancelled", tk.Status)
		}
	})

	// The console on a Cluster: the tasks page says it keeps no index,
	// the replicas page lists both replicas, and no index key or
	// timeline was written on any master.
	t.Run("console", func(t *testing.T) {
		get := func(path string) string {
			resp, err := http.Get("http://" + caddr + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		if page := get("/"); !strings.Contains(page, "Redis Cluster") {
			t.Errorf("the tasks page on a Cluster:\n%s", page)
		}
		if page := get("/replicas"); strings.Count(page, " / 1000</td>") != 2 {
			t.Errorf("the replicas page on a Cluster does not list both replicas' heartbeats:\n%s", page)
		}
		for _, a := range addrs {
			rdb := redis.NewClient(&redis.Options{Addr: a})
			ops, _, err := rdb.Scan(context.Background(), 0, "*{ops}*", 1000).Result()
			logs, _, err2 := rdb.Scan(context.Background(), 0, "*:log", 1000).Result()
			rdb.Close()
			if err != nil || err2 != nil {
				t.Fatalf("SCAN on %s: %v %v", a, err, err2)
			}
			if len(ops)+len(logs) > 0 {
				t.Errorf("master %s holds console records on a Cluster: %v %v", a, ops, logs)
			}
		}
	})

	// The owners' task records really are spread over the masters.
	t.Run("spread", func(t *testing.T) {
		var with []string
		for _, a := range addrs {
			rdb := redis.NewClient(&redis.Options{Addr: a})
			keys, _, err := rdb.Scan(context.Background(), 0, "*}:t:*", 1000).Result()
			rdb.Close()
			if err != nil {
				t.Fatalf("SCAN on %s: %v", a, err)
			}
			t.Logf("master %s: %d task keys", a, len(keys))
			if len(keys) > 0 {
				with = append(with, a)
			}
		}
		if len(with) < 2 {
			t.Errorf("task keys on %v only, want them on at least two of the masters %v", with, addrs)
		}
	})
}
