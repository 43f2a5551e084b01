package front2025

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// The fallback task tools (internal/fallback) as this front serves them
// to a session client that declares no tasks (fallback.go), in front of
// a session server of any protocol version.

// TestFallbackSessionClient: a 2025-06-18 client without tasks, across two
// replicas: a fast call of a task candidate stays plain; a slow one answers early with a task
// id, the session is told the tools appeared, and the tools read the
// status and the result back; another session cannot see the task; bad
// arguments say what to fix; cancel.
func TestFallbackSessionClient(t *testing.T) {
	cl, gate := gatedFallbackCluster(t, 2)
	c := &gwtest.Client{T: t, URLs: cl.urls}
	init := c.InitializeAs("2025-06-18", map[string]any{})
	var caps struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Tools struct {
				ListChanged bool `json:"listChanged"`
			} `json:"tools"`
			Tasks json.RawMessage `json:"tasks"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(init, &caps)
	if caps.ProtocolVersion != "2025-06-18" || !caps.Capabilities.Tools.ListChanged || caps.Capabilities.Tasks != nil {
		t.Fatalf("initialize result %s: want 2025-06-18, tools.listChanged, no tasks", init)
	}
	if names := gwtest.ToolNames(t, c.Call("tools/list", map[string]any{}).Result); names["taskgate_task_result"] || !names["slow"] {
		t.Fatalf("tools/list before any fallback task: %v", names)
	}

	// A task candidate answered within its hybrid wait is a plain answer.
	if a := callTool(c, "echo", map[string]any{"text": "quick"}); a.Text() != "quick" || a.IsError || a.StructuredContent.TaskID != "" {
		t.Fatalf("fast call: %+v", a)
	}

	// The first fallback task: list_changed, then the result naming it.
	// Its call stays in flight until the gate opens: it is working
	// however long the checks below take.
	msgs := c.CallAll("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0, "text": gwtest.GateMarker}})
	if len(msgs) != 2 || msgs[0].Method != "notifications/tools/list_changed" {
		t.Fatalf("first fallback answer: %+v, want list_changed then the result", msgs)
	}
	var started gwtest.ToolAnswer
	_ = json.Unmarshal(msgs[1].Result, &started)
	id := started.StructuredContent.TaskID
	if id == "" || started.IsError || started.StructuredContent.Status != "working" || started.StructuredContent.PollInterval <= 0 ||
		!strings.Contains(started.Text(), "taskgate_task_result") || !strings.Contains(started.Text(), id) {
		t.Fatalf("started: %s", msgs[1].Result)
	}
	if names := gwtest.ToolNames(t, c.Call("tools/list", map[string]any{}).Result); !names["taskgate_task_status"] || !names["taskgate_task_result"] ||
		!names["taskgate_task_cancel"] || !names["taskgate_task_answer"] || !names["slow"] {
		t.Fatalf("tools/list after the first fallback task: %v", names)
	}
	// Only the first page gains them.
	if r := c.Call("tools/list", map[string]any{"cursor": "x"}); r.Result != nil && gwtest.ToolNames(t, r.Result)["taskgate_task_status"] {
		t.Fatalf("a later page has the fallback tools: %s", r.Result)
	}

	if a := callTool(c, "taskgate_task_status", map[string]any{"taskId": id}); a.IsError || a.StructuredContent.Status != "working" ||
		!strings.Contains(a.Text(), "working") {
		t.Fatalf("status: %+v", a)
	}
	// Another session (same replicas) is another owner.
	other := &gwtest.Client{T: t, URLs: cl.urls}
	other.InitializeAs("2025-06-18", map[string]any{})
	for _, tool := range []string{"taskgate_task_status", "taskgate_task_result", "taskgate_task_cancel"} {
		if a := callTool(other, tool, map[string]any{"taskId": id}); !a.IsError || !strings.Contains(a.Text(), "task not found") {
			t.Fatalf("%s of another session's task: %+v", tool, a)
		}
	}
	gate.Release()
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 20}); a.Text() != "slept 0 s: "+gwtest.GateMarker || a.IsError {
		t.Fatalf("result: %+v", a)
	}
	if a := callTool(c, "taskgate_task_status", map[string]any{"taskId": id}); a.StructuredContent.Status != "completed" {
		t.Fatalf("status after the result: %+v", a)
	}

	// Bad arguments: a tool error saying what to fix.
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"taskgate_task_status", map[string]any{}, "taskId is required"},
		{"taskgate_task_status", map[string]any{"taskId": 7}, "taskId is required"},
		{"taskgate_task_status", map[string]any{"taskId": id, "x": 1}, `unknown argument "x"`},
		{"taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 51}, "waitSeconds must be a number from 0 to 50"},
		{"taskgate_task_answer", map[string]any{"taskId": id}, "inputResponses is required"},
		{"taskgate_task_answer", map[string]any{"taskId": id, "inputResponses": map[string]any{"k": 1}}, "must be an object"},
		{"taskgate_task_status", map[string]any{"taskId": "no-such-task"}, "task not found"},
	} {
		if a := callTool(c, tc.tool, tc.args); !a.IsError || !strings.Contains(a.Text(), tc.want) {
			t.Errorf("%s %v: %+v, want isError with %q", tc.tool, tc.args, a, tc.want)
		}
	}

	// Cancel: the task and the upstream call end.
	second := callTool(c, "slow", map[string]any{"seconds": 20, "text": "never"})
	sid := second.StructuredContent.TaskID
	if sid == "" {
		t.Fatalf("second fallback answer: %+v", second)
	}
	if a := callTool(c, "taskgate_task_cancel", map[string]any{"taskId": sid}); a.IsError || a.StructuredContent.Status != "cancelled" {
		t.Fatalf("cancel: %+v", a)
	}
	if a := callTool(c, "taskgate_task_cancel", map[string]any{"taskId": sid}); !a.IsError || !strings.Contains(a.Text(), "already") {
		t.Fatalf("cancel again: %+v", a)
	}
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": sid}); !a.IsError || !strings.Contains(a.Text(), "cancelled") {
		t.Fatalf("result of a cancelled task: %+v", a)
	}
	gwtest.WaitFor(t, func() bool { return cl.rec.Count("slow", testupstream.Cancelled) == 1 })
}

// TestFallbackInputByTool: a client without elicitation answers the
// task's question with task_answer, read from task_status.
func TestFallbackInputByTool(t *testing.T) {
	cl := fallbackCluster(t, 2)
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.InitializeAs("2025-11-25", map[string]any{})
	started := callTool(c, "elicit", map[string]any{})
	id := started.StructuredContent.TaskID
	if id == "" || started.StructuredContent.Status != "input_required" || !strings.Contains(started.Text(), "needs input") {
		t.Fatalf("elicit: %+v", started)
	}
	var st gwtest.ToolAnswer
	gwtest.WaitFor(t, func() bool {
		st = callTool(c, "taskgate_task_status", map[string]any{"taskId": id})
		return len(st.StructuredContent.InputRequests) == 1
	})
	var key string
	for k := range st.StructuredContent.InputRequests {
		key = k
	}
	if !strings.Contains(st.Text(), "elicitation/create") || !strings.Contains(st.Text(), "taskgate_task_answer") {
		t.Fatalf("status text: %s", st.Text())
	}
	// The result cannot ask this client: it returns the status at once.
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 30}); a.StructuredContent.Status != "input_required" {
		t.Fatalf("result while waiting for input: %+v", a)
	}
	if a := callTool(c, "taskgate_task_answer", map[string]any{"taskId": id, "inputResponses": map[string]any{"nope": map[string]any{}}}); !a.IsError ||
		!strings.Contains(a.Text(), `"`+key+`"`) {
		t.Fatalf("answer with a wrong key: %+v", a)
	}
	if a := callTool(c, "taskgate_task_answer", map[string]any{"taskId": id, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}); a.IsError {
		t.Fatalf("answer: %+v", a)
	}
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id}); a.Text() != "Hello, Ada!" {
		t.Fatalf("result: %+v", a)
	}
}

// TestFallbackInputOnResultStream: a client with elicitation is asked on
// the stream of its pending task_result, and answers on another replica.
func TestFallbackInputOnResultStream(t *testing.T) {
	cl := fallbackCluster(t, 2)
	c := &gwtest.Client{T: t, URLs: cl.urls}
	c.InitializeAs("2025-11-25", map[string]any{"elicitation": map[string]any{}})
	id := callTool(c, "elicit", map[string]any{}).StructuredContent.TaskID
	if id == "" {
		t.Fatal("no task")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/call",
		"params": map[string]any{"name": "taskgate_task_result", "arguments": map[string]any{"taskId": id, "waitSeconds": 20}}})
	asked := 0
	var final gwtest.Reply
	gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool {
		switch {
		case m.Method == "elicitation/create":
			asked++
			ar := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID),
				"result": map[string]any{"action": "accept", "content": map[string]any{"name": "Grace"}}})
			ar.Body.Close()
			if ar.StatusCode != http.StatusAccepted {
				t.Errorf("answer: HTTP %d", ar.StatusCode)
			}
		case string(m.ID) == "99":
			final = m
			return false
		}
		return true
	})
	var a gwtest.ToolAnswer
	_ = json.Unmarshal(final.Result, &a)
	if asked != 1 || a.Text() != "Hello, Grace!" {
		t.Fatalf("asked %d times, final %s", asked, final.Result)
	}
}

// TestFallbackOff: without Config.Fallback nothing of it shows.
func TestFallbackOff(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.Add(func(c *frontrig.Config) {
		c.Policy = gwtest.HybridPolicy(gwtest.Rules(t, "slow", policy.Task), 100*time.Millisecond)
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.InitializeAs("2025-06-18", map[string]any{})
	if a := callTool(c, "slow", map[string]any{"seconds": 0.5, "text": "x"}); a.Text() != "slept 0.5 s: x" {
		t.Fatalf("slow call: %+v", a)
	}
	if names := gwtest.ToolNames(t, c.Call("tools/list", map[string]any{}).Result); names["taskgate_task_status"] {
		t.Fatalf("tools/list: %v", names)
	}
	if r := c.Call("tools/call", map[string]any{"name": "taskgate_task_status", "arguments": map[string]any{"taskId": "x"}}); r.Error == nil {
		var a gwtest.ToolAnswer
		_ = json.Unmarshal(r.Result, &a)
		if strings.Contains(a.Text(), "task not found") {
			t.Fatalf("a fallback tool answered with the tools off: %s", r.Result)
		}
	}
}

// TestFallbackProgressInStatus: progress the upstream reports for a
// fallback task shows in task_status (its call was answered, so it is
// not relayed as notifications).
func TestFallbackProgressInStatus(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.Add(func(c *frontrig.Config) {
		c.Policy = gwtest.HybridPolicy(gwtest.Rules(t, "progress", policy.Task), 200*time.Millisecond)
		c.Fallback = fallback.Config{Enabled: true}
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.InitializeAs("2025-11-25", map[string]any{})
	msgs := c.CallAll("tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 3, "delayMs": 400},
		"_meta": map[string]any{"progressToken": "p1"}})
	var started gwtest.ToolAnswer
	_ = json.Unmarshal(msgs[len(msgs)-1].Result, &started)
	id := started.StructuredContent.TaskID
	if id == "" {
		t.Fatalf("progress call: %+v", msgs)
	}
	var st gwtest.ToolAnswer
	gwtest.WaitFor(t, func() bool {
		st = callTool(c, "taskgate_task_status", map[string]any{"taskId": id})
		return strings.Contains(st.Text(), "Progress: ")
	})
	if !strings.Contains(st.Text(), "/3 (step ") {
		t.Fatalf("status text: %s", st.Text())
	}
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 10}); a.IsError {
		t.Fatalf("result: %+v", a)
	}
}

// TestFallbackRequiredTool: a --task-required tool is "optional" in the
// tools/list of a session without tasks (clients refuse to call a
// "required" one themselves), and its call becomes a fallback task.
func TestFallbackRequiredTool(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.Add(func(c *frontrig.Config) {
		c.Policy = gwtest.HybridPolicy(gwtest.Rules(t, "slow", policy.TaskRequired), 100*time.Millisecond)
		c.Fallback = fallback.Config{Enabled: true}
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.InitializeAs("2025-11-25", map[string]any{})
	var list struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(c.Call("tools/list", map[string]any{}).Result, &list)
	for _, tl := range list.Tools {
		if tl.Name == "slow" && tl.Execution.TaskSupport != "optional" {
			t.Fatalf("slow taskSupport %q, want optional for a client without tasks", tl.Execution.TaskSupport)
		}
	}
	if a := callTool(c, "slow", map[string]any{"seconds": 0.5, "text": "x"}); a.StructuredContent.TaskID == "" {
		t.Fatalf("required tool without params.task: %+v", a)
	}
	// A client with tasks still sees "required".
	w := &gwtest.Client{T: t, URLs: f.URLs}
	w.InitializeAs("2025-11-25", map[string]any{"tasks": map[string]any{"requests": map[string]any{}}})
	_ = json.Unmarshal(w.Call("tools/list", map[string]any{}).Result, &list)
	for _, tl := range list.Tools {
		if tl.Name == "slow" && tl.Execution.TaskSupport != "required" {
			t.Fatalf("slow taskSupport %q for a client with tasks, want required", tl.Execution.TaskSupport)
		}
	}
}

// TestFallbackOldServer: a 2025-11-25 client that declares no tasks in
// front of a 2024-11-05 server (presented to it as 2025-11-25): a fast call
// of a task candidate is answered directly; a slow call answers early with
// a task id (the session told the tools appeared), and the fallback tools
// read its status and its result back; the server ran the call once.
func TestFallbackOldServer(t *testing.T) {
	for _, transport := range gwtest.OldTransports {
		t.Run(transport, func(t *testing.T) {
			rec := &testupstream.Recorder{}
			url, client := gwtest.OldUpstream(t, transport, testupstream.Options{Recorder: rec})
			f := newFleet(t, url)
			f.Add(func(c *frontrig.Config) {
				c.Upstream = client
				// echo, a task candidate too, has a long hybrid wait: it is
				// answered directly however busy the machine.
				c.Policy = gwtest.HybridPolicy(append(gwtest.Rules(t, "slow", policy.Task), gwtest.WithWait(gwtest.Rules(t, "echo", policy.Task), gwtest.DirectWait)...),
					300*time.Millisecond)
				c.Fallback = fallback.Config{Enabled: true}
			})
			c := &gwtest.Client{T: t, URLs: f.URLs}
			c.InitializeAs("2025-11-25", map[string]any{})
			if a := callTool(c, "echo", map[string]any{"text": "quick"}); a.Text() != "quick" || a.StructuredContent.TaskID != "" {
				t.Fatalf("fast call: %+v", a)
			}
			msgs := c.CallAll("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1.2, "text": "late"}})
			if len(msgs) != 2 || msgs[0].Method != "notifications/tools/list_changed" {
				t.Fatalf("the fallback answer: %+v, want list_changed then the result", msgs)
			}
			var started gwtest.ToolAnswer
			_ = json.Unmarshal(msgs[1].Result, &started)
			id := started.StructuredContent.TaskID
			if id == "" || started.StructuredContent.Status != "working" || !strings.Contains(started.Text(), "taskgate_task_result") {
				t.Fatalf("started: %s", msgs[1].Result)
			}
			if names := gwtest.ToolNames(t, c.Call("tools/list", map[string]any{}).Result); !names["taskgate_task_status"] || !names["taskgate_task_result"] || !names["slow"] {
				t.Fatalf("tools/list after the fallback task: %v", names)
			}
			if a := callTool(c, "taskgate_task_status", map[string]any{"taskId": id}); a.StructuredContent.Status != "working" && a.StructuredContent.Status != "completed" {
				t.Errorf("status: %+v", a)
			}
			if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id}); a.Text() != "slept 1.2 s: late" || a.IsError {
				t.Errorf("result: %+v", a)
			}
			if n := rec.Count("slow", testupstream.Completed); n != 1 {
				t.Errorf("the server completed slow %d times, want once", n)
			}
		})
	}
}

// fallbackCluster is replicas with the fallback tools on
// (frontrig.FallbackFleet).
func fallbackCluster(t *testing.T, replicas int) *cluster {
	cl, _ := gatedFallbackCluster(t, replicas)
	return cl
}

// gatedFallbackCluster is fallbackCluster with its gate.
func gatedFallbackCluster(t *testing.T, replicas int) (*cluster, *gwtest.Gate) {
	t.Helper()
	f, rec, gate := frontrig.FallbackFleet(t, replicas, func(r *frontrig.Replica) http.Handler {
		_, h := serveFront(r)
		return h
	})
	return &cluster{urls: f.URLs, rec: rec}, gate
}

// callTool calls a tool and decodes its CallToolResult.
func callTool(c *gwtest.Client, name string, args map[string]any) gwtest.ToolAnswer {
	c.T.Helper()
	r := c.Call("tools/call", map[string]any{"name": name, "arguments": args})
	if r.Error != nil {
		c.T.Fatalf("%s: JSON-RPC error %+v", name, r.Error)
	}
	var a gwtest.ToolAnswer
	if err := json.Unmarshal(r.Result, &a); err != nil {
		c.T.Fatalf("%s: result %s: %v", name, r.Result, err)
	}
	return a
}
