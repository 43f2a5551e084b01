package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestExtTasksClient runs js/ext-tasks.mjs: the official MCP Tasks requester
// package, @modelcontextprotocol/ext-tasks, on the TypeScript SDK v2 client
// pinned to 2026-07-28, as a second, independent client of the tasks
// extension, against two replicas per upstream era. Its tools/call and
// tasks/* go through the script's own rawDispatch (the package has no HTTP
// transport; see the script's header), which alternates between the
// replicas.
//
// The scenarios: elicit (a --task tool: task, inputRequests answered with
// tasks/update, completed), elicit2 (no rule, two questions at once: MRTR
// rounds before any task, passed through from a modern upstream, made by
// the gateway from a legacy one's elicitations), outcomes (isError is completed, a JSON-RPC error is
// failed) and cancel (a 30-second task cancelled 500 ms after it was
// created; the upstream saw the cancellation).
func TestExtTasksClient(t *testing.T) {
	node := ensureJS(t)
	for _, era := range upstreamEras {
		t.Run(era.name, func(t *testing.T) {
			t.Parallel()
			d := startModernDeployment(t, era.stateless, 2,
				"--task", "elicit", "--task", "slow", "--task", "fail", "--task", "rpcerror", "--poll-interval", "100ms")
			out := runExtTasks(t, node, "elicit,elicit2,outcomes,cancel", d.urls)
			checkExtTasks(t, out, d, era.stateless)
		})
	}
}

type extOut struct {
	ProtocolEra        string `json:"protocolEra"`
	ServerCapabilities struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	} `json:"serverCapabilities"`
	Dispatches []extDispatch `json:"dispatches"`
	Inputs     []extInput    `json:"inputs"`
	Errors     []string      `json:"errors"`
	Error      string        `json:"error"`
	Elicit     *extRun       `json:"elicit"`
	Elicit2    *extRun       `json:"elicit2"`
	Fail       *extRun       `json:"fail"`
	RPCError   *extRun       `json:"rpcerror"`
	Cancel     *extRun       `json:"cancel"`
}

type extDispatch struct {
	Replica  int               `json:"replica"`
	Method   string            `json:"method"`
	Request  json.RawMessage   `json:"request"`
	Headers  map[string]string `json:"headers"`
	Status   int               `json:"status"`
	Response json.RawMessage   `json:"response"`
}

type extInput struct {
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Scope    string `json:"scope"`
	Delivery string `json:"delivery"`
	TaskID   string `json:"taskId"`
	InputID  string `json:"inputId"`
}

type extRun struct {
	Tool   string `json:"tool"`
	Kind   string `json:"kind"` // "task" or "immediate"
	TaskID string `json:"taskId"`
	Events []struct {
		Status string `json:"status"`
		TaskID string `json:"taskId"`
		PollMs *int64 `json:"pollMs"`
	} `json:"events"`
	MS          float64  `json:"ms"`
	CancelAt    *float64 `json:"cancelAt"`
	CancelAcked *float64 `json:"cancelAcked"`
	CancelError string   `json:"cancelError"`
	Outcome     struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Name    string          `json:"name"`
			Message string          `json:"message"`
			Code    *int64          `json:"code"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	} `json:"outcome"`
}

func (r *extRun) statuses() []string {
	var s []string
	for _, e := range r.Events {
		s = append(s, e.Status)
	}
	return s
}

// runExtTasks runs js/ext-tasks.mjs with scenarios against urls.
func runExtTasks(t *testing.T, node, scenarios string, urls []string) *extOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "ext-tasks.mjs", scenarios, strings.Join(urls, ","))
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ext-tasks.mjs output:\n%s\nstderr: %s", raw, stderr.Bytes())
		}
	})
	var out extOut
	if jerr := json.Unmarshal(bytes.TrimSpace(raw), &out); jerr != nil {
		t.Fatalf("node ext-tasks.mjs: %v (%v)", err, jerr)
	}
	if out.Error != "" || err != nil {
		t.Fatalf("ext-tasks.mjs failed (%v): %s", err, out.Error)
	}
	return &out
}

func checkExtTasks(t *testing.T, out *extOut, d *modernDeployment, modern bool) {
	t.Helper()
	if out.ProtocolEra != "modern" || canonicalJSON(out.ServerCapabilities.Extensions[tasksExtensionID]) != "{}" {
		t.Errorf("the SDK v2 client connected in era %q with extensions %v, want modern with %s: {}", out.ProtocolEra, out.ServerCapabilities.Extensions, tasksExtensionID)
	}
	for _, e := range out.Errors {
		t.Errorf("ext-tasks reported: %s", e)
	}

	// elicit: a task; its one input request answered by tasks/update.
	if r := out.Elicit; r == nil {
		t.Error("elicit: not run")
	} else {
		if r.Kind != "task" || r.TaskID == "" {
			t.Errorf("elicit: execution %q, want a task", r.Kind)
		}
		checkExtCompleted(t, "elicit", r, "Hello, Grace!", false)
		var mine []extInput
		for _, in := range out.Inputs {
			if in.TaskID == r.TaskID && r.TaskID != "" {
				mine = append(mine, in)
			}
		}
		if len(mine) != 1 || mine[0].Message != "What is your name?" || mine[0].Scope != "task" || mine[0].Delivery != "task-update" {
			t.Errorf("elicit: input requests handled %+v, want one elicitation delivered by task-update", mine)
		}
	}

	// elicit2 (no rule) asks at once: MRTR rounds before any task (SEP-2663,
	// "MRTR → tasks composition"), a modern upstream's passed through, a
	// legacy upstream's two elicitations turned into rounds by the gateway;
	// answered at once, the call ends within the hybrid wait: no task.
	if r := out.Elicit2; r == nil {
		t.Error("elicit2: not run")
	} else {
		checkExtCompleted(t, "elicit2", r, testupstream.Elicit2Text("Grace", "teal"), false)
		wantKind, wantDelivery := "immediate", "request-retry"
		if r.Kind != wantKind {
			t.Errorf("elicit2: execution %q, want %q", r.Kind, wantKind)
		}
		asked := map[string]string{}
		for _, in := range out.Inputs {
			if in.Message == testupstream.Elicit2Questions["name"] && in.TaskID != "" && out.Elicit != nil && in.TaskID == out.Elicit.TaskID {
				continue // elicit's question
			}
			if in.Message == testupstream.Elicit2Questions["name"] || in.Message == testupstream.Elicit2Questions["color"] {
				asked[in.Message] = in.Delivery
			}
		}
		for _, q := range testupstream.Elicit2Questions {
			if asked[q] != wantDelivery {
				t.Errorf("elicit2: question %q delivered by %q, want %q (all: %+v)", q, asked[q], wantDelivery, out.Inputs)
			}
		}
	}

	// Outcomes: isError is a completed task; a JSON-RPC error a failed one.
	if r := out.Fail; r == nil || r.Kind != "task" {
		t.Errorf("fail: %+v, want a task", r)
	} else {
		checkExtCompleted(t, "fail", r, testupstream.FailText, true)
	}
	if r := out.RPCError; r == nil || r.Kind != "task" {
		t.Errorf("rpcerror: %+v, want a task", r)
	} else if e := r.Outcome.Error; r.Outcome.Status != "failed" || e == nil || e.Code == nil || *e.Code != testupstream.RPCErrorCode {
		t.Errorf("rpcerror: outcome %s %+v, want failed with code %d", r.Outcome.Status, e, testupstream.RPCErrorCode)
	}

	// Cancel: acknowledged, cancelled, and the upstream saw it.
	if r := out.Cancel; r == nil || r.Kind != "task" {
		t.Errorf("cancel: %+v, want a task", r)
	} else {
		if r.CancelAcked == nil || r.CancelError != "" || r.Outcome.Status != "cancelled" {
			t.Errorf("cancel: acked %v, error %q, outcome %s (statuses %v), want acknowledged and cancelled",
				r.CancelAcked, r.CancelError, r.Outcome.Status, r.statuses())
		}
		if r.MS > 10000 {
			t.Errorf("cancel: the 30-second task took %.0f ms to settle cancelled", r.MS)
		}
		if n := d.waitCalls(t, "slow", testupstream.Called, 1); n != 1 {
			t.Errorf("the upstream ran slow %d times in the 500 ms before the cancel, want once", n)
		}
		if n := d.waitCalls(t, "slow", testupstream.Cancelled, 1); n != 1 {
			t.Errorf("the upstream never saw the cancellation: events %+v", d.rec.Events())
		}
		if n := d.rec.Count("slow", testupstream.Completed); n != 0 {
			t.Errorf("slow completed upstream after the cancel")
		}
	}

	// The wire: every request answered with HTTP 200; tasks/* carried the
	// Mcp-Name routing header; both replicas served task traffic.
	perReplica := map[int]int{}
	for _, dp := range out.Dispatches {
		if dp.Status != 200 {
			t.Errorf("%s on replica %d: HTTP %d %s", dp.Method, dp.Replica, dp.Status, dp.Response)
		}
		if !strings.HasPrefix(dp.Method, "tasks/") {
			continue
		}
		perReplica[dp.Replica]++
		var req struct {
			Params struct {
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		_ = json.Unmarshal(dp.Request, &req)
		if dp.Headers["Mcp-Name"] != req.Params.TaskID || req.Params.TaskID == "" {
			t.Errorf("%s for task %q sent Mcp-Name %q", dp.Method, req.Params.TaskID, dp.Headers["Mcp-Name"])
		}
	}
	if perReplica[0] == 0 || perReplica[1] == 0 {
		t.Errorf("tasks/* per replica: %v, want both replicas used", perReplica)
	}
}

// checkExtCompleted: the execution settled completed with the tool's result.
func checkExtCompleted(t *testing.T, what string, r *extRun, text string, isError bool) {
	t.Helper()
	if r.Outcome.Status != "completed" {
		t.Errorf("%s: outcome %s (statuses %v) %+v, want completed", what, r.Outcome.Status, r.statuses(), r.Outcome.Error)
		return
	}
	res := decodeCall(t, what, r.Outcome.Result)
	if res.text() != text || res.IsError != isError {
		t.Errorf("%s: result %s, want %q (isError %t)", what, r.Outcome.Result, text, isError)
	}
}
