package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// The raw clients of the Handler tests. Their answers, policies and
// helpers are the ones the fronts' tests use (internal/gwtest), under the
// names these tests call them. mcpClient and modernClient stay types of
// this package while tests here build them by field (t, urls, sid, auth)
// and add methods to them (drain_test.go, gate_test.go); they are
// gwtest.Client and gwtest.ModernClient under those names.

type (
	rpcReply = gwtest.Reply
	wireTask = gwtest.WireTask
	detailed = gwtest.Detailed
)

const directWait = gwtest.DirectWait

var (
	readMessages   = gwtest.ReadMessages
	scanMessages   = gwtest.ScanMessages
	reply          = gwtest.OneReply
	resultText     = gwtest.ResultText
	rules          = gwtest.Rules
	withWait       = gwtest.WithWait
	rulesPolicy    = gwtest.RulesPolicy
	hybridPolicy   = gwtest.HybridPolicy
	decodeDetailed = gwtest.DecodeDetailed
	eras           = gwtest.Eras
	mpost          = gwtest.MPost
	modernMeta     = gwtest.ModernMeta
	okResult       = gwtest.OKResult
)

// modernClient speaks 2026-07-28: no session, _meta and headers on every
// request, and (unless noExt) the tasks extension declared.
type modernClient struct {
	t      *testing.T
	urls   []string
	next   atomic.Int64
	auth   string
	noExt  bool
	id     atomic.Int64
	header http.Header // more headers on every request
}

func (c *modernClient) caps() map[string]any {
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "sampling": map[string]any{}}
	if !c.noExt {
		caps["extensions"] = map[string]any{core.TasksExtension: map[string]any{}}
	}
	return caps
}

func (c *modernClient) call(method string, params map[string]any) rpcReply {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": c.caps(),
	}
	id := c.id.Add(1)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := c.urls[int(c.next.Add(1))%len(c.urls)]
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	for k, vv := range c.header {
		req.Header[k] = vv
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	var out rpcReply
	readMessages(c.t, resp, func(m rpcReply) bool {
		if string(m.ID) == fmt.Sprint(id) {
			out = m
			return false
		}
		return true
	})
	return out
}

func (c *modernClient) toolTask(name string, args map[string]any) detailed {
	c.t.Helper()
	d := decodeDetailed(c.t, c.call("tools/call", map[string]any{"name": name, "arguments": args}))
	if d.ResultType != "task" || d.TaskID == "" || d.Status != "working" || d.TTLMs == nil || d.PollIntervalMs == nil {
		c.t.Fatalf("tools/call %s: want a CreateTaskResult, got %+v", name, d)
	}
	if d.TTL != nil || d.PollInterval != nil {
		c.t.Errorf("CreateTaskResult carries the 2025-11-25 names ttl/pollInterval")
	}
	return d
}

func (c *modernClient) waitTask(id, status string) detailed {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d := decodeDetailed(c.t, c.call("tasks/get", map[string]any{"taskId": id}))
		if d.ResultType != "complete" {
			c.t.Fatalf("tasks/get resultType = %q", d.ResultType)
		}
		if d.Status == status {
			return d
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s is %s (%s), want %s", id, d.Status, d.StatusMessage, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cluster is N gateway replicas on one Redis, in front of one upstream.
type cluster struct {
	urls []string
	rec  *testupstream.Recorder
}

func newCluster(t *testing.T, replicas int, rules policy.Rules) *cluster {
	t.Helper()
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	for i := 0; i < replicas; i++ {
		f.add(func(c *Config) { c.Policy = rulesPolicy(rules) })
	}
	return &cluster{urls: f.urls, rec: rec}
}

// mcpClient is a raw 2025-11-25 client: it speaks JSON-RPC over HTTP and
// can alternate between replicas.
type mcpClient struct {
	t      *testing.T
	urls   []string
	next   atomic.Int64
	sid    string
	auth   string
	nextID atomic.Int64
}

func (c *mcpClient) url() string { return c.urls[int(c.next.Add(1))%len(c.urls)] }

func (c *mcpClient) do(ctx context.Context, body any) *http.Response {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url(), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST: %v", err)
	}
	return resp
}

// call sends a request and returns its response (notifications skipped).
func (c *mcpClient) call(method string, params any) rpcReply {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := c.nextID.Add(1)
	var out rpcReply
	readMessages(c.t, c.do(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}), func(m rpcReply) bool {
		if string(m.ID) == fmt.Sprint(id) && m.Method == "" {
			out = m
			return false
		}
		return true
	})
	return out
}

func (c *mcpClient) initialize() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := c.do(ctx, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "sampling": map[string]any{}},
		"clientInfo":      map[string]any{"name": "raw", "version": "0"},
	}})
	c.sid = resp.Header.Get("Mcp-Session-Id")
	var caps struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Tasks json.RawMessage `json:"tasks"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	readMessages(c.t, resp, func(m rpcReply) bool {
		_ = json.Unmarshal(mcpwire.MustMarshal(m), &caps)
		return false
	})
	if c.sid == "" || caps.Result.ProtocolVersion != "2025-11-25" || len(caps.Result.Capabilities.Tasks) == 0 {
		c.t.Fatalf("initialize: session %q version %q tasks %s", c.sid, caps.Result.ProtocolVersion, caps.Result.Capabilities.Tasks)
	}
	r := c.do(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	r.Body.Close()
}

func (c *mcpClient) startTask(tool string, args any, meta map[string]any) wireTask {
	c.t.Helper()
	params := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}}
	if meta != nil {
		params["_meta"] = meta
	}
	r := c.call("tools/call", params)
	var res struct {
		Task wireTask `json:"task"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task.TaskID == "" {
		c.t.Fatalf("tools/call %s as task: %+v %s", tool, r.Error, r.Result)
	}
	if res.Task.Status != "working" || res.Task.TTL == nil || *res.Task.TTL != 60000 || res.Task.PollInterval <= 0 || res.Task.CreatedAt == "" {
		c.t.Fatalf("CreateTaskResult: %+v", res.Task)
	}
	return res.Task
}

func (c *mcpClient) getTask(id string) (wireTask, rpcReply) {
	c.t.Helper()
	r := c.call("tasks/get", map[string]any{"taskId": id})
	var wt wireTask
	if r.Error == nil {
		_ = json.Unmarshal(r.Result, &wt)
	}
	return wt, r
}

// waitStatus polls tasks/get until the task has status want.
func (c *mcpClient) waitStatus(id, want string) wireTask {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		wt, r := c.getTask(id)
		if r.Error != nil {
			c.t.Fatalf("tasks/get: %+v", r.Error)
		}
		if wt.Status == want {
			return wt
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s stuck in %s (%s), want %s", id, wt.Status, wt.StatusMessage, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eraUpstream is gwtest.EraUpstream under the names the Handler tests use.
type eraUpstream struct {
	*gwtest.EraUpstream
	url  string
	next eraServer // next.Store(&h) serves h from now on
}

type eraServer struct{ u *gwtest.EraUpstream }

func (s eraServer) Store(h *http.Handler) { s.u.Serve(*h) }

type upstreamPost struct {
	method, session, version, name, auth string
}

func newEraUpstream(t *testing.T, stateless bool) *eraUpstream {
	u := gwtest.NewEraUpstream(t, stateless)
	return &eraUpstream{u, u.URL, eraServer{u}}
}

// posts returns the recorded POSTs of JSON-RPC method m ("" for all).
func (u *eraUpstream) posts(m string) []upstreamPost {
	var out []upstreamPost
	for _, p := range u.Posts(m) {
		out = append(out, upstreamPost{p.Method, p.Session, p.Version, p.Name, p.Auth})
	}
	return out
}

var upstreamEras = []struct {
	name      string
	stateless bool
}{{"modern-upstream", true}, {"legacy-upstream", false}}
