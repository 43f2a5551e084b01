package gwtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// Reply is one JSON-RPC message of an answer: a response, or a request or
// notification the gateway sent on the way.
type Reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// ReadMessages yields the JSON-RPC messages of a JSON or SSE answer.
func ReadMessages(t testing.TB, resp *http.Response, each func(Reply) bool) {
	t.Helper()
	if err := ScanMessages(resp, each); err != nil {
		t.Fatal(err)
	}
}

// ScanMessages is ReadMessages for goroutines: it returns its error.
func ScanMessages(resp *http.Response, each func(Reply) bool) error {
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m Reply
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return fmt.Errorf("decode JSON answer (HTTP %d): %v", resp.StatusCode, err)
		}
		each(m)
		return nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "" {
			continue
		}
		var m Reply
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return fmt.Errorf("decode SSE event: %v", err)
		}
		if !each(m) {
			return nil
		}
	}
	return nil
}

// OneReply reads the one JSON-RPC response of a JSON or SSE answer.
func OneReply(t testing.TB, resp *http.Response) Reply {
	t.Helper()
	var out Reply
	ReadMessages(t, resp, func(m Reply) bool {
		if m.Method != "" {
			return true
		}
		out = m
		return false
	})
	return out
}

// Client is a raw 2025-11-25 client: it speaks JSON-RPC over HTTP and
// can alternate between replicas.
type Client struct {
	T      *testing.T
	URLs   []string
	next   atomic.Int64
	SID    string
	Auth   string
	nextID atomic.Int64
}

// URL is the next replica's endpoint, round robin.
func (c *Client) URL() string { return c.URLs[int(c.next.Add(1))%len(c.URLs)] }

// Do POSTs body with the session's headers.
func (c *Client) Do(ctx context.Context, body any) *http.Response {
	c.T.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.SID != "" {
		req.Header.Set("Mcp-Session-Id", c.SID)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	if c.Auth != "" {
		req.Header.Set("Authorization", c.Auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatalf("POST: %v", err)
	}
	return resp
}

// Call sends a request and returns its response (notifications skipped).
func (c *Client) Call(method string, params any) Reply {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := c.nextID.Add(1)
	var out Reply
	ReadMessages(c.T, c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}), func(m Reply) bool {
		if string(m.ID) == fmt.Sprint(id) && m.Method == "" {
			out = m
			return false
		}
		return true
	})
	return out
}

// CallAll sends a request and returns every message of its answer.
func (c *Client) CallAll(method string, params any) []Reply {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []Reply
	ReadMessages(c.T, c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": 1000 + c.nextID.Add(1), "method": method, "params": params}),
		func(m Reply) bool { out = append(out, m); return true })
	return out
}

// Initialize opens a 2025-11-25 session that declares elicitation and
// sampling, and fails the test unless the answer offers tasks.
func (c *Client) Initialize() {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "sampling": map[string]any{}},
		"clientInfo":      map[string]any{"name": "raw", "version": "0"},
	}})
	c.SID = resp.Header.Get("Mcp-Session-Id")
	var caps struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Tasks json.RawMessage `json:"tasks"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	ReadMessages(c.T, resp, func(m Reply) bool {
		_ = json.Unmarshal(mcpwire.MustMarshal(m), &caps)
		return false
	})
	if c.SID == "" || caps.Result.ProtocolVersion != "2025-11-25" || len(caps.Result.Capabilities.Tasks) == 0 {
		c.T.Fatalf("initialize: session %q version %q tasks %s", c.SID, caps.Result.ProtocolVersion, caps.Result.Capabilities.Tasks)
	}
	r := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	r.Body.Close()
}

// InitializeAs opens a session at version with capabilities caps and
// returns the initialize result.
func (c *Client) InitializeAs(version string, caps map[string]any) json.RawMessage {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": caps,
		"clientInfo": map[string]any{"name": "no-tasks", "version": "0"},
	}})
	c.SID = resp.Header.Get("Mcp-Session-Id")
	var result json.RawMessage
	ReadMessages(c.T, resp, func(m Reply) bool { result = m.Result; return false })
	if c.SID == "" || result == nil {
		c.T.Fatalf("initialize: session %q result %s", c.SID, result)
	}
	r := c.Do(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	r.Body.Close()
	return result
}

// WireTask is a 2025-11-25 Task.
type WireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// StartTask calls tool as a task and checks the CreateTaskResult.
func (c *Client) StartTask(tool string, args any, meta map[string]any) WireTask {
	c.T.Helper()
	params := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}}
	if meta != nil {
		params["_meta"] = meta
	}
	r := c.Call("tools/call", params)
	var res struct {
		Task WireTask `json:"task"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task.TaskID == "" {
		c.T.Fatalf("tools/call %s as task: %+v %s", tool, r.Error, r.Result)
	}
	if res.Task.Status != "working" || res.Task.TTL == nil || *res.Task.TTL != 60000 || res.Task.PollInterval <= 0 || res.Task.CreatedAt == "" {
		c.T.Fatalf("CreateTaskResult: %+v", res.Task)
	}
	return res.Task
}

// GetTask is one tasks/get.
func (c *Client) GetTask(id string) (WireTask, Reply) {
	c.T.Helper()
	r := c.Call("tasks/get", map[string]any{"taskId": id})
	var wt WireTask
	if r.Error == nil {
		_ = json.Unmarshal(r.Result, &wt)
	}
	return wt, r
}

// WaitStatus polls tasks/get until the task has status want.
func (c *Client) WaitStatus(id, want string) WireTask {
	c.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		wt, r := c.GetTask(id)
		if r.Error != nil {
			c.T.Fatalf("tasks/get: %+v", r.Error)
		}
		if wt.Status == want {
			return wt
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("task %s stuck in %s (%s), want %s", id, wt.Status, wt.StatusMessage, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ResultText is a CallToolResult's first text, isError and related task.
func ResultText(t testing.TB, raw json.RawMessage) (string, bool, string) {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
		Meta    map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("bad CallToolResult %s", raw)
	}
	return r.Content[0].Text, r.IsError, r.Meta[core.RelatedTaskKey].TaskID
}

// ModernClient speaks 2026-07-28: no session, _meta and headers on every
// request, and (unless NoExt) the tasks extension declared.
type ModernClient struct {
	T      *testing.T
	URLs   []string
	next   atomic.Int64
	Auth   string
	NoExt  bool
	id     atomic.Int64
	Header http.Header // more headers on every request
}

// Caps are the client capabilities every request declares.
func (c *ModernClient) Caps() map[string]any {
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "sampling": map[string]any{}}
	if !c.NoExt {
		caps["extensions"] = map[string]any{core.TasksExtension: map[string]any{}}
	}
	return caps
}

// Call sends one request and returns its response.
func (c *ModernClient) Call(method string, params map[string]any) Reply {
	c.T.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": c.Caps(),
	}
	id := c.id.Add(1)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := c.URLs[int(c.next.Add(1))%len(c.URLs)]
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if c.Auth != "" {
		req.Header.Set("Authorization", c.Auth)
	}
	for k, vv := range c.Header {
		req.Header[k] = vv
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatalf("%s: %v", method, err)
	}
	var out Reply
	ReadMessages(c.T, resp, func(m Reply) bool {
		if string(m.ID) == fmt.Sprint(id) {
			out = m
			return false
		}
		return true
	})
	return out
}

// Detailed is a 2026-07-28 task result: CreateTaskResult or DetailedTask.
type Detailed struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs *int64          `json:"pollIntervalMs"`
	TTL            any             `json:"ttl"`
	PollInterval   any             `json:"pollInterval"`
	Result         json.RawMessage `json:"result"`
	Error          *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
}

// DecodeDetailed reads a successful reply as a Detailed.
func DecodeDetailed(t testing.TB, r Reply) Detailed {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var d Detailed
	if err := json.Unmarshal(r.Result, &d); err != nil {
		t.Fatalf("decode %s: %v", r.Result, err)
	}
	return d
}

// ToolTask calls tool name and checks that the answer is a CreateTaskResult.
func (c *ModernClient) ToolTask(name string, args map[string]any) Detailed {
	c.T.Helper()
	d := DecodeDetailed(c.T, c.Call("tools/call", map[string]any{"name": name, "arguments": args}))
	if d.ResultType != "task" || d.TaskID == "" || d.Status != "working" || d.TTLMs == nil || d.PollIntervalMs == nil {
		c.T.Fatalf("tools/call %s: want a CreateTaskResult, got %+v", name, d)
	}
	if d.TTL != nil || d.PollInterval != nil {
		c.T.Errorf("CreateTaskResult carries the 2025-11-25 names ttl/pollInterval")
	}
	return d
}

// WaitTask polls tasks/get until the task has status status.
func (c *ModernClient) WaitTask(id, status string) Detailed {
	c.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d := DecodeDetailed(c.T, c.Call("tasks/get", map[string]any{"taskId": id}))
		if d.ResultType != "complete" {
			c.T.Fatalf("tasks/get resultType = %q", d.ResultType)
		}
		if d.Status == status {
			return d
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("task %s is %s (%s), want %s", id, d.Status, d.StatusMessage, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Eras runs fn once against each upstream era, as subtests.
func Eras(t *testing.T, fn func(t *testing.T, stateless bool)) {
	for _, stateless := range []bool{true, false} {
		name := "modern-upstream"
		if !stateless {
			name = "legacy-upstream"
		}
		t.Run(name, func(t *testing.T) { fn(t, stateless) })
	}
}

// ModernMeta is the _meta of a 2026-07-28 request that declares nothing.
func ModernMeta() map[string]any {
	return map[string]any{
		core.MetaProtocolVersion: core.Version2026,
		core.MetaClientInfo:      map[string]any{"name": "modern-test", "version": "1.0.0"},
		core.MetaClientCaps:      map[string]any{},
	}
}

// MPost sends one 2026-07-28 request: meta becomes params._meta (none when
// nil) and the standard headers are set from the body, then edit may change
// them.
func MPost(t testing.TB, url, method string, params, meta map[string]any, edit func(http.Header)) *http.Response {
	t.Helper()
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	if meta != nil {
		p["_meta"] = meta
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": p})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", core.Version2026)
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", upstream.HeaderValue(n))
	}
	if edit != nil {
		edit(req.Header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// OKResult reads a successful reply's result into v.
func OKResult(t testing.TB, resp *http.Response, v any) {
	t.Helper()
	r := OneReply(t, resp)
	if r.Error != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, error %+v, want a result", resp.StatusCode, r.Error)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
}
