package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stdioChildOutcome is what js/stdio-child-2025.mjs prints.
type stdioChildOutcome struct {
	ProtocolVersion string `json:"protocolVersion"`
	HasSessionID    bool   `json:"hasSessionId"`
	TasksCapability bool   `json:"tasksCapability"`
	Steps           struct {
		Logging struct {
			Text string   `json:"text"`
			Logs []string `json:"logs"`
		} `json:"logging"`
		Elicit      struct{ Text string } `json:"elicit"`
		Sample      struct{ Text string } `json:"sample"`
		TaskElicit  stdioTaskRun          `json:"taskElicit"`
		TaskSample  stdioTaskRun          `json:"taskSample"`
		TaskLogging struct {
			stdioTaskRun
			Logs []string `json:"logs"`
		} `json:"taskLogging"`
	} `json:"steps"`
	Seen struct {
		Elicitations []string `json:"elicitations"`
		Samples      []string `json:"samples"`
	} `json:"seen"`
	Error string `json:"error"`
}

type stdioTaskRun struct {
	TaskID   string   `json:"taskId"`
	Statuses []string `json:"statuses"`
	Text     string   `json:"text"`
	Error    any      `json:"error"`
}

// TestStdioChildServes2025Client: go-sdk's conformance server, which
// speaks 2026-07-28 as well, as taskgate's stdio child, and a 2025-11-25
// client of the TypeScript SDK. The client must get all that the server
// gives a 2025-11-25 client directly (issue 37, item 1): a session of its
// own, the child's log messages, its elicitation and sampling requests,
// on a plain call and inside a task (input_required, the request relayed
// on tasks/result, then the result).
func TestStdioChildServes2025Client(t *testing.T) {
	node := ensureJS(t)
	bin := filepath.Join(t.TempDir(), "everything-server")
	if err := buildGo(bin, everythingServerPkg); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "stdio:"+bin, "--task", "test_elicitation,test_sampling,test_tool_with_logging")
	raw := runScript(t, node, "stdio-child-2025.mjs", g.URL)
	var out stdioChildOutcome
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("stdio-child-2025.mjs printed %q: %v", raw, err)
	}
	if out.Error != "" {
		t.Fatalf("client failed: %s\n%s", out.Error, raw)
	}
	if out.ProtocolVersion != "2025-11-25" || !out.HasSessionID || !out.TasksCapability {
		t.Errorf("negotiated %q, session id %v, tasks capability %v; want 2025-11-25 with a session and tasks", out.ProtocolVersion, out.HasSessionID, out.TasksCapability)
	}
	s := out.Steps
	wantLogs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	if !slices.Equal(s.Logging.Logs, wantLogs) || !strings.Contains(s.Logging.Text, "executed successfully") {
		t.Errorf("plain call with logging: logs %q, text %q; want %q", s.Logging.Logs, s.Logging.Text, wantLogs)
	}
	if !strings.Contains(s.Elicit.Text, "action=accept") || !strings.Contains(s.Elicit.Text, "grace") {
		t.Errorf("plain elicitation: %q, want the accepted answer", s.Elicit.Text)
	}
	if s.Sample.Text != "LLM response: sampled plain-prompt" {
		t.Errorf("plain sampling: %q", s.Sample.Text)
	}
	for name, run := range map[string]stdioTaskRun{"elicitation": s.TaskElicit, "sampling": s.TaskSample} {
		if run.TaskID == "" || run.Error != nil {
			t.Errorf("%s in a task: %+v, want a task and no error", name, run)
			continue
		}
		// The SDK's stream reports the statuses it polled, then the
		// result from tasks/result (which carried the relayed request).
		if !slices.Contains(run.Statuses, "input_required") {
			t.Errorf("%s in a task went through %v; want input_required", name, run.Statuses)
		}
	}
	if !strings.Contains(s.TaskElicit.Text, "action=accept") || !strings.Contains(s.TaskElicit.Text, "grace") {
		t.Errorf("elicitation in a task: %q", s.TaskElicit.Text)
	}
	if s.TaskSample.Text != "LLM response: sampled task-prompt" {
		t.Errorf("sampling in a task: %q", s.TaskSample.Text)
	}
	if want := []string{"plain: who are you?", "in a task: who are you?"}; !slices.Equal(out.Seen.Elicitations, want) {
		t.Errorf("elicitations seen %q, want %q", out.Seen.Elicitations, want)
	}
	if want := []string{"plain-prompt", "task-prompt"}; !slices.Equal(out.Seen.Samples, want) {
		t.Errorf("sampling requests seen %q, want %q", out.Seen.Samples, want)
	}
	if s.TaskLogging.TaskID == "" || !strings.Contains(s.TaskLogging.Text, "executed successfully") {
		t.Errorf("logging tool in a task: %+v", s.TaskLogging.stdioTaskRun)
	}
	if !slices.Equal(s.TaskLogging.Logs, wantLogs) {
		t.Errorf("logging tool in a task: logs %q, want %q", s.TaskLogging.Logs, wantLogs)
	}
}
