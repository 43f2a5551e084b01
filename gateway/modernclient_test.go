package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// modernCluster is N replicas on one Redis in front of one upstream of the
// given era.
type modernCluster struct {
	urls []string
	rec  *testupstream.Recorder
	mr   *miniredis.Miniredis
}

func newModernCluster(t *testing.T, replicas int, stateless bool, rules policy.Rules, hybrid time.Duration) *modernCluster {
	t.Helper()
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless, Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	for i := 0; i < replicas; i++ {
		f.add(func(c *Config) { c.Policy = hybridPolicy(rules, hybrid) })
	}
	return &modernCluster{urls: f.urls, rec: rec, mr: f.mr}
}

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

type detailed struct {
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

func decodeDetailed(t *testing.T, r rpcReply) detailed {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var d detailed
	if err := json.Unmarshal(r.Result, &d); err != nil {
		t.Fatalf("decode %s: %v", r.Result, err)
	}
	return d
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

func eras(t *testing.T, fn func(t *testing.T, stateless bool)) {
	for _, stateless := range []bool{true, false} {
		name := "modern-upstream"
		if !stateless {
			name = "legacy-upstream"
		}
		t.Run(name, func(t *testing.T) { fn(t, stateless) })
	}
}

// Test2026AutoFastIsDirect: a fast auto call is answered directly and
// writes nothing to the store (within directWait: no busy machine makes
