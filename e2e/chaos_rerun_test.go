package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestChaosRerun is TestChaos with every tool rerunnable (--rerun '*',
// docs/durable.md): three taskgate processes on one redis-server with AOF,
// one 2026-07-28 client spreading tasks round robin, one replica killed
// with SIGKILL mid-run and restarted, Redis killed and restarted later.
// Where TestChaos accepts a dead replica's tasks failing ("replica …
// stopped"), here every task completes with its own result (rpcerror fails
// with the upstream's own error, fail is an isError result): the dead
// replica's tasks were run again by the others. The upstream ran each
// tool at least once per task and at most once per attempt the store
// counted (plus calls cut off by the kill). The delay a rerun adds is
// measured and logged, never asserted; so is everything about speed.
//
// Fewer tasks than TestChaos (chaosRerunTasks), one era after the other,
// to bound the suite's time.
func TestChaosRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, three gateways and runs tasks through a replica crash and a Redis restart")
	}
	t.Parallel()
	for _, era := range upstreamEras {
		t.Run(era.name, func(t *testing.T) { testChaosRerun(t, era.stateless) })
	}
}

const (
	chaosRerunTasks       = 150
	chaosRerunConcurrency = 30
)

func testChaosRerun(t *testing.T, stateless bool) {
	rig := newChaosRig(t, chaosRigOptions{
		stateless: stateless,
		extraArgs: []string{"--rerun", "*", "--rerun-backoff", "200ms"},
		owner:     "rerun",
		transport: &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 32},
		tasks:     chaosRerunTasks, concurrency: chaosRerunConcurrency,
	})
	const victim = chaosVictim
	rig.run(nil)
	start, srv, rec, st, tasks, gws := rig.start, rig.srv, rig.rec, rig.st, rig.tasks, rig.gws
	liveAtKill, killedAt := rig.liveAtKill, rig.killedAt

	// Every task completes with its own result: nothing failed for a
	// replica that stopped.
	attempts := storeTaskInts(t, srv.Addr, "attempts")
	known := map[string]bool{}
	rounds := map[string]int{}   // the upstream calls the final attempts account for, at least
	maxCalls := map[string]int{} // the calls every attempt may have made, at most
	var reran []*chaosTask
	var rerunDelay, baseDelay []time.Duration
	for _, tk := range tasks {
		if tk.problem != "" {
			t.Errorf("task %d (%s %v): %s", tk.i, tk.tool, tk.args, tk.problem)
			continue
		}
		known[tk.id] = true
		if msg := tk.check(tk.final); msg != "" {
			t.Errorf("task %d (%s %v, %s, created on replica %d): %s", tk.i, tk.tool, tk.args, tk.id, tk.replica, msg)
			continue
		}
		n := max(attempts[tk.id], 1)
		rounds[tk.tool] += chaosRounds(tk.tool, stateless)
		maxCalls[tk.tool] += n * chaosRounds(tk.tool, stateless)
		took := taskSpan(tk.final) - nominal(tk)
		if n > 1 {
			reran = append(reran, tk)
			rerunDelay = append(rerunDelay, took)
		} else if tk.tool != "elicit" { // the client's answering time is no part of the baseline
			baseDelay = append(baseDelay, took)
		}
	}
	if len(reran) == 0 {
		t.Errorf("no task ran again, though replica %d was killed holding %d unfinished tasks", victim, liveAtKill)
	}
	for _, tool := range []string{"echo", "slow", "elicit", "fail", "rpcerror"} {
		n := rec.Count(tool, testupstream.Called)
		if hi := maxCalls[tool] + int(st.cutCalls(tool))*3; n < rounds[tool] || n > hi {
			t.Errorf("the upstream ran %s %d times, want %d to %d (one run per task's last attempt, at most one per attempt)", tool, n, rounds[tool], hi)
		}
	}
	// A task whose creating call was cut off is run to its end too.
	for id, msg := range checkStoreTasks(t, srv.Addr, known) {
		if strings.Contains(msg, "stopped before the upstream answered") {
			t.Errorf("task %s, unknown to the client, failed as its replica stopped: %q", id, msg)
		}
	}
	for _, p := range st.problems() {
		t.Error(p)
	}
	if n := st.leaks.Load(); n != 0 {
		t.Errorf("%d cross-owner requests did not answer \"not found\"", n)
	}

	byTool := map[string]int{}
	for _, tk := range reran {
		byTool[tk.tool]++
	}
	t.Logf("replica %d SIGKILLed at %v with %d unfinished tasks on it; %d tasks ran again %v",
		victim, killedAt.Sub(start).Round(time.Millisecond), liveAtKill, len(reran), byTool)
	t.Logf("rerun delay (measured, not asserted): a task that ran again took %s beyond its tool's own time (median; max %s; n=%d); one that did not, %s (median; n=%d); lease %v + 2 s grace, backoff 200 ms",
		median(rerunDelay), maxDur(rerunDelay), len(rerunDelay), median(baseDelay), len(baseDelay), chaosLease)
	causes := map[string]int{}
	var takeover []time.Duration // from the kill to each rerun's start
	for _, g := range gws {
		for _, line := range strings.Split(g.stderr.String(), "\n") {
			var l struct {
				Op    string    `json:"op"`
				Cause string    `json:"cause"`
				Time  time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Op != "rerun" || l.Cause == "" {
				continue
			}
			causes[l.Cause]++
			takeover = append(takeover, l.Time.Sub(killedAt))
		}
	}
	t.Logf("reruns logged by the surviving replicas, by cause: %v; begun %s after the kill (median; max %s)", causes, median(takeover), maxDur(takeover))
	t.Logf("chaos-rerun summary: upstream=%s tasks=%d reran=%d run=%v", strings.TrimPrefix(t.Name(), "TestChaosRerun/"),
		len(known), len(reran), time.Since(start).Round(100*time.Millisecond))
}

// storeTaskInts reads one integer field of every task's hash in Redis
// (0 where it is absent), by task id: its attempts, its webhook events'
// count (whseq).
func storeTaskInts(t *testing.T, addr, field string) map[string]int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string]int{}
	iter := rdb.Scan(ctx, 0, "tg:{*}:t:*", 1000).Iterator()
	for iter.Next(ctx) {
		if strings.HasSuffix(iter.Val(), ":gone") {
			continue
		}
		v, err := rdb.HMGet(ctx, iter.Val(), "id", field).Result()
		if err != nil {
			t.Fatalf("HMGET: %v", err)
		}
		id, _ := v[0].(string)
		var n int
		if s, _ := v[1].(string); s != "" {
			_, _ = fmt.Sscan(s, &n)
		}
		out[id] = n
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}

// taskSpan is a terminal task's life: creation to its last update.
func taskSpan(tk mTask) time.Duration {
	c, err1 := time.Parse(time.RFC3339Nano, tk.CreatedAt)
	u, err2 := time.Parse(time.RFC3339Nano, tk.LastUpdatedAt)
	if err1 != nil || err2 != nil {
		return 0
	}
	return u.Sub(c)
}

// nominal is how long the tool itself takes for the task's arguments.
func nominal(tk *chaosTask) time.Duration {
	if s, ok := tk.args["seconds"].(float64); ok && tk.tool == "slow" {
		return time.Duration(s * float64(time.Second))
	}
	return 0
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(10 * time.Millisecond)
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m.Round(10 * time.Millisecond)
}
