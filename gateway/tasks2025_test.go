package gateway

import (
	"bufio"
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
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

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

func rules(t *testing.T, specs ...any) policy.Rules {
	t.Helper()
	var rs policy.Rules
	for i := 0; i < len(specs); i += 2 {
		r, err := policy.NewRule(specs[i].(string), specs[i+1].(policy.Mode))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
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

type rpcReply struct {
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

// readMessages yields the JSON-RPC messages of a JSON or SSE answer.
func readMessages(t *testing.T, resp *http.Response, each func(rpcReply) bool) {
	t.Helper()
	if err := scanMessages(resp, each); err != nil {
		t.Fatal(err)
	}
}

// scanMessages is readMessages for goroutines: it returns its error.
func scanMessages(resp *http.Response, each func(rpcReply) bool) error {
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m rpcReply
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
		var m rpcReply
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return fmt.Errorf("decode SSE event: %v", err)
		}
		if !each(m) {
			return nil
		}
	}
	return nil
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

type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
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

func resultText(t *testing.T, raw json.RawMessage) (string, bool, string) {
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

func Test2025TaskCompletes(t *testing.T) {
	cl := newCluster(t, 2, rules(t, "*", policy.Task))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()
	task := c.startTask("slow", map[string]any{"seconds": 0.3, "text": "x"}, nil)
	if wt, _ := c.getTask(task.TaskID); wt.Status != "working" {
		t.Errorf("right after create: %s", wt.Status)
	}
	// tasks/result blocks until the task is terminal, then returns exactly
	// the tool's result plus related-task _meta.
	r := c.call("tasks/result", map[string]any{"taskId": task.TaskID})
	if r.Error != nil {
		t.Fatalf("tasks/result: %+v", r.Error)
	}
	text, isErr, related := resultText(t, r.Result)
	if text != "slept 0.3 s: x" || isErr || related != task.TaskID {
		t.Errorf("tasks/result = %q isError=%v related=%q", text, isErr, related)
	}
	c.waitStatus(task.TaskID, "completed")
	if n := cl.rec.Count("slow", testupstream.Completed); n != 1 {
		t.Errorf("upstream ran slow %d times, want 1", n)
	}
}

func Test2025TaskElicitationAcrossReplicas(t *testing.T) {
	cl := newCluster(t, 2, rules(t, "*", policy.Task))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()
	task := c.startTask("elicit", map[string]any{}, nil)
	c.waitStatus(task.TaskID, "input_required")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := c.do(ctx, map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tasks/result", "params": map[string]any{"taskId": task.TaskID}})
	var final rpcReply
	asked := 0
	readMessages(t, resp, func(m rpcReply) bool {
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
			ar := c.do(ctx, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID),
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
	if text, _, _ := resultText(t, final.Result); text != "Hello, Ada!" {
		t.Errorf("result %q", text)
	}
	c.waitStatus(task.TaskID, "completed")
}

func Test2025TaskFailures(t *testing.T) {
	cl := newCluster(t, 1, rules(t, "*", policy.Task))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()

	// isError: failed under 2025-11-25, and tasks/result returns the result.
	task := c.startTask("fail", map[string]any{}, nil)
	c.waitStatus(task.TaskID, "failed")
	r := c.call("tasks/result", map[string]any{"taskId": task.TaskID})
	if text, isErr, _ := resultText(t, r.Result); !isErr || text != testupstream.FailText {
		t.Errorf("fail: %q isError=%v", text, isErr)
	}

	// A JSON-RPC error: failed, and tasks/result returns that error.
	task = c.startTask("rpcerror", map[string]any{}, nil)
	c.waitStatus(task.TaskID, "failed")
	r = c.call("tasks/result", map[string]any{"taskId": task.TaskID})
	if r.Error == nil || r.Error.Code != testupstream.RPCErrorCode || r.Error.Message != testupstream.RPCErrorMessage {
		t.Errorf("rpcerror: tasks/result = %+v %s", r.Error, r.Result)
	}
}

func Test2025TaskCancel(t *testing.T) {
	cl := newCluster(t, 2, rules(t, "*", policy.Task))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()
	task := c.startTask("slow", map[string]any{"seconds": 30}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	r := c.call("tasks/cancel", map[string]any{"taskId": task.TaskID})
	var wt wireTask
	if r.Error != nil || json.Unmarshal(r.Result, &wt) != nil || wt.Status != "cancelled" {
		t.Fatalf("tasks/cancel = %+v %s", r.Error, r.Result)
	}
	if err := cl.rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Errorf("the upstream did not see the cancellation: %v", err)
	}
	r = c.call("tasks/cancel", map[string]any{"taskId": task.TaskID})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams || !strings.Contains(r.Error.Message, "cancelled") {
		t.Errorf("second cancel = %+v", r.Error)
	}
	c.waitStatus(task.TaskID, "cancelled")
}

func Test2025TaskOwners(t *testing.T) {
	cl := newCluster(t, 1, rules(t, "*", policy.Task))
	alice := &mcpClient{t: t, urls: cl.urls, auth: "Bearer alice"}
	alice.initialize()
	task := alice.startTask("echo", map[string]any{"text": "secret"}, nil)
	alice.waitStatus(task.TaskID, "completed")

	mallory := &mcpClient{t: t, urls: cl.urls, auth: "Bearer mallory"}
	mallory.initialize()
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		r := mallory.call(m, map[string]any{"taskId": task.TaskID})
		if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams || r.Error.Message != "Failed to retrieve task: Task not found" {
			t.Errorf("%s by another owner = %+v %s", m, r.Error, r.Result)
		}
	}
	r := mallory.call("tasks/list", map[string]any{})
	if r.Error != nil || strings.Contains(string(r.Result), task.TaskID) {
		t.Errorf("tasks/list by another owner leaks: %s", r.Result)
	}
	r = alice.call("tasks/list", map[string]any{})
	if !strings.Contains(string(r.Result), task.TaskID) {
		t.Errorf("tasks/list misses the owner's task: %s", r.Result)
	}
	r = alice.call("tasks/list", map[string]any{"cursor": "not-a-cursor"})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("bad cursor = %+v", r.Error)
	}
	r = alice.call("tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("unknown task = %+v", r.Error)
	}
}

func Test2025ToolNegotiation(t *testing.T) {
	cl := newCluster(t, 1, rules(t, "slow", policy.TaskRequired, "echo", policy.Sync))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()
	r := c.call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("required tool without task = %+v", r.Error)
	}
	r = c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "a"}, "task": map[string]any{}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("task on a --sync tool = %+v", r.Error)
	}
	// No rule, and the upstream declares no taskSupport: forbidden.
	r = c.call("tools/call", map[string]any{"name": "fail", "arguments": map[string]any{}, "task": map[string]any{}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
		t.Errorf("task on an undeclared tool = %+v", r.Error)
	}
	// A sync tool without task passes straight through.
	r = c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "plain"}})
	if text, _, _ := resultText(t, r.Result); text != "plain" {
		t.Errorf("sync call = %q", text)
	}
}

func Test2025ProgressOnGetStream(t *testing.T) {
	cl := newCluster(t, 2, rules(t, "*", policy.Task))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The GET stream on replica 0, the task on replica 1.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cl.urls[0], nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	get, err := http.DefaultClient.Do(req)
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, get.Status)
	}
	seen := make(chan rpcReply, 64)
	go scanMessages(get, func(m rpcReply) bool { seen <- m; return true })
	time.Sleep(100 * time.Millisecond) // let the stream subscribe
	c.next.Store(0)                    // next request → replica 1
	task := c.startTask("progress", map[string]any{"steps": 3, "delayMs": 50}, map[string]any{"progressToken": "p-1"})

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
				var wt wireTask
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
	cl := newCluster(t, 2, rules(t, "*", policy.Task))
	c := &mcpClient{t: t, urls: cl.urls}
	c.initialize()
	for round := 0; round < 5; round++ {
		task := c.startTask("progress", map[string]any{"steps": 4, "delayMs": 20}, map[string]any{"progressToken": "tok"})
		progress := 0
		var final rpcReply
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		readMessages(t, c.do(ctx, map[string]any{"jsonrpc": "2.0", "id": "res", "method": "tasks/result",
			"params": map[string]any{"taskId": task.TaskID}}), func(m rpcReply) bool {
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
		if text, _, _ := resultText(t, final.Result); text != "done 4" {
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

// rulesPolicy is a fixed policy of rules rs, the policy package's defaults
// for the rest.
func rulesPolicy(rs policy.Rules) *policy.Current {
	return policy.NewCurrent(&policy.Config{Rules: rs})
}

// hybridPolicy is rulesPolicy with a hybrid wait.
func hybridPolicy(rs policy.Rules, wait time.Duration) *policy.Current {
	return policy.NewCurrent(&policy.Config{Rules: rs, HybridWait: wait})
}
