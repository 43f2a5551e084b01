package e2e

// Servers of the oldest protocol version (2024-11-05) gain tasks through
// taskgate (issue 28, item 1).

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// oldServerOut is what js/old-server.mjs saw.
type oldServerOut struct {
	ProtocolVersion    string `json:"protocolVersion"`
	ServerCapabilities struct {
		Tasks json.RawMessage `json:"tasks"`
	} `json:"serverCapabilities"`
	Tools   map[string]string `json:"tools"`
	Plain   json.RawMessage   `json:"plain"`
	Created struct {
		TaskID string `json:"taskId"`
	} `json:"created"`
	Final struct {
		Status string `json:"status"`
	} `json:"final"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// mcpServerCommands is the published stdio server of protocol 2024-11-05
// (npm mcp-server-commands 0.5.0, pinned in js/package.json).
func mcpServerCommands(t *testing.T) string {
	t.Helper()
	ensureJS(t)
	bin, err := filepath.Abs("js/node_modules/.bin/mcp-server-commands")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestOldServerGainsTasks: a TypeScript SDK client at 2025-11-25 in front
// of a 2024-11-05 server gets capabilities.tasks, taskSupport on the tool
// the policy makes a task, and a task whose result is the plain call's:
// mcp-server-commands 0.5.0 as a stdio child, and a go-sdk server limited
// to 2024-11-05 over HTTP. Before, taskgate passed such a session through
// unchanged (no tasks), and the SDK rejected the plain answer to its
// task-augmented call.
func TestOldServerGainsTasks(t *testing.T) {
	node := ensureJS(t)
	cases := []struct {
		name, upstream, tool, args string
	}{
		{"stdio-mcp-server-commands", "stdio:" + mcpServerCommands(t), "run_command", `{"command":"echo from an old server"}`},
		{"http-go-sdk-2024-11-05", newUpstream(t, testupstream.Options{ProtocolVersion: "2024-11-05"}), "echo", `{"text":"from an old server"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, tc.upstream, "--task", tc.tool, "--poll-interval", "50ms")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "old-server.mjs", g.URL, tc.tool, tc.args)
			cmd.Dir = "js"
			cmd.WaitDelay = 5 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			raw, err := cmd.Output()
			var out oldServerOut
			if jerr := json.Unmarshal(bytes.TrimSpace(raw), &out); jerr != nil || err != nil || out.Error != "" {
				t.Fatalf("old-server.mjs: %v %v %s\nstdout: %s\nstderr: %s", err, jerr, out.Error, raw, stderr.Bytes())
			}
			if out.ProtocolVersion != "2025-11-25" {
				t.Errorf("negotiated %q, want 2025-11-25", out.ProtocolVersion)
			}
			if len(out.ServerCapabilities.Tasks) == 0 {
				t.Errorf("no capabilities.tasks: %s", raw)
			}
			if out.Tools[tc.tool] != "optional" {
				t.Errorf("%s taskSupport %q, want optional", tc.tool, out.Tools[tc.tool])
			}
			if out.Created.TaskID == "" || out.Final.Status != "completed" {
				t.Fatalf("task %+v ended %q, want completed", out.Created, out.Final.Status)
			}
			var plain, result struct {
				Content json.RawMessage `json:"content"`
				IsError bool            `json:"isError"`
			}
			_ = json.Unmarshal(out.Plain, &plain)
			_ = json.Unmarshal(out.Result, &result)
			var pc, rc any
			_ = json.Unmarshal(plain.Content, &pc)
			_ = json.Unmarshal(result.Content, &rc)
			if pc == nil || !reflect.DeepEqual(pc, rc) || plain.IsError != result.IsError {
				t.Errorf("task result %s, plain call %s", out.Result, out.Plain)
			}
		})
	}
}

// TestOldServerModernClient: go-sdk's client at its default (2026-07-28)
// in front of a 2024-11-05 HTTP server: the gateway's owner session speaks
// 2024-11-05 upstream, and the client lists and calls as directly.
func TestOldServerModernClient(t *testing.T) {
	opts := testupstream.Options{ProtocolVersion: "2024-11-05", ListChanged: true}
	direct := viewGo(t, newUpstream(t, opts), "", true)
	via := viewGo(t, startGateway(t, newUpstream(t, opts)).URL, "", true)
	compareViews(t, direct, via, true)
}

// TestOldServerToolsCommand: taskgate tools in front of mcp-server-commands
// says what a 2025-11-25 client gets (run_command optional, as the gateway
// then serves it) and that the upstream speaks 2024-11-05.
func TestOldServerToolsCommand(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, out, stderr := toolsJSON(t, ctx, "--upstream-command", mcpServerCommands(t), "--task", "run_command")
	if len(rows) != 1 {
		t.Fatalf("output %s", out)
	}
	if rows[0].Tool != "run_command" || rows[0].Legacy != "optional" || rows[0].Modern != "task" {
		t.Errorf("rows %+v, want run_command optional/task", rows)
	}
	if !strings.Contains(stderr, "the upstream speaks 2024-11-05: presented to 2025-11-25 clients as 2025-11-25") {
		t.Errorf("progress does not say the upstream's version: %s", stderr)
	}
}

// TestOldServerModernRules: in front of a 2024-11-05 session server the
// rules, the hybrid (auto) decision and an MRTR round before a task work
// for 2026-07-28 clients as in front of any session server.
func TestOldServerModernRules(t *testing.T) {
	d := &modernDeployment{rec: &testupstream.Recorder{}}
	up := newUpstream(t, testupstream.Options{ProtocolVersion: "2024-11-05", Elicit2: true, Recorder: d.rec})
	d.urls = []string{startGateway(t, up, singleReplicaFlags...).URL}
	t.Run("rules", func(t *testing.T) { testModernRules(t, d) })
	t.Run("mrtr-before-task", func(t *testing.T) { testMRTRBeforeTask(t, d, false) })
}
