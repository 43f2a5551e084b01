package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// A hand-driven 2026-07-28 client over raw HTTP (SEP-2575 stateless
// requests, SEP-2663 tasks extension), for the tests in tasks2026_test.go:
// every request carries the protocol version, client info and client
// capabilities in params._meta and the MCP-Protocol-Version, Mcp-Method and
// Mcp-Name headers; nothing is hidden by an SDK.

const (
	modernVersion          = "2026-07-28"
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCaps         = "io.modelcontextprotocol/clientCapabilities"
	subscriptionIDKey      = "io.modelcontextprotocol/subscriptionId"
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

// upstreamEras are the two go-sdk upstreams, neither with task support: a
// modern stateless one and a legacy (session) one.
var upstreamEras = []struct {
	name      string
	stateless bool
}{{"modern-upstream", true}, {"legacy-upstream", false}}

// modernDeployment is an upstream (recording into rec) and the gateways in
// front of it.
type modernDeployment struct {
	rec  *testupstream.Recorder
	urls []string
}

// startModernDeployment starts a fresh upstream of the given era, with the
// elicit2 tool, and replicas taskgate processes in front of it with flags;
// more than one replica share a real redis-server.
func startModernDeployment(t *testing.T, stateless bool, replicas int, flags ...string) *modernDeployment {
	t.Helper()
	d := &modernDeployment{rec: &testupstream.Recorder{}}
	up := newUpstream(t, testupstream.Options{Stateless: stateless, Elicit2: true, Recorder: d.rec})
	args := slices.Clone(flags)
	if replicas > 1 {
		args = append(args, "--redis-url", "redis://"+redistest.Start(t))
	}
	for range replicas {
		d.urls = append(d.urls, startGateway(t, up, args...).URL)
	}
	return d
}

// waitCalls waits (at most 5 s) until tool was entered upstream n times and
// returns how often it was.
func (d *modernDeployment) waitCalls(t *testing.T, tool string, kind testupstream.EventKind, n int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.rec.WaitFor(ctx, tool, kind, n)
	return d.rec.Count(tool, kind)
}

// mClient is one 2026-07-28 client identity.
type mClient struct {
	t    *testing.T
	urls []string // the replicas; every call names the one it goes to
	auth string   // Authorization, "" for none
	ext  bool     // declares the tasks extension
	hc   *http.Client
	ids  *atomic.Int64
}

func newMClient(t *testing.T, urls []string, auth string, ext bool) *mClient {
	return &mClient{t: t, urls: urls, auth: auth, ext: ext, hc: &http.Client{Timeout: 20 * time.Second}, ids: new(atomic.Int64)}
}

// on returns the same client reporting to t, for use in a subtest.
func (c *mClient) on(t *testing.T) *mClient {
	cc := *c
	cc.t = t
	return &cc
}

// caps are the client capabilities it declares: form elicitation, and the
// tasks extension when ext.
func (c *mClient) caps() map[string]any {
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if c.ext {
		caps["extensions"] = map[string]any{tasksExtensionID: map[string]any{}}
	}
	return caps
}

// mReq is one request before it is sent, for tests that break it.
type mReq struct {
	ID     int64
	Method string
	Body   map[string]any // the JSON-RPC request
	Header http.Header
}

// params is the request's params object.
func (r *mReq) params() map[string]any { return r.Body["params"].(map[string]any) }

// meta is the request's params._meta.
func (r *mReq) meta() map[string]any { return r.params()["_meta"].(map[string]any) }

// build makes a well-formed request: params plus the per-request _meta
// (merged with any _meta in params), and the headers mirroring the body.
func (c *mClient) build(method string, params map[string]any) *mReq {
	p := maps.Clone(params)
	if p == nil {
		p = map[string]any{}
	}
	meta := map[string]any{
		metaProtocolVersion: modernVersion,
		metaClientInfo:      map[string]any{"name": "taskgate-e2e-modern", "version": "1.0.0"},
		metaClientCaps:      c.caps(),
	}
	if m, ok := params["_meta"].(map[string]any); ok {
		maps.Copy(meta, m)
	}
	p["_meta"] = meta
	id := c.ids.Add(1)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", modernVersion)
	h.Set("Mcp-Method", method)
	switch method {
	case "tools/call":
		h.Set("Mcp-Name", fmt.Sprint(p["name"]))
	case "tasks/get", "tasks/update", "tasks/cancel":
		h.Set("Mcp-Name", fmt.Sprint(p["taskId"])) // SEP-2663 "Routing Headers": MUST
	}
	if c.auth != "" {
		h.Set("Authorization", c.auth)
	}
	return &mReq{ID: id, Method: method, Header: h,
		Body: map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p}}
}

// mReply is the answer to one request.
type mReply struct {
	Status      int
	ContentType string
	Msgs        []rpcMsg // every JSON-RPC message of the answer, in order
	rpcMsg               // the response to the request; zero if none came
}

func (r mReply) String() string {
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d error %s", r.Status, r.Error)
	}
	return fmt.Sprintf("HTTP %d result %s", r.Status, r.Result)
}

// send POSTs r to replica i and reads the whole answer (a JSON body or an
// SSE stream up to its end).
func (c *mClient) send(i int, r *mReq) mReply {
	c.t.Helper()
	out, err := c.trySend(i, r)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// trySend is send that returns a transport failure (a replica that is
// down, a connection cut mid-answer) instead of failing the test; it never
// touches c.t, so any goroutine may call it.
func (c *mClient) trySend(i int, r *mReq) (mReply, error) {
	body, _ := json.Marshal(r.Body)
	req, _ := http.NewRequest(http.MethodPost, c.urls[i], bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := c.hc.Do(req)
	if err != nil {
		return mReply{}, fmt.Errorf("%s to replica %d: %w", r.Method, i, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return mReply{}, fmt.Errorf("%s to replica %d: reading the answer: %w", r.Method, i, err)
	}
	out := mReply{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	out.Msgs = answerMessages(out.ContentType, data)
	for _, m := range out.Msgs {
		if m.isResponse() && string(m.ID) == fmt.Sprint(r.ID) {
			out.rpcMsg = m
		}
	}
	return out, nil
}

// answerMessages are the JSON-RPC messages of an answer's body: its events'
// data for an SSE stream, else the body itself.
func answerMessages(contentType string, data []byte) []rpcMsg {
	var raws []json.RawMessage
	if strings.HasPrefix(contentType, "text/event-stream") {
		for _, ev := range parseSSE(data) {
			if b, err := json.Marshal(ev.Data); err == nil && ev.Data != nil {
				raws = append(raws, b)
			}
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		raws = append(raws, data)
	}
	var out []rpcMsg
	for _, raw := range raws {
		var m rpcMsg
		if json.Unmarshal(raw, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// call sends a well-formed request to replica i.
func (c *mClient) call(i int, method string, params map[string]any) mReply {
	c.t.Helper()
	return c.send(i, c.build(method, params))
}

// ok calls and returns the result, failing the test on anything but an
// HTTP 200 result.
func (c *mClient) ok(i int, method string, params map[string]any) json.RawMessage {
	c.t.Helper()
	r := c.call(i, method, params)
	if r.Status != http.StatusOK || r.Error != nil || r.Result == nil {
		c.t.Fatalf("%s %v on replica %d: %s, want an HTTP 200 result", method, params, i, r)
	}
	return r.Result
}

// mTask is a CreateTaskResult, a tasks/get result or notifications/tasks
// params: the SEP-2663 Task, with the status payload when detailed.
type mTask struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          json.RawMessage            `json:"ttlMs"`
	PollIntervalMs *int64                     `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          *tsErr                     `json:"error"`
	InputRequests  map[string]mInput          `json:"inputRequests"`
	Meta           map[string]json.RawMessage `json:"_meta"`
	// 2025-11-25 shapes, which must not appear.
	TTL          json.RawMessage `json:"ttl"`
	PollInterval json.RawMessage `json:"pollInterval"`
	Task         json.RawMessage `json:"task"`
}

type mInput struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// message is an elicitation input request's message.
func (in mInput) message() string {
	var p struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(in.Params, &p)
	return p.Message
}

func decodeTask(t *testing.T, what string, raw json.RawMessage) mTask {
	t.Helper()
	var tk mTask
	if err := json.Unmarshal(raw, &tk); err != nil {
		t.Fatalf("%s: not a Task: %s: %v", what, raw, err)
	}
	return tk
}

// checkTask checks a Task against SEP-2663: the resultType (wantRT; "" for
// notification params), the fields every Task has, and, when detailed, the
// payload its status calls for and no other; a CreateTaskResult
// (detailed false) inlines nothing.
func checkTask(t *testing.T, what string, tk mTask, wantRT string, detailed bool) {
	t.Helper()
	if tk.ResultType != wantRT {
		t.Errorf("%s: resultType %q, want %q", what, tk.ResultType, wantRT)
	}
	if !uuidRE.MatchString(tk.TaskID) {
		t.Errorf("%s: taskId %q is not a random UUID", what, tk.TaskID)
	}
	created, err1 := time.Parse(time.RFC3339Nano, tk.CreatedAt)
	updated, err2 := time.Parse(time.RFC3339Nano, tk.LastUpdatedAt)
	if err1 != nil || err2 != nil || updated.Before(created) {
		t.Errorf("%s: createdAt %q, lastUpdatedAt %q: want ISO 8601 times, updated not before created", what, tk.CreatedAt, tk.LastUpdatedAt)
	}
	var ttl *int64
	if len(tk.TTLMs) == 0 || json.Unmarshal(tk.TTLMs, &ttl) != nil || (ttl != nil && *ttl <= 0) {
		t.Errorf("%s: ttlMs %s, want a positive integer or null", what, tk.TTLMs)
	}
	if tk.PollIntervalMs != nil && *tk.PollIntervalMs <= 0 {
		t.Errorf("%s: pollIntervalMs %d", what, *tk.PollIntervalMs)
	}
	if tk.TTL != nil || tk.PollInterval != nil || tk.Task != nil {
		t.Errorf("%s: carries the 2025-11-25 fields ttl/pollInterval/task: %+v", what, tk)
	}
	hasResult, hasError, hasInputs := tk.Result != nil, tk.Error != nil, len(tk.InputRequests) > 0
	want := [3]bool{}
	if detailed {
		switch tk.Status {
		case "working", "cancelled":
		case "input_required":
			want[2] = true
		case "completed":
			want[0] = true
		case "failed":
			want[1] = true
		default:
			t.Errorf("%s: status %q is not a task status", what, tk.Status)
		}
	}
	if got := [3]bool{hasResult, hasError, hasInputs}; got != want {
		t.Errorf("%s: status %s with result %t, error %t, inputRequests %t; want %t, %t, %t",
			what, tk.Status, hasResult, hasError, hasInputs, want[0], want[1], want[2])
	}
}

// createTask calls tool on replica i and wants a CreateTaskResult.
func (c *mClient) createTask(i int, tool string, args map[string]any) mTask {
	c.t.Helper()
	r := c.call(i, "tools/call", map[string]any{"name": tool, "arguments": args})
	if r.Status != http.StatusOK || r.Error != nil {
		c.t.Fatalf("tools/call %s: %s, want a CreateTaskResult", tool, r)
	}
	tk := decodeTask(c.t, "tools/call "+tool, r.Result)
	if tk.ResultType != "task" {
		c.t.Fatalf("tools/call %s = %s, want a CreateTaskResult (resultType task)", tool, r.Result)
	}
	checkTask(c.t, "CreateTaskResult of "+tool, tk, "task", false)
	return tk
}

// get is tasks/get on replica i.
func (c *mClient) get(i int, id string) mTask {
	c.t.Helper()
	tk := decodeTask(c.t, "tasks/get", c.ok(i, "tasks/get", map[string]any{"taskId": id}))
	checkTask(c.t, "tasks/get", tk, "complete", true)
	if tk.TaskID != id {
		c.t.Fatalf("tasks/get %s answered for task %s", id, tk.TaskID)
	}
	return tk
}

// waitTask polls tasks/get on replica i, honouring pollIntervalMs (at most
// 500 ms), until until holds (20 s at most); it returns the task and every
// status seen.
func (c *mClient) waitTask(i int, id string, what string, until func(mTask) bool) (mTask, []string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var seen []string
	for {
		tk := c.get(i, id)
		if len(seen) == 0 || seen[len(seen)-1] != tk.Status {
			seen = append(seen, tk.Status)
		}
		if until(tk) {
			return tk, seen
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s: %s not reached in 20 s; statuses %v, last %+v", id, what, seen, tk)
		}
		wait := 100 * time.Millisecond
		if tk.PollIntervalMs != nil {
			wait = min(time.Duration(*tk.PollIntervalMs)*time.Millisecond, 500*time.Millisecond)
		}
		time.Sleep(wait)
	}
}

// waitStatus waits for the task to have status.
func (c *mClient) waitStatus(i int, id, status string) (mTask, []string) {
	c.t.Helper()
	return c.waitTask(i, id, "status "+status, func(tk mTask) bool { return tk.Status == status })
}

// terminal reports whether a task status is final.
func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// ack sends a tasks/update or tasks/cancel and wants the empty
// acknowledgement: HTTP 200, resultType "complete".
func (c *mClient) ack(i int, method string, params map[string]any) {
	c.t.Helper()
	res := c.ok(i, method, params)
	var a map[string]json.RawMessage
	if json.Unmarshal(res, &a) != nil || string(a["resultType"]) != `"complete"` {
		c.t.Errorf("%s acknowledgement = %s, want an empty result with resultType complete", method, res)
	}
	for k := range a {
		if k != "resultType" && k != "_meta" {
			c.t.Errorf("%s acknowledgement carries %q: %s", method, k, res)
		}
	}
}

func (c *mClient) update(i int, id string, responses map[string]any) {
	c.t.Helper()
	c.ack(i, "tasks/update", map[string]any{"taskId": id, "inputResponses": responses})
}

func (c *mClient) cancel(i int, id string) {
	c.t.Helper()
	c.ack(i, "tasks/cancel", map[string]any{"taskId": id})
}

// accept is an accepted form elicitation's answer.
func accept(field, value string) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{field: value}}
}

// callResult is a CallToolResult (a sync answer or a task's inlined result).
type callResult struct {
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	IsError       bool                       `json:"isError"`
	InputRequests map[string]mInput          `json:"inputRequests"`
	RequestState  *string                    `json:"requestState"`
	Meta          map[string]json.RawMessage `json:"_meta"`
	Content       []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r callResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func decodeCall(t *testing.T, what string, raw json.RawMessage) callResult {
	t.Helper()
	var r callResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: not a CallToolResult: %s: %v", what, raw, err)
	}
	return r
}

// checkInlinedResult checks a completed task's result: the tool's
// CallToolResult, as a 2026-07-28 result (resultType "complete": the
// schema's Result says servers of this version MUST include it, and the
// official ext-tasks client rejects a result without it), and without the
// 2025-11-25 related-task _meta.
func checkInlinedResult(t *testing.T, what string, raw json.RawMessage, text string, isError bool) {
	t.Helper()
	r := decodeCall(t, what, raw)
	if r.text() != text || r.IsError != isError {
		t.Errorf("%s: result %q (isError %t), want %q (isError %t): %s", what, r.text(), r.IsError, text, isError, raw)
	}
	if r.ResultType != "complete" {
		t.Errorf("%s: the inlined CallToolResult has resultType %q, want \"complete\" (MCP 2026-07-28 schema, Result: servers MUST include it): %s",
			what, r.ResultType, raw)
	}
	if _, ok := r.Meta[relatedTaskKey]; ok {
		t.Errorf("%s: the inlined result carries the 2025-11-25 related-task _meta: %s", what, raw)
	}
}

// inputKeys returns the keys of inputRequests by elicitation message.
func inputKeys(t *testing.T, what string, in map[string]mInput) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for k, r := range in {
		if r.Method != "elicitation/create" {
			t.Errorf("%s: input request %s is %s, want elicitation/create", what, k, r.Method)
		}
		keys[r.message()] = k
	}
	return keys
}

// sseReader reads one SSE response as it arrives.
type sseReader struct {
	msgs chan json.RawMessage // closed when the stream ends
	err  error                // why it ended; read after msgs is closed
}

// readSSE starts reading body's events; each event's data is sent on msgs.
// It stops when body is closed.
func readSSE(body io.Reader) *sseReader {
	s := &sseReader{msgs: make(chan json.RawMessage, 256)}
	go func() {
		defer close(s.msgs)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		var data []string
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if len(data) > 0 {
					s.msgs <- json.RawMessage(strings.Join(data, "\n"))
				}
				data = nil
				continue
			}
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		s.err = sc.Err()
		if s.err == nil {
			s.err = io.EOF
		}
	}()
	return s
}

// next returns the next message, or fails the test when the stream ends or
// nothing comes within timeout.
func (s *sseReader) next(t *testing.T, timeout time.Duration) rpcMsg {
	t.Helper()
	select {
	case raw, ok := <-s.msgs:
		if !ok {
			t.Fatalf("the stream ended: %v", s.err)
		}
		var m rpcMsg
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("SSE event is not JSON-RPC: %s", raw)
		}
		return m
	case <-time.After(timeout):
		t.Fatalf("no message on the stream within %v", timeout)
	}
	return rpcMsg{}
}
