package gateway

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// commandCounter counts the commands a Store sends, by name.
type commandCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (*commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.n[strings.ToLower(cmd.Name())]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (*commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *commandCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.n
	c.n = map[string]int{}
	return old
}

// TestTasksGetTerminalStamp: a poll of a terminal task already rendered
// reads only its stamp (one HMGET, no HGETALL) and answers the very bytes
// of the full read; a record whose stamp changed is read and rendered
// anew; another owner, an expired task and an unreachable store get what
// they get without the cache.
func TestTasksGetTerminalStamp(t *testing.T) {
	cmds := &commandCounter{n: map[string]int{}}
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	rig := newStoreRig(t, true, taskstore.Options{Clock: clock}, Config{Policy: rulesPolicy(rules(t, "echo", policy.Task))}, cmds)
	mr := rig.mr
	alice := &modernClient{t: t, urls: rig.c.urls, auth: "Bearer alice"}
	task := alice.toolTask("echo", map[string]any{"text": "stamped"})
	alice.waitTask(task.TaskID, "completed")
	// The worker's last writes and reads (lease release, notification)
	// would count with the polls' commands: wait until it is gone.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rig.h.runner.mu.Lock()
		jobs := rig.h.runner.jobs
		rig.h.runner.mu.Unlock()
		if jobs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still running", jobs)
		}
	}
	get := func(c *modernClient) (string, map[string]int) {
		cmds.reset()
		r := c.call("tasks/get", map[string]any{"taskId": task.TaskID})
		return string(r.Result), cmds.reset()
	}
	full, _ := get(alice)
	cached, n := get(alice)
	if cached != full || !strings.Contains(cached, "stamped") {
		t.Fatalf("from the stamp:\n%s\nfrom the record:\n%s", cached, full)
	}
	if n["hmget"] != 1 || n["hgetall"] != 0 {
		t.Errorf("a poll of a cached terminal task sent %v, want one HMGET and no HGETALL", n)
	}

	// The stamp changed (here by hand: a terminal task is never written
	// again): the record is read and rendered anew.
	key := rig.taskKey(t, task.TaskID)
	updated, err := strconv.ParseInt(mr.HGet(key, "updated"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	mr.HSet(key, "message", "rewritten", "updated", itoa(updated+1))
	again, n := get(alice)
	if !strings.Contains(again, "rewritten") || n["hgetall"] != 1 {
		t.Errorf("after the record changed: %s (commands %v), want the new statusMessage from a full read", again, n)
	}

	// Another owner: not found, as without the cache.
	mallory := &modernClient{t: t, urls: alice.urls, auth: "Bearer mallory"}
	if r := mallory.call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("another owner's tasks/get = %s %+v, want -32602 not found", r.Result, r.Error)
	}

	// Expired by the store's clock: expired, as Get says, though cached.
	get(alice) // re-cached
	skew.Store(int64(time.Duration(*task.TTLMs)*time.Millisecond + time.Second))
	if r := alice.call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("tasks/get of an expired task = %s %+v, want an error", r.Result, r.Error)
	}
	skew.Store(0)

	// Store unreachable: "task store unavailable", not the cached answer.
	get(alice)
	mr.Close()
	if r := alice.call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error == nil || !strings.HasPrefix(r.Error.Message, "task store unavailable") {
		t.Errorf("tasks/get with Redis down = %s %+v, want task store unavailable", r.Result, r.Error)
	}
}
