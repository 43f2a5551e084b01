package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

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
	pol := func(c *Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "elicit2", policy.Task)) }
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
	if text, _, _ := gwtest.ResultText(t, done.Result); text != want {
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
	var final gwtest.Reply
	gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool {
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
	if text, _, _ := gwtest.ResultText(t, final.Result); text != want {
		t.Errorf("2025-11-25 client: tasks/result %s %+v, want %q", final.Result, final.Error, want)
	}
	if n := rec.Count("elicit2", testupstream.Called); n < 2 {
		t.Errorf("the upstream ran elicit2 %d times", n)
	}
}
