package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// fallbackCluster is replicas with the fallback tools on and three task
// candidates (--task): "slow" with a 300 ms hybrid wait (its calls that
// must become tasks are held at the gate or run far longer), "elicit" and
// "echo" with a long one (directWait), so that elicit's question always
// comes before the wait ends and echo is always answered directly.
func fallbackCluster(t *testing.T, replicas int) *cluster {
	cl, _ := gatedFallbackCluster(t, replicas)
	return cl
}

// gatedFallbackCluster is fallbackCluster with its upstream behind a
// gate (gate_test.go).
func gatedFallbackCluster(t *testing.T, replicas int) (*cluster, *callGate) {
	t.Helper()
	rec := &testupstream.Recorder{}
	upURL, gate := gatedUpstream(t, testupstream.Handler(testupstream.Options{Recorder: rec}))
	f := newFleet(t, upURL)
	for i := 0; i < replicas; i++ {
		f.add(func(c *Config) {
			c.Policy = hybridPolicy(append(rules(t, "slow", policy.Task),
				withWait(rules(t, "elicit", policy.Task, "echo", policy.Task), directWait)...), 300*time.Millisecond)
			c.Fallback = FallbackTools{Enabled: true}
		})
	}
	return &cluster{urls: f.URLs, rec: rec}, gate
}

type toolAnswer struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent struct {
		TaskID        string                     `json:"taskId"`
		Status        string                     `json:"status"`
		PollInterval  int64                      `json:"pollIntervalMs"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	} `json:"structuredContent"`
	IsError bool `json:"isError"`
}

func (a toolAnswer) text() string {
	var b strings.Builder
	for _, c := range a.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// callTool calls a tool and decodes its CallToolResult.
func callTool(c *gwtest.Client, name string, args map[string]any) toolAnswer {
	c.T.Helper()
	r := c.Call("tools/call", map[string]any{"name": name, "arguments": args})
	if r.Error != nil {
		c.T.Fatalf("%s: JSON-RPC error %+v", name, r.Error)
	}
	var a toolAnswer
	if err := json.Unmarshal(r.Result, &a); err != nil {
		c.T.Fatalf("%s: result %s: %v", name, r.Result, err)
	}
	return a
}

func toolNames(t *testing.T, result json.RawMessage) map[string]bool {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(result, &res); err != nil {
		t.Fatalf("tools/list result %s: %v", result, err)
	}
	out := map[string]bool{}
	for _, tl := range res.Tools {
		out[tl.Name] = true
	}
	return out
}

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
	if names := toolNames(t, c.Call("tools/list", map[string]any{}).Result); names["taskgate_task_result"] || !names["slow"] {
		t.Fatalf("tools/list before any fallback task: %v", names)
	}

	// A task candidate answered within its hybrid wait is a plain answer.
	if a := callTool(c, "echo", map[string]any{"text": "quick"}); a.text() != "quick" || a.IsError || a.StructuredContent.TaskID != "" {
		t.Fatalf("fast call: %+v", a)
	}

	// The first fallback task: list_changed, then the result naming it.
	// Its call stays in flight until the gate opens: it is working
	// however long the checks below take.
	msgs := c.CallAll("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0, "text": gateMarker}})
	if len(msgs) != 2 || msgs[0].Method != "notifications/tools/list_changed" {
		t.Fatalf("first fallback answer: %+v, want list_changed then the result", msgs)
	}
	var started toolAnswer
	_ = json.Unmarshal(msgs[1].Result, &started)
	id := started.StructuredContent.TaskID
	if id == "" || started.IsError || started.StructuredContent.Status != "working" || started.StructuredContent.PollInterval <= 0 ||
		!strings.Contains(started.text(), "taskgate_task_result") || !strings.Contains(started.text(), id) {
		t.Fatalf("started: %s", msgs[1].Result)
	}
	if names := toolNames(t, c.Call("tools/list", map[string]any{}).Result); !names["taskgate_task_status"] || !names["taskgate_task_result"] ||
		!names["taskgate_task_cancel"] || !names["taskgate_task_answer"] || !names["slow"] {
		t.Fatalf("tools/list after the first fallback task: %v", names)
	}
	// Only the first page gains them.
	if r := c.Call("tools/list", map[string]any{"cursor": "x"}); r.Result != nil && toolNames(t, r.Result)["taskgate_task_status"] {
		t.Fatalf("a later page has the fallback tools: %s", r.Result)
	}

	if a := callTool(c, "taskgate_task_status", map[string]any{"taskId": id}); a.IsError || a.StructuredContent.Status != "working" ||
		!strings.Contains(a.text(), "working") {
		t.Fatalf("status: %+v", a)
	}
	// Another session (same replicas) is another owner.
	other := &gwtest.Client{T: t, URLs: cl.urls}
	other.InitializeAs("2025-06-18", map[string]any{})
	for _, tool := range []string{"taskgate_task_status", "taskgate_task_result", "taskgate_task_cancel"} {
		if a := callTool(other, tool, map[string]any{"taskId": id}); !a.IsError || !strings.Contains(a.text(), "task not found") {
			t.Fatalf("%s of another session's task: %+v", tool, a)
		}
	}
	gate.release()
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 20}); a.text() != "slept 0 s: "+gateMarker || a.IsError {
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
		if a := callTool(c, tc.tool, tc.args); !a.IsError || !strings.Contains(a.text(), tc.want) {
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
	if a := callTool(c, "taskgate_task_cancel", map[string]any{"taskId": sid}); !a.IsError || !strings.Contains(a.text(), "already") {
		t.Fatalf("cancel again: %+v", a)
	}
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": sid}); !a.IsError || !strings.Contains(a.text(), "cancelled") {
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
	if id == "" || started.StructuredContent.Status != "input_required" || !strings.Contains(started.text(), "needs input") {
		t.Fatalf("elicit: %+v", started)
	}
	var st toolAnswer
	gwtest.WaitFor(t, func() bool {
		st = callTool(c, "taskgate_task_status", map[string]any{"taskId": id})
		return len(st.StructuredContent.InputRequests) == 1
	})
	var key string
	for k := range st.StructuredContent.InputRequests {
		key = k
	}
	if !strings.Contains(st.text(), "elicitation/create") || !strings.Contains(st.text(), "taskgate_task_answer") {
		t.Fatalf("status text: %s", st.text())
	}
	// The result cannot ask this client: it returns the status at once.
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 30}); a.StructuredContent.Status != "input_required" {
		t.Fatalf("result while waiting for input: %+v", a)
	}
	if a := callTool(c, "taskgate_task_answer", map[string]any{"taskId": id, "inputResponses": map[string]any{"nope": map[string]any{}}}); !a.IsError ||
		!strings.Contains(a.text(), `"`+key+`"`) {
		t.Fatalf("answer with a wrong key: %+v", a)
	}
	if a := callTool(c, "taskgate_task_answer", map[string]any{"taskId": id, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}); a.IsError {
		t.Fatalf("answer: %+v", a)
	}
	if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id}); a.text() != "Hello, Ada!" {
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
	var final rpcReply
	readMessages(t, resp, func(m rpcReply) bool {
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
	var a toolAnswer
	_ = json.Unmarshal(final.Result, &a)
	if asked != 1 || a.text() != "Hello, Grace!" {
		t.Fatalf("asked %d times, final %s", asked, final.Result)
	}
}

// TestFallbackStatelessClient: a 2026-07-28 client without the extension
// sees the tools at once and follows its task with them; another
// Authorization cannot.
func TestFallbackStatelessClient(t *testing.T) {
	cl := fallbackCluster(t, 2)
	auth := func(v string) func(http.Header) { return func(h http.Header) { h.Set("Authorization", v) } }
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	okResult(t, mpost(t, cl.urls[0], "tools/list", nil, modernMeta(), auth("Bearer a")), &list)
	found := 0
	for _, tl := range list.Tools {
		if strings.HasPrefix(tl.Name, "taskgate_task_") {
			found++
		}
	}
	if found != 4 {
		t.Fatalf("tools/list: %d fallback tools in %+v", found, list.Tools)
	}
	var started struct {
		toolAnswer
		ResultType string `json:"resultType"`
	}
	okResult(t, mpost(t, cl.urls[0], "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "m"}},
		modernMeta(), auth("Bearer a")), &started)
	id := started.StructuredContent.TaskID
	if started.ResultType != "complete" || id == "" || started.IsError {
		t.Fatalf("started: %+v", started)
	}
	var a toolAnswer
	okResult(t, mpost(t, cl.urls[1], "tools/call", map[string]any{"name": "taskgate_task_status", "arguments": map[string]any{"taskId": id}},
		modernMeta(), auth("Bearer b")), &a)
	if !a.IsError || !strings.Contains(a.text(), "task not found") {
		t.Fatalf("another owner's status: %+v", a)
	}
	a = toolAnswer{}
	okResult(t, mpost(t, cl.urls[1], "tools/call", map[string]any{"name": "taskgate_task_result", "arguments": map[string]any{"taskId": id, "waitSeconds": 9}},
		modernMeta(), auth("Bearer a")), &a)
	if a.text() != "slept 1 s: m" {
		t.Fatalf("result: %+v", a)
	}
	// With the extension declared, the same call is a real task.
	meta := modernMeta()
	meta[core.MetaClientCaps] = map[string]any{"extensions": map[string]any{core.TasksExtension: map[string]any{}}}
	var task struct {
		ResultType string `json:"resultType"`
	}
	okResult(t, mpost(t, cl.urls[0], "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "m"}},
		meta, auth("Bearer a")), &task)
	if task.ResultType != "task" {
		t.Fatalf("with the extension: %+v", task)
	}
}

// TestFallbackOff: without Config.Fallback nothing of it shows.
func TestFallbackOff(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) {
		c.Policy = hybridPolicy(rules(t, "slow", policy.Task), 100*time.Millisecond)
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.InitializeAs("2025-06-18", map[string]any{})
	if a := callTool(c, "slow", map[string]any{"seconds": 0.5, "text": "x"}); a.text() != "slept 0.5 s: x" {
		t.Fatalf("slow call: %+v", a)
	}
	if names := toolNames(t, c.Call("tools/list", map[string]any{}).Result); names["taskgate_task_status"] {
		t.Fatalf("tools/list: %v", names)
	}
	if r := c.Call("tools/call", map[string]any{"name": "taskgate_task_status", "arguments": map[string]any{"taskId": "x"}}); r.Error == nil {
		var a toolAnswer
		_ = json.Unmarshal(r.Result, &a)
		if strings.Contains(a.text(), "task not found") {
			t.Fatalf("a fallback tool answered with the tools off: %s", r.Result)
		}
	}
}

// TestFallbackStatelessClientInput: a 2026-07-28 client without the
// extension and without elicitation answers its fallback task's question
// with task_answer, in front of either era of upstream.
func TestFallbackStatelessClientInput(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless}))
		t.Cleanup(up.Close)
		f := newFleet(t, up.URL+"/mcp")
		for i := 0; i < 2; i++ {
			f.add(func(c *Config) {
				c.Policy = hybridPolicy(rules(t, "elicit", policy.Task), 200*time.Millisecond)
				c.Fallback = FallbackTools{Enabled: true}
			})
		}
		call := func(url, tool string, args map[string]any) toolAnswer {
			var a toolAnswer
			okResult(t, mpost(t, url, "tools/call", map[string]any{"name": tool, "arguments": args}, modernMeta(), nil), &a)
			return a
		}
		var list json.RawMessage
		okResult(t, mpost(t, f.URLs[1], "tools/list", nil, modernMeta(), nil), &list)
		if names := toolNames(t, list); !names["elicit"] || !names["taskgate_task_answer"] {
			t.Fatalf("tools/list: %v", names)
		}
		started := call(f.URLs[0], "elicit", map[string]any{})
		id := started.StructuredContent.TaskID
		if id == "" {
			t.Fatalf("elicit: %+v", started)
		}
		var st toolAnswer
		gwtest.WaitFor(t, func() bool {
			st = call(f.URLs[1], "taskgate_task_status", map[string]any{"taskId": id})
			return len(st.StructuredContent.InputRequests) == 1
		})
		var key string
		for k := range st.StructuredContent.InputRequests {
			key = k
		}
		if a := call(f.URLs[0], "taskgate_task_answer", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"name": "Lin"}}}}); a.IsError {
			t.Fatalf("answer: %+v", a)
		}
		if a := call(f.URLs[1], "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 20}); a.text() != "Hello, Lin!" {
			t.Fatalf("result: %+v", a)
		}
	})
}

// TestFallbackProgressInStatus: progress the upstream reports for a
// fallback task shows in task_status (its call was answered, so it is
// not relayed as notifications).
func TestFallbackProgressInStatus(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) {
		c.Policy = hybridPolicy(rules(t, "progress", policy.Task), 200*time.Millisecond)
		c.Fallback = FallbackTools{Enabled: true}
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.InitializeAs("2025-11-25", map[string]any{})
	msgs := c.CallAll("tools/call", map[string]any{"name": "progress", "arguments": map[string]any{"steps": 3, "delayMs": 400},
		"_meta": map[string]any{"progressToken": "p1"}})
	var started toolAnswer
	_ = json.Unmarshal(msgs[len(msgs)-1].Result, &started)
	id := started.StructuredContent.TaskID
	if id == "" {
		t.Fatalf("progress call: %+v", msgs)
	}
	var st toolAnswer
	gwtest.WaitFor(t, func() bool {
		st = callTool(c, "taskgate_task_status", map[string]any{"taskId": id})
		return strings.Contains(st.text(), "Progress: ")
	})
	if !strings.Contains(st.text(), "/3 (step ") {
		t.Fatalf("status text: %s", st.text())
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
	f.add(func(c *Config) {
		c.Policy = hybridPolicy(rules(t, "slow", policy.TaskRequired), 100*time.Millisecond)
		c.Fallback = FallbackTools{Enabled: true}
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
