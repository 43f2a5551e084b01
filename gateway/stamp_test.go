package gateway

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// TestTasksGetTerminalZeroRTT: once the store's removal notices are live, a
// poll of a terminal task already rendered sends no command at all and
// answers the very bytes of the full read; a removal notice makes the next
// poll read the stamp (one HMGET), and a stamp that changed the whole
// record; near its expiry a task's stamp is read on every poll; another
// owner and an expired task get what they get without the cache; with the
// store unreachable the cached task is still answered, an uncached one not.
func TestTasksGetTerminalZeroRTT(t *testing.T) {
	cmds := gwtest.NewCommandCounter()
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	rig := newStoreRig(t, true, taskstore.Options{Clock: clock}, Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "echo", policy.Task))}, cmds)
	mr := rig.mr
	alice := &gwtest.ModernClient{T: t, URLs: rig.c.URLs, Auth: "Bearer alice"}
	task := alice.ToolTask("echo", map[string]any{"text": "stamped"})
	alice.WaitTask(task.TaskID, "completed")
	// The worker's last writes and reads (lease release, notification)
	// would count with the polls' commands: wait until it is gone.
	waitIdle(t, rig.h)
	get := func(c *gwtest.ModernClient) (string, map[string]int) {
		cmds.Reset()
		r := c.Call("tasks/get", map[string]any{"taskId": task.TaskID})
		return string(r.Result), cmds.Reset()
	}
	renders := rig.h.f2026.Renders
	gwtest.WaitFor(t, func() bool { return renders.Live() })
	full, _ := get(alice)
	cached, n := get(alice)
	if cached != full || !strings.Contains(cached, "stamped") {
		t.Fatalf("from the cache:\n%s\nfrom the record:\n%s", cached, full)
	}
	if len(n) != 0 {
		t.Errorf("a poll of a cached terminal task sent %v, want no command", n)
	}

	// The record changed (here by hand: a terminal task is never written
	// again) and a removal notice came: the stamp is read, and the record
	// read and rendered anew.
	key := gwtest.MiniTaskKey(t, rig.mr, task.TaskID)
	updated, err := strconv.ParseInt(mr.HGet(key, "updated"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	mr.HSet(key, "message", "rewritten", "updated", itoa(updated+1))
	if same, n := get(alice); same != full || len(n) != 0 {
		t.Fatalf("without a notice: %s (commands %v), want the cached answer and no command", same, n)
	}
	epoch := renders.Epoch()
	mr.Publish(key[:strings.Index(key, ":{")]+":removed", "some-other-task")
	gwtest.WaitFor(t, func() bool { return renders.Epoch() > epoch })
	again, n := get(alice)
	if !strings.Contains(again, "rewritten") || n["hmget"] != 1 || n["hgetall"] != 1 {
		t.Errorf("after a notice: %s (commands %v), want the new statusMessage from a stamp read and a full read", again, n)
	}
	if _, n := get(alice); len(n) != 0 {
		t.Errorf("the poll after: commands %v, want none", n)
	}

	// Another owner: not found, as without the cache.
	mallory := &gwtest.ModernClient{T: t, URLs: alice.URLs, Auth: "Bearer mallory"}
	if r := mallory.Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("another owner's tasks/get = %s %+v, want -32602 not found", r.Result, r.Error)
	}

	// Close to its expiry by the store's clock: the stamp is read on every
	// poll. Past it: expired, as Get says, though cached.
	ttl := time.Duration(*task.TTLMs) * time.Millisecond
	skew.Store(int64(ttl - front.ZeroRTTSkew/2))
	for i := 0; i < 2; i++ {
		if _, n := get(alice); n["hmget"] != 1 || n["hgetall"] != 0 {
			t.Errorf("a poll %v before the expiry sent %v, want one HMGET", front.ZeroRTTSkew/2, n)
		}
	}
	skew.Store(int64(ttl + time.Second))
	if r := alice.Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("tasks/get of an expired task = %s %+v, want an error", r.Result, r.Error)
	}
	skew.Store(0)

	// Store unreachable, and the replica has noticed (its pub/sub
	// connection broke, so the stamp is read, and fails): still the
	// cached answer (servableInOutage), as before it noticed; a task not
	// cached gets "task store unavailable".
	cachedNow, _ := get(alice)
	mr.Close()
	gwtest.WaitFor(t, func() bool { return !renders.Live() })
	if r := alice.Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error != nil || string(r.Result) != cachedNow {
		t.Errorf("tasks/get with Redis down = %s %+v, want the cached answer %s", r.Result, r.Error, cachedNow)
	}
	if r := alice.Call("tasks/get", map[string]any{"taskId": "never-cached"}); r.Error == nil || !strings.HasPrefix(r.Error.Message, "task store unavailable") {
		t.Errorf("tasks/get of a task not cached with Redis down = %s %+v, want task store unavailable", r.Result, r.Error)
	}
}
