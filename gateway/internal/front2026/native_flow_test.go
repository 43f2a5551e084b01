package front2026

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

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
	pol := func(c *frontrig.Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "fail", policy.Task)) }
	fl.Add(pol)
	fl.Add(pol)
	c := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: "Bearer native-2026"}

	tk := c.ToolTask("elicit", map[string]any{})
	if _, err := uuid.Parse(tk.TaskID); err != nil {
		t.Fatalf("task id %q", tk.TaskID)
	}
	owner := core.AuthOwner(&http.Request{Header: http.Header{"Authorization": {c.Auth}}})
	if _, err := fl.Rs[0].Deps.Runner.Store.Get(t.Context(), owner, tk.TaskID); err == nil {
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
	if text, _, _ := gwtest.ResultText(t, done.Result); text != "Hello, Ada!" {
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
	if _, err := fl.Rs[0].Deps.Runner.Store.Get(t.Context(), owner, ruled.TaskID); err != nil {
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
