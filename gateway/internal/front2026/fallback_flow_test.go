package front2026

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// The fallback task tools (internal/fallback) as this front serves them
// to a client without the tasks extension (fallback.go).

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
	gwtest.OKResult(t, gwtest.MPost(t, cl.urls[0], "tools/list", nil, gwtest.ModernMeta(), auth("Bearer a")), &list)
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
		gwtest.ToolAnswer
		ResultType string `json:"resultType"`
	}
	gwtest.OKResult(t, gwtest.MPost(t, cl.urls[0], "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "m"}},
		gwtest.ModernMeta(), auth("Bearer a")), &started)
	id := started.StructuredContent.TaskID
	if started.ResultType != "complete" || id == "" || started.IsError {
		t.Fatalf("started: %+v", started)
	}
	var a gwtest.ToolAnswer
	gwtest.OKResult(t, gwtest.MPost(t, cl.urls[1], "tools/call", map[string]any{"name": "taskgate_task_status", "arguments": map[string]any{"taskId": id}},
		gwtest.ModernMeta(), auth("Bearer b")), &a)
	if !a.IsError || !strings.Contains(a.Text(), "task not found") {
		t.Fatalf("another owner's status: %+v", a)
	}
	a = gwtest.ToolAnswer{}
	gwtest.OKResult(t, gwtest.MPost(t, cl.urls[1], "tools/call", map[string]any{"name": "taskgate_task_result", "arguments": map[string]any{"taskId": id, "waitSeconds": 9}},
		gwtest.ModernMeta(), auth("Bearer a")), &a)
	if a.Text() != "slept 1 s: m" {
		t.Fatalf("result: %+v", a)
	}
	// With the extension declared, the same call is a real task.
	meta := gwtest.ModernMeta()
	meta[core.MetaClientCaps] = map[string]any{"extensions": map[string]any{core.TasksExtension: map[string]any{}}}
	var task struct {
		ResultType string `json:"resultType"`
	}
	gwtest.OKResult(t, gwtest.MPost(t, cl.urls[0], "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "m"}},
		meta, auth("Bearer a")), &task)
	if task.ResultType != "task" {
		t.Fatalf("with the extension: %+v", task)
	}
}

// TestFallbackStatelessClientInput: a 2026-07-28 client without the
// extension and without elicitation answers its fallback task's question
// with task_answer, in front of either era of upstream.
func TestFallbackStatelessClientInput(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless}))
		t.Cleanup(up.Close)
		f := newFleet(t, up.URL+"/mcp")
		for i := 0; i < 2; i++ {
			f.Add(func(c *frontrig.Config) {
				c.Policy = gwtest.HybridPolicy(gwtest.Rules(t, "elicit", policy.Task), 200*time.Millisecond)
				c.Fallback = fallback.Config{Enabled: true}
			})
		}
		call := func(url, tool string, args map[string]any) gwtest.ToolAnswer {
			var a gwtest.ToolAnswer
			gwtest.OKResult(t, gwtest.MPost(t, url, "tools/call", map[string]any{"name": tool, "arguments": args}, gwtest.ModernMeta(), nil), &a)
			return a
		}
		var list json.RawMessage
		gwtest.OKResult(t, gwtest.MPost(t, f.URLs[1], "tools/list", nil, gwtest.ModernMeta(), nil), &list)
		if names := gwtest.ToolNames(t, list); !names["elicit"] || !names["taskgate_task_answer"] {
			t.Fatalf("tools/list: %v", names)
		}
		started := call(f.URLs[0], "elicit", map[string]any{})
		id := started.StructuredContent.TaskID
		if id == "" {
			t.Fatalf("elicit: %+v", started)
		}
		var st gwtest.ToolAnswer
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
		if a := call(f.URLs[1], "taskgate_task_result", map[string]any{"taskId": id, "waitSeconds": 20}); a.Text() != "Hello, Lin!" {
			t.Fatalf("result: %+v", a)
		}
	})
}

// fallbackCluster is replicas with the fallback tools on
// (frontrig.FallbackFleet).
func fallbackCluster(t *testing.T, replicas int) *modernCluster {
	t.Helper()
	f, rec, _ := frontrig.FallbackFleet(t, replicas, serveFront)
	return &modernCluster{urls: f.URLs, rec: rec, mr: f.MR}
}
