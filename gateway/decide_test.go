package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// fleet is replicas of one gateway on one Redis in front of one upstream,
// each built with its own Config (mod), for policy and latency tests: a
// front's fleet (frontrig) whose replicas are Handlers.
type fleet struct {
	*frontrig.Fleet
	hs []*Handler
}

func newFleet(t *testing.T, upstreamURL string) *fleet {
	return &fleet{Fleet: frontrig.NewFleet(t, upstreamURL, nil)}
}

// add starts one more replica; mod may change its Config.
func (f *fleet) add(mod func(*Config)) *Handler {
	t := f.T
	t.Helper()
	rc := f.Next()
	cfg := Config{Upstream: rc.Upstream, Store: rc.Store, ReplicaID: rc.ReplicaID, PollLimit: rc.PollLimit}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	f.Start(h)
	f.hs = append(f.hs, h)
	return h
}

// legacyTaskSupport lists the tools on a 2025-11-25 session and returns
// each one's execution.taskSupport ("" when absent).
func legacyTaskSupport(t *testing.T, c *gwtest.Client) map[string]string {
	t.Helper()
	r := c.Call("tools/list", map[string]any{})
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list: %+v %s", r.Error, r.Result)
	}
	out := map[string]string{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool.Execution.TaskSupport
	}
	return out
}

// resultType is the resultType of a modern tools/call answer.
func resultType(t *testing.T, r gwtest.Reply) string {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var rt struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(r.Result, &rt)
	return rt.ResultType
}

func slowArgs(seconds float64) map[string]any {
	return map[string]any{"name": "slow", "arguments": map[string]any{"seconds": seconds}}
}

// TestPolicyReloadAppliesToNextCall: a Config stored in Config.Policy
// changes what tools/list shows and how tools/call is served from the next
// request on, while a task created under the old rules runs to its end.
func TestPolicyReloadAppliesToNextCall(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	taskRule := gwtest.Rules(t, "slow", policy.Task)
	cur := policy.NewCurrent(&policy.Config{Rules: taskRule})
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) { c.Policy = cur })

	legacy := &gwtest.Client{T: t, URLs: f.URLs}
	legacy.Initialize()
	modern := &gwtest.ModernClient{T: t, URLs: f.URLs}
	if ts := legacyTaskSupport(t, legacy)["slow"]; ts != "optional" {
		t.Fatalf("slow under a task rule: taskSupport %q", ts)
	}
	running := legacy.StartTask("slow", map[string]any{"seconds": 1, "text": "old rules"}, nil)
	if rt := resultType(t, modern.Call("tools/call", slowArgs(0))); rt != "task" {
		t.Fatalf("modern call under a task rule: resultType %q", rt)
	}

	cur.Store(&policy.Config{Rules: gwtest.Rules(t, "slow", policy.Sync)})
	if ts, ok := legacyTaskSupport(t, legacy)["slow"]; ts != "" || !ok {
		t.Errorf("slow under a sync rule: taskSupport %q", ts)
	}
	r := legacy.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("task on a tool now --sync = %+v", r.Error)
	}
	if rt := resultType(t, modern.Call("tools/call", slowArgs(0))); rt != "complete" {
		t.Errorf("modern call under a sync rule: resultType %q", rt)
	}
	legacy.WaitStatus(running.TaskID, "completed") // the reload did not touch it
}

// annotatedUpstream serves two tools told apart only by annotations.
func annotatedUpstream(t *testing.T, stateless bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "annotated", Version: "1"}, nil)
	reply := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, reply)
	mcp.AddTool(s, &mcp.Tool{Name: "update"}, reply)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAnnotationRulesAtToolsCall: the catalogue keeps the annotations of
// tools/list (of either era's client, on any replica), so a rule on
// readOnlyHint applies to tools/call too.
func TestAnnotationRulesAtToolsCall(t *testing.T) {
	ro := true
	rs := policy.Rules{
		{Glob: "*", Mode: policy.Sync, When: policy.Annotations{ReadOnlyHint: &ro}, Source: "test"},
		{Glob: "*", Mode: policy.Task, Source: "test"},
	}
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		f := newFleet(t, annotatedUpstream(t, stateless))
		for i := 0; i < 2; i++ {
			f.add(func(c *Config) { c.Policy = gwtest.RulesPolicy(rs) })
		}
		// A modern client lists on replica 0 and calls on replica 1.
		modern := &gwtest.ModernClient{T: t, URLs: f.URLs}
		if r := modern.Call("tools/list", nil); r.Error != nil {
			t.Fatalf("tools/list: %+v", r.Error)
		}
		if rt := resultType(t, modern.Call("tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{}})); rt != "complete" {
			t.Errorf("read-only lookup: resultType %q, want complete (sync)", rt)
		}
		if rt := resultType(t, modern.Call("tools/call", map[string]any{"name": "update", "arguments": map[string]any{}})); rt != "task" {
			t.Errorf("update: resultType %q, want task", rt)
		}
		if stateless {
			return // a 2025-11-25 client needs a session upstream
		}
		legacy := &gwtest.Client{T: t, URLs: f.URLs}
		legacy.Initialize()
		ts := legacyTaskSupport(t, legacy)
		if ts["lookup"] != "" || ts["update"] != "optional" {
			t.Errorf("legacy tools/list taskSupport = %v", ts)
		}
		r := legacy.Call("tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{}, "task": map[string]any{}})
		if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
			t.Errorf("task on the read-only tool = %+v", r.Error)
		}
	})
}

// TestRuleSetsTaskTTLAndPollInterval: a task gets its rule's ttl and
// pollInterval, over what the client asked for.
func TestRuleSetsTaskTTLAndPollInterval(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	rs := policy.Rules{{Glob: "slow", Mode: policy.Task, TTL: 90 * time.Second, PollInterval: 3 * time.Second, Source: "test"}}
	f.add(func(c *Config) { c.Policy = gwtest.RulesPolicy(rs) })

	legacy := &gwtest.Client{T: t, URLs: f.URLs}
	legacy.Initialize()
	r := legacy.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{"ttl": 60000}})
	var res struct {
		Task gwtest.WireTask `json:"task"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task.TTL == nil {
		t.Fatalf("legacy task: %+v %s", r.Error, r.Result)
	}
	if *res.Task.TTL != 90000 || res.Task.PollInterval != 3000 {
		t.Errorf("legacy task ttl %d pollInterval %d, want 90000 and 3000", *res.Task.TTL, res.Task.PollInterval)
	}

	modern := &gwtest.ModernClient{T: t, URLs: f.URLs, Auth: "Bearer m"}
	d := modern.ToolTask("slow", map[string]any{"seconds": 0})
	if *d.TTLMs != 90000 || *d.PollIntervalMs != 3000 {
		t.Errorf("modern task ttlMs %d pollIntervalMs %d, want 90000 and 3000", *d.TTLMs, *d.PollIntervalMs)
	}
}
