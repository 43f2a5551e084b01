package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestTasksRawHTTP pins, in plain JSON-RPC over HTTP, the parts of 2025-11-25
// tasks that SDK clients hide: the exact capability, taskSupport in
// tools/list, -32601 for refused task augmentation, the CreateTaskResult
// fields, related-task _meta where the spec wants it (tasks/result) and not
// where it does not (tasks/get, tasks/list, tasks/cancel), and -32602 for
// every bad task reference.
func TestTasksRawHTTP(t *testing.T) {
	t.Parallel()
	urls := startTaskDeployment(t, oneReplica, &testupstream.Recorder{})
	s := newRawSession(t, urls[0], "")

	// initialize: the gateway's tasks capability, at 2025-11-25.
	init := s.initialize()
	var ir struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	mustDecode(t, init.Result, &ir)
	if ir.ProtocolVersion != "2025-11-25" {
		t.Errorf("initialize: protocolVersion %q, want 2025-11-25", ir.ProtocolVersion)
	}
	if got, want := canonicalJSON(ir.Capabilities["tasks"]), `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`; got != want {
		t.Errorf("initialize: capabilities.tasks = %s, want %s", got, want)
	}

	// tools/list: execution.taskSupport from the rules.
	var tl struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	mustDecode(t, s.mustResult("tools/list", map[string]any{}), &tl)
	for _, tool := range tl.Tools {
		got := ""
		if tool.Execution != nil {
			got = tool.Execution.TaskSupport
		}
		if want := wantTaskSupport[tool.Name]; got != want {
			t.Errorf("tools/list: %s execution.taskSupport = %q, want %q", tool.Name, got, want)
		}
	}

	// Refused task augmentation.
	s.wantError("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}, "task": map[string]any{"ttl": 1000}}, codeMethodNotFound)
	s.wantError("tools/call", map[string]any{"name": "roots", "arguments": map[string]any{}}, codeMethodNotFound)

	// A task: CreateTaskResult at once, with every field.
	start := time.Now()
	cr := s.mustResult("tools/call", map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": 2, "text": "raw"}, "task": map[string]any{"ttl": taskTTLMs},
	})
	if d := time.Since(start); d > time.Second {
		t.Errorf("CreateTaskResult took %v for a 2 s tool, want it at once", d)
	}
	var created struct {
		Task tsTask `json:"task"`
	}
	mustDecode(t, cr, &created)
	checkNewTask(t, "raw slow", created.Task, taskTTLMs)
	id := created.Task.TaskID

	get := s.mustResult("tasks/get", map[string]any{"taskId": id})
	var tk tsTask
	mustDecode(t, get, &tk)
	if tk.TaskID != id || tk.Status != "working" || tk.CreatedAt != created.Task.CreatedAt {
		t.Errorf("tasks/get = %s, want the working task %s", get, id)
	}
	if hasRelatedTaskMeta(get) {
		t.Errorf("tasks/get result carries related-task _meta (spec: SHOULD NOT): %s", get)
	}

	// tasks/result blocks until done and carries the related-task _meta.
	res := s.mustResult("tasks/result", map[string]any{"taskId": id})
	var cres tsCallResult
	mustDecode(t, res, &cres)
	if cres.text() != "slept 2 s: raw" || cres.IsError {
		t.Errorf("tasks/result = %s, want the upstream's result", res)
	}
	if got := relatedTask(res); got != id {
		t.Errorf("tasks/result _meta related-task = %q, want %q: %s", got, id, res)
	}

	lst := s.mustResult("tasks/list", map[string]any{})
	var page tsListResult
	mustDecode(t, lst, &page)
	if len(page.Tasks) != 1 || page.Tasks[0].TaskID != id || page.Tasks[0].Status != "completed" || page.NextCursor != "" {
		t.Errorf("tasks/list = %s, want just the completed task", lst)
	}
	if hasRelatedTaskMeta(lst) {
		t.Errorf("tasks/list result carries related-task _meta (spec: SHOULD NOT): %s", lst)
	}

	// A JSON-RPC error upstream: the task fails and tasks/result returns
	// exactly that error.
	cr3 := s.mustResult("tools/call", map[string]any{"name": "rpcerror", "arguments": map[string]any{}, "task": map[string]any{}})
	mustDecode(t, cr3, &created)
	rerr := s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID})
	if rerr.Error == nil || rerr.Error.Code != testupstream.RPCErrorCode || rerr.Error.Message != testupstream.RPCErrorMessage ||
		canonicalJSON(rerr.Error.Data) != `{"tool":"rpcerror"}` {
		t.Errorf("tasks/result of rpcerror = result %s error %s, want the upstream's JSON-RPC error", rerr.Result, rerr.Error)
	}
	mustDecode(t, s.mustResult("tasks/get", map[string]any{"taskId": created.Task.TaskID}), &tk)
	if tk.Status != "failed" {
		t.Errorf("rpcerror task status %q, want failed", tk.Status)
	}

	// Bad references: -32602.
	s.wantError("tasks/cancel", map[string]any{"taskId": id}, codeInvalidParams) // terminal
	s.wantError("tasks/list", map[string]any{"cursor": "bogus"}, codeInvalidParams)
	s.wantError("tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}, codeInvalidParams)
	s.wantError("tasks/result", map[string]any{"taskId": "not-a-task"}, codeInvalidParams)
	s.wantError("tasks/get", map[string]any{}, codeInvalidParams)

	// A running task cancelled: the Task comes back, without related-task _meta.
	cr2 := s.mustResult("tools/call", map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": 30}, "task": map[string]any{"ttl": taskTTLMs},
	})
	mustDecode(t, cr2, &created)
	cancelled := s.mustResult("tasks/cancel", map[string]any{"taskId": created.Task.TaskID})
	mustDecode(t, cancelled, &tk)
	if tk.TaskID != created.Task.TaskID || tk.Status != "cancelled" {
		t.Errorf("tasks/cancel = %s, want the Task with status cancelled", cancelled)
	}
	if hasRelatedTaskMeta(cancelled) {
		t.Errorf("tasks/cancel result carries related-task _meta (spec: SHOULD NOT): %s", cancelled)
	}

	// Another session (no Authorization) does not see this session's task.
	other := newRawSession(t, urls[0], "")
	other.initialize()
	other.wantError("tasks/get", map[string]any{"taskId": id}, codeInvalidParams)
	other.wantError("tasks/result", map[string]any{"taskId": id}, codeInvalidParams)
	var op tsListResult
	mustDecode(t, other.mustResult("tasks/list", map[string]any{}), &op)
	if len(op.Tasks) != 0 {
		t.Errorf("another session's tasks/list = %+v, want empty", op.Tasks)
	}
}

// rawSession is a hand-driven 2025-11-25 client session over plain HTTP.
type rawSession struct {
	t    *testing.T
	url  string
	auth string
	sid  string
	hc   *http.Client
	next int
}

func newRawSession(t *testing.T, url, auth string) *rawSession {
	return &rawSession{t: t, url: url, auth: auth, hc: &http.Client{Timeout: 20 * time.Second}}
}

// post sends one JSON-RPC message and returns the HTTP status and every
// JSON-RPC message of the answer (a JSON body or the SSE events' data).
func (s *rawSession) post(msg any) (int, []rpcMsg) {
	s.t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		req.Header.Set("Mcp-Session-Id", s.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if s.auth != "" {
		req.Header.Set("Authorization", s.auth)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && s.sid == "" {
		s.sid = sid
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("POST %s: reading the answer: %v", body, err)
	}
	var raws []json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range parseSSE(data) {
			if b, err := json.Marshal(ev.Data); err == nil && ev.Data != nil {
				raws = append(raws, b)
			}
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		raws = append(raws, data)
	}
	var msgs []rpcMsg
	for _, r := range raws {
		var m rpcMsg
		if json.Unmarshal(r, &m) == nil {
			msgs = append(msgs, m)
		}
	}
	return resp.StatusCode, msgs
}

// call sends a request and returns its response.
func (s *rawSession) call(method string, params any) rpcMsg {
	s.t.Helper()
	s.next++
	id := s.next
	status, msgs := s.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for _, m := range msgs {
		if m.isResponse() && string(m.ID) == fmt.Sprint(id) {
			return m
		}
	}
	s.t.Fatalf("%s: HTTP %d without a response to id %d: %+v", method, status, id, msgs)
	return rpcMsg{}
}

func (s *rawSession) mustResult(method string, params any) json.RawMessage {
	s.t.Helper()
	m := s.call(method, params)
	if m.Error != nil || m.Result == nil {
		s.t.Fatalf("%s %v: error %s", method, params, m.Error)
	}
	return m.Result
}

func (s *rawSession) wantError(method string, params any, code int64) {
	s.t.Helper()
	m := s.call(method, params)
	if m.Error == nil || m.Error.Code != code {
		s.t.Errorf("%s %v = result %s error %s, want JSON-RPC error %d", method, params, m.Result, m.Error, code)
	}
}

// initialize runs the 2025-11-25 handshake and returns the initialize response.
func (s *rawSession) initialize() rpcMsg {
	s.t.Helper()
	m := s.call("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "taskgate-e2e-raw", "version": "1.0.0"},
	})
	if m.Error != nil {
		s.t.Fatalf("initialize: %s", m.Error)
	}
	if s.sid == "" {
		s.t.Fatalf("initialize: no Mcp-Session-Id")
	}
	if status, _ := s.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); status != http.StatusAccepted {
		s.t.Fatalf("notifications/initialized: HTTP %d, want 202", status)
	}
	return m
}

func mustDecode(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
}
