package testupstream

// Native 2026-07-28 tasks (the tasks extension, io.modelcontextprotocol/tasks):
// a stateless upstream that runs some tools as tasks of its own, as FastMCP,
// rmcp, the C# SDK or mcpkit do. No Go SDK has the extension, so it is a
// layer in front of the go-sdk's stateless handler, written from the
// extension's spec:
//
//   - server/discover declares the extension in capabilities.extensions;
//   - a tools/call of a NativeTaskTools tool from a client that declares the
//     extension is answered at once with a CreateTaskResult (resultType
//     "task"); a NativeRequiredTools tool from one that does not gets -32021; the tool runs in the background through the go-sdk handler,
//     its MRTR rounds (input_required) becoming the task's inputRequests;
//   - tasks/get answers the DetailedTask (result, error or inputRequests
//     inlined); tasks/update feeds inputResponses to the next round;
//     tasks/cancel cancels the run (the tool sees its context end);
//   - everything else goes to the go-sdk handler as it is.
//
// A client that does not declare the extension never gets a task (the
// extension's "Capability Negotiation"). Tasks live in memory, 60 s each.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// TasksExtension is the tasks extension's identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

// NativeTaskTools are the tools a NativeTasks upstream runs as tasks.
var NativeTaskTools = map[string]bool{"slow": true, "elicit": true, "elicit2": true, "fail": true, "rpcerror": true}

// NativeRequiredTools are the NativeTaskTools a NativeTasks upstream runs
// only as tasks: a client that does not declare the extension gets -32021
// naming it (SEP-2663, "Capability Negotiation").
var NativeRequiredTools = map[string]bool{"elicit2": true}

// NativeTaskTTL is the ttlMs of a NativeTasks upstream's tasks.
const NativeTaskTTL = 60 * time.Second

type nativeTask struct {
	id, created   string
	status        string
	message       string
	updated       string
	result, error json.RawMessage
	inputRequests json.RawMessage // outstanding, while input_required
	requestState  json.RawMessage
	responses     map[string]json.RawMessage
	params        map[string]json.RawMessage // the call's params, _meta and all
	host          string
	header        http.Header
	cancel        context.CancelFunc
}

type nativeTasks struct {
	inner http.Handler
	mu    sync.Mutex
	tasks map[string]*nativeTask
}

func withNativeTasks(inner http.Handler) http.Handler {
	return &nativeTasks{inner: inner, tasks: map[string]*nativeTask{}}
}

type rpcMessage struct {
	ID     json.RawMessage            `json:"id"`
	Method string                     `json:"method"`
	Params map[string]json.RawMessage `json:"params"`
}

func (n *nativeTasks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		n.inner.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m rpcMessage
	if json.Unmarshal(body, &m) != nil || m.ID == nil {
		n.pass(w, r, body)
		return
	}
	switch m.Method {
	case "server/discover":
		n.discover(w, r, body, m)
	case "tools/call":
		var name string
		_ = json.Unmarshal(m.Params["name"], &name)
		if NativeRequiredTools[name] && !declaresExtension(m.Params) {
			writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
				"code": -32021, "message": "Missing required client capability: " + name + " runs only as a task",
				"data": map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}}}})
			return
		}
		if !NativeTaskTools[name] || !declaresExtension(m.Params) {
			n.pass(w, r, body)
			return
		}
		n.create(w, r, m)
	case "tasks/get", "tasks/update", "tasks/cancel":
		n.taskRequest(w, m)
	default:
		n.pass(w, r, body)
	}
}

func (n *nativeTasks) pass(w http.ResponseWriter, r *http.Request, body []byte) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	n.inner.ServeHTTP(w, r2)
}

// declaresExtension reports whether a request's client capabilities
// declare the tasks extension.
func declaresExtension(params map[string]json.RawMessage) bool {
	var meta struct {
		Caps struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	_ = json.Unmarshal(params["_meta"], &meta)
	_, ok := meta.Caps.Extensions[TasksExtension]
	return ok
}

// innerCall sends body to the go-sdk handler and returns its JSON-RPC
// response (JSON, or the response event of an SSE answer).
func (n *nativeTasks) innerCall(ctx context.Context, host string, header http.Header, body []byte) (json.RawMessage, int) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(body))
	req.Host = host // the go-sdk checks it (DNS rebinding protection)
	req.Header = header.Clone()
	req.Header.Del("Content-Length")
	rec := httptest.NewRecorder()
	n.inner.ServeHTTP(rec, req)
	out := rec.Body.Bytes()
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
		var resp json.RawMessage
		for _, line := range strings.Split(string(out), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var probe struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(data), &probe) == nil && probe.ID != nil && probe.Method == "" {
				resp = json.RawMessage(data)
			}
		}
		return resp, rec.Code
	}
	return out, rec.Code
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (n *nativeTasks) discover(w http.ResponseWriter, r *http.Request, body []byte, m rpcMessage) {
	resp, code := n.innerCall(r.Context(), r.Host, r.Header, body)
	var msg struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if code != http.StatusOK || json.Unmarshal(resp, &msg) != nil || msg.Result == nil {
		w.WriteHeader(code)
		_, _ = w.Write(resp)
		return
	}
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(msg.Result["capabilities"], &caps)
	ext := map[string]json.RawMessage{}
	_ = json.Unmarshal(caps["extensions"], &ext)
	ext[TasksExtension] = json.RawMessage(`{}`)
	caps["extensions"], _ = json.Marshal(ext)
	msg.Result["capabilities"], _ = json.Marshal(caps)
	writeResult(w, m.ID, msg.Result)
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (n *nativeTasks) create(w http.ResponseWriter, r *http.Request, m rpcMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), NativeTaskTTL)
	t := &nativeTask{id: uuid.NewString(), created: now(), status: "working", params: m.Params,
		host: r.Host, header: r.Header.Clone(), cancel: cancel, responses: map[string]json.RawMessage{}}
	t.updated = t.created
	n.mu.Lock()
	n.tasks[t.id] = t
	view := n.view(t, false)
	n.mu.Unlock()
	go n.run(ctx, t)
	writeResult(w, m.ID, view)
}

// run runs the task's tool through the go-sdk handler, one MRTR round at a
// time, until it ends or waits for input.
func (n *nativeTasks) run(ctx context.Context, t *nativeTask) {
	n.mu.Lock()
	params := map[string]json.RawMessage{}
	for k, v := range t.params {
		params[k] = v
	}
	if len(t.responses) > 0 {
		params["inputResponses"], _ = json.Marshal(t.responses)
		params["requestState"] = t.requestState
	}
	n.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "native-" + t.id, "method": "tools/call", "params": params})
	resp, _ := n.innerCall(ctx, t.host, t.header, body)
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(resp, &msg)
	var round struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  json.RawMessage `json:"requestState"`
	}
	_ = json.Unmarshal(msg.Result, &round)
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.status == "cancelled" {
		return
	}
	t.updated = now()
	switch {
	case ctx.Err() != nil:
		t.status, t.message = "failed", "the task outlived its ttl"
		t.error = json.RawMessage(`{"code":-32603,"message":"the task outlived its ttl"}`)
	case len(msg.Error) > 0:
		t.status, t.error = "failed", msg.Error
	case round.ResultType == "input_required":
		t.status, t.inputRequests, t.requestState = "input_required", round.InputRequests, round.RequestState
		t.responses = map[string]json.RawMessage{}
		return
	case len(msg.Result) > 0:
		t.status, t.result = "completed", msg.Result
	default:
		t.status, t.message = "failed", "the tool gave no answer"
		t.error = json.RawMessage(`{"code":-32603,"message":"the tool gave no answer"}`)
	}
	t.cancel()
}

// view is the task as the extension shows it: a CreateTaskResult, or with
// detailed set the DetailedTask of tasks/get. Called with n.mu held.
func (n *nativeTasks) view(t *nativeTask, detailed bool) map[string]any {
	v := map[string]any{"resultType": "task", "taskId": t.id, "status": t.status, "createdAt": t.created,
		"lastUpdatedAt": t.updated, "ttlMs": NativeTaskTTL.Milliseconds(), "pollIntervalMs": 100}
	if t.message != "" {
		v["statusMessage"] = t.message
	}
	if !detailed {
		return v
	}
	v["resultType"] = "complete"
	switch t.status {
	case "completed":
		v["result"] = t.result
	case "failed":
		v["error"] = t.error
	case "input_required":
		v["inputRequests"] = t.inputRequests
	}
	return v
}

func (n *nativeTasks) taskRequest(w http.ResponseWriter, m rpcMessage) {
	var id string
	_ = json.Unmarshal(m.Params["taskId"], &id)
	n.mu.Lock()
	t := n.tasks[id]
	if t == nil {
		n.mu.Unlock()
		writeRPCError(w, m.ID, -32602, "Task not found: "+id)
		return
	}
	switch m.Method {
	case "tasks/get":
		v := n.view(t, true)
		n.mu.Unlock()
		writeResult(w, m.ID, v)
		return
	case "tasks/cancel":
		if t.status == "working" || t.status == "input_required" {
			t.status, t.message, t.updated = "cancelled", "cancelled by request", now()
			t.cancel()
		}
	case "tasks/update":
		var got map[string]json.RawMessage
		_ = json.Unmarshal(m.Params["inputResponses"], &got)
		var outstanding map[string]json.RawMessage
		_ = json.Unmarshal(t.inputRequests, &outstanding)
		for k, v := range got {
			if _, ok := outstanding[k]; ok && t.status == "input_required" {
				t.responses[k] = v
			}
		}
		if t.status == "input_required" && len(t.responses) == len(outstanding) {
			t.status, t.inputRequests, t.updated = "working", nil, now()
			ctx, cancel := context.WithTimeout(context.Background(), NativeTaskTTL)
			t.cancel = cancel
			go n.run(ctx, t)
		}
	}
	n.mu.Unlock()
	writeResult(w, m.ID, map[string]any{"resultType": "complete"})
}
