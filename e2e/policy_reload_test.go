package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestPolicyReloadOnSIGHUP runs the binary with --policy FILE, starts a
// task under the file's rules, rewrites the file and sends SIGHUP: the next
// tools/list and tools/call follow the new rules, for 2025-11-25 and
// 2026-07-28 clients, and the running task still completes.
func TestPolicyReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "rules.json")
	writeRules := func(mode string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(`{"rules": [{"tool": "slow", "mode": "`+mode+`"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeRules("task")
	g := startGateway(t, newUpstream(t, testupstream.Options{}), "--policy", file, "--log-level", "debug")

	s := newRawSession(t, g.URL, "")
	s.initialize()
	if ts := reloadTaskSupport(t, s)["slow"]; ts != "optional" {
		t.Fatalf("under the task rule: slow taskSupport %q, want optional", ts)
	}
	if rt := reloadModernCall(t, g.URL, 0); rt != "task" {
		t.Fatalf("under the task rule: modern call resultType %q, want task", rt)
	}
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	mustDecode(t, s.mustResult("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 2, "text": "old rules"},
		"task": map[string]any{}}), &created)

	writeRules("sync")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.stderr.String(), `"sighup":true`) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged after SIGHUP:\n%s", g.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	if !regexp.MustCompile(`taskgate_policy_reloads_total\{result="ok"\} [1-9]`).MatchString(metricsText(t, g.base+"/metrics")) {
		t.Errorf("the reload is not counted in taskgate_policy_reloads_total")
	}
	if ts, ok := reloadTaskSupport(t, s)["slow"]; !ok || ts != "" {
		t.Errorf("under the sync rule: slow taskSupport %q, want none", ts)
	}
	s.wantError("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}}, -32601)
	if rt := reloadModernCall(t, g.URL, 0); rt != "complete" {
		t.Errorf("under the sync rule: modern call resultType %q, want complete", rt)
	}

	// The task created under the old rules is untouched by the reload.
	res := s.mustResult("tasks/result", map[string]any{"taskId": created.Task.TaskID})
	if !strings.Contains(string(res), "slept 2 s: old rules") {
		t.Errorf("tasks/result of the running task = %s", res)
	}
	var task struct {
		Status string `json:"status"`
	}
	mustDecode(t, s.mustResult("tasks/get", map[string]any{"taskId": created.Task.TaskID}), &task)
	if task.Status != "completed" {
		t.Errorf("running task ended %q, want completed", task.Status)
	}
	// Each decision is in the debug log with its reason.
	if out := g.stderr.String(); !strings.Contains(out, `"op":"decide"`) || !strings.Contains(out, `rule 1: slow (`+file+`:1)`) {
		t.Errorf("no decision with its reason in the log")
	}
	// Every line names the replica (--replica-id), the startup line too,
	// and durations say their unit.
	want := "e2e-" + strings.TrimPrefix(g.base, "http://")
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(g.stderr.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l["replica"] != want {
			t.Errorf("log line without replica %q: %s", want, line)
		}
		msg, _ := l["message"].(string)
		seen[msg] = true
		if msg == "task created" {
			if _, ok := l["ttl_seconds"].(float64); !ok {
				t.Errorf("task created line without ttl_seconds: %s", line)
			}
		}
	}
	if !seen["taskgate serving"] || !seen["task created"] {
		t.Errorf("log lacks the startup or task created line:\n%s", g.stderr.String())
	}
}

// reloadTaskSupport lists the tools and returns each one's taskSupport.
func reloadTaskSupport(t *testing.T, s *rawSession) map[string]string {
	t.Helper()
	var tl struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	mustDecode(t, s.mustResult("tools/list", map[string]any{}), &tl)
	out := map[string]string{}
	for _, tool := range tl.Tools {
		out[tool.Name] = tool.Execution.TaskSupport
	}
	return out
}

// reloadModernCall calls slow as a 2026-07-28 client with the tasks
// extension and returns the answer's resultType.
func reloadModernCall(t *testing.T, url string, seconds float64) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "slow", "arguments": map[string]any{"seconds": seconds},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{
				"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		}}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "slow")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("modern tools/call: %v", err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	data := raw.Bytes()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range parseSSE(data) {
			if b, err := json.Marshal(ev.Data); err == nil && strings.Contains(string(b), `"id":1`) {
				data = b
			}
		}
	}
	var m struct {
		Result struct {
			ResultType string `json:"resultType"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Error != nil {
		t.Fatalf("modern tools/call: HTTP %d %s", resp.StatusCode, data)
	}
	return m.Result.ResultType
}
