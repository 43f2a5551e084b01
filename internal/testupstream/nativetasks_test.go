package testupstream_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// modernPost sends one 2026-07-28 request; ext declares the tasks extension.
func modernPost(t *testing.T, url, method string, params map[string]any, ext bool) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{}}
	if ext {
		caps["extensions"] = map[string]any{testupstream.TasksExtension: map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "unit", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				raw = []byte(d)
			}
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, raw)
	}
	return msg.Result, msg.Error
}

func waitNative(t *testing.T, url, id string, until func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, e := modernPost(t, url, "tasks/get", map[string]any{"taskId": id}, true)
		if e != nil {
			t.Fatalf("tasks/get: %v", e)
		}
		if until(res) {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: last %v", id, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNativeTasksExtension: the NativeTasks upstream follows the tasks
// extension: declared in server/discover; a task for a client that
// declares it, none for one that does not; input through inputRequests and
// tasks/update; cancel; unknown ids refused.
func TestNativeTasksExtension(t *testing.T) {
	srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true, NativeTasks: true}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"

	disc, e := modernPost(t, url, "server/discover", nil, false)
	if e != nil || !strings.Contains(mustJSON(disc["capabilities"]), testupstream.TasksExtension) {
		t.Fatalf("server/discover = %v %v, want the tasks extension", disc, e)
	}

	plain, _ := modernPost(t, url, "tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}}, false)
	if plain["resultType"] != "input_required" {
		t.Errorf("without the extension: %v, want an MRTR round", plain)
	}

	created, e := modernPost(t, url, "tools/call", map[string]any{"name": "elicit", "arguments": map[string]any{}}, true)
	if e != nil || created["resultType"] != "task" || created["status"] != "working" {
		t.Fatalf("with the extension: %v %v, want a CreateTaskResult", created, e)
	}
	id := created["taskId"].(string)
	ir := waitNative(t, url, id, func(r map[string]any) bool { return r["status"] != "working" })
	reqs, _ := ir["inputRequests"].(map[string]any)
	if ir["status"] != "input_required" || reqs["name"] == nil || ir["resultType"] != "complete" {
		t.Fatalf("tasks/get = %v, want input_required with the name question", ir)
	}
	if ack, e := modernPost(t, url, "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}, true); e != nil || ack["resultType"] != "complete" {
		t.Fatalf("tasks/update = %v %v", ack, e)
	}
	done := waitNative(t, url, id, func(r map[string]any) bool { return r["status"] != "working" })
	if done["status"] != "completed" || !strings.Contains(mustJSON(done["result"]), "Hello, Ada!") {
		t.Errorf("after the answer: %v", done)
	}

	failed, _ := modernPost(t, url, "tools/call", map[string]any{"name": "rpcerror", "arguments": map[string]any{}}, true)
	got := waitNative(t, url, failed["taskId"].(string), func(r map[string]any) bool { return r["status"] != "working" })
	if got["status"] != "failed" || !strings.Contains(mustJSON(got["error"]), testupstream.RPCErrorMessage) {
		t.Errorf("rpcerror task: %v", got)
	}

	slow, _ := modernPost(t, url, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30}}, true)
	if _, e := modernPost(t, url, "tasks/cancel", map[string]any{"taskId": slow["taskId"]}, true); e != nil {
		t.Fatalf("tasks/cancel: %v", e)
	}
	if got := waitNative(t, url, slow["taskId"].(string), func(map[string]any) bool { return true }); got["status"] != "cancelled" {
		t.Errorf("after cancel: %v", got)
	}
	if _, e := modernPost(t, url, "tasks/get", map[string]any{"taskId": "nope"}, true); e == nil || e["code"] != float64(-32602) {
		t.Errorf("unknown task: %v", e)
	}
	if echo, _ := modernPost(t, url, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, true); echo["resultType"] == "task" {
		t.Errorf("echo became a task: %v", echo)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
