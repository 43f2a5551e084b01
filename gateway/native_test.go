package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/upstream"
)

// TestToolDeclaredDiscovers: a call of a tool no tools/list taught the
// catalogue lists the upstream's tools (every page) once, and the
// declaration is then known; another unknown tool soon after does not
// list again.
func TestToolDeclaredDiscovers(t *testing.T) {
	var lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		lists.Add(1)
		result := `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"p2"}`
		if req.Params.Cursor == "p2" {
			result = `{"tools":[{"name":"native","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`))
	}))
	t.Cleanup(srv.Close)
	h := newFleet(t, srv.URL).add(nil)
	sess := &upstream.Session{ID: "s1", ProtocolVersion: core.Version2025}
	decl, listed := h.up.ToolDeclared(t.Context(), sess, "native")
	if !listed || decl.TaskSupport != "required" || lists.Load() != 2 {
		t.Fatalf("native: %+v %v after %d tools/list", decl, listed, lists.Load())
	}
	if _, listed := h.up.ToolDeclared(t.Context(), sess, "unknown"); listed || lists.Load() != 2 {
		t.Errorf("an unknown tool right after: listed %v, %d tools/list (want no new listing)", listed, lists.Load())
	}
	if c := h.decider.DecideCall(t.Context(), "native", policy.Client2025); !c.Native || c.Ruled {
		t.Errorf("native(native) = %v, %v", c.Native, c.Ruled)
	}
}

// TestNative2026PassThrough: a 2026-07-28 client in front of a stateless
// upstream with the tasks extension of its own (testupstream NativeTasks),
// two replicas on a real redis-server, the client alternating between
// them: the upstream's task passes through (its id, its inputRequests, the
// client's tasks/update reaching it, its result), tasks/cancel reaches it,
// another owner gets -32602, a client without the extension gets the
// upstream's MRTR round, and a rule takes a tool over (the gateway's task;
// the extension withheld from the upstream). A task the upstream loses
// reads failed.
func TestNative2026PassThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	addr := redistest.Start(t)
	rec := &testupstream.Recorder{}
	upHandler := testupstream.Handler(testupstream.Options{Stateless: true, NativeTasks: true, Recorder: rec})
	var swap atomic.Pointer[http.Handler]
	swap.Store(&upHandler)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*swap.Load()).ServeHTTP(w, r) }))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	fl.Redis = func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }
	pol := func(c *Config) { c.Policy = rulesPolicy(rules(t, "fail", policy.Task)) }
	fl.add(pol)
	fl.add(pol)
	c := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer native-2026"}

	tk := c.ToolTask("elicit", map[string]any{})
	if _, err := uuid.Parse(tk.TaskID); err != nil {
		t.Fatalf("task id %q", tk.TaskID)
	}
	owner := core.AuthOwner(&http.Request{Header: http.Header{"Authorization": {c.Auth}}})
	if _, err := fl.hs[0].runner.Store.Get(t.Context(), owner, tk.TaskID); err == nil {
		t.Fatal("the gateway made a task of its own")
	}
	ir := c.WaitTask(tk.TaskID, "input_required")
	if ir.InputRequests["name"].Method != "elicitation/create" {
		t.Fatalf("inputRequests = %+v", ir.InputRequests)
	}
	if r := c.Call("tasks/update", map[string]any{"taskId": tk.TaskID,
		"inputResponses": map[string]any{"name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}); r.Error != nil {
		t.Fatalf("tasks/update: %+v", r.Error)
	}
	done := c.WaitTask(tk.TaskID, "completed")
	if text, _, _ := resultText(t, done.Result); text != "Hello, Ada!" {
		t.Errorf("result %s", done.Result)
	}

	other := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer someone-else"}
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		if r := other.Call(m, map[string]any{"taskId": tk.TaskID}); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("another owner's %s: %+v %s, want -32602", m, r.Error, r.Result)
		}
	}

	slow := c.ToolTask("slow", map[string]any{"seconds": 30})
	// Running upstream (a cancel before its run starts has nothing to stop).
	gwtest.WaitFor(t, func() bool { return rec.Count("slow", testupstream.Called) == 1 })
	if r := c.Call("tasks/cancel", map[string]any{"taskId": slow.TaskID}); r.Error != nil {
		t.Fatalf("tasks/cancel: %+v", r.Error)
	}
	c.WaitTask(slow.TaskID, "cancelled")
	gwtest.WaitFor(t, func() bool { return rec.Count("slow", testupstream.Cancelled) == 1 })

	plain := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer native-2026", NoExt: true}
	var round struct {
		ResultType string `json:"resultType"`
	}
	if r := plain.Call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}}); json.Unmarshal(r.Result, &round) != nil || round.ResultType != "input_required" {
		t.Errorf("a client without the extension: %s %+v, want the upstream's MRTR round", r.Result, r.Error)
	}

	// --task fail: the gateway's own task, the extension withheld upstream
	// (the upstream runs it synchronously).
	ruled := c.ToolTask("fail", map[string]any{})
	if _, err := fl.hs[0].runner.Store.Get(t.Context(), owner, ruled.TaskID); err != nil {
		t.Errorf("the ruled tool's task is not the gateway's: %v", err)
	}
	if got := c.WaitTask(ruled.TaskID, "completed"); !strings.Contains(string(got.Result), testupstream.FailText) {
		t.Errorf("ruled task result %s", got.Result)
	}

	// The upstream restarts: its tasks are gone.
	lostTask := c.ToolTask("slow", map[string]any{"seconds": 30})
	fresh := testupstream.Handler(testupstream.Options{Stateless: true, NativeTasks: true})
	swap.Store(&fresh)
	if got := c.WaitTask(lostTask.TaskID, "failed"); got.Error == nil || !strings.Contains(got.StatusMessage, "no longer knows") {
		t.Errorf("a lost task: %+v", got)
	}
}

// TestToolDeclaredConcurrentCallers: callers racing one discovery wait for
// it and see its result; a failed listing does not hold off the next one
// for discoverEvery.
func TestToolDeclaredConcurrentCallers(t *testing.T) {
	var lists atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		failing := fail.Load()
		if lists.Add(1) == 1 {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		if failing {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32603,"message":"not now"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"tools":[{"name":"native","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}}`))
	}))
	t.Cleanup(srv.Close)
	h := newFleet(t, srv.URL).add(nil)
	sess := &upstream.Session{ID: "s1", ProtocolVersion: core.Version2025}

	// The first listing fails; callers waiting on it see nothing declared.
	results := make(chan bool, 4)
	for range 4 {
		go func() {
			_, listed := h.up.ToolDeclared(t.Context(), sess, "native")
			results <- listed
		}()
	}
	gwtest.WaitFor(t, func() bool { return lists.Load() == 1 })
	fail.Store(false)
	close(release)
	for range 4 {
		if <-results {
			t.Error("a caller saw a declaration from a failed listing")
		}
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d listings for 4 concurrent callers, want 1", n)
	}
	// A second later the next call lists again (no 30 s hold after a
	// failure), and succeeds.
	gwtest.WaitFor(t, func() bool {
		_, listed := h.up.ToolDeclared(t.Context(), sess, "native")
		return listed
	})
}

// TestHeldUpstreamTask2026: a tool a stateless upstream runs only as its
// own task (the tasks extension; -32021 without it). The gateway holds that
// task under its own, for a 2026-07-28 client whose rule makes the tool
// the gateway's (its questions in tasks/get, answered by tasks/update),
// and for a 2025-11-25 client of a session the gateway holds (its
// questions on tasks/result): the upstream's questions reach the client,
// the answers reach the upstream's task, its result is the task's.
func TestHeldUpstreamTask2026(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true, NativeTasks: true, Elicit2: true, Recorder: rec}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	pol := func(c *Config) { c.Policy = rulesPolicy(rules(t, "elicit2", policy.Task)) }
	fl.add(pol)
	fl.add(pol)

	answers := map[string]any{
		"name":  map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}},
		"color": map[string]any{"action": "accept", "content": map[string]any{"color": "teal"}},
	}
	want := testupstream.Elicit2Text("Ada", "teal")

	modern := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer held"}
	tk := modern.ToolTask("elicit2", map[string]any{})
	ir := modern.WaitTask(tk.TaskID, "input_required")
	responses := map[string]any{}
	for k, in := range ir.InputRequests {
		for q, a := range answers {
			if strings.Contains(string(in.Params), testupstream.Elicit2Questions[q]) {
				responses[k] = a
			}
		}
	}
	if len(responses) != 2 {
		t.Fatalf("input requests %+v, want the upstream's two questions", ir.InputRequests)
	}
	if r := modern.Call("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": responses}); r.Error != nil {
		t.Fatalf("tasks/update: %+v", r.Error)
	}
	done := modern.WaitTask(tk.TaskID, "completed")
	if text, _, _ := resultText(t, done.Result); text != want {
		t.Errorf("2026-07-28 client: result %s, want %q", done.Result, want)
	}

	// A 2025-11-25 client, the gateway its session: the questions come on
	// tasks/result as elicitation requests.
	legacy := &gwtest.Client{T: t, URLs: fl.URLs, Auth: "Bearer held"}
	legacy.Initialize()
	task := legacy.StartTask("elicit2", map[string]any{}, nil)
	legacy.WaitStatus(task.TaskID, "input_required")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := legacy.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": "res", "method": "tasks/result", "params": map[string]any{"taskId": task.TaskID}})
	var final rpcReply
	readMessages(t, resp, func(m rpcReply) bool {
		if m.Method == "elicitation/create" {
			for q, a := range answers {
				if strings.Contains(string(m.Params), testupstream.Elicit2Questions[q]) {
					ans := legacy.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": a})
					ans.Body.Close()
				}
			}
			return true
		}
		if string(m.ID) == `"res"` {
			final = m
			return false
		}
		return true
	})
	if text, _, _ := resultText(t, final.Result); text != want {
		t.Errorf("2025-11-25 client: tasks/result %s %+v, want %q", final.Result, final.Error, want)
	}
	if n := rec.Count("elicit2", testupstream.Called); n < 2 {
		t.Errorf("the upstream ran elicit2 %d times", n)
	}
}

// TestNativeNeedsServerCapability: a tool is native only if the upstream
// also declares task-augmented tools/call in its capabilities (MCP
// 2025-11-25, Tasks); what one replica's initialize saw, another reads
// from the store. Unknown (no initialize seen yet) trusts tools/list.
func TestNativeNeedsServerCapability(t *testing.T) {
	fl := newFleet(t, "http://127.0.0.1:1/mcp")
	a, b := fl.add(nil), fl.add(nil)
	ctx := t.Context()
	a.decider.LearnTools(ctx, map[string]decide.ToolDecl{"research": {TaskSupport: policy.TaskSupportRequired}})
	if c := a.decider.DecideCall(ctx, "research", policy.Client2025); !c.Native {
		t.Fatal("with no initialize seen, a tool declaring taskSupport is native")
	}
	a.decider.LearnServerCaps(ctx, json.RawMessage(`{"tools":{}}`))
	if c := a.decider.DecideCall(ctx, "research", policy.Client2025); c.Native {
		t.Error("an upstream without capabilities.tasks has native tools")
	}
	if c := b.decider.DecideCall(ctx, "research", policy.Client2025); c.Native {
		t.Error("the other replica did not read the capability from the store")
	}
	if ts := a.decider.DecideCall(ctx, "research", policy.Client2025).Upstream; ts != "" {
		t.Errorf("upstreamTaskSupport = %q, want none", ts)
	}
	a.decider.LearnServerCaps(ctx, json.RawMessage(`{"tasks":{"requests":{"tools":{"call":{}}}}}`))
	if c := a.decider.DecideCall(ctx, "research", policy.Client2025); !c.Native {
		t.Error("an upstream declaring task-augmented tools/call has no native tools")
	}
}
