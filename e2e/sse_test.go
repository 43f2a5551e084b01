package e2e

// Servers on the HTTP+SSE transport of MCP 2024-11-05 through taskgate
// (issue 28, item 2): detected at start, a session upstream per client
// session.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// startSupergateway runs npm supergateway 4.0.0 with --outputTransport sse
// in front of mcp-server-commands 0.5.0 (one stdio child, whose every
// line supergateway sends to every SSE session), and returns its SSE URL.
func startSupergateway(t *testing.T, node string) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	child := shellWords(npmServer(t, node, "mcp-server-commands/build/index.js"))
	argv := npmServer(t, node, "supergateway/dist/index.js", "--stdio", child, "--outputTransport", "sse",
		"--port", port, "--healthEndpoint", "/healthz")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its shell and child go with it
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("supergateway's output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return "http://" + addr + "/sse"
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("supergateway did not come up on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newSSEUpstream serves the test upstream with go-sdk's HTTP+SSE handler
// (mcp.NewSSEHandler) and returns its SSE URL.
func newSSEUpstream(t *testing.T, opts testupstream.Options) string {
	t.Helper()
	s := testupstream.NewServer(opts)
	srv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { closeBounded(t, srv) })
	return srv.URL + "/sse"
}

// waitLog waits for s in the gateway's log.
func waitLog(t *testing.T, g *gateway, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(g.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the gateway's log:\n%s", s, g.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSSEServerTwoClients: mcp-server-commands behind supergateway's
// HTTP+SSE transport, through taskgate with --task run_command: the
// transport is detected, and two TypeScript SDK 2025-11-25 client
// sessions at once each list the tools (run_command optional), call
// run_command plainly and as a task, and get only their own output, the
// task's result equal to the plain call's. supergateway sends every
// answer of its one child to every SSE session: each session's answers
// are told apart by the gateway's request ids.
func TestSSEServerTwoClients(t *testing.T) {
	node := ensureJS(t)
	up := startSupergateway(t, node)
	g := startGateway(t, up, "--task", "run_command", "--poll-interval", "50ms")
	waitLog(t, g, `"transport":"sse"`)
	var wg sync.WaitGroup
	outs := make([]oldServerOut, 2)
	raws := make([][]byte, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// The sleep keeps both sessions' calls in flight together.
			args := fmt.Sprintf(`{"command":"sleep 0.3; echo client-%d"}`, i)
			cmd := exec.CommandContext(ctx, node, "old-server.mjs", g.URL, "run_command", args)
			cmd.Dir = "js"
			cmd.WaitDelay = 5 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			raw, err := cmd.Output()
			raws[i] = raw
			if jerr := json.Unmarshal(bytes.TrimSpace(raw), &outs[i]); jerr != nil || err != nil || outs[i].Error != "" {
				t.Errorf("client %d: %v %v %s\nstdout: %s\nstderr: %s", i, err, jerr, outs[i].Error, raw, stderr.Bytes())
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.Logf("the gateway's log:\n%s", g.stderr.String())
		return
	}
	for i, out := range outs {
		mine, theirs := fmt.Sprintf("client-%d", i), fmt.Sprintf("client-%d", 1-i)
		if out.ProtocolVersion != "2025-11-25" || len(out.ServerCapabilities.Tasks) == 0 {
			t.Errorf("client %d: version %q, tasks %s", i, out.ProtocolVersion, out.ServerCapabilities.Tasks)
		}
		if out.Tools["run_command"] != "optional" {
			t.Errorf("client %d: run_command taskSupport %q, want optional", i, out.Tools["run_command"])
		}
		if !bytes.Contains(out.Plain, []byte(mine)) || bytes.Contains(out.Plain, []byte(theirs)) {
			t.Errorf("client %d: the plain call answered %s", i, out.Plain)
		}
		if out.Created.TaskID == "" || out.Final.Status != "completed" {
			t.Errorf("client %d: task %+v ended %q", i, out.Created, out.Final.Status)
			continue
		}
		var plain, result struct {
			Content any  `json:"content"`
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(out.Plain, &plain)
		_ = json.Unmarshal(out.Result, &result)
		if plain.Content == nil || !reflect.DeepEqual(plain.Content, result.Content) || plain.IsError != result.IsError {
			t.Errorf("client %d: task result %s, plain call %s", i, out.Result, out.Plain)
		}
	}
	if outs[0].Created.TaskID == outs[1].Created.TaskID {
		t.Errorf("both clients got task %s", outs[0].Created.TaskID)
	}
}

// TestSSEServerGoClients: go-sdk's client at its default version
// (2026-07-28, with a tool-list-changed handler: owner sessions and
// subscriptions/listen) and at 2025-11-25, through taskgate in front of
// go-sdk's HTTP+SSE server at 2024-11-05, lists, calls and hears the tool
// list change as directly in front of the same server over Streamable
// HTTP.
func TestSSEServerGoClients(t *testing.T) {
	opts := testupstream.Options{ProtocolVersion: "2024-11-05", ListChanged: true}
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			t.Parallel()
			direct := viewGo(t, newUpstream(t, opts), version, true)
			g := startGateway(t, newSSEUpstream(t, opts))
			waitLog(t, g, `"transport":"sse"`)
			compareViews(t, direct, viewGo(t, g.URL, version, true), true)
		})
	}
}

// TestSSEServerStartup: taskgate tools lists an HTTP+SSE server's tools
// (detected); --upstream-transport sse in front of a Streamable HTTP
// server, or an unknown transport, stops serve at start saying why.
func TestSSEServerStartup(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	up := newSSEUpstream(t, testupstream.Options{ProtocolVersion: "2024-11-05"})
	rows, out, _ := toolsJSON(t, ctx, "--upstream", up, "--task", "echo")
	found := false
	for _, r := range rows {
		found = found || r.Tool == "echo" && r.Legacy == "optional"
	}
	if !found {
		t.Errorf("taskgate tools over HTTP+SSE: %s", out)
	}
	modern := newUpstream(t, testupstream.Options{})
	for _, c := range []struct {
		transport, want string
	}{
		{"sse", "--upstream-transport sse: " + modern + " is not an HTTP+SSE server's endpoint"},
		{"websocket", `invalid --upstream-transport "websocket": want auto, streamable-http or sse`},
	} {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, taskgateBin, "serve", "--listen", addr, "--upstream", modern, "--upstream-transport", c.transport).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("serve --upstream-transport %s: %v\n%s\nwant %q", c.transport, err, out, c.want)
		}
	}
}
