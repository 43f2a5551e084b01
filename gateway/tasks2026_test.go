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
	"github.com/taskgate/taskgate/gateway/internal/front2026"
	"github.com/taskgate/taskgate/internal/mcpwire"
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
// it a task).
func Test2026AutoFastIsDirect(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 1, stateless, nil, directWait)
		c := &modernClient{t: t, urls: cl.urls}
		c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "warm"}}) // held session, era detection
		before := len(cl.mr.Keys())
		r := c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "fast"}})
		if text, isErr, _ := resultText(t, r.Result); text != "fast" || isErr {
			t.Fatalf("echo = %q", text)
		}
		var rt struct {
			ResultType string `json:"resultType"`
		}
		_ = json.Unmarshal(r.Result, &rt)
		if rt.ResultType != "complete" {
			t.Errorf("resultType = %q, want complete", rt.ResultType)
		}
		if after := len(cl.mr.Keys()); after != before {
			t.Errorf("a fast auto call wrote to Redis: %d keys before, %d after", before, after)
		}
	})
}

func Test2026AutoSlowBecomesTask(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 2, stateless, nil, 100*time.Millisecond)
		c := &modernClient{t: t, urls: cl.urls}
		task := c.toolTask("slow", map[string]any{"seconds": 0.5, "text": "late"})
		d := c.waitTask(task.TaskID, "completed")
		if text, _, _ := resultText(t, d.Result); text != "slept 0.5 s: late" {
			t.Errorf("result = %q", text)
		}
		if n := cl.rec.Count("slow", testupstream.Called); n != 1 {
			t.Errorf("upstream called %d times, want once", n)
		}
	})
}

func Test2026ElicitationThroughUpdate(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 2, stateless, rules(t, "elicit", policy.Task), time.Second)
		c := &modernClient{t: t, urls: cl.urls}
		task := c.toolTask("elicit", map[string]any{})
		d := c.waitTask(task.TaskID, "input_required")
		if len(d.InputRequests) != 1 {
			t.Fatalf("inputRequests = %+v", d.InputRequests)
		}
		var key string
		for k, in := range d.InputRequests {
			key = k
			if in.Method != "elicitation/create" || !strings.Contains(string(in.Params), "What is your name?") {
				t.Errorf("input request %s = %s %s", k, in.Method, in.Params)
			}
		}
		// A partial or unknown answer is fine and ignored.
		ack := c.call("tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{"nope": map[string]any{}}})
		if ack.Error != nil || !strings.Contains(string(ack.Result), `"resultType":"complete"`) {
			t.Fatalf("tasks/update ack = %+v %s", ack.Error, ack.Result)
		}
		ack = c.call("tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}})
		if ack.Error != nil {
			t.Fatalf("tasks/update: %+v", ack.Error)
		}
		d = c.waitTask(task.TaskID, "completed")
		if text, _, _ := resultText(t, d.Result); text != "Hello, Ada!" {
			t.Errorf("result = %q", text)
		}
	})
}

// Test2026MRTRRoundBeforeTheTask: a stateless upstream's input_required
// round and the retry's result pass through directly (within directWait:
// no busy machine makes either a task).
func Test2026MRTRRoundBeforeTheTask(t *testing.T) {
	cl := newModernCluster(t, 1, true, nil, directWait)
	c := &modernClient{t: t, urls: cl.urls}
	r := c.call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}})
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("auto elicit: want the upstream's input_required round passed through, got %+v %s", r.Error, r.Result)
	}
	responses := map[string]any{}
	for k := range ir.InputRequests {
		responses[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "Lin"}}
	}
	params := map[string]any{"name": "elicit", "arguments": map[string]any{}, "inputResponses": responses}
	if ir.RequestState != "" {
		params["requestState"] = ir.RequestState
	}
	r = c.call("tools/call", params)
	if text, _, _ := resultText(t, r.Result); text != "Hello, Lin!" {
		t.Errorf("retry = %q", text)
	}
}

func Test2026Outcomes(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 1, stateless, rules(t, "*", policy.Task), time.Second)
		c := &modernClient{t: t, urls: cl.urls}
		// isError stays completed: only JSON-RPC errors fail (SEP-2663).
		d := c.waitTask(c.toolTask("fail", map[string]any{}).TaskID, "completed")
		if text, isErr, _ := resultText(t, d.Result); !isErr || text != testupstream.FailText {
			t.Errorf("fail: %q isError=%v", text, isErr)
		}
		if strings.Contains(string(d.Result), core.RelatedTaskKey) {
			t.Errorf("inlined result carries related-task _meta: %s", d.Result)
		}
		d = c.waitTask(c.toolTask("rpcerror", map[string]any{}).TaskID, "failed")
		if d.Error == nil || d.Error.Code != testupstream.RPCErrorCode {
			t.Errorf("rpcerror: error = %+v", d.Error)
		}
	})
}

func Test2026CancelAcrossReplicas(t *testing.T) {
	eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 2, stateless, rules(t, "slow", policy.Task), time.Second)
		c := &modernClient{t: t, urls: cl.urls}
		task := c.toolTask("slow", map[string]any{"seconds": 30})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatal(err)
		}
		ack := c.call("tasks/cancel", map[string]any{"taskId": task.TaskID})
		if ack.Error != nil || !strings.Contains(string(ack.Result), `"resultType":"complete"`) {
			t.Fatalf("cancel ack = %+v %s", ack.Error, ack.Result)
		}
		c.waitTask(task.TaskID, "cancelled")
		if err := cl.rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
			t.Errorf("the upstream did not see the cancellation: %v", err)
		}
		// A terminal task gets the same ack.
		if again := c.call("tasks/cancel", map[string]any{"taskId": task.TaskID}); again.Error != nil {
			t.Errorf("cancel of a cancelled task = %+v", again.Error)
		}
	})
}

func Test2026Errors(t *testing.T) {
	cl := newModernCluster(t, 1, true, rules(t, "slow", policy.TaskRequired), time.Second)
	c := &modernClient{t: t, urls: cl.urls, auth: "Bearer a"}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if r := c.call(m, map[string]any{"taskId": "x"}); r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
			t.Errorf("%s = %+v, want -32601", m, r.Error)
		}
	}
	if r := c.call("tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("unknown task = %+v, want -32602", r.Error)
	}
	noExt := &modernClient{t: t, urls: cl.urls, noExt: true}
	r := noExt.call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMissingCapability || !strings.Contains(string(r.Error.Data), core.TasksExtension) {
		t.Errorf("required tool without the extension = %+v", r.Error)
	}
	if r := noExt.call("tasks/get", map[string]any{"taskId": "x"}); r.Error == nil || r.Error.Code != mcpwire.CodeMissingCapability {
		t.Errorf("tasks/get without the extension = %+v", r.Error)
	}
	// Owner isolation: another Authorization cannot see the task.
	task := c.toolTask("slow", map[string]any{"seconds": 0.1})
	other := &modernClient{t: t, urls: cl.urls, auth: "Bearer b"}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		r := other.call(m, map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
			t.Errorf("%s by another owner = %+v %s", m, r.Error, r.Result)
		}
	}
	c.waitTask(task.TaskID, "completed")
}

func Test2026Listen(t *testing.T) {
	cl := newModernCluster(t, 2, true, rules(t, "slow", policy.Task), time.Second)
	c := &modernClient{t: t, urls: cl.urls, auth: "Bearer me"}
	mine := c.toolTask("slow", map[string]any{"seconds": 0.3})
	theirs := (&modernClient{t: t, urls: cl.urls, auth: "Bearer them"}).toolTask("slow", map[string]any{"seconds": 0.1})

	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": []string{mine.TaskID, theirs.TaskID}},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": c.caps()}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cl.urls[0], strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("Authorization", "Bearer me")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := true
	readMessages(t, resp, func(m rpcReply) bool {
		var p struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
			TaskID string          `json:"taskId"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
			Meta   map[string]any  `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Meta[front2026.SubscriptionIDKey] != "sub-1" {
			t.Errorf("%s without the subscription id: %s", m.Method, m.Params)
		}
		if first {
			first = false
			if m.Method != "notifications/subscriptions/acknowledged" || len(p.Notifications.TaskIDs) != 1 || p.Notifications.TaskIDs[0] != mine.TaskID {
				t.Fatalf("first message = %s %s, want the acknowledgement granting only my task", m.Method, m.Params)
			}
			return true
		}
		if m.Method != "notifications/tasks" || p.TaskID != mine.TaskID {
			t.Fatalf("unexpected %s %s", m.Method, m.Params)
		}
		if p.Status == "completed" {
			if text, _, _ := resultText(t, p.Result); text != "slept 0.3 s: " {
				t.Errorf("notification result = %q", text)
			}
			return false
		}
		return true
	})
	if first {
		t.Fatal("no acknowledgement")
	}
}

// TestBridgeElicitationForPlain2026Calls: a 2026-07-28 client without the
// tasks extension, in front of a legacy upstream that elicits during a
// plain call, gets MRTR rounds; its retries may land on any replica.
func TestBridgeElicitationForPlain2026Calls(t *testing.T) {
	cl := newModernCluster(t, 2, false, nil, time.Second)
	c := &modernClient{t: t, urls: cl.urls, noExt: true, auth: "Bearer bridge"}
	for round := 0; round < 2; round++ {
		r := c.call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}})
		var ir struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Method string `json:"method"`
			} `json:"inputRequests"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || ir.RequestState == "" {
			t.Fatalf("plain elicit on a legacy upstream = %+v %s, want an input_required round", r.Error, r.Result)
		}
		responses := map[string]any{}
		for k, in := range ir.InputRequests {
			if in.Method != "elicitation/create" {
				t.Errorf("input request %s is %s", k, in.Method)
			}
			responses[k] = map[string]any{"action": "accept", "content": map[string]any{"name": fmt.Sprint("Ada", round)}}
		}
		r = c.call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{},
			"inputResponses": responses, "requestState": ir.RequestState})
		if r.Error != nil {
			t.Fatalf("retry: %+v", r.Error)
		}
		if text, _, _ := resultText(t, r.Result); text != fmt.Sprint("Hello, Ada", round, "!") {
			t.Errorf("retry result = %q", text)
		}
		if !strings.Contains(string(r.Result), `"resultType":"complete"`) {
			t.Errorf("final result lacks resultType: %s", r.Result)
		}
	}
	// Another owner cannot continue someone's call.
	other := &modernClient{t: t, urls: cl.urls, noExt: true, auth: "Bearer other"}
	r := other.call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{},
		"inputResponses": map[string]any{"1": map[string]any{"action": "decline"}}, "requestState": front2026.BridgePrefix + "00000000-0000-4000-8000-000000000000"})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("unknown requestState = %+v %s", r.Error, r.Result)
	}
}
