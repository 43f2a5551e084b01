package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// What js/fallback.mjs prints.
type fallbackOut struct {
	Steps       map[string]fallbackStep `json:"steps"`
	ListChanged []struct {
		Client string   `json:"client"`
		Error  string   `json:"error"`
		Tools  []string `json:"tools"`
	} `json:"listChanged"`
	Elicitations []struct {
		Client string `json:"client"`
	} `json:"elicitations"`
	Replicas           map[string][]int `json:"replicas"`
	ProtocolVersion    string           `json:"protocolVersion"`
	ServerCapabilities struct {
		Tools struct {
			ListChanged bool `json:"listChanged"`
		} `json:"tools"`
	} `json:"serverCapabilities"`
	ToolsBefore  []string `json:"toolsBefore"`
	ClientErrors []any    `json:"clientErrors"`
	Error        string   `json:"error"`
}

type fallbackStep struct {
	Ms     int64 `json:"ms"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent struct {
			TaskID        string                     `json:"taskId"`
			Status        string                     `json:"status"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s fallbackStep) text() string {
	if s.Result == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range s.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestFallbackToolsTypeScript: the TypeScript SDK v1 client with no tasks
// capability, against two replicas sharing Redis (every HTTP request to
// the next one): a slow tool answers early with a task id, the SDK
// re-lists the tools on list_changed, status and result read back, another
// session cannot touch the task, cancel stops the upstream call, input is
// answered by the elicitation handler while task_result waits, and by
// task_answer from a client without elicitation.
func TestFallbackToolsTypeScript(t *testing.T) {
	node := ensureJS(t)
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Recorder: rec})
	redisURL := "redis://" + redistest.Start(t)
	args := []string{"--fallback-tools", "--task", "slow", "--task", "elicit", "--hybrid-wait", "500ms", "--redis-url", redisURL}
	g0, g1 := startGateway(t, up, args...), startGateway(t, up, args...)
	urls := []string{g0.URL, g1.URL}

	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "fallback.mjs", strings.Join(urls, ","))
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	var out fallbackOut
	if jerr := json.Unmarshal(bytes.TrimSpace(raw), &out); jerr != nil || err != nil || out.Error != "" {
		t.Fatalf("node fallback.mjs: %v %v %s\nstdout: %s\nstderr: %s", err, jerr, out.Error, raw, stderr.Bytes())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fallback.mjs output:\n%s", raw)
		}
	})
	step := func(name string) fallbackStep {
		s, ok := out.Steps[name]
		if !ok {
			t.Fatalf("step %s did not run", name)
		}
		if s.Error != nil {
			t.Fatalf("step %s: error %+v", name, *s.Error)
		}
		return s
	}

	if out.ProtocolVersion != "2025-11-25" || !out.ServerCapabilities.Tools.ListChanged {
		t.Errorf("session: %q, tools.listChanged %v", out.ProtocolVersion, out.ServerCapabilities.Tools.ListChanged)
	}
	if slices.Contains(out.ToolsBefore, "taskgate_task_result") {
		t.Errorf("the fallback tools were listed before any fallback task: %v", out.ToolsBefore)
	}
	started := step("slowStarted")
	id := started.Result.StructuredContent.TaskID
	// It came before the tool's end: the status read next is working. How
	// long it took is only logged (a busy machine stretches it).
	if !uuidRE.MatchString(id) || started.Result.IsError || !strings.Contains(started.text(), "taskgate_task_result") {
		t.Fatalf("slow call: %+v in %d ms; want a task id", started.Result, started.Ms)
	}
	t.Logf("the slow call answered with its task id after %d ms", started.Ms)
	relisted := false
	for _, l := range out.ListChanged {
		if l.Client == "asker" && slices.Contains(l.Tools, "taskgate_task_result") && slices.Contains(l.Tools, "taskgate_task_answer") {
			relisted = true
		}
	}
	if !relisted {
		t.Errorf("the SDK's list-changed refresh did not find the fallback tools: %+v", out.ListChanged)
	}
	if s := step("status"); s.Result.StructuredContent.Status != "working" {
		t.Errorf("status: %+v", s.Result)
	}
	for _, name := range []string{"foreignStatus", "foreignResult", "foreignCancel"} {
		if s := step(name); !s.Result.IsError || !strings.Contains(s.text(), "task not found") {
			t.Errorf("%s: %+v, want isError task not found", name, s.Result)
		}
	}
	if s := step("result"); s.text() != "slept 6 s: late" || s.Result.IsError {
		t.Errorf("result: %+v", s.Result)
	}
	if n := rec.Count("slow", testupstream.Completed); n != 1 {
		t.Errorf("the upstream completed slow %d times, want 1 (the call was not repeated)", n)
	}

	if s := step("cancel"); s.Result.IsError || s.Result.StructuredContent.Status != "cancelled" {
		t.Errorf("cancel: %+v", s.Result)
	}
	if s := step("cancelledStatus"); s.Result.StructuredContent.Status != "cancelled" {
		t.Errorf("status after cancel: %+v", s.Result)
	}
	waitUntil(t, 10*time.Second, func() bool { return rec.Count("slow", testupstream.Cancelled) == 1 })

	if s := step("elicitResult"); s.text() != "Hello, Grace!" {
		t.Errorf("input through the elicitation handler: %+v", s.Result)
	}
	asked := 0
	for _, e := range out.Elicitations {
		if e.Client == "asker" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("the elicitation handler ran %d times, want 1", asked)
	}
	if s := step("plainStatus"); len(s.Result.StructuredContent.InputRequests) != 1 || s.Result.StructuredContent.Status != "input_required" {
		t.Errorf("status of the plain client's task: %+v", s.Result)
	}
	if s := step("plainAnswer"); s.Result.IsError {
		t.Errorf("task_answer: %+v", s.Result)
	}
	if s := step("plainResult"); s.text() != "Hello, Ada!" {
		t.Errorf("input through task_answer: %+v", s.Result)
	}
	// Each task was created on one replica and read on the other.
	if got := out.Replicas["asker:slow"]; len(got) != 2 || got[0] != 0 {
		t.Errorf("slow calls went to replicas %v, want the first on replica 0", got)
	}
	if got := out.Replicas["asker:taskgate_task_result"]; len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Errorf("task_result calls went to replicas %v, want replica 1", got)
	}
	if !strings.Contains(g0.stderr.String(), `"op":"created","task_id":"`+id+`"`) || !strings.Contains(g1.stderr.String(), `"op":"retrieved","task_id":"`+id+`"`) {
		t.Errorf("task %s was not created on replica 0 and retrieved on replica 1", id)
	}
	if len(out.ClientErrors) > 0 {
		t.Errorf("client errors: %v", out.ClientErrors)
	}
}

// waitUntil polls cond until it holds, or fails the test after limit.
func waitUntil(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
