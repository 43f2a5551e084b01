package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// MCP Tasks for 2026-07-28 clients, end to end: the built taskgate binary in
// front of a go-sdk upstream of either era, neither with task support,
// driven by the raw-HTTP client of client2026_test.go.
//
//	Test2026SingleReplica  one gateway (embedded store) per era: what each
//	                       rule makes of a call, with and without the
//	                       extension; request validation; an MRTR round
//	                       before the task (auto mode)
//	Test2026TwoReplicas    two gateways on one redis-server per era: the
//	                       spec's example flow, two partial updates,
//	                       outcomes, cancel, subscriptions/listen, the MRTR
//	                       bridge; created on A, polled and updated on B,
//	                       cancelled on A

// singleHybridWait is the single replica's --hybrid-wait: what is meant
// to be answered directly (a fast auto call, an MRTR round) comes back
// within it however busy the machine; what is meant to become a task
// works longer (slowSeconds).
const singleHybridWait = 5 * time.Second

// slowSeconds is how long the auto call that must become a task works:
// past singleHybridWait with room to spare.
const slowSeconds = 7.0

// singleReplicaFlags: one tool per kind of rule; slow, elicit and elicit2
// have none (auto).
var singleReplicaFlags = []string{
	"--sync", "echo", "--task", "fail", "--task-required", "progress",
	"--hybrid-wait", singleHybridWait.String(), "--poll-interval", "100ms",
}

func Test2026SingleReplica(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.name, func(t *testing.T) {
			t.Parallel()
			d := startModernDeployment(t, era.stateless, 1, singleReplicaFlags...)
			t.Run("rules", func(t *testing.T) { testModernRules(t, d) })
			t.Run("validation", func(t *testing.T) { testModernValidation(t, d) })
			t.Run("mrtr-before-task", func(t *testing.T) { testMRTRBeforeTask(t, d, era.stateless) })
		})
	}
}

// testModernRules: each rule, with and without the extension declared
// (docs/ARCHITECTURE.md, "How a tools/call is decided": what each rule
// means per client): a task, -32021, or the call answered synchronously.
func testModernRules(t *testing.T, d *modernDeployment) {
	const (
		sync    = "sync"
		task    = "task"
		refused = "-32021"
	)
	for _, tc := range []struct {
		name    string
		tool    string
		args    map[string]any
		ext     bool
		want    string
		text    string
		isError bool
	}{
		// Fast before slow: what the gateway learns of slow's latency must
		// not decide the fast call.
		{"no rule, fast, with extension", "slow", map[string]any{"seconds": 0, "text": "fast"}, true, sync, "slept 0 s: fast", false},
		{"no rule, slow, with extension", "slow", map[string]any{"seconds": slowSeconds, "text": "late"}, true, task, fmt.Sprintf("slept %g s: late", slowSeconds), false},
		{"no rule, slow, without extension", "slow", map[string]any{"seconds": 0.5, "text": "plain"}, false, sync, "slept 0.5 s: plain", false},
		{"--sync, with extension", "echo", map[string]any{"text": "e1"}, true, sync, "e1", false},
		{"--sync, without extension", "echo", map[string]any{"text": "e2"}, false, sync, "e2", false},
		{"--task, with extension", "fail", map[string]any{}, true, task, testupstream.FailText, true},
		{"--task, without extension", "fail", map[string]any{}, false, sync, testupstream.FailText, true},
		{"--task-required, with extension", "progress", map[string]any{"steps": 2}, true, task, "done 2", false},
		{"--task-required, without extension", "progress", map[string]any{"steps": 2}, false, refused, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMClient(t, d.urls, "Bearer rules", tc.ext)
			before := d.rec.Count(tc.tool, testupstream.Called)
			start := time.Now()
			r := c.call(0, "tools/call", map[string]any{"name": tc.tool, "arguments": tc.args})
			took := time.Since(start)
			switch tc.want {
			case sync:
				if r.Status != http.StatusOK || r.Error != nil {
					t.Fatalf("%s, want a result", r)
				}
				res := decodeCall(t, "sync answer", r.Result)
				if res.ResultType != "complete" || res.TaskID != "" || res.text() != tc.text || res.IsError != tc.isError {
					t.Errorf("= %s, want a plain result %q (isError %t, resultType complete)", r.Result, tc.text, tc.isError)
				}
			case task:
				tk := decodeTask(t, "tools/call", r.Result)
				if r.Status != http.StatusOK || r.Error != nil || tk.ResultType != "task" {
					t.Fatalf("%s, want a CreateTaskResult", r)
				}
				checkTask(t, "CreateTaskResult", tk, "task", false)
				if tk.Status != "working" {
					t.Errorf("CreateTaskResult status %q, want working", tk.Status)
				}
				if tc.tool == "slow" {
					// The auto call is held for --hybrid-wait
					// (singleHybridWait), then becomes a task before the
					// tool is done: its status is working (above). How long
					// that took is only logged; a busy machine stretches it.
					t.Logf("auto call became a task after %v", took)
				}
				done, seen := c.waitTask(0, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
				if done.Status != "completed" {
					t.Fatalf("task ended %s (statuses %v): %+v, want completed", done.Status, seen, done)
				}
				checkInlinedResult(t, "completed task", done.Result, tc.text, tc.isError)
			case refused:
				if r.Status != http.StatusBadRequest || r.Error == nil || r.Error.Code != codeMissingCapability {
					t.Fatalf("%s, want HTTP 400 with error -32021", r)
				}
				checkRequiredTasks(t, r.Error)
				if n := d.rec.Count(tc.tool, testupstream.Called); n != before {
					t.Errorf("the refused call reached the upstream")
				}
				return
			}
			if n := d.waitCalls(t, tc.tool, testupstream.Called, before+1); n != before+1 {
				t.Errorf("upstream ran %s %d times for one call", tc.tool, n-before)
			}
		})
	}
}

// checkRequiredTasks: a -32021 error names the tasks extension in
// data.requiredCapabilities (SEP-2663 (io.modelcontextprotocol/tasks
// extension), "Capability Negotiation").
func checkRequiredTasks(t *testing.T, e *tsErr) {
	t.Helper()
	var data struct {
		RequiredCapabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"requiredCapabilities"`
	}
	if json.Unmarshal(e.Data, &data) != nil || canonicalJSON(data.RequiredCapabilities.Extensions[tasksExtensionID]) != "{}" {
		t.Errorf("-32021 data = %s, want requiredCapabilities.extensions[%q] = {}", e.Data, tasksExtensionID)
	}
}

// testModernValidation: what the 2026-07-28 transport and the tasks
// extension require of every request, each broken on its own.
func testModernValidation(t *testing.T, d *modernDeployment) {
	withExt := newMClient(t, d.urls, "Bearer validation", true)
	noExt := newMClient(t, d.urls, "Bearer validation", false)
	echoCall := map[string]any{"name": "echo", "arguments": map[string]any{"text": "v"}}
	someTask := map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}
	setHeader := func(k, v string) func(*mReq) { return func(r *mReq) { r.Header.Set(k, v) } }
	delHeader := func(k string) func(*mReq) { return func(r *mReq) { r.Header.Del(k) } }
	for _, tc := range []struct {
		name   string
		c      *mClient
		method string
		params map[string]any
		edit   func(*mReq)
		code   int64
		status int
	}{
		{"control: a well-formed call", withExt, "tools/call", echoCall, nil, 0, http.StatusOK},
		{"MCP-Protocol-Version header disagrees with _meta", withExt, "tools/call", echoCall, setHeader("MCP-Protocol-Version", "2025-11-25"), codeHeaderMismatch, 400},
		{"no MCP-Protocol-Version header", withExt, "tools/call", echoCall, delHeader("MCP-Protocol-Version"), codeHeaderMismatch, 400},
		{"Mcp-Method disagrees", withExt, "tools/call", echoCall, setHeader("Mcp-Method", "tools/list"), codeHeaderMismatch, 400},
		{"no Mcp-Method", withExt, "tools/call", echoCall, delHeader("Mcp-Method"), codeHeaderMismatch, 400},
		{"Mcp-Name disagrees", withExt, "tools/call", echoCall, setHeader("Mcp-Name", "slow"), codeHeaderMismatch, 400},
		{"no Mcp-Name on tools/call", withExt, "tools/call", echoCall, delHeader("Mcp-Name"), codeHeaderMismatch, 400},
		{"Mcp-Name on tasks/get disagrees with taskId", withExt, "tasks/get", someTask, setHeader("Mcp-Name", "another-task"), codeHeaderMismatch, 400},
		{"no _meta", withExt, "tools/call", echoCall, func(r *mReq) { delete(r.params(), "_meta") }, codeInvalidParams, 400},
		{"no protocolVersion in _meta", withExt, "tools/call", echoCall, func(r *mReq) { delete(r.meta(), metaProtocolVersion) }, codeInvalidParams, 400},
		{"no clientCapabilities in _meta", withExt, "tools/call", echoCall, func(r *mReq) { delete(r.meta(), metaClientCaps) }, codeInvalidParams, 400},
		{"unknown protocol version", withExt, "tools/call", echoCall, func(r *mReq) {
			r.meta()[metaProtocolVersion] = "2099-01-01"
			r.Header.Set("MCP-Protocol-Version", "2099-01-01")
		}, codeUnsupportedVersion, 400},
		{"tasks/get without the extension", noExt, "tasks/get", someTask, nil, codeMissingCapability, 400},
		{"tasks/update without the extension", noExt, "tasks/update", map[string]any{"taskId": someTask["taskId"], "inputResponses": map[string]any{}}, nil, codeMissingCapability, 400},
		{"tasks/cancel without the extension", noExt, "tasks/cancel", someTask, nil, codeMissingCapability, 400},
		{"subscriptions/listen for tasks without the extension", noExt, "subscriptions/listen",
			map[string]any{"notifications": map[string]any{"taskIds": []string{"00000000-0000-4000-8000-000000000000"}}}, nil, codeMissingCapability, 400},
		{"tasks/get of an unknown task", withExt, "tasks/get", someTask, nil, codeInvalidParams, 400},
		{"tasks/result is not in the extension", withExt, "tasks/result", someTask, nil, codeMethodNotFound, 404},
		{"tasks/list is not in the extension", withExt, "tasks/list", map[string]any{}, nil, codeMethodNotFound, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := d.rec.Count("echo", testupstream.Called)
			c := tc.c.on(t)
			req := c.build(tc.method, tc.params)
			if tc.edit != nil {
				tc.edit(req)
			}
			r := c.send(0, req)
			if tc.code == 0 {
				if r.Status != tc.status || r.Error != nil {
					t.Fatalf("%s, want HTTP %d with a result", r, tc.status)
				}
				return
			}
			if r.Status != tc.status || r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("%s, want HTTP %d with error %d", r, tc.status, tc.code)
			}
			if string(r.ID) != fmt.Sprint(req.ID) {
				t.Errorf("error response id %s, want the request's %d", r.ID, req.ID)
			}
			switch tc.code {
			case codeUnsupportedVersion:
				var data struct {
					Supported []string `json:"supported"`
					Requested string   `json:"requested"`
				}
				if json.Unmarshal(r.Error.Data, &data) != nil || !slices.Contains(data.Supported, modernVersion) || data.Requested != "2099-01-01" {
					t.Errorf("-32022 data = %s, want supported with %s and requested 2099-01-01", r.Error.Data, modernVersion)
				}
			case codeMissingCapability:
				checkRequiredTasks(t, r.Error)
			}
			if tc.method == "tools/call" && d.rec.Count("echo", testupstream.Called) != before {
				t.Errorf("the rejected call reached the upstream")
			}
		})
	}
}

// testMRTRBeforeTask: a no-rule (auto) tool that needs input. A modern
// upstream asks with an input_required result: it passes through
// synchronously, no task, and the client's retry with inputResponses and
// requestState is a new call, decided afresh (SEP-2663: MRTR exchanges
// SHOULD resolve before the CreateTaskResult). A legacy upstream asks with
// a server→client request during the hybrid wait: the call becomes a task
// whose first state is that input request.
func testMRTRBeforeTask(t *testing.T, d *modernDeployment, modern bool) {
	c := newMClient(t, d.urls, "Bearer mrtr", true)
	for _, tc := range []struct {
		tool    string
		answers map[string]map[string]any // by question
		want    string
	}{
		{"elicit", map[string]map[string]any{"What is your name?": accept("name", "Lin")}, "Hello, Lin!"},
		{"elicit2", map[string]map[string]any{
			testupstream.Elicit2Questions["name"]:  accept("name", "Lin"),
			testupstream.Elicit2Questions["color"]: accept("color", "teal"),
		}, testupstream.Elicit2Text("Lin", "teal")},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c := c.on(t)
			before := d.rec.Count(tc.tool, testupstream.Called)
			if !modern {
				// A session upstream asks on the call's stream: the gateway
				// holds the call and asks in MRTR rounds (its own
				// requestState), on either replica, until the held call
				// answers; the upstream runs the tool once.
				params := map[string]any{"name": tc.tool, "arguments": map[string]any{}}
				var r mReply
				for round := 0; round < 4; round++ {
					r = c.call(round%len(d.urls), "tools/call", params)
					res := decodeCall(t, "round", r.Result)
					if r.Error != nil || res.ResultType != "input_required" {
						break
					}
					if res.TaskID != "" || res.RequestState == nil || !strings.HasPrefix(*res.RequestState, "taskgate-mrtr:") {
						t.Fatalf("round %d = %s, want the gateway's input_required round and no task", round, r)
					}
					responses := map[string]any{}
					for q, k := range inputKeys(t, "input_required", res.InputRequests) {
						if tc.answers[q] == nil {
							t.Fatalf("unexpected question %q", q)
						}
						responses[k] = tc.answers[q]
					}
					params = map[string]any{"name": tc.tool, "arguments": map[string]any{},
						"inputResponses": responses, "requestState": *res.RequestState}
				}
				if res := decodeCall(t, "last round", r.Result); r.Error != nil || res.ResultType != "complete" || res.TaskID != "" || res.text() != tc.want {
					t.Errorf("last round = %s, want the plain result %q", r, tc.want)
				}
				if n := d.waitCalls(t, tc.tool, testupstream.Called, before+1); n != before+1 {
					t.Errorf("a legacy upstream ran %s %d times, want once", tc.tool, n-before)
				}
				return
			}
			r := c.call(0, "tools/call", map[string]any{"name": tc.tool, "arguments": map[string]any{}})
			round := decodeCall(t, "first round", r.Result)
			if r.Status != http.StatusOK || r.Error != nil || round.ResultType != "input_required" || round.TaskID != "" ||
				len(round.InputRequests) != len(tc.answers) || round.RequestState == nil || *round.RequestState == "" {
				t.Fatalf("%s, want the upstream's input_required round with %d input requests and a requestState, no task", r, len(tc.answers))
			}
			responses := map[string]any{}
			for q, k := range inputKeys(t, "input_required", round.InputRequests) {
				if tc.answers[q] == nil {
					t.Fatalf("unexpected question %q", q)
				}
				responses[k] = tc.answers[q]
			}
			r = c.call(0, "tools/call", map[string]any{"name": tc.tool, "arguments": map[string]any{},
				"inputResponses": responses, "requestState": *round.RequestState})
			res := decodeCall(t, "retry", r.Result)
			if r.Status != http.StatusOK || r.Error != nil || res.ResultType != "complete" || res.TaskID != "" || res.text() != tc.want {
				t.Errorf("retry = %s, want the plain result %q", r, tc.want)
			}
			if n := d.waitCalls(t, tc.tool, testupstream.Called, before+2); n != before+2 {
				t.Errorf("upstream ran %s %d times, want twice (the round, then the retry)", tc.tool, n-before)
			}
		})
	}
}

// twoReplicaFlags: every tool the scenarios use is a --task tool.
var twoReplicaFlags = []string{
	"--task", "elicit", "--task", "elicit2", "--task", "slow", "--task", "fail", "--task", "rpcerror",
	"--poll-interval", "100ms",
}

// Replicas: the create on A, the polls and updates on B, the cancel on A.
const (
	replicaA = 0
	replicaB = 1
)

func Test2026TwoReplicas(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.name, func(t *testing.T) {
			t.Parallel()
			d := startModernDeployment(t, era.stateless, 2, twoReplicaFlags...)
			t.Run("spec-example-flow", func(t *testing.T) { testSpecExampleFlow(t, d, era.stateless) })
			t.Run("two-partial-updates", func(t *testing.T) { testTwoPartialUpdates(t, d, era.stateless) })
			t.Run("outcomes", func(t *testing.T) { testModernOutcomes(t, d) })
			t.Run("cancel", func(t *testing.T) { testModernCancel(t, d, era.stateless) })
			t.Run("listen", func(t *testing.T) { testModernListen(t, d) })
			t.Run("bridge", func(t *testing.T) { testModernBridge(t, d, era.stateless) })
		})
	}
}

// testSpecExampleFlow is SEP-2663 (io.modelcontextprotocol/tasks extension),
// "Example Message Flow": a tool that elicits the user's name becomes a
// task; tasks/get shows input_required with the elicitation in
// inputRequests, the same again on a second poll; tasks/update answers it;
// the task completes with "Hello, <name>!".
func testSpecExampleFlow(t *testing.T, d *modernDeployment, modern bool) {
	c := newMClient(t, d.urls, "Bearer alice", true)
	before := d.rec.Count("elicit", testupstream.Called)
	created := c.createTask(replicaA, "elicit", map[string]any{})
	if created.Status != "working" {
		t.Errorf("CreateTaskResult status %q, want working", created.Status)
	}
	ir, seen := c.waitTask(replicaB, created.TaskID, "input_required", func(tk mTask) bool { return tk.Status != "working" })
	if ir.Status != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("after %v: %+v, want input_required with one input request", seen, ir)
	}
	if ir.CreatedAt != created.CreatedAt || ir.TTLMs == nil {
		t.Errorf("tasks/get createdAt %s, want the CreateTaskResult's %s", ir.CreatedAt, created.CreatedAt)
	}
	var key string
	for k, in := range ir.InputRequests {
		key = k
		var p struct {
			Message         string `json:"message"`
			RequestedSchema struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
				Required []string `json:"required"`
			} `json:"requestedSchema"`
		}
		if in.Method != "elicitation/create" || json.Unmarshal(in.Params, &p) != nil || p.Message != "What is your name?" ||
			p.RequestedSchema.Type != "object" || p.RequestedSchema.Properties["name"].Type != "string" || !slices.Equal(p.RequestedSchema.Required, []string{"name"}) {
			t.Errorf("input request %s = %s %s, want the upstream's elicitation for a name", k, in.Method, in.Params)
		}
	}
	// Polled again before the user answers: the same snapshot, same key.
	again := c.get(replicaB, created.TaskID)
	if again.Status != "input_required" || len(again.InputRequests) != 1 ||
		canonicalJSON(again.InputRequests[key].Params) != canonicalJSON(ir.InputRequests[key].Params) {
		t.Errorf("second poll = %+v, want the same input request under key %s", again, key)
	}
	c.update(replicaB, created.TaskID, map[string]any{key: accept("name", "Luca")})
	done, seen := c.waitTask(replicaB, created.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	for _, s := range seen {
		if s != "input_required" && s != "working" && s != "completed" {
			t.Errorf("status %s after the update (statuses %v)", s, seen)
		}
	}
	if done.Status != "completed" {
		t.Fatalf("task ended %s: %+v", done.Status, done)
	}
	checkInlinedResult(t, "spec example flow", done.Result, "Hello, Luca!", false)
	if onA := c.get(replicaA, created.TaskID); onA.Status != "completed" || canonicalJSON(onA.Result) != canonicalJSON(done.Result) {
		t.Errorf("replica A sees %+v, replica B %+v", onA, done)
	}
	want := 1 // a legacy upstream's call waits for the answer
	if modern {
		want = 2 // the input_required round, then the retry with the answer
	}
	if n := d.waitCalls(t, "elicit", testupstream.Called, before+want); n != before+want {
		t.Errorf("upstream ran elicit %d times, want %d", n-before, want)
	}
}

// testTwoPartialUpdates: elicit2 asks two questions at once (a legacy
// upstream: two concurrent elicitation/create requests; a modern one: one
// round with two inputRequests); each is answered by its own tasks/update.
// After the first, the task stays input_required with only the other
// question, under the same key; an answer to an already answered key is
// ignored; after the second, it completes with both answers.
func testTwoPartialUpdates(t *testing.T, d *modernDeployment, modern bool) {
	c := newMClient(t, d.urls, "Bearer alice", true)
	before := d.rec.Count("elicit2", testupstream.Called)
	created := c.createTask(replicaA, "elicit2", map[string]any{})
	ir, seen := c.waitTask(replicaB, created.TaskID, "both questions", func(tk mTask) bool {
		return terminal(tk.Status) || len(tk.InputRequests) == 2
	})
	if ir.Status != "input_required" {
		t.Fatalf("after %v: %+v, want input_required with two input requests", seen, ir)
	}
	keys := inputKeys(t, "tasks/get", ir.InputRequests)
	nameKey, colorKey := keys[testupstream.Elicit2Questions["name"]], keys[testupstream.Elicit2Questions["color"]]
	if nameKey == "" || colorKey == "" || nameKey == colorKey {
		t.Fatalf("input requests %v, want one per question", keys)
	}

	c.update(replicaB, created.TaskID, map[string]any{nameKey: accept("name", "Luca")})
	one, seen := c.waitTask(replicaB, created.TaskID, "the first answer taken", func(tk mTask) bool {
		_, stillName := tk.InputRequests[nameKey]
		return terminal(tk.Status) || !stillName
	})
	if one.Status != "input_required" || len(one.InputRequests) != 1 || one.InputRequests[colorKey].message() != testupstream.Elicit2Questions["color"] {
		t.Fatalf("after one of two answers (statuses %v): %+v, want input_required with only %s (the colour)", seen, one, colorKey)
	}
	// The answered key again, on the other replica: ignored.
	c.update(replicaA, created.TaskID, map[string]any{nameKey: accept("name", "Mallory")})
	if still := c.get(replicaB, created.TaskID); still.Status != "input_required" {
		t.Errorf("after a repeated answer: %+v, want still input_required", still)
	}

	c.update(replicaB, created.TaskID, map[string]any{colorKey: accept("color", "teal")})
	done, seen := c.waitTask(replicaB, created.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if done.Status != "completed" {
		t.Fatalf("task ended %s (statuses %v): %+v", done.Status, seen, done)
	}
	checkInlinedResult(t, "elicit2", done.Result, testupstream.Elicit2Text("Luca", "teal"), false)
	want := 1
	if modern {
		want = 2 // one round with both questions, one retry once both are answered
	}
	if n := d.waitCalls(t, "elicit2", testupstream.Called, before+want); n != before+want {
		t.Errorf("upstream ran elicit2 %d times, want %d", n-before, want)
	}
}

// testModernOutcomes: a tool error is a completed task with the isError
// result; a JSON-RPC error is a failed task with that error inlined
// (SEP-2663 (io.modelcontextprotocol/tasks extension), "Task Execution
// Errors"); unknown and other owners' tasks are -32602.
func testModernOutcomes(t *testing.T, d *modernDeployment) {
	c := newMClient(t, d.urls, "Bearer alice", true)
	fail := c.createTask(replicaA, "fail", map[string]any{})
	done, _ := c.waitTask(replicaB, fail.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if done.Status != "completed" {
		t.Errorf("a tool error (isError) ended the task %s, want completed: %+v", done.Status, done)
	} else {
		checkInlinedResult(t, "fail", done.Result, testupstream.FailText, true)
	}

	rpc := c.createTask(replicaA, "rpcerror", map[string]any{})
	failed, _ := c.waitTask(replicaB, rpc.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	switch {
	case failed.Status != "failed":
		t.Errorf("a JSON-RPC error ended the task %s, want failed: %+v", failed.Status, failed)
	case failed.Error.Code != testupstream.RPCErrorCode || failed.Error.Message != testupstream.RPCErrorMessage ||
		canonicalJSON(failed.Error.Data) != `{"tool":"rpcerror"}`:
		t.Errorf("failed task error = %s, want the upstream's %d %q {\"tool\":\"rpcerror\"}", failed.Error, testupstream.RPCErrorCode, testupstream.RPCErrorMessage)
	case failed.StatusMessage == "":
		t.Errorf("failed task without a statusMessage (spec: SHOULD)")
	}

	other := newMClient(t, d.urls, "Bearer mallory", true)
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		r := other.call(replicaB, m, map[string]any{"taskId": fail.TaskID, "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != codeInvalidParams {
			t.Errorf("%s of another owner's task = %s, want -32602", m, r)
		}
	}
	if r := c.call(replicaB, "tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}); r.Error == nil || r.Error.Code != codeInvalidParams {
		t.Errorf("tasks/get of an unknown task = %s, want -32602", r)
	}
}

// testModernCancel: a 30-second call as a task (created on A, where its
// worker runs), cancelled on A and, another one, on B: acknowledged,
// cancelled, and the upstream saw the cancellation (its handler's context
// ended). And a task waiting for input, cancelled: a legacy upstream's call
// (blocked in its elicitation) is cancelled; a modern upstream, between
// rounds, is never called again.
func testModernCancel(t *testing.T, d *modernDeployment, modern bool) {
	c := newMClient(t, d.urls, "Bearer alice", true)
	for _, tc := range []struct {
		name     string
		cancelOn int
	}{{"cancel on A", replicaA}, {"cancel on B", replicaB}} {
		t.Run(tc.name, func(t *testing.T) {
			c := c.on(t)
			called, cancelled, completed := d.rec.Count("slow", testupstream.Called), d.rec.Count("slow", testupstream.Cancelled), d.rec.Count("slow", testupstream.Completed)
			created := c.createTask(replicaA, "slow", map[string]any{"seconds": 30, "text": "never"})
			if n := d.waitCalls(t, "slow", testupstream.Called, called+1); n != called+1 {
				t.Fatalf("the upstream did not start slow")
			}
			if tk := c.get(replicaB, created.TaskID); tk.Status != "working" {
				t.Errorf("running task is %s, want working", tk.Status)
			}
			start := time.Now()
			c.cancel(tc.cancelOn, created.TaskID)
			done, seen := c.waitTask(replicaB, created.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
			if done.Status != "cancelled" {
				t.Errorf("cancelled task is %s (statuses %v), want cancelled", done.Status, seen)
			}
			if n := d.waitCalls(t, "slow", testupstream.Cancelled, cancelled+1); n != cancelled+1 {
				t.Errorf("the upstream never saw the cancellation: events %+v", d.rec.Events())
			}
			t.Logf("cancelled, and the upstream saw it, %v after tasks/cancel", time.Since(start))
			if n := d.rec.Count("slow", testupstream.Completed); n != completed {
				t.Errorf("slow completed upstream after the cancel")
			}
			// Cancelling a task that is already over is acknowledged too.
			c.cancel(replicaB, created.TaskID)
			if tk := c.get(replicaA, created.TaskID); tk.Status != "cancelled" {
				t.Errorf("after a second cancel: %s", tk.Status)
			}
		})
	}
	t.Run("cancel while input_required", func(t *testing.T) {
		c := c.on(t)
		called, cancelled := d.rec.Count("elicit", testupstream.Called), d.rec.Count("elicit", testupstream.Cancelled)
		created := c.createTask(replicaA, "elicit", map[string]any{})
		c.waitStatus(replicaB, created.TaskID, "input_required")
		c.cancel(replicaB, created.TaskID)
		done, seen := c.waitTask(replicaB, created.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
		if done.Status != "cancelled" {
			t.Errorf("cancelled task is %s (statuses %v), want cancelled", done.Status, seen)
		}
		// A late answer changes nothing.
		c.update(replicaA, created.TaskID, map[string]any{"1": accept("name", "Late")})
		if tk := c.get(replicaA, created.TaskID); tk.Status != "cancelled" {
			t.Errorf("after a late answer: %s", tk.Status)
		}
		if modern {
			time.Sleep(300 * time.Millisecond)
			if n := d.rec.Count("elicit", testupstream.Called); n != called+1 {
				t.Errorf("upstream called %d times, want once (no retry after the cancel)", n-called)
			}
			return
		}
		if n := d.waitCalls(t, "elicit", testupstream.Cancelled, cancelled+1); n != cancelled+1 {
			t.Errorf("the legacy upstream's call, blocked in its elicitation, was not cancelled: events %+v", d.rec.Events())
		}
	})
}

// testModernListen: subscriptions/listen with notifications.taskIds on B,
// for tasks created on A: the acknowledgement comes first and grants only
// the caller's own tasks; then notifications/tasks carry the full
// DetailedTask, each with the subscription id, as tasks/get shows it.
func testModernListen(t *testing.T, d *modernDeployment) {
	c := newMClient(t, d.urls, "Bearer alice", true)
	other := newMClient(t, d.urls, "Bearer mallory", true)
	slow := c.createTask(replicaA, "slow", map[string]any{"seconds": 1, "text": "listen"})
	elicit := c.createTask(replicaA, "elicit", map[string]any{})
	theirs := other.createTask(replicaA, "slow", map[string]any{"seconds": 0.2})
	unknown := "00000000-0000-4000-8000-000000000000"

	req := c.build("subscriptions/listen", map[string]any{
		"notifications": map[string]any{"taskIds": []string{slow.TaskID, elicit.TaskID, theirs.TaskID, unknown}},
	})
	body, _ := json.Marshal(req.Body)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.urls[replicaB], strings.NewReader(string(body)))
	hreq.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	defer cancel() // ends the stream before the body is closed
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("subscriptions/listen: HTTP %d %s, want an SSE stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	stream := readSSE(resp.Body)
	subID := fmt.Sprint(req.ID)
	subscription := func(params json.RawMessage) string {
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		return string(p.Meta[subscriptionIDKey])
	}

	first := stream.next(t, 10*time.Second)
	var ack struct {
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	_ = json.Unmarshal(first.Params, &ack)
	var granted []string
	_ = json.Unmarshal(ack.Notifications["taskIds"], &granted)
	slices.Sort(granted)
	want := []string{slow.TaskID, elicit.TaskID}
	slices.Sort(want)
	if first.Method != "notifications/subscriptions/acknowledged" || !slices.Equal(granted, want) || len(ack.Notifications) != 1 {
		t.Fatalf("first message %s %s, want the acknowledgement granting only my two tasks %v", first.Method, first.Params, want)
	}
	if got := subscription(first.Params); got != subID {
		t.Errorf("acknowledgement _meta subscriptionId = %s, want the listen request's id %s", got, subID)
	}

	// The elicit task may already wait for input: a notification only
	// reports changes after the acknowledgement, so look once.
	answered := false
	answer := func(tk mTask) {
		if answered || tk.Status != "input_required" {
			return
		}
		answered = true
		for k := range tk.InputRequests {
			c.update(replicaA, elicit.TaskID, map[string]any{k: accept("name", "Ada")})
		}
	}
	answer(c.get(replicaA, elicit.TaskID))

	last := map[string]mTask{}
	statuses := map[string][]string{}
	for deadline := time.Now().Add(15 * time.Second); last[slow.TaskID].Status != "completed" || last[elicit.TaskID].Status != "completed"; {
		if time.Now().After(deadline) {
			t.Fatalf("not both tasks completed on the stream in 15 s: %v", statuses)
		}
		m := stream.next(t, 10*time.Second)
		if m.Method != "notifications/tasks" {
			t.Errorf("unexpected %s on the listen stream: %s", m.Method, m.Params)
			continue
		}
		if got := subscription(m.Params); got != subID {
			t.Errorf("notifications/tasks _meta subscriptionId = %s, want %s", got, subID)
		}
		tk := decodeTask(t, "notifications/tasks", m.Params)
		if tk.TaskID != slow.TaskID && tk.TaskID != elicit.TaskID {
			t.Errorf("notification for task %s, which was not granted", tk.TaskID)
			continue
		}
		checkTask(t, "notifications/tasks", tk, "", true)
		last[tk.TaskID] = tk
		statuses[tk.TaskID] = append(statuses[tk.TaskID], tk.Status)
		if tk.TaskID == elicit.TaskID {
			answer(tk)
		}
	}
	t.Logf("notifications: %v", statuses)
	checkInlinedResult(t, "slow on the stream", last[slow.TaskID].Result, "slept 1 s: listen", false)
	checkInlinedResult(t, "elicit on the stream", last[elicit.TaskID].Result, "Hello, Ada!", false)
	// What the stream said last is what tasks/get says.
	for id, tk := range last {
		got := c.get(replicaA, id)
		if got.Status != tk.Status || got.LastUpdatedAt != tk.LastUpdatedAt || got.CreatedAt != tk.CreatedAt ||
			canonicalJSON(got.TTLMs) != canonicalJSON(tk.TTLMs) || canonicalJSON(got.Result) != canonicalJSON(tk.Result) {
			t.Errorf("task %s: last notification %+v, tasks/get %+v", id, tk, got)
		}
	}
}

// testModernBridge: a client without the extension calls elicit and
// elicit2 plainly. In front of a legacy upstream the gateway's MRTR bridge
// turns the upstream's elicitation requests into input_required rounds; in
// front of a modern one the upstream's own rounds pass through. Either way
// the retries, on the other replica, complete the call.
func testModernBridge(t *testing.T, d *modernDeployment, modern bool) {
	c := newMClient(t, d.urls, "Bearer bridge", false)
	for _, tc := range []struct {
		tool    string
		answers map[string]map[string]any
		want    string
	}{
		{"elicit", map[string]map[string]any{"What is your name?": accept("name", "Ada")}, "Hello, Ada!"},
		{"elicit2", map[string]map[string]any{
			testupstream.Elicit2Questions["name"]:  accept("name", "Ada"),
			testupstream.Elicit2Questions["color"]: accept("color", "teal"),
		}, testupstream.Elicit2Text("Ada", "teal")},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c := c.on(t)
			before := d.rec.Count(tc.tool, testupstream.Called)
			params := map[string]any{"name": tc.tool, "arguments": map[string]any{}}
			asked := map[string]int{}
			var res callResult
			for round := 0; ; round++ {
				replica := round % 2 // the first call on A, the retries alternating
				r := c.call(replica, "tools/call", params)
				if r.Status != http.StatusOK || r.Error != nil {
					t.Fatalf("round %d: %s", round, r)
				}
				res = decodeCall(t, "tools/call", r.Result)
				if res.ResultType != "input_required" {
					break
				}
				if round == 3 {
					t.Fatalf("still input_required after %d rounds: %s", round+1, r.Result)
				}
				if res.TaskID != "" || res.RequestState == nil || *res.RequestState == "" || len(res.InputRequests) == 0 {
					t.Fatalf("round %d = %s, want an input_required round with input requests and a requestState", round, r.Result)
				}
				responses := map[string]any{}
				for q, k := range inputKeys(t, "input_required", res.InputRequests) {
					asked[q]++
					if tc.answers[q] == nil {
						t.Fatalf("unexpected question %q", q)
					}
					responses[k] = tc.answers[q]
				}
				params = map[string]any{"name": tc.tool, "arguments": map[string]any{},
					"inputResponses": responses, "requestState": *res.RequestState}
			}
			if res.ResultType != "complete" || res.text() != tc.want || res.TaskID != "" {
				t.Errorf("final answer %+v, want the plain result %q", res, tc.want)
			}
			for q := range tc.answers {
				if asked[q] != 1 {
					t.Errorf("question %q asked %d times, want once", q, asked[q])
				}
			}
			want := 1
			if modern {
				want = 2
			}
			if n := d.waitCalls(t, tc.tool, testupstream.Called, before+want); n != before+want {
				t.Errorf("upstream ran %s %d times, want %d", tc.tool, n-before, want)
			}
		})
	}
}
