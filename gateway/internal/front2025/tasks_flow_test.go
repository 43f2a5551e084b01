package front2025

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

func Test2025TaskCompletes(t *testing.T) {
	cl := newCluster(t, 2, gwtest.Rules(t, "*", policy.Task))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()
	task := c.StartTask("slow", map[string]any{"seconds": 0.3, "text": "x"}, nil)
	if wt, _ := c.GetTask(task.TaskID); wt.Status != "working" {
		t.Errorf("right after create: %s", wt.Status)
	}
	// tasks/result blocks until the task is terminal, then returns exactly
	// the tool's result plus related-task _meta.
	r := c.Call("tasks/result", map[string]any{"taskId": task.TaskID})
	if r.Error != nil {
		t.Fatalf("tasks/result: %+v", r.Error)
	}
	text, isErr, related := gwtest.ResultText(t, r.Result)
	if text != "slept 0.3 s: x" || isErr || related != task.TaskID {
		t.Errorf("tasks/result = %q isError=%v related=%q", text, isErr, related)
	}
	c.WaitStatus(task.TaskID, "completed")
	if n := cl.rec.Count("slow", testupstream.Completed); n != 1 {
		t.Errorf("upstream ran slow %d times, want 1", n)
	}
}

func Test2025TaskElicitationAcrossReplicas(t *testing.T) {
	cl := newCluster(t, 2, gwtest.Rules(t, "*", policy.Task))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()
	task := c.StartTask("elicit", map[string]any{}, nil)
	c.WaitStatus(task.TaskID, "input_required")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tasks/result", "params": map[string]any{"taskId": task.TaskID}})
	var final gwtest.Reply
	asked := 0
	gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool {
		switch {
		case m.Method == "elicitation/create":
			asked++
			var p struct {
				Meta map[string]struct {
					TaskID string `json:"taskId"`
				} `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Meta[core.RelatedTaskKey].TaskID != task.TaskID {
				t.Errorf("elicitation without related-task _meta: %s", m.Params)
			}
			// The answer goes to whichever replica the client picks next.
			ar := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID),
				"result": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}})
			ar.Body.Close()
			if ar.StatusCode != http.StatusAccepted {
				t.Errorf("answer: HTTP %d", ar.StatusCode)
			}
			return true
		case string(m.ID) == "99":
			final = m
			return false
		}
		return true
	})
	if asked != 1 {
		t.Fatalf("elicitation requests on the tasks/result stream: %d", asked)
	}
	if final.Error != nil {
		t.Fatalf("tasks/result error: %+v", final.Error)
	}
	if text, _, _ := gwtest.ResultText(t, final.Result); text != "Hello, Ada!" {
		t.Errorf("result %q", text)
	}
	c.WaitStatus(task.TaskID, "completed")
}

func Test2025TaskFailures(t *testing.T) {
	cl := newCluster(t, 1, gwtest.Rules(t, "*", policy.Task))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()

	// isError: failed under 2025-11-25, and tasks/result returns the result.
	task := c.StartTask("fail", map[string]any{}, nil)
	c.WaitStatus(task.TaskID, "failed")
	r := c.Call("tasks/result", map[string]any{"taskId": task.TaskID})
	if text, isErr, _ := gwtest.ResultText(t, r.Result); !isErr || text != testupstream.FailText {
		t.Errorf("fail: %q isError=%v", text, isErr)
	}

	// A JSON-RPC error: failed, and tasks/result returns that error.
	task = c.StartTask("rpcerror", map[string]any{}, nil)
	c.WaitStatus(task.TaskID, "failed")
	r = c.Call("tasks/result", map[string]any{"taskId": task.TaskID})
	if r.Error == nil || r.Error.Code != testupstream.RPCErrorCode || r.Error.Message != testupstream.RPCErrorMessage {
		t.Errorf("rpcerror: tasks/result = %+v %s", r.Error, r.Result)
	}
}

func Test2025TaskCancel(t *testing.T) {
	cl := newCluster(t, 2, gwtest.Rules(t, "*", policy.Task))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()
	task := c.StartTask("slow", map[string]any{"seconds": 30}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	r := c.Call("tasks/cancel", map[string]any{"taskId": task.TaskID})
	var wt gwtest.WireTask
	if r.Error != nil || json.Unmarshal(r.Result, &wt) != nil || wt.Status != "cancelled" {
		t.Fatalf("tasks/cancel = %+v %s", r.Error, r.Result)
	}
	if err := cl.rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Errorf("the upstream did not see the cancellation: %v", err)
	}
	r = c.Call("tasks/cancel", map[string]any{"taskId": task.TaskID})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams || !strings.Contains(r.Error.Message, "cancelled") {
		t.Errorf("second cancel = %+v", r.Error)
	}
	c.WaitStatus(task.TaskID, "cancelled")
}

func Test2025TaskOwners(t *testing.T) {
	cl := newCluster(t, 1, gwtest.Rules(t, "*", policy.Task))
	alice := &gwtest.Client{T: t, URLs: cl.urls, Auth: "Bearer alice"}
	alice.Initialize()
	task := alice.StartTask("echo", map[string]any{"text": "secret"}, nil)
	alice.WaitStatus(task.TaskID, "completed")

	mallory := &gwtest.Client{T: t, URLs: cl.urls, Auth: "Bearer mallory"}
	mallory.Initialize()
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		r := mallory.Call(m, map[string]any{"taskId": task.TaskID})
		if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams || r.Error.Message != "Failed to retrieve task: Task not found" {
			t.Errorf("%s by another owner = %+v %s", m, r.Error, r.Result)
		}
	}
	r := mallory.Call("tasks/list", map[string]any{})
	if r.Error != nil || strings.Contains(string(r.Result), task.TaskID) {
		t.Errorf("tasks/list by another owner leaks: %s", r.Result)
	}
	r = alice.Call("tasks/list", map[string]any{})
	if !strings.Contains(string(r.Result), task.TaskID) {
		t.Errorf("tasks/list misses the owner's task: %s", r.Result)
	}
	r = alice.Call("tasks/list", map[string]any{"cursor": "not-a-cursor"})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("bad cursor = %+v", r.Error)
	}
	r = alice.Call("tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("unknown task = %+v", r.Error)
	}
}

func Test2025ToolNegotiation(t *testing.T) {
	cl := newCluster(t, 1, gwtest.Rules(t, "slow", policy.TaskRequired, "echo", policy.Sync))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()
	r := c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("required tool without task = %+v", r.Error)
	}
	r = c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "a"}, "task": map[string]any{}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("task on a --sync tool = %+v", r.Error)
	}
	// No rule, and the upstream declares no taskSupport: forbidden.
	r = c.Call("tools/call", map[string]any{"name": "fail", "arguments": map[string]any{}, "task": map[string]any{}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("task on an undeclared tool = %+v", r.Error)
	}
	// A sync tool without task passes straight through.
	r = c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "plain"}})
	if text, _, _ := gwtest.ResultText(t, r.Result); text != "plain" {
		t.Errorf("sync call = %q", text)
	}
}

func Test2025ProgressOnGetStream(t *testing.T) {
	cl := newCluster(t, 2, gwtest.Rules(t, "*", policy.Task))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The GET stream on replica 0, the task on replica 1.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cl.urls[0], nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.SID)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	get, err := http.DefaultClient.Do(req)
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, get.Status)
	}
	seen := make(chan gwtest.Reply, 64)
	go gwtest.ScanMessages(get, func(m gwtest.Reply) bool { seen <- m; return true })
	time.Sleep(100 * time.Millisecond) // let the stream subscribe
	c.URLs = cl.urls[1:]               // the next requests → replica 1
	task := c.StartTask("progress", map[string]any{"steps": 3, "delayMs": 50}, map[string]any{"progressToken": "p-1"})

	progress, statuses := 0, map[string]bool{}
	timeout := time.After(15 * time.Second)
	for !statuses["completed"] || progress < 3 {
		select {
		case m := <-seen:
			switch m.Method {
			case "notifications/progress":
				var p struct {
					Token any `json:"progressToken"`
					Meta  map[string]struct {
						TaskID string `json:"taskId"`
					} `json:"_meta"`
				}
				_ = json.Unmarshal(m.Params, &p)
				if p.Token != "p-1" || p.Meta[core.RelatedTaskKey].TaskID != task.TaskID {
					t.Errorf("progress without token or related-task: %s", m.Params)
				}
				if statuses["completed"] {
					t.Errorf("progress after terminal")
				}
				progress++
			case "notifications/tasks/status":
				var wt gwtest.WireTask
				_ = json.Unmarshal(m.Params, &wt)
				if wt.TaskID == task.TaskID {
					statuses[wt.Status] = true
				}
			}
		case <-timeout:
			t.Fatalf("GET stream saw %d progress notifications and statuses %v", progress, statuses)
		}
	}
}

// TestProgressOnResultStream: progress goes on the open tasks/result
// stream, ahead of the result. (The race where the last progress, sent just
// before the result, was lost does not reproduce in-process; the e2e
// TestTasksTypeScript lifecycle runs catch it.)
func TestProgressOnResultStream(t *testing.T) {
	cl := newCluster(t, 2, gwtest.Rules(t, "*", policy.Task))
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.Initialize()
	for round := 0; round < 5; round++ {
		task := c.StartTask("progress", map[string]any{"steps": 4, "delayMs": 20}, map[string]any{"progressToken": "tok"})
		progress := 0
		var final gwtest.Reply
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		gwtest.ReadMessages(t, c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": "res", "method": "tasks/result",
			"params": map[string]any{"taskId": task.TaskID}}), func(m gwtest.Reply) bool {
			switch {
			case m.Method == "notifications/progress":
				progress++
				return true
			case string(m.ID) == `"res"`:
				final = m
				return false
			}
			return true
		})
		cancel()
		if text, _, _ := gwtest.ResultText(t, final.Result); text != "done 4" {
			t.Fatalf("round %d: result %q", round, text)
		}
		// The stream opened right after creation, so at most the first
		// step or two may have gone to the GET stream instead; the last
		// ones must be here.
		if progress < 3 {
			t.Errorf("round %d: %d progress notifications on the tasks/result stream", round, progress)
		}
	}
}
