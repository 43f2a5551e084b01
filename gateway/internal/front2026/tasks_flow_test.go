package front2026

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// it a task).
func Test2026AutoFastIsDirect(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 1, stateless, nil, gwtest.DirectWait)
		c := &gwtest.ModernClient{T: t, URLs: cl.urls}
		c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "warm"}}) // held session, era detection
		before := len(cl.mr.Keys())
		r := c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "fast"}})
		if text, isErr, _ := gwtest.ResultText(t, r.Result); text != "fast" || isErr {
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
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 2, stateless, nil, 100*time.Millisecond)
		c := &gwtest.ModernClient{T: t, URLs: cl.urls}
		task := c.ToolTask("slow", map[string]any{"seconds": 0.5, "text": "late"})
		d := c.WaitTask(task.TaskID, "completed")
		if text, _, _ := gwtest.ResultText(t, d.Result); text != "slept 0.5 s: late" {
			t.Errorf("result = %q", text)
		}
		if n := cl.rec.Count("slow", testupstream.Called); n != 1 {
			t.Errorf("upstream called %d times, want once", n)
		}
	})
}

func Test2026ElicitationThroughUpdate(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 2, stateless, gwtest.Rules(t, "elicit", policy.Task), time.Second)
		c := &gwtest.ModernClient{T: t, URLs: cl.urls}
		task := c.ToolTask("elicit", map[string]any{})
		d := c.WaitTask(task.TaskID, "input_required")
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
		ack := c.Call("tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{"nope": map[string]any{}}})
		if ack.Error != nil || !strings.Contains(string(ack.Result), `"resultType":"complete"`) {
			t.Fatalf("tasks/update ack = %+v %s", ack.Error, ack.Result)
		}
		ack = c.Call("tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}})
		if ack.Error != nil {
			t.Fatalf("tasks/update: %+v", ack.Error)
		}
		d = c.WaitTask(task.TaskID, "completed")
		if text, _, _ := gwtest.ResultText(t, d.Result); text != "Hello, Ada!" {
			t.Errorf("result = %q", text)
		}
	})
}

// Test2026MRTRRoundBeforeTheTask: a stateless upstream's input_required
// round and the retry's result pass through directly (within gwtest.DirectWait:
// no busy machine makes either a task).
func Test2026MRTRRoundBeforeTheTask(t *testing.T) {
	cl := newModernCluster(t, 1, true, nil, gwtest.DirectWait)
	c := &gwtest.ModernClient{T: t, URLs: cl.urls}
	r := c.Call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}})
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
	r = c.Call("tools/call", params)
	if text, _, _ := gwtest.ResultText(t, r.Result); text != "Hello, Lin!" {
		t.Errorf("retry = %q", text)
	}
}

func Test2026Outcomes(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 1, stateless, gwtest.Rules(t, "*", policy.Task), time.Second)
		c := &gwtest.ModernClient{T: t, URLs: cl.urls}
		// isError stays completed: only JSON-RPC errors fail (SEP-2663).
		d := c.WaitTask(c.ToolTask("fail", map[string]any{}).TaskID, "completed")
		if text, isErr, _ := gwtest.ResultText(t, d.Result); !isErr || text != testupstream.FailText {
			t.Errorf("fail: %q isError=%v", text, isErr)
		}
		if strings.Contains(string(d.Result), core.RelatedTaskKey) {
			t.Errorf("inlined result carries related-task _meta: %s", d.Result)
		}
		d = c.WaitTask(c.ToolTask("rpcerror", map[string]any{}).TaskID, "failed")
		if d.Error == nil || d.Error.Code != testupstream.RPCErrorCode {
			t.Errorf("rpcerror: error = %+v", d.Error)
		}
	})
}

func Test2026CancelAcrossReplicas(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		cl := newModernCluster(t, 2, stateless, gwtest.Rules(t, "slow", policy.Task), time.Second)
		c := &gwtest.ModernClient{T: t, URLs: cl.urls}
		task := c.ToolTask("slow", map[string]any{"seconds": 30})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatal(err)
		}
		ack := c.Call("tasks/cancel", map[string]any{"taskId": task.TaskID})
		if ack.Error != nil || !strings.Contains(string(ack.Result), `"resultType":"complete"`) {
			t.Fatalf("cancel ack = %+v %s", ack.Error, ack.Result)
		}
		c.WaitTask(task.TaskID, "cancelled")
		if err := cl.rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
			t.Errorf("the upstream did not see the cancellation: %v", err)
		}
		// A terminal task gets the same ack.
		if again := c.Call("tasks/cancel", map[string]any{"taskId": task.TaskID}); again.Error != nil {
			t.Errorf("cancel of a cancelled task = %+v", again.Error)
		}
	})
}

func Test2026Errors(t *testing.T) {
	cl := newModernCluster(t, 1, true, gwtest.Rules(t, "slow", policy.TaskRequired), time.Second)
	c := &gwtest.ModernClient{T: t, URLs: cl.urls, Auth: "Bearer a"}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if r := c.Call(m, map[string]any{"taskId": "x"}); r.Error == nil || r.Error.Code != mcpwire.CodeMethodNotFound {
			t.Errorf("%s = %+v, want -32601", m, r.Error)
		}
	}
	if r := c.Call("tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}); r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("unknown task = %+v, want -32602", r.Error)
	}
	noExt := &gwtest.ModernClient{T: t, URLs: cl.urls, NoExt: true}
	r := noExt.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}})
	if r.Error == nil || r.Error.Code != mcpwire.CodeMissingCapability || !strings.Contains(string(r.Error.Data), core.TasksExtension) {
		t.Errorf("required tool without the extension = %+v", r.Error)
	}
	if r := noExt.Call("tasks/get", map[string]any{"taskId": "x"}); r.Error == nil || r.Error.Code != mcpwire.CodeMissingCapability {
		t.Errorf("tasks/get without the extension = %+v", r.Error)
	}
	// Owner isolation: another Authorization cannot see the task.
	task := c.ToolTask("slow", map[string]any{"seconds": 0.1})
	other := &gwtest.ModernClient{T: t, URLs: cl.urls, Auth: "Bearer b"}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		r := other.Call(m, map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
			t.Errorf("%s by another owner = %+v %s", m, r.Error, r.Result)
		}
	}
	c.WaitTask(task.TaskID, "completed")
}

func Test2026Listen(t *testing.T) {
	cl := newModernCluster(t, 2, true, gwtest.Rules(t, "slow", policy.Task), time.Second)
	c := &gwtest.ModernClient{T: t, URLs: cl.urls, Auth: "Bearer me"}
	mine := c.ToolTask("slow", map[string]any{"seconds": 0.3})
	theirs := (&gwtest.ModernClient{T: t, URLs: cl.urls, Auth: "Bearer them"}).ToolTask("slow", map[string]any{"seconds": 0.1})

	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": []string{mine.TaskID, theirs.TaskID}},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": c.Caps()}}})
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
	gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool {
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
		if p.Meta[subscriptionIDKey] != "sub-1" {
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
			if text, _, _ := gwtest.ResultText(t, p.Result); text != "slept 0.3 s: " {
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
	c := &gwtest.ModernClient{T: t, URLs: cl.urls, NoExt: true, Auth: "Bearer bridge"}
	for round := 0; round < 2; round++ {
		r := c.Call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}})
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
		r = c.Call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{},
			"inputResponses": responses, "requestState": ir.RequestState})
		if r.Error != nil {
			t.Fatalf("retry: %+v", r.Error)
		}
		if text, _, _ := gwtest.ResultText(t, r.Result); text != fmt.Sprint("Hello, Ada", round, "!") {
			t.Errorf("retry result = %q", text)
		}
		if !strings.Contains(string(r.Result), `"resultType":"complete"`) {
			t.Errorf("final result lacks resultType: %s", r.Result)
		}
	}
	// Another owner cannot continue someone's call.
	other := &gwtest.ModernClient{T: t, URLs: cl.urls, NoExt: true, Auth: "Bearer other"}
	r := other.Call("tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{},
		"inputResponses": map[string]any{"1": map[string]any{"action": "decline"}}, "requestState": bridgePrefix + "00000000-0000-4000-8000-000000000000"})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("unknown requestState = %+v %s", r.Error, r.Result)
	}
}
