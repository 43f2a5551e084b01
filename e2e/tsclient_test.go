package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// tsOutcome is what js/client.mjs prints.
type tsOutcome struct {
	ProtocolVersion string `json:"protocolVersion"`
	ServerInfo      struct {
		Name string `json:"name"`
	} `json:"serverInfo"`
	HasSessionID bool     `json:"hasSessionId"`
	Tools        []string `json:"tools"`
	Echo         tsText   `json:"echo"`
	Slow         tsText   `json:"slow"`
	Elicit       struct {
		tsText
		Requests []struct {
			Message string `json:"message"`
		} `json:"requests"`
	} `json:"elicit"`
	Progress struct {
		tsText
		Notifications []struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
		} `json:"notifications"`
	} `json:"progress"`
	Sample struct {
		tsText
		Prompts []string `json:"prompts"`
	} `json:"sample"`
	Roots struct {
		tsText
		Requests int `json:"requests"`
	} `json:"roots"`
	Fail     tsText `json:"fail"`
	RPCError struct {
		Code int64          `json:"code"`
		Data map[string]any `json:"data"`
	} `json:"rpcerror"`
	Terminated bool   `json:"terminated"`
	Error      string `json:"error"`
}

type tsText struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
}

// TestTypeScriptClient runs the official TypeScript SDK client (js/client.mjs)
// directly against the upstream and through the gateway; both runs must
// observe the same outcomes, and the right ones.
func TestTypeScriptClient(t *testing.T) {
	node := ensureJS(t)
	outputs := map[string][]byte{}
	for _, via := range vias {
		t.Run(via, func(t *testing.T) {
			url := endpoint(t, via, testupstream.Options{})
			raw := runNode(t, node, url)
			var out tsOutcome
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("client.mjs printed %q: %v", raw, err)
			}
			checkTSOutcome(t, out)
			if via == "gateway" { // a 2025-11-25 session: the gateway offers tasks
				raw = withoutTasksCapability(t, raw, 1)
			}
			outputs[via] = canonical(t, raw)
		})
	}
	if d, g := outputs["direct"], outputs["gateway"]; d != nil && g != nil && !bytes.Equal(d, g) {
		t.Errorf("TypeScript client saw different outcomes through the gateway:\n--- direct\n%s\n--- gateway\n%s", d, g)
	}
}

// TestTypeScriptClientStatelessUpstream: the same client, a 2025-11-25
// one, through two replicas in front of a stateless 2026-07-28 upstream,
// which has no sessions and asks with input_required rounds: the gateway
// is the session, and the upstream's rounds reach the client as
// elicitation, sampling and roots requests on the call's stream; the
// outcomes are those of a session upstream.
func TestTypeScriptClientStatelessUpstream(t *testing.T) {
	node := ensureJS(t)
	up := newUpstream(t, testupstream.Options{Stateless: true})
	args := []string{"--redis-url", "redis://" + redistest.Start(t)}
	a, b := startGateway(t, up, args...), startGateway(t, up, args...)
	for _, g := range []*gateway{a, b} {
		raw := runNode(t, node, g.URL)
		var out tsOutcome
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("client.mjs printed %q: %v", raw, err)
		}
		checkTSOutcome(t, out)
	}
}

// TestTypeScriptClientStatelessNotifications: the TS SDK client's
// session features in front of a stateless upstream, which has no session:
// logging/setLevel (messages at or above it on the call), resources/subscribe
// (the update on the session's GET stream, which the SDK opens itself), and
// a call it aborts (notifications/cancelled: the upstream's tool is
// cancelled). Across replicas: gateway/stateless_notify_test.go.
func TestTypeScriptClientStatelessNotifications(t *testing.T) {
	node := ensureJS(t)
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Stateless: true, Notify: true, Recorder: rec})
	g := startGateway(t, up, "--redis-url", "redis://"+redistest.Start(t))
	raw := runScript(t, node, "notify.mjs", g.URL)
	var out struct {
		Error        string   `json:"error"`
		Logs         []string `json:"logs"`
		Updated      []string `json:"updated"`
		LogResult    string   `json:"logResult"`
		Slow         string   `json:"slow"`
		Capabilities struct {
			Logging   json.RawMessage `json:"logging"`
			Resources struct {
				Subscribe bool `json:"subscribe"`
			} `json:"resources"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Error != "" {
		t.Fatalf("notify.mjs printed %s (%v)", raw, err)
	}
	if out.Capabilities.Logging == nil || !out.Capabilities.Resources.Subscribe {
		t.Errorf("capabilities: logging %s, resources.subscribe %v; want both", out.Capabilities.Logging, out.Capabilities.Resources.Subscribe)
	}
	if want := []string{"info:info: ts", "error:error: ts"}; !slices.Equal(out.Logs, want) || out.LogResult != "logged" {
		t.Errorf("log messages %q, result %q; want %q, logged", out.Logs, out.LogResult, want)
	}
	if len(out.Updated) == 0 || out.Updated[0] != testupstream.NoteURI {
		t.Errorf("resource updates %q, want %s", out.Updated, testupstream.NoteURI)
	}
	if out.Slow != "aborted" {
		t.Errorf("the aborted call: %s", out.Slow)
	}
	waitUntil(t, 10*time.Second, func() bool { return rec.Count("slow", testupstream.Cancelled) == 1 })
}

func checkTSOutcome(t *testing.T, out tsOutcome) {
	t.Helper()
	if out.Error != "" {
		t.Fatalf("client.mjs failed: %s", out.Error)
	}
	if out.ProtocolVersion != "2025-11-25" || out.ServerInfo.Name != testupstream.Implementation.Name || !out.HasSessionID {
		t.Errorf("connect: protocol %q, server %q, session id %t; want 2025-11-25, %q, true",
			out.ProtocolVersion, out.ServerInfo.Name, out.HasSessionID, testupstream.Implementation.Name)
	}
	if want := []string{"echo", "elicit", "fail", "progress", "roots", "rpcerror", "sample", "slow"}; !slices.Equal(out.Tools, want) {
		t.Errorf("tools = %v, want %v", out.Tools, want)
	}
	for _, c := range []struct {
		name string
		got  tsText
		want tsText
	}{
		{"echo", out.Echo, tsText{Text: "hello from ts"}},
		{"slow", out.Slow, tsText{Text: "slept 0.5 s: ts"}},
		{"elicit", out.Elicit.tsText, tsText{Text: "Hello, Grace!"}},
		{"progress", out.Progress.tsText, tsText{Text: "done 3"}},
		{"sample", out.Sample.tsText, tsText{Text: "sampled: say hi"}},
		{"roots", out.Roots.tsText, tsText{Text: "file:///work/a,file:///work/b"}},
		{"fail", out.Fail, tsText{IsError: true, Text: testupstream.FailText}},
	} {
		if c.got != c.want {
			t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if len(out.Elicit.Requests) != 1 || out.Elicit.Requests[0].Message != "What is your name?" {
		t.Errorf("elicitation requests = %+v, want one asking %q", out.Elicit.Requests, "What is your name?")
	}
	if n := out.Progress.Notifications; len(n) != 3 || n[0].Progress != 1 || n[2].Progress != 3 || n[2].Total != 3 {
		t.Errorf("progress notifications = %+v, want 1/3, 2/3, 3/3", n)
	}
	if !slices.Equal(out.Sample.Prompts, []string{"say hi"}) || out.Roots.Requests != 1 {
		t.Errorf("sampling prompts %q, roots/list requests %d; want [say hi], 1", out.Sample.Prompts, out.Roots.Requests)
	}
	if out.RPCError.Code != testupstream.RPCErrorCode || out.RPCError.Data["tool"] != "rpcerror" {
		t.Errorf("rpcerror = %+v, want code %d with data {tool: rpcerror}", out.RPCError, testupstream.RPCErrorCode)
	}
	if !out.Terminated {
		t.Error("session not terminated")
	}
}

// jsPackages are the packages js/ needs; a node_modules without one of them
// (installed before it was added) is installed again.
var jsPackages = []string{"sdk", "client", "ext-tasks", "server-everything", "server-filesystem", "server-memory", "server-sequential-thinking"}

// jsMu serializes ensureJS: two npm ci in one directory at once break each
// other.
var jsMu sync.Mutex

// ensureJS finds node and npm and installs js/node_modules from the lock
// file if it is missing or lacks one of jsPackages. It returns node's path.
func ensureJS(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the TypeScript client test needs node (>= 20) on PATH: %v", err)
	}
	jsMu.Lock()
	defer jsMu.Unlock()
	missing := false
	for _, p := range jsPackages {
		if _, err := os.Stat(filepath.Join("js", "node_modules", "@modelcontextprotocol", p, "package.json")); err != nil {
			missing = true
		}
	}
	if !missing {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("e2e/js/node_modules is missing and npm is not on PATH to install it: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = "js"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in e2e/js: %v\n%s", err, out)
	}
	return node
}

// runNode runs js/client.mjs against url and returns what it printed.
func runNode(t *testing.T, node, url string) []byte {
	t.Helper()
	return runScript(t, node, "client.mjs", url)
}

// runScript runs the e2e script js/<script> with node against url and
// returns what it printed.
func runScript(t *testing.T, node, script, url string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, url)
	cmd.Dir = "js"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s %s: %v\nstdout: %s\nstderr: %s", script, url, err, out, stderr.Bytes())
	}
	return bytes.TrimSpace(out)
}
