package runner

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
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
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		blip := &failScriptHook{Match: "waiting for the client to answer", Left: 3}
		rig := newStoreRig(t, stateless, taskstore.Options{ResyncInterval: 500 * time.Millisecond}, Params{}, blip)
		task := rig.toolTask(t, "elicit", map[string]any{})
		d := rig.waitTask(t, task.ID, "input_required")
		if n := blip.Failed.Load(); n != 3 {
			t.Fatalf("the store refused %d input-request writes, want 3 (the test's premise)", n)
		}
		answerAda(t, rig, task.ID, d)
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
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		asked := &failScriptHook{Match: "waiting for the client to answer", Left: 1, LostReply: true}
		took := &failScriptHook{Match: "take-", Left: 1, LostReply: true}
		done := &failScriptHook{Match: string(taskstore.StatusCompleted), Left: 2, LostReply: true}
		rig := newStoreRig(t, stateless, taskstore.Options{ResyncInterval: 500 * time.Millisecond}, Params{}, asked, took, done)
		task := rig.toolTask(t, "elicit", map[string]any{})
		d := rig.waitTask(t, task.ID, "input_required")
		// The hook counts a lost reply after Redis ran the write, so a
		// client may see its effect first: wait for the count.
		gwtest.WaitFor(t, func() bool { return asked.Failed.Load() >= 1 })
		if n := asked.Failed.Load(); n != 1 {
			t.Fatalf("%d input-request writes lost their reply, want 1 (the test's premise)", n)
		}
		if len(d.InputRequests) != 1 {
			t.Fatalf("input requests %v, want one", d.InputRequests)
		}
		answerAda(t, rig, task.ID, d)
		// The worker knows its write landed: the task counts as finished.
		gwtest.WaitMetric(t, rig.metricsURL, "taskgate_tasks_finished_total", map[string]string{"tool": "elicit", "status": "completed"}, 1)
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
		Params{Renew: 200 * time.Millisecond, Lease: 5 * time.Second})
	rec, mr := rig.rec, rig.mr
	keyOf := func(id string) string { return gwtest.MiniTaskKey(t, rig.mr, id) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("cancel", func(t *testing.T) {
		task := rig.toolTask(t, "slow", map[string]any{"seconds": 30.0, "text": "x"})
		if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatal(err)
		}
		mr.HSet(keyOf(task.ID), "status", "cancelled", "cancel", "1")
		if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
			t.Fatalf("the upstream call of a task cancelled without an event was not stopped: %v", err)
		}
	})

	t.Run("answers", func(t *testing.T) {
		task := rig.toolTask(t, "elicit", map[string]any{})
		d := rig.waitTask(t, task.ID, "input_required")
		key := keyOf(task.ID)
		for k := range d.InputRequests {
			// What AnswerInputs writes (inputs.go), minus the event.
			answer, _ := json.Marshal(map[string]any{"result": map[string]any{"action": "accept", "content": map[string]any{"name": "Lost"}}})
			mr.HDel(key, "in:"+k)
			mr.HSet(key, "re:"+k, string(answer), "pending", "0", "status", "working")
		}
		d = rig.waitTask(t, task.ID, "completed")
		if text, _, _ := gwtest.ResultText(t, d.Result); text != "Hello, Lost!" {
			t.Errorf("result %q, want Hello, Lost!", text)
		}
	})
}

// storeRig is a runner, with no Handler around it, on a miniredis store
// (its client with the given hooks, go-redis's own retries off) in front
// of a test upstream, stateless or with sessions. Its tasks are a
// 2026-07-28 client's, of owner rigOwner, as the 2026-07-28 front starts
// them.
type storeRig struct {
	mr         *miniredis.Miniredis
	rec        *testupstream.Recorder // newStoreRig's upstream's
	rn         *Runner
	store      *taskstore.Store
	target     *upstreamside.Target
	metricsURL string // the runner's metrics, served as /metrics is
}

// rigOwner owns the tasks a storeRig starts.
const rigOwner = "o"

// newStoreRig starts a storeRig; p's zero Lease and Renew are the
// gateway's defaults (15 s, 5 s), and its store, upstream, metrics, log
// and replica are the rig's.
func newStoreRig(t *testing.T, stateless bool, so taskstore.Options, p Params, hooks ...redis.Hook) *storeRig {
	t.Helper()
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless, Recorder: rec}))
	t.Cleanup(up.Close)
	rig := newStoreRigOn(t, up.URL+"/mcp", stateless, so, p, hooks...)
	rig.rec = rec
	return rig
}

// newStoreRigOn is newStoreRig in front of the upstream at upURL.
func newStoreRigOn(t *testing.T, upURL string, stateless bool, so taskstore.Options, p Params, hooks ...redis.Hook) *storeRig {
	t.Helper()
	rig := &storeRig{}
	rig.mr = miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: rig.mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	for _, hook := range hooks {
		rdb.AddHook(hook)
	}
	rig.store = taskstore.New(rdb, so)
	t.Cleanup(func() { rig.store.Close() })
	client, err := upstream.New(upURL, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Lease <= 0 {
		p.Lease = 15 * time.Second
	}
	if p.Renew <= 0 {
		p.Renew = 5 * time.Second
	}
	var held func() int
	p.Metrics = obs.NewMetrics(func() float64 { return float64(held()) })
	p.Store, p.Up, p.Observe, p.Log, p.Replica = rig.store, client, func(string, time.Duration) {}, zerolog.Nop(), "rig"
	rig.rn = New(p)
	held = rig.rn.Inflight
	t.Cleanup(rig.rn.Stop)
	metrics := httptest.NewServer(p.Metrics.Handler())
	t.Cleanup(metrics.Close)
	rig.metricsURL = metrics.URL + "/metrics"
	rig.target = &upstreamside.Target{Session: &upstream.Session{ProtocolVersion: core.Version2026}, Stateless: true}
	if !stateless { // the session the gateway holds for an owner (upstreamside, owner.go)
		sess, _, err := client.Initialize(context.Background(), nil, json.RawMessage(`{"protocolVersion":"2025-11-25",`+
			`"capabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{}},"clientInfo":{"name":"rig","version":"0"}}`))
		if err != nil {
			t.Fatal(err)
		}
		rig.target = &upstreamside.Target{Session: sess}
	}
	return rig
}

// toolTask starts, on the rig's runner, rigOwner's task of tool with args,
// as the 2026-07-28 front does for a client that can answer elicitations.
func (rig *storeRig) toolTask(t *testing.T, tool string, args map[string]any) *taskstore.Task {
	t.Helper()
	params := mcpwire.MustMarshal(map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
		core.MetaProtocolVersion: core.Version2026, core.MetaClientCaps: map[string]any{"elicitation": map[string]any{}}}})
	upParams := upstreamside.ParamsFor(params, rig.target)
	slot, e := rig.rn.Admit(context.Background(), rigOwner, AdmitTask)
	if e != nil {
		t.Fatal(e)
	}
	j := &Job{Owner: rigOwner, Sess: rig.target.Session, Slot: slot, ClientCaps: json.RawMessage(`{"elicitation":{}}`),
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: upParams},
		Client2026: &Job2026{Target: rig.target, Params: upParams}}
	if err := rig.rn.Launch(context.Background(), j, LaunchSpec{Proto: taskstore.Protocol2026, Tool: tool}); err != nil {
		t.Fatal(err)
	}
	return j.Task
}

// waitTask waits until task id's status is status, and returns it.
func (rig *storeRig) waitTask(t *testing.T, id, status string) *taskstore.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last *taskstore.Task
	got, err := rig.store.WaitFor(ctx, rigOwner, id, func(tk *taskstore.Task) bool {
		last = tk
		return string(tk.Status) == status
	})
	if err != nil {
		if last != nil {
			t.Fatalf("task %s is %s (%s), want %s: %v", id, last.Status, last.StatusMessage, status, err)
		}
		t.Fatalf("task %s, want %s: %v", id, status, err)
	}
	return got
}

// answerAda answers the elicit tool's question (its task in
// input_required, d) with "Ada", as a 2026-07-28 client's tasks/update
// does, and checks the greeting it completes with.
func answerAda(t *testing.T, rig *storeRig, id string, d *taskstore.Task) {
	t.Helper()
	for key := range d.InputRequests {
		if _, err := rig.store.AnswerInputs(context.Background(), rigOwner, id, map[string]json.RawMessage{key: json.RawMessage(
			`{"result":{"action":"accept","content":{"name":"Ada"}}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	d = rig.waitTask(t, id, "completed")
	if text, isErr, _ := gwtest.ResultText(t, d.Result); text != "Hello, Ada!" || isErr {
		t.Errorf("result = %q (isError %t), want Hello, Ada!", text, isErr)
	}
}
