package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// MCP Tasks for 2025-11-25 clients, end to end: the TypeScript SDK's
// experimental tasks client (js/tasks.mjs) in front of taskgate in front of
// an upstream with no task support at all.

// taskFlags is the rule set every tasks test runs the gateway with: one tool
// per kind of rule, and a short pollInterval so SDK polling loops are quick.
var taskFlags = []string{
	"--task", "slow", "--task", "elicit", "--task", "sample", "--task", "progress",
	"--task", "fail", "--task", "rpcerror",
	"--task-required", "roots",
	"--sync", "echo",
	"--poll-interval", "100ms",
}

// wantTaskSupport is what tools/list must say under taskFlags ("" = absent).
var wantTaskSupport = map[string]string{
	"slow": "optional", "elicit": "optional", "sample": "optional", "progress": "optional",
	"fail": "optional", "rpcerror": "optional", "roots": "required", "echo": "",
}

const (
	relatedTaskKey     = "io.modelcontextprotocol/related-task"
	pollMs             = 100 // --poll-interval in taskFlags
	taskTTLMs          = 60000
	codeInvalidParams  = -32602
	codeMethodNotFound = -32601
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// taskSetup is one deployment the scenarios run against.
type taskSetup struct {
	name     string
	replicas int // 1: embedded store; more: that many processes sharing one redis-server
	upstream testupstream.Options
}

var (
	oneReplica     = taskSetup{"one-replica", 1, testupstream.Options{}}
	twoReplicas    = taskSetup{"two-replicas", 2, testupstream.Options{}}
	olderUpstream  = taskSetup{"upstream-2025-06-18", 1, testupstream.Options{ProtocolVersion: "2025-06-18"}}
	oldestUpstream = taskSetup{"upstream-2024-11-05", 1, testupstream.Options{ProtocolVersion: "2024-11-05"}}
	// The gateway is the session of a stateless 2026-07-28 upstream.
	statelessUpstream = taskSetup{"stateless-upstream", 2, testupstream.Options{Stateless: true}}
)

// startTaskDeployment starts a fresh upstream (recording into rec) and the
// setup's gateways; it returns their MCP endpoints.
func startTaskDeployment(t *testing.T, s taskSetup, rec *testupstream.Recorder) []string {
	t.Helper()
	opts := s.upstream
	opts.Recorder = rec
	up := newUpstream(t, opts)
	args := slices.Clone(taskFlags)
	if s.replicas > 1 {
		args = append(args, "--redis-url", "redis://"+redistest.Start(t))
	}
	var urls []string
	for range s.replicas {
		urls = append(urls, startGateway(t, up, args...).URL)
	}
	return urls
}

// TestTasksTypeScript runs js/tasks.mjs's scenarios against one gateway, two
// replicas sharing Redis (the client alternating between them on every HTTP
// request), and one gateway in front of a 2025-06-18 upstream.
func TestTasksTypeScript(t *testing.T) {
	node := ensureJS(t)
	for _, c := range []struct {
		setup     taskSetup
		scenarios []string
	}{
		{oneReplica, []string{"lifecycle", "cancel", "list", "access"}},
		{twoReplicas, []string{"lifecycle", "cancel", "list", "access"}},
		{olderUpstream, []string{"lifecycle", "cancel"}},
		{oldestUpstream, []string{"lifecycle", "cancel"}},
		{statelessUpstream, []string{"lifecycle", "cancel", "list", "access"}},
	} {
		for _, sc := range c.scenarios {
			t.Run(c.setup.name+"/"+sc, func(t *testing.T) {
				t.Parallel()
				rec := &testupstream.Recorder{}
				urls := startTaskDeployment(t, c.setup, rec)
				out := runTasksNode(t, node, sc, urls)
				checkSession(t, out)
				switch sc {
				case "lifecycle":
					checkLifecycle(t, out, rec, c.setup.upstream.Stateless)
				case "cancel":
					checkCancel(t, out, rec)
				case "list":
					checkList(t, out)
				case "access":
					checkAccess(t, out)
				}
				checkNoProgressAfterTerminal(t, out)
				if len(urls) > 1 {
					checkAlternation(t, out)
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// What tasks.mjs prints.

type tsTasksOut struct {
	Scenario           string                     `json:"scenario"`
	Replicas           int                        `json:"replicas"`
	ProtocolVersion    string                     `json:"protocolVersion"`
	ServerCapabilities map[string]json.RawMessage `json:"serverCapabilities"`
	HasSessionID       bool                       `json:"hasSessionId"`
	Tools              map[string]string          `json:"tools"`
	Steps              json.RawMessage            `json:"steps"`
	Exchanges          []tsExchange               `json:"exchanges"`
	ClientErrors       []json.RawMessage          `json:"clientErrors"`
	Error              string                     `json:"error"`
}

// tsTimed is one SDK call: its start (ms since the script began), duration,
// and result or error.
type tsTimed struct {
	T      float64         `json:"t"`
	MS     float64         `json:"ms"`
	Result json.RawMessage `json:"result"`
	Error  *tsErr          `json:"error"`
}

type tsErr struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *tsErr) String() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%d %q data=%s", e.Code, e.Message, e.Data)
}

type tsTask struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage"`
	TTL           *float64 `json:"ttl"`
	PollInterval  *float64 `json:"pollInterval"`
	CreatedAt     string   `json:"createdAt"`
	LastUpdatedAt string   `json:"lastUpdatedAt"`
}

type tsCallResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

func (r tsCallResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// task decodes a Task result (tasks/get, tasks/cancel).
func (c *tsTimed) task() (tsTask, bool) {
	var tk tsTask
	if c == nil || c.Error != nil || json.Unmarshal(c.Result, &tk) != nil || tk.TaskID == "" {
		return tk, false
	}
	return tk, true
}

// created decodes a CreateTaskResult.
func (c *tsTimed) created() (tsTask, bool) {
	var r struct {
		Task tsTask `json:"task"`
	}
	if c == nil || c.Error != nil || json.Unmarshal(c.Result, &r) != nil || r.Task.TaskID == "" {
		return r.Task, false
	}
	return r.Task, true
}

// call decodes a CallToolResult.
func (c *tsTimed) call() (tsCallResult, bool) {
	var r tsCallResult
	if c == nil || c.Error != nil || json.Unmarshal(c.Result, &r) != nil {
		return r, false
	}
	return r, true
}

func (c *tsTimed) String() string {
	if c == nil {
		return "<not run>"
	}
	if c.Error != nil {
		return "error " + c.Error.String()
	}
	return string(c.Result)
}

type tsStreamMsg struct {
	Type   string          `json:"type"`
	T      float64         `json:"t"`
	Task   *tsTask         `json:"task"`
	Result json.RawMessage `json:"result"`
	Error  *tsErr          `json:"error"`
}

// tsStream is one callToolStream run and what followed it.
type tsStream struct {
	Messages []tsStreamMsg   `json:"messages"`
	TaskID   string          `json:"taskId"`
	Seen     json.RawMessage `json:"seen"`
	After    *tsTimed        `json:"after"`
	Get      *tsTimed        `json:"get"`
	Result   *tsTimed        `json:"result"`
	Progress []tsProgress    `json:"progress"`
}

func (s *tsStream) statuses() []string {
	var st []string
	for _, m := range s.Messages {
		if m.Type == "taskStatus" && m.Task != nil {
			st = append(st, m.Task.Status)
		}
	}
	return st
}

func (s *tsStream) last() tsStreamMsg {
	if len(s.Messages) == 0 {
		return tsStreamMsg{Type: "<none>"}
	}
	return s.Messages[len(s.Messages)-1]
}

func (s *tsStream) dump() string {
	b, _ := json.Marshal(s.Messages)
	return string(b)
}

type tsProgress struct {
	T        float64 `json:"t"`
	Progress float64 `json:"progress"`
	Total    float64 `json:"total"`
}

// tsExchange is one HTTP request the client made and what it got back.
type tsExchange struct {
	Client      string          `json:"client"`
	Replica     int             `json:"replica"`
	Method      string          `json:"method"`
	T0          float64         `json:"t0"`
	T1          float64         `json:"t1"`
	Request     json.RawMessage `json:"request"`
	Status      int             `json:"status"`
	ContentType string          `json:"contentType"`
	Response    json.RawMessage `json:"response"`
	Events      []struct {
		T    float64         `json:"t"`
		ID   string          `json:"id"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
	Error       string `json:"error"`
	StreamError string `json:"streamError"`
}

// rpcMsg is the envelope of any JSON-RPC message.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *tsErr          `json:"error"`
}

func (m rpcMsg) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// timedMsg is a message received, with when it arrived.
type timedMsg struct {
	T float64
	rpcMsg
}

func (ex *tsExchange) request() rpcMsg {
	var m rpcMsg
	_ = json.Unmarshal(ex.Request, &m)
	return m
}

// received returns the JSON-RPC messages of the response, in order.
func (ex *tsExchange) received() []timedMsg {
	var out []timedMsg
	add := func(t float64, raw json.RawMessage) {
		var m rpcMsg
		if json.Unmarshal(raw, &m) == nil && (m.Method != "" || len(m.ID) > 0) {
			out = append(out, timedMsg{t, m})
		}
	}
	if len(ex.Response) > 0 {
		add(ex.T1, ex.Response)
	}
	for _, e := range ex.Events {
		add(e.T, e.Data)
	}
	return out
}

// relatedTask is _meta[related-task].taskId of params or a result.
func relatedTask(raw json.RawMessage) string {
	var v struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &v) != nil || v.Meta == nil {
		return ""
	}
	var rt struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(v.Meta[relatedTaskKey], &rt) != nil {
		return ""
	}
	return rt.TaskID
}

func hasRelatedTaskMeta(raw json.RawMessage) bool {
	var v struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(raw, &v)
	_, ok := v.Meta[relatedTaskKey]
	return ok
}

// paramTaskID is params.taskId of a request.
func paramTaskID(m rpcMsg) string {
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.TaskID
}

// exchangesFor returns the POSTs of method (for taskID, when given).
func (o *tsTasksOut) exchangesFor(method, taskID string) []*tsExchange {
	var exs []*tsExchange
	for i := range o.Exchanges {
		ex := &o.Exchanges[i]
		req := ex.request()
		if req.Method == method && (taskID == "" || paramTaskID(req) == taskID) {
			exs = append(exs, ex)
		}
	}
	return exs
}

// createExchange is the tools/call whose CreateTaskResult named taskID.
func (o *tsTasksOut) createExchange(taskID string) *tsExchange {
	for _, ex := range o.exchangesFor("tools/call", "") {
		for _, m := range ex.received() {
			var r struct {
				Task tsTask `json:"task"`
			}
			if m.isResponse() && json.Unmarshal(m.Result, &r) == nil && r.Task.TaskID == taskID {
				return ex
			}
		}
	}
	return nil
}

// progressFor returns every notifications/progress received for the
// progress token of the tools/call that created taskID, with the exchange
// each came on.
func (o *tsTasksOut) progressFor(taskID string) (token string, got []timedMsg, on []*tsExchange) {
	ce := o.createExchange(taskID)
	if ce == nil {
		return "", nil, nil
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(ce.request().Params, &p)
	token = string(p.Meta.ProgressToken)
	for i := range o.Exchanges {
		ex := &o.Exchanges[i]
		for _, m := range ex.received() {
			if m.Method != "notifications/progress" {
				continue
			}
			var pp struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			}
			_ = json.Unmarshal(m.Params, &pp)
			if string(pp.ProgressToken) == token {
				got = append(got, m)
				on = append(on, ex)
			}
		}
	}
	return token, got, on
}

// runTasksNode runs js/tasks.mjs scenario against urls and decodes its output.
func runTasksNode(t *testing.T, node, scenario string, urls []string) *tsTasksOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tasks.mjs", scenario, strings.Join(urls, ","))
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	var out tsTasksOut
	if jerr := json.Unmarshal(bytes.TrimSpace(raw), &out); jerr != nil {
		t.Fatalf("node tasks.mjs %s: %v (%v)\nstdout: %s\nstderr: %s", scenario, err, jerr, raw, stderr.Bytes())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tasks.mjs %s output:\n%s\nstderr: %s", scenario, raw, stderr.Bytes())
		}
	})
	if out.Error != "" || err != nil {
		t.Fatalf("tasks.mjs %s failed (%v): %s", scenario, err, out.Error)
	}
	return &out
}

// ---------------------------------------------------------------------------
// Checks.

// checkSession: the client negotiated 2025-11-25 and was offered tasks.
func checkSession(t *testing.T, out *tsTasksOut) {
	t.Helper()
	if out.ProtocolVersion != "2025-11-25" || !out.HasSessionID {
		t.Errorf("session: protocol %q, session id %t; want 2025-11-25 with a session id", out.ProtocolVersion, out.HasSessionID)
	}
	want := `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`
	if got := canonicalJSON(out.ServerCapabilities["tasks"]); got != want {
		t.Errorf("capabilities.tasks = %s, want %s", got, want)
	}
}

func canonicalJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}

type lifecycleSteps struct {
	Slow struct {
		Create, Get, Result, After *tsTimed
	} `json:"slow"`
	Elicit, Sample, Roots, Fail, RPCError, ProgressPoll tsStream
	ProgressResult                                      struct {
		Create, Result *tsTimed
		Progress       []tsProgress
	} `json:"progressResult"`
	OptionalSync, SyncWithTask, RequiredWithoutTask, SyncEcho *tsTimed
	Unknown                                                   struct {
		Get, Result, Cancel *tsTimed
	} `json:"unknown"`
}

// stateless: the upstream is a stateless 2026-07-28 one, which runs a tool
// that asks for input once per MRTR round (the round, then the retry).
func checkLifecycle(t *testing.T, out *tsTasksOut, rec *testupstream.Recorder, stateless bool) {
	t.Helper()
	var s lifecycleSteps
	if err := json.Unmarshal(out.Steps, &s); err != nil {
		t.Fatalf("decoding steps: %v", err)
	}
	for name, want := range wantTaskSupport {
		if got, ok := out.Tools[name]; !ok || got != want {
			t.Errorf("tools/list: %s taskSupport = %q (listed %t), want %q", name, got, ok, want)
		}
	}

	// slow: CreateTaskResult at once, tasks/get at once, tasks/result blocks.
	created, ok := s.Slow.Create.created()
	if !ok {
		t.Fatalf("slow as a task: %s", s.Slow.Create)
	}
	checkNewTask(t, "slow", created, taskTTLMs)
	if s.Slow.Create.MS > 1000 {
		t.Errorf("slow (1.5 s) as a task: CreateTaskResult after %.0f ms, want it at once", s.Slow.Create.MS)
	}
	if tk, ok := s.Slow.Get.task(); !ok || tk.Status != "working" || tk.TaskID != created.TaskID || s.Slow.Get.MS > 500 {
		t.Errorf("tasks/get of a running task = %s after %.0f ms, want status working at once", s.Slow.Get, s.Slow.Get.MS)
	}
	if r, ok := s.Slow.Result.call(); !ok || r.text() != "slept 1.5 s: ts" || r.IsError {
		t.Errorf("tasks/result of slow = %s, want the upstream's %q", s.Slow.Result, "slept 1.5 s: ts")
	} else if done := s.Slow.Result.T + s.Slow.Result.MS - s.Slow.Create.T; done < 1400 {
		t.Errorf("tasks/result of slow answered %.0f ms after the call, before the tool could finish (1.5 s)", done)
	}
	if tk, ok := s.Slow.After.task(); !ok || tk.Status != "completed" {
		t.Errorf("tasks/get after tasks/result = %s, want completed", s.Slow.After)
	}
	checkResultWire(t, out, created.TaskID, "slow")

	// Input from the client, through tasks/result.
	crossedReplicas := 0
	for _, c := range []struct {
		name, want, method string
		s                  *tsStream
		seen               string
	}{
		{"elicit", "Hello, Grace!", "elicitation/create", &s.Elicit, `[{"message":"What is your name?"}]`},
		{"sample", "sampled: say hi", "sampling/createMessage", &s.Sample, `[{"prompt":"say hi"}]`},
		{"roots", "file:///work/a,file:///work/b", "roots/list", &s.Roots, `1`},
	} {
		if crossed := checkInputTask(t, out, c.name, c.s, c.want, c.method); crossed {
			crossedReplicas++
		}
		if got := stripT(c.s.Seen); got != c.seen {
			t.Errorf("%s: client handler saw %s, want %s", c.name, got, c.seen)
		}
	}

	if out.Replicas > 1 && crossedReplicas == 0 {
		t.Errorf("no input answer was POSTed to another replica than the tasks/result stream it answered; the test did not exercise cross-replica input routing")
	}

	// isError → failed, tasks/result returns the CallToolResult.
	if st := s.Fail.statuses(); len(st) == 0 || st[len(st)-1] != "failed" {
		t.Errorf("fail as a task: statuses %v, want to end failed (isError is failed in 2025-11-25); stream %s", st, s.Fail.dump())
	}
	if tk, ok := s.Fail.Get.task(); !ok || tk.Status != "failed" {
		t.Errorf("fail: tasks/get = %s, want failed", s.Fail.Get)
	} else if tk.StatusMessage == "" {
		t.Logf("fail: failed task has no statusMessage (spec: SHOULD)")
	}
	if r, ok := s.Fail.Result.call(); !ok || !r.IsError || r.text() != testupstream.FailText {
		t.Errorf("fail: tasks/result = %s, want the CallToolResult {isError: true, %q}", s.Fail.Result, testupstream.FailText)
	}
	if s.Fail.TaskID != "" {
		checkResultWire(t, out, s.Fail.TaskID, "fail")
	}

	// JSON-RPC error → failed, tasks/result returns the same error.
	if st := s.RPCError.statuses(); len(st) == 0 || st[len(st)-1] != "failed" {
		t.Errorf("rpcerror as a task: statuses %v, want to end failed; stream %s", st, s.RPCError.dump())
	}
	if tk, ok := s.RPCError.Get.task(); !ok || tk.Status != "failed" {
		t.Errorf("rpcerror: tasks/get = %s, want failed", s.RPCError.Get)
	}
	if e := s.RPCError.Result; e == nil || e.Error == nil || e.Error.Code != testupstream.RPCErrorCode ||
		canonicalJSON(e.Error.Data) != `{"tool":"rpcerror"}` {
		t.Errorf("rpcerror: tasks/result = %s, want the upstream's error %d {\"tool\":\"rpcerror\"}", e, testupstream.RPCErrorCode)
	}
	// On the wire (the SDK prefixes messages): exactly the upstream's error.
	var wireErrs int
	for _, ex := range out.exchangesFor("tasks/result", s.RPCError.TaskID) {
		for _, m := range ex.received() {
			if !m.isResponse() || string(m.ID) != string(ex.request().ID) {
				continue
			}
			if m.Error == nil {
				t.Errorf("rpcerror: tasks/result answered with result %s, want the JSON-RPC error", m.Result)
				continue
			}
			wireErrs++
			if m.Error.Code != testupstream.RPCErrorCode || m.Error.Message != testupstream.RPCErrorMessage ||
				canonicalJSON(m.Error.Data) != `{"tool":"rpcerror"}` {
				t.Errorf("rpcerror: tasks/result error on the wire = %s, want %d %q {\"tool\":\"rpcerror\"}",
					m.Error, testupstream.RPCErrorCode, testupstream.RPCErrorMessage)
			}
		}
	}
	if wireErrs == 0 && s.RPCError.TaskID != "" {
		t.Errorf("rpcerror: no tasks/result error response on the wire")
	}

	// Progress with the client polling: relayed (GET stream), related-task _meta.
	if st := s.ProgressPoll.statuses(); len(st) == 0 || st[len(st)-1] != "completed" {
		t.Errorf("progress as a task: statuses %v, want completed; stream %s", st, s.ProgressPoll.dump())
	}
	if r := s.ProgressPoll.last(); r.Type != "result" || !strings.Contains(string(r.Result), "done 3") {
		t.Errorf("progress as a task: last message %s %s, want result done 3", r.Type, r.Result)
	}
	checkProgress(t, out, "progress (polling)", s.ProgressPoll.TaskID, s.ProgressPoll.Progress, "GET")

	// Progress with tasks/result open: on that stream, before the result.
	pc, ok := s.ProgressResult.Create.created()
	if !ok {
		t.Errorf("progress as a task (tasks/result): %s", s.ProgressResult.Create)
	} else {
		if r, ok := s.ProgressResult.Result.call(); !ok || r.text() != "done 3" {
			t.Errorf("progress: tasks/result = %s, want done 3", s.ProgressResult.Result)
		}
		checkProgress(t, out, "progress (tasks/result open)", pc.TaskID, s.ProgressResult.Progress, "tasks/result")
	}

	checkStatusNotifications(t, out)

	// Sync and refused calls.
	if s.OptionalSync.Error != nil || string(s.OptionalSync.Result) != `"slept 0 s: sync"` {
		t.Errorf("optional tool called without task = %s, want a plain result \"slept 0 s: sync\"", s.OptionalSync)
	}
	if s.SyncEcho.Error != nil || string(s.SyncEcho.Result) != `"plain"` {
		t.Errorf("--sync tool called plainly = %s, want \"plain\"", s.SyncEcho)
	}
	wantCode(t, "task on a --sync tool", s.SyncWithTask, codeMethodNotFound)
	wantCode(t, "--task-required tool without task", s.RequiredWithoutTask, codeMethodNotFound)
	wantCode(t, "tasks/get of an unknown task", s.Unknown.Get, codeInvalidParams)
	wantCode(t, "tasks/result of an unknown task", s.Unknown.Result, codeInvalidParams)
	wantCode(t, "tasks/cancel of an unknown task", s.Unknown.Cancel, codeInvalidParams)

	// Every tool ran upstream exactly once per call (per MRTR round for a
	// stateless upstream), on exactly one replica.
	rounds := 1
	if stateless {
		rounds = 2
	}
	for tool, n := range map[string]int{"slow": 2, "elicit": rounds, "sample": rounds, "roots": rounds, "fail": 1, "rpcerror": 1, "progress": 2, "echo": 1} {
		if got := rec.Count(tool, testupstream.Called); got != n {
			t.Errorf("upstream saw %d calls of %s, want %d", got, tool, n)
		}
	}
	if got := rec.Count("", testupstream.Cancelled); got != 0 {
		t.Errorf("upstream saw %d cancelled calls, want none: %+v", got, rec.Events())
	}
}

// stripT drops the "t" fields of recorded handler calls.
func stripT(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if m, ok := e.(map[string]any); ok {
				delete(m, "t")
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func wantCode(t *testing.T, what string, c *tsTimed, code int64) {
	t.Helper()
	if c == nil || c.Error == nil || c.Error.Code != code {
		t.Errorf("%s = %s, want JSON-RPC error %d", what, c, code)
	}
}

// checkNewTask checks a CreateTaskResult's task.
func checkNewTask(t *testing.T, what string, tk tsTask, ttl float64) {
	t.Helper()
	if !uuidRE.MatchString(tk.TaskID) {
		t.Errorf("%s: taskId %q is not a random (v4) UUID", what, tk.TaskID)
	}
	if tk.Status != "working" {
		t.Errorf("%s: new task status %q, want working", what, tk.Status)
	}
	if tk.TTL == nil || *tk.TTL != ttl {
		t.Errorf("%s: ttl %v, want the requested %v", what, tk.TTL, ttl)
	}
	if tk.PollInterval == nil || *tk.PollInterval != pollMs {
		t.Errorf("%s: pollInterval %v, want %d (--poll-interval)", what, tk.PollInterval, pollMs)
	}
	c, err1 := time.Parse(time.RFC3339Nano, tk.CreatedAt)
	u, err2 := time.Parse(time.RFC3339Nano, tk.LastUpdatedAt)
	if err1 != nil || err2 != nil {
		t.Errorf("%s: createdAt %q / lastUpdatedAt %q not ISO 8601 (RFC 3339)", what, tk.CreatedAt, tk.LastUpdatedAt)
	} else if u.Before(c) || time.Since(c) > time.Minute || time.Until(c) > 5*time.Second {
		t.Errorf("%s: createdAt %s, lastUpdatedAt %s: not around now and in order", what, c, u)
	}
}

// checkResultWire: the tasks/result response that ended taskID's wait
// carries the related-task _meta (2025-11-25 "Associating Task-Related
// Messages": tasks/result MUST include it).
func checkResultWire(t *testing.T, out *tsTasksOut, taskID, what string) {
	t.Helper()
	var found bool
	for _, ex := range out.exchangesFor("tasks/result", taskID) {
		for _, m := range ex.received() {
			if !m.isResponse() || string(m.ID) != string(ex.request().ID) || m.Result == nil {
				continue
			}
			found = true
			if got := relatedTask(m.Result); got != taskID {
				t.Errorf("%s: tasks/result result._meta[%q].taskId = %q, want %q; result %s", what, relatedTaskKey, got, taskID, m.Result)
			}
		}
	}
	if !found {
		t.Errorf("%s: no successful tasks/result response on the wire", what)
	}
}

// checkInputTask: a tool asking for client input ends with the right result,
// the task was seen input_required, the request came on the SSE stream of
// tasks/result with related-task _meta, and the client's POSTed answer was
// accepted. crossed reports whether that answer went to another replica
// than the stream the request came on.
func checkInputTask(t *testing.T, out *tsTasksOut, name string, s *tsStream, want, method string) (crossed bool) {
	t.Helper()
	if s.TaskID == "" {
		t.Errorf("%s as a task: no task created; stream %s", name, s.dump())
		return false
	}
	if st := s.statuses(); !slices.Contains(st, "input_required") {
		t.Errorf("%s: tasks/get statuses %v never input_required", name, st)
	}
	last := s.last()
	var r tsCallResult
	if last.Type != "result" || json.Unmarshal(last.Result, &r) != nil || r.text() != want || r.IsError {
		t.Errorf("%s as a task ended with %s %s %v, want result %q", name, last.Type, last.Result, last.Error, want)
	}
	if tk, ok := s.After.task(); !ok || tk.Status != "completed" {
		t.Errorf("%s: tasks/get afterwards = %s, want completed", name, s.After)
	}

	// The input request on the wire.
	var reqs []timedMsg
	var streams []*tsExchange
	for i := range out.Exchanges {
		ex := &out.Exchanges[i]
		for _, m := range ex.received() {
			if m.Method == method {
				reqs = append(reqs, m)
				streams = append(streams, ex)
			}
		}
	}
	var mine []int
	for i, m := range reqs {
		if relatedTask(m.Params) == s.TaskID {
			mine = append(mine, i)
		}
	}
	if len(mine) != 1 {
		t.Errorf("%s: %d %s requests carry _meta related-task %s (of %d received), want 1", name, len(mine), method, s.TaskID, len(reqs))
		return false
	}
	m, ex := reqs[mine[0]], streams[mine[0]]
	if rq := ex.request(); rq.Method != "tasks/result" || paramTaskID(rq) != s.TaskID {
		t.Errorf("%s: %s came on the stream of %s %s (%s), want the client's tasks/result", name, method, ex.Method, rq.Method, paramTaskID(rq))
	}
	if len(m.ID) == 0 {
		t.Errorf("%s: %s has no id", name, method)
	}
	// The client's answer: a POSTed response with that id, accepted (202).
	var answered bool
	for i := range out.Exchanges {
		a := &out.Exchanges[i]
		if rq := a.request(); rq.isResponse() && string(rq.ID) == string(m.ID) {
			answered = true
			crossed = a.Replica != ex.Replica
			if a.Status != 202 {
				t.Errorf("%s: the client's POSTed answer to %s got HTTP %d, want 202", name, method, a.Status)
			}
			if rq.Error != nil {
				t.Errorf("%s: the client answered %s with an error: %s", name, method, rq.Error)
			}
		}
	}
	if !answered {
		t.Errorf("%s: the client never POSTed an answer to %s id %s", name, method, m.ID)
	}
	return crossed
}

// checkProgress: every step's notifications/progress arrived once, with the
// tools/call's progress token and related-task _meta, on onStream: "GET"
// (the session's stream) or "tasks/result" (that open stream, before its
// final response).
func checkProgress(t *testing.T, out *tsTasksOut, what, taskID string, handled []tsProgress, onStream string) {
	t.Helper()
	if taskID == "" {
		t.Errorf("%s: no task", what)
		return
	}
	token, got, on := out.progressFor(taskID)
	if len(got) != 3 || len(handled) != 3 {
		t.Errorf("%s: %d notifications/progress on the wire for token %s, %d reached the handler; want 3", what, len(got), token, len(handled))
	}
	for i, m := range got {
		if rt := relatedTask(m.Params); rt != taskID {
			t.Errorf("%s: notifications/progress %s without _meta related-task %s", what, m.Params, taskID)
		}
		ex := on[i]
		if onStream == "GET" {
			if ex.Method != "GET" {
				t.Errorf("%s: notifications/progress came on a %s %s stream, want the session's GET stream (no tasks/result open)", what, ex.Method, ex.request().Method)
			}
			continue
		}
		if rq := ex.request(); rq.Method != onStream || paramTaskID(rq) != taskID {
			t.Errorf("%s: notifications/progress came on %s %s, want the open %s stream", what, ex.Method, rq.Method, onStream)
			continue
		}
		for _, r := range ex.received() {
			if r.isResponse() && r.T < m.T {
				t.Errorf("%s: notifications/progress after the %s response (task terminal)", what, onStream)
			}
		}
	}
}

type cancelSteps struct {
	Slow struct {
		Create, Cancel, Get, CancelAgain, Result *tsTimed
	} `json:"slow"`
	Progress struct {
		Create, Cancel, Get *tsTimed
		SawProgress         bool         `json:"sawProgress"`
		CancelledAt         float64      `json:"cancelledAt"`
		Progress            []tsProgress `json:"progress"`
	} `json:"progress"`
	Done struct {
		Create, Result, Cancel, Get *tsTimed
	} `json:"done"`
}

func checkCancel(t *testing.T, out *tsTasksOut, rec *testupstream.Recorder) {
	t.Helper()
	var s cancelSteps
	if err := json.Unmarshal(out.Steps, &s); err != nil {
		t.Fatalf("decoding steps: %v", err)
	}
	slow, ok := s.Slow.Create.created()
	if !ok {
		t.Fatalf("slow as a task: %s", s.Slow.Create)
	}
	if tk, ok := s.Slow.Cancel.task(); !ok || tk.Status != "cancelled" || tk.TaskID != slow.TaskID {
		t.Errorf("tasks/cancel of a running task = %s, want the Task, status cancelled", s.Slow.Cancel)
	}
	if tk, ok := s.Slow.Get.task(); !ok || tk.Status != "cancelled" {
		t.Errorf("tasks/get after cancel = %s, want cancelled", s.Slow.Get)
	}
	wantCode(t, "cancelling a cancelled task", s.Slow.CancelAgain, codeInvalidParams)
	t.Logf("tasks/result of a cancelled task: %s", s.Slow.Result)

	if !s.Progress.SawProgress {
		t.Errorf("progress as a task: no notifications/progress within 10 s (GET stream)")
	}
	if tk, ok := s.Progress.Cancel.task(); !ok || tk.Status != "cancelled" {
		t.Errorf("tasks/cancel of the progress task = %s, want cancelled", s.Progress.Cancel)
	}
	if tk, ok := s.Progress.Get.task(); !ok || tk.Status != "cancelled" {
		t.Errorf("tasks/get of the cancelled progress task = %s, want cancelled", s.Progress.Get)
	}
	// No progress once the task is terminal (a notification already in
	// flight when the cancel was answered gets 250 ms).
	for _, p := range s.Progress.Progress {
		if p.T > s.Progress.CancelledAt+250 {
			t.Errorf("notifications/progress %v/%v arrived %.0f ms after the task was cancelled", p.Progress, p.Total, p.T-s.Progress.CancelledAt)
		}
	}
	if pc, ok := s.Progress.Create.created(); ok {
		_, got, _ := out.progressFor(pc.TaskID)
		for _, m := range got {
			if relatedTask(m.Params) != pc.TaskID {
				t.Errorf("notifications/progress %s without related-task _meta", m.Params)
			}
		}
	}

	if r, ok := s.Done.Result.call(); !ok || r.text() != "slept 0 s: quick" {
		t.Errorf("tasks/result of a quick task = %s", s.Done.Result)
	}
	wantCode(t, "cancelling a completed task", s.Done.Cancel, codeInvalidParams)
	if tk, ok := s.Done.Get.task(); !ok || tk.Status != "completed" {
		t.Errorf("tasks/get after a refused cancel = %s, want still completed", s.Done.Get)
	}

	// The upstream calls were aborted (notifications/cancelled upstream).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tool := range []string{"slow", "progress"} {
		if err := rec.WaitFor(ctx, tool, testupstream.Cancelled, 1); err != nil {
			t.Errorf("upstream never saw the cancellation of %s: %v; events %+v", tool, err, rec.Events())
		}
	}
}

type listSteps struct {
	Created     []string  `json:"created"`
	CreateError *tsErr    `json:"createError"`
	Pages       []tsTimed `json:"pages"`
	BadCursor   *tsTimed  `json:"badCursor"`
}

type tsListResult struct {
	Tasks      []tsTask `json:"tasks"`
	NextCursor string   `json:"nextCursor"`
}

func pageOf(c *tsTimed) (tsListResult, bool) {
	var r tsListResult
	if c == nil || c.Error != nil || json.Unmarshal(c.Result, &r) != nil {
		return r, false
	}
	return r, true
}

// listIDs concatenates the task ids of pages, failing on an error page.
func listIDs(t *testing.T, what string, pages []tsTimed) []string {
	t.Helper()
	var ids []string
	for i := range pages {
		p, ok := pageOf(&pages[i])
		if !ok {
			t.Errorf("%s: tasks/list page %d = %s", what, i+1, &pages[i])
			return ids
		}
		for _, tk := range p.Tasks {
			ids = append(ids, tk.TaskID)
		}
	}
	return ids
}

func checkList(t *testing.T, out *tsTasksOut) {
	t.Helper()
	var s listSteps
	if err := json.Unmarshal(out.Steps, &s); err != nil {
		t.Fatalf("decoding steps: %v", err)
	}
	if s.CreateError != nil || len(s.Created) != 52 || slices.Contains(s.Created, "") {
		t.Fatalf("creating 52 tasks: %d created, error %s", len(s.Created), s.CreateError)
	}
	want := slices.Clone(s.Created)
	slices.Reverse(want) // newest first
	got := listIDs(t, "list", s.Pages)
	if !slices.Equal(got, want) {
		t.Errorf("tasks/list over %d pages = %v,\nwant the 52 tasks newest first: %v", len(s.Pages), got, want)
	}
	if len(s.Pages) < 2 {
		t.Errorf("tasks/list returned 52 tasks in %d page(s), want pagination (page size 50)", len(s.Pages))
	}
	for i := range s.Pages {
		p, _ := pageOf(&s.Pages[i])
		if last := i == len(s.Pages)-1; last != (p.NextCursor == "") {
			t.Errorf("tasks/list page %d of %d: nextCursor %q", i+1, len(s.Pages), p.NextCursor)
		}
		if len(p.Tasks) == 0 {
			t.Errorf("tasks/list page %d is empty", i+1)
		}
	}
	wantCode(t, "tasks/list with a cursor the gateway never gave", s.BadCursor, codeInvalidParams)
	for _, ex := range out.exchangesFor("tasks/list", "") {
		for _, m := range ex.received() {
			if m.isResponse() && hasRelatedTaskMeta(m.Result) {
				t.Errorf("tasks/list result carries related-task _meta (spec: SHOULD NOT)")
			}
		}
	}
}

type accessSteps struct {
	AliceRunning, AliceDone, AliceDoneResult, BobCreate, AnonCreate, AliceCancel, Expiring *tsTimed
	Bob                                                                                    *struct {
		GetRunning, ResultRunning, CancelRunning, GetDone, ResultDone, CancelDone *tsTimed
		List                                                                      []tsTimed
	}
	Alice2 *struct {
		GetRunning, ResultDone *tsTimed
		List                   []tsTimed
	}
	Alice *struct {
		GetRunning *tsTimed
		List       []tsTimed
	}
	Anon *struct {
		OwnGet, OtherGet, OtherResult, OtherCancel, AliceGet *tsTimed
		OtherList                                            []tsTimed
	}
	Expired *struct {
		Get, Result *tsTimed
		List        []tsTimed
	}
}

func checkAccess(t *testing.T, out *tsTasksOut) {
	t.Helper()
	var s accessSteps
	if err := json.Unmarshal(out.Steps, &s); err != nil {
		t.Fatalf("decoding steps: %v", err)
	}
	running, ok1 := s.AliceRunning.created()
	done, ok2 := s.AliceDone.created()
	bob, ok3 := s.BobCreate.created()
	anon, ok4 := s.AnonCreate.created()
	if !ok1 || !ok2 || !ok3 || !ok4 || s.Bob == nil || s.Alice2 == nil || s.Alice == nil || s.Anon == nil {
		t.Fatalf("creating tasks: alice %s, %s; bob %s; anon %s", s.AliceRunning, s.AliceDone, s.BobCreate, s.AnonCreate)
	}
	if r, ok := s.AliceDoneResult.call(); !ok || r.text() != "slept 0 s: alice done" {
		t.Errorf("alice's tasks/result = %s", s.AliceDoneResult)
	}

	// Another Authorization: not found, never a hint the task exists.
	for what, c := range map[string]*tsTimed{
		"get running": s.Bob.GetRunning, "result running": s.Bob.ResultRunning, "cancel running": s.Bob.CancelRunning,
		"get done": s.Bob.GetDone, "result done": s.Bob.ResultDone, "cancel done": s.Bob.CancelDone,
	} {
		wantCode(t, "another owner's tasks/"+what, c, codeInvalidParams)
	}
	if ids := listIDs(t, "bob", s.Bob.List); !slices.Equal(ids, []string{bob.TaskID}) {
		t.Errorf("bob's tasks/list = %v, want only his own task %s", ids, bob.TaskID)
	}

	// The same Authorization on another session: the same owner.
	if tk, ok := s.Alice2.GetRunning.task(); !ok || tk.TaskID != running.TaskID || tk.Status != "working" {
		t.Errorf("same Authorization, new session: tasks/get = %s, want the running task", s.Alice2.GetRunning)
	}
	if r, ok := s.Alice2.ResultDone.call(); !ok || r.text() != "slept 0 s: alice done" {
		t.Errorf("same Authorization, new session: tasks/result = %s", s.Alice2.ResultDone)
	}
	wantAlice := []string{done.TaskID, running.TaskID}
	for what, pages := range map[string][]tsTimed{"alice": s.Alice.List, "alice (new session)": s.Alice2.List} {
		if ids := listIDs(t, what, pages); !slices.Equal(ids, wantAlice) {
			t.Errorf("%s tasks/list = %v, want %v (newest first)", what, ids, wantAlice)
		}
	}
	if tk, ok := s.Alice.GetRunning.task(); !ok || tk.Status != "working" {
		t.Errorf("alice's own tasks/get = %s", s.Alice.GetRunning)
	}

	// No Authorization: bound to the session.
	if tk, ok := s.Anon.OwnGet.task(); !ok || tk.TaskID != anon.TaskID {
		t.Errorf("anonymous owner's tasks/get = %s", s.Anon.OwnGet)
	}
	wantCode(t, "another session's tasks/get", s.Anon.OtherGet, codeInvalidParams)
	wantCode(t, "another session's tasks/result", s.Anon.OtherResult, codeInvalidParams)
	wantCode(t, "another session's tasks/cancel", s.Anon.OtherCancel, codeInvalidParams)
	wantCode(t, "an authorized client's tasks/get of a session's task", s.Anon.AliceGet, codeInvalidParams)
	if ids := listIDs(t, "anon2", s.Anon.OtherList); len(ids) != 0 {
		t.Errorf("another session's tasks/list = %v, want empty", ids)
	}

	if tk, ok := s.AliceCancel.task(); !ok || tk.Status != "cancelled" {
		t.Errorf("owner's tasks/cancel = %s, want cancelled", s.AliceCancel)
	}

	// Expiry.
	exp, ok := s.Expiring.created()
	switch {
	case !ok:
		t.Errorf("task with ttl 1000: %s", s.Expiring)
	case s.Expired == nil:
		t.Logf("task asked for ttl 1000 ms got ttl %v; expiry not checked", exp.TTL)
	default:
		wantCode(t, "tasks/get of an expired task", s.Expired.Get, codeInvalidParams)
		wantCode(t, "tasks/result of an expired task", s.Expired.Result, codeInvalidParams)
		if ids := listIDs(t, "alice after expiry", s.Expired.List); slices.Contains(ids, exp.TaskID) {
			t.Errorf("tasks/list still lists the expired task %s", exp.TaskID)
		}
	}
}

// checkAlternation: with several replicas, both really served the client's
// task traffic (so state, input answers and cancels crossed replicas).
func checkAlternation(t *testing.T, out *tsTasksOut) {
	t.Helper()
	per := map[int]map[string]int{}
	for i := range out.Exchanges {
		ex := &out.Exchanges[i]
		m := ex.request().Method
		if m == "" {
			m = ex.Method
			if ex.request().isResponse() {
				m = "response"
			}
		}
		if per[ex.Replica] == nil {
			per[ex.Replica] = map[string]int{}
		}
		per[ex.Replica][m]++
	}
	for r := 0; r < out.Replicas; r++ {
		n := 0
		for m, c := range per[r] {
			if strings.HasPrefix(m, "tasks/") {
				n += c
			}
		}
		if n == 0 {
			t.Errorf("replica %d served no tasks/* request: %v", r, per)
		}
	}
	t.Logf("requests per replica: %v", per)
}

// checkStatusNotifications: notifications/tasks/status are optional, but
// when sent they carry a whole Task and no related-task _meta (2025-11-25
// "Task Notifications").
func checkStatusNotifications(t *testing.T, out *tsTasksOut) {
	t.Helper()
	var n int
	for i := range out.Exchanges {
		ex := &out.Exchanges[i]
		for _, m := range ex.received() {
			if m.Method != "notifications/tasks/status" {
				continue
			}
			n++
			var tk tsTask
			if json.Unmarshal(m.Params, &tk) != nil || tk.TaskID == "" || tk.Status == "" || tk.CreatedAt == "" {
				t.Errorf("notifications/tasks/status params %s: not a Task", m.Params)
			}
			if hasRelatedTaskMeta(m.Params) {
				t.Errorf("notifications/tasks/status carries related-task _meta (spec: SHOULD NOT): %s", m.Params)
			}
		}
	}
	t.Logf("%d notifications/tasks/status received (best effort)", n)
}

// checkNoProgressAfterTerminal: on any one stream, once the task is shown
// terminal (a terminal notifications/tasks/status, or the tasks/result
// response), no notifications/progress of that task follows (2025-11-25:
// progress stops at terminal).
func checkNoProgressAfterTerminal(t *testing.T, out *tsTasksOut) {
	t.Helper()
	terminal := map[string]bool{"completed": true, "failed": true, "cancelled": true}
	for i := range out.Exchanges {
		ex := &out.Exchanges[i]
		ended := map[string]bool{}
		for _, m := range ex.received() {
			switch {
			case m.Method == "notifications/tasks/status":
				var tk tsTask
				if json.Unmarshal(m.Params, &tk) == nil && terminal[tk.Status] {
					ended[tk.TaskID] = true
				}
			case m.isResponse() && ex.request().Method == "tasks/result":
				ended[paramTaskID(ex.request())] = true
			case m.Method == "notifications/progress":
				if id := relatedTask(m.Params); ended[id] {
					t.Errorf("notifications/progress for task %s after it was shown terminal on the same %s stream: %s", id, ex.Method, m.Params)
				}
			}
		}
	}
}
