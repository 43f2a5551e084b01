package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// fleet is replicas of one gateway on one Redis in front of one upstream,
// each built with its own Config (mod), for policy and latency tests.
type fleet struct {
	t  *testing.T
	up string // the upstream's MCP endpoint
	mr *miniredis.Miniredis
	// redis, when set, makes each replica's Redis client instead of one
	// on mr (a real redis-server, the production options).
	redis func() redis.UniversalClient
	hs    []*Handler
	urls  []string
	cmds  []*atomic.Int64 // Redis commands each replica's store sent
}

func newFleet(t *testing.T, upstreamURL string) *fleet {
	return &fleet{t: t, up: upstreamURL, mr: miniredis.RunT(t)}
}

// add starts one more replica; mod may change its Config.
func (f *fleet) add(mod func(*Config)) *Handler {
	t := f.t
	t.Helper()
	var rdb redis.UniversalClient
	if f.redis != nil {
		rdb = f.redis()
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: f.mr.Addr()})
	}
	n := &atomic.Int64{}
	rdb.AddHook(redistest.CountHook{N: n})
	store := taskstore.New(rdb, taskstore.Options{ResyncInterval: 500 * time.Millisecond})
	client, err := upstream.New(f.up, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Tests poll in tight loops; the poll limit has its own tests.
	cfg := Config{Upstream: client, Store: store, ReplicaID: fmt.Sprintf("f%d", len(f.hs)), PollLimit: -1}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	// Cleanups run last-registered first: the HTTP server, the Handler
	// (its workers), the store, the client.
	t.Cleanup(func() { rdb.Close() })
	t.Cleanup(func() { store.Close() })
	t.Cleanup(func() { h.Close() })
	t.Cleanup(srv.Close)
	f.hs = append(f.hs, h)
	f.urls = append(f.urls, srv.URL+"/mcp")
	f.cmds = append(f.cmds, n)
	return h
}

// legacyTaskSupport lists the tools on a 2025-11-25 session and returns
// each one's execution.taskSupport ("" when absent).
func legacyTaskSupport(t *testing.T, c *mcpClient) map[string]string {
	t.Helper()
	r := c.call("tools/list", map[string]any{})
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
func resultType(t *testing.T, r rpcReply) string {
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
	taskRule := rules(t, "slow", policy.Task)
	cur := policy.NewCurrent(&policy.Config{Rules: taskRule})
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) { c.Policy = cur })

	legacy := &mcpClient{t: t, urls: f.urls}
	legacy.initialize()
	modern := &modernClient{t: t, urls: f.urls}
	if ts := legacyTaskSupport(t, legacy)["slow"]; ts != "optional" {
		t.Fatalf("slow under a task rule: taskSupport %q", ts)
	}
	running := legacy.startTask("slow", map[string]any{"seconds": 1, "text": "old rules"}, nil)
	if rt := resultType(t, modern.call("tools/call", slowArgs(0))); rt != "task" {
		t.Fatalf("modern call under a task rule: resultType %q", rt)
	}

	cur.Store(&policy.Config{Rules: rules(t, "slow", policy.Sync)})
	if ts, ok := legacyTaskSupport(t, legacy)["slow"]; ts != "" || !ok {
		t.Errorf("slow under a sync rule: taskSupport %q", ts)
	}
	r := legacy.call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("task on a tool now --sync = %+v", r.Error)
	}
	if rt := resultType(t, modern.call("tools/call", slowArgs(0))); rt != "complete" {
		t.Errorf("modern call under a sync rule: resultType %q", rt)
	}
	legacy.waitStatus(running.TaskID, "completed") // the reload did not touch it
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
	eras(t, func(t *testing.T, stateless bool) {
		f := newFleet(t, annotatedUpstream(t, stateless))
		for i := 0; i < 2; i++ {
			f.add(func(c *Config) { c.Policy = rulesPolicy(rs) })
		}
		// A modern client lists on replica 0 and calls on replica 1.
		modern := &modernClient{t: t, urls: f.urls}
		if r := modern.call("tools/list", nil); r.Error != nil {
			t.Fatalf("tools/list: %+v", r.Error)
		}
		if rt := resultType(t, modern.call("tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{}})); rt != "complete" {
			t.Errorf("read-only lookup: resultType %q, want complete (sync)", rt)
		}
		if rt := resultType(t, modern.call("tools/call", map[string]any{"name": "update", "arguments": map[string]any{}})); rt != "task" {
			t.Errorf("update: resultType %q, want task", rt)
		}
		if stateless {
			return // a 2025-11-25 client needs a session upstream
		}
		legacy := &mcpClient{t: t, urls: f.urls}
		legacy.initialize()
		ts := legacyTaskSupport(t, legacy)
		if ts["lookup"] != "" || ts["update"] != "optional" {
			t.Errorf("legacy tools/list taskSupport = %v", ts)
		}
		r := legacy.call("tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{}, "task": map[string]any{}})
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
	f.add(func(c *Config) { c.Policy = rulesPolicy(rs) })

	legacy := &mcpClient{t: t, urls: f.urls}
	legacy.initialize()
	r := legacy.call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{"ttl": 60000}})
	var res struct {
		Task wireTask `json:"task"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task.TTL == nil {
		t.Fatalf("legacy task: %+v %s", r.Error, r.Result)
	}
	if *res.Task.TTL != 90000 || res.Task.PollInterval != 3000 {
		t.Errorf("legacy task ttl %d pollInterval %d, want 90000 and 3000", *res.Task.TTL, res.Task.PollInterval)
	}

	modern := &modernClient{t: t, urls: f.urls, auth: "Bearer m"}
	d := modern.toolTask("slow", map[string]any{"seconds": 0})
	if *d.TTLMs != 90000 || *d.PollIntervalMs != 3000 {
		t.Errorf("modern task ttlMs %d pollIntervalMs %d, want 90000 and 3000", *d.TTLMs, *d.PollIntervalMs)
	}
}
