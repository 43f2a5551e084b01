package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestInputRequestSurvivesStoreBlip: the upstream asks for input just as
// Redis is briefly unavailable (here: it answers LOADING, as a restarted
// Redis does while it reloads its AOF). The worker waits it out and the
// question reaches the client. Found by TestChaos (e2e): the worker gave
// up at once, so a legacy upstream's elicitation got an error and the task
// completed with "taskgate could not relay elicitation/create", and a
// modern upstream's task failed.
func TestInputRequestSurvivesStoreBlip(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		blip := &gwtest.FailScriptHook{Match: "waiting for the client to answer", Left: 3}
		c := newStoreRig(t, stateless, taskstore.Options{ResyncInterval: 500 * time.Millisecond},
			Config{Policy: rulesPolicy(rules(t, "elicit", policy.Task))}, blip).c
		task := c.toolTask("elicit", map[string]any{})
		d := c.waitTask(task.TaskID, "input_required")
		if n := blip.Failed.Load(); n != 3 {
			t.Fatalf("the store refused %d input-request writes, want 3 (the test's premise)", n)
		}
		answerAda(t, c, task.TaskID, d)
	})
}

// TestStoreWriteReplyLost: Redis runs the worker's write of the upstream's
// input request, its take of the client's answer, and its write of the
// result, but dies before answering (here:
// the reply is replaced by io.EOF), so the worker retries writes that
// already landed. Each retry must count as done: not a reused input
// request key (the task used to fail with "could not record the upstream's
// input requests: … key already used"), not "already terminal" (the
// result was logged as discarded and the task never counted as finished),
// and a repeated take must get the answers the lost one took (the task
// waited for them forever).
// Found by e2e TestChaos on a machine with a slow disk, where Redis took
// long enough to fsync its AOF to be killed between a write and its reply.
func TestStoreWriteReplyLost(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		asked := &gwtest.FailScriptHook{Match: "waiting for the client to answer", Left: 1, LostReply: true}
		took := &gwtest.FailScriptHook{Match: "take-", Left: 1, LostReply: true}
		done := &gwtest.FailScriptHook{Match: string(taskstore.StatusCompleted), Left: 2, LostReply: true}
		c := newStoreRig(t, stateless, taskstore.Options{ResyncInterval: 500 * time.Millisecond},
			Config{Policy: rulesPolicy(rules(t, "elicit", policy.Task))}, asked, took, done).c
		url := c.urls[0]
		task := c.toolTask("elicit", map[string]any{})
		d := c.waitTask(task.TaskID, "input_required")
		// The hook counts a lost reply after Redis ran the write, so a
		// client may see its effect first: wait for the count.
		gwtest.WaitFor(t, func() bool { return asked.Failed.Load() >= 1 })
		if n := asked.Failed.Load(); n != 1 {
			t.Fatalf("%d input-request writes lost their reply, want 1 (the test's premise)", n)
		}
		if len(d.InputRequests) != 1 {
			t.Fatalf("input requests %v, want one", d.InputRequests)
		}
		answerAda(t, c, task.TaskID, d)
		// The worker knows its write landed: the task counts as finished.
		waitMetric(t, url, "taskgate_tasks_finished_total", map[string]string{"tool": "elicit", "status": "completed"}, 1)
		gwtest.WaitFor(t, func() bool { return done.Failed.Load() >= 2 && took.Failed.Load() >= 1 })
		if n := done.Failed.Load(); n != 2 {
			t.Fatalf("%d result writes lost their reply, want 2 (the test's premise)", n)
		}
		if n := took.Failed.Load(); n != 1 {
			t.Fatalf("%d takes of the answers lost their reply, want 1 (the test's premise)", n)
		}
	})
}

// TestWorkerFindsLostEvents: the worker acts on what its watch never heard
// of. A cancel whose event was lost is found by the next lease renewal
// (ErrTerminal), which stops the upstream call; answers whose event was
// lost are read by the resync while the task waits for them. Here the
// events are lost by writing the task hash directly, without PUBLISH.
func TestWorkerFindsLostEvents(t *testing.T) {
	rig := newStoreRig(t, true, taskstore.Options{ResyncInterval: 300 * time.Millisecond},
		Config{Policy: rulesPolicy(rules(t, "slow", policy.Task, "elicit", policy.Task)), LeaseRenew: 200 * time.Millisecond, Lease: 5 * time.Second})
	c, rec, mr := rig.c, rig.rec, rig.mr
	keyOf := func(id string) string { return rig.taskKey(t, id) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("cancel", func(t *testing.T) {
		task := c.toolTask("slow", map[string]any{"seconds": 30.0, "text": "x"})
		if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatal(err)
		}
		mr.HSet(keyOf(task.TaskID), "status", "cancelled", "cancel", "1")
		if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
			t.Fatalf("the upstream call of a task cancelled without an event was not stopped: %v", err)
		}
	})

	t.Run("answers", func(t *testing.T) {
		task := c.toolTask("elicit", map[string]any{})
		d := c.waitTask(task.TaskID, "input_required")
		key := keyOf(task.TaskID)
		for k := range d.InputRequests {
			// What AnswerInputs writes (inputs.go), minus the event.
			answer, _ := json.Marshal(map[string]any{"result": map[string]any{"action": "accept", "content": map[string]any{"name": "Lost"}}})
			mr.HDel(key, "in:"+k)
			mr.HSet(key, "re:"+k, string(answer), "pending", "0", "status", "working")
		}
		d = c.waitTask(task.TaskID, "completed")
		if text, _, _ := resultText(t, d.Result); text != "Hello, Lost!" {
			t.Errorf("result %q, want Hello, Lost!", text)
		}
	})
}

// storeRig is one gateway on a miniredis store (its client with the given
// hooks, go-redis's own retries off) in front of a test upstream.
type storeRig struct {
	mr  *miniredis.Miniredis
	rec *testupstream.Recorder
	c   *modernClient
	h   *Handler
}

func newStoreRig(t *testing.T, stateless bool, so taskstore.Options, cfg Config, hooks ...redis.Hook) *storeRig {
	t.Helper()
	rig := &storeRig{rec: &testupstream.Recorder{}}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless, Recorder: rig.rec}))
	t.Cleanup(up.Close)
	rig.mr = miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: rig.mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	for _, hook := range hooks {
		rdb.AddHook(hook)
	}
	store := taskstore.New(rdb, so)
	t.Cleanup(func() { store.Close() })
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream, cfg.Store, cfg.PollLimit = client, store, -1
	if rig.h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rig.h.Close() })
	srv := httptest.NewServer(rig.h)
	t.Cleanup(srv.Close)
	rig.c = &modernClient{t: t, urls: []string{srv.URL + "/mcp"}}
	return rig
}

// taskKey is the Redis key of task id's hash.
func (rig *storeRig) taskKey(t *testing.T, id string) string {
	t.Helper()
	for _, k := range rig.mr.Keys() {
		if strings.HasSuffix(k, ":t:"+id) {
			return k
		}
	}
	t.Fatalf("no task hash for %s among %v", id, rig.mr.Keys())
	return ""
}

// answerAda answers the elicit tool's question (its task in
// input_required, d) with "Ada" and checks the greeting it completes with.
func answerAda(t *testing.T, c *modernClient, id string, d detailed) {
	t.Helper()
	for key := range d.InputRequests {
		c.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}})
	}
	d = c.waitTask(id, "completed")
	if text, isErr, _ := resultText(t, d.Result); text != "Hello, Ada!" || isErr {
		t.Errorf("result = %q (isError %t), want Hello, Ada!", text, isErr)
	}
}
