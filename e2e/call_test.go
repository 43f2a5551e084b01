package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// runCall runs `taskgate call args...` (the built binary) and returns its
// stdout, stderr and exit status.
func runCall(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, taskgateBin, append([]string{"call"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("taskgate call %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// TestCall: taskgate call against a gateway (the built binary) in front of
// the test upstream: a task prints its status changes in order and then
// its result, exit 0; a plain call prints the result; a tool error, a
// failed task and a task cut by --timeout (cancelled, which the upstream
// sees) exit 1; a call the gateway refuses, or a URL without the
// endpoint's path, exits 2 naming the fix.
func TestCall(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	rec := &testupstream.Recorder{}
	g := startGateway(t, newUpstream(t, testupstream.Options{Recorder: rec}), "--task", "slow,fail")

	out, errOut, code := runCall(t, g.URL, "slow", "seconds=1", "--task", "text=end to end")
	if code != 0 || out != "slept 1 s: end to end\n" {
		t.Errorf("slow as a task: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The status changes, in order, on stderr: working, then completed.
	working, completed := strings.Index(errOut, ": working\n"), strings.Index(errOut, ": completed\n")
	if working < 0 || completed < working || !strings.Contains(errOut, "MCP 2025-11-25 session") {
		t.Errorf("slow as a task: stderr %q, want the session, then working, then completed", errOut)
	}

	if out, errOut, code = runCall(t, g.URL, "echo", "text=plain"); code != 0 || out != "plain\n" {
		t.Errorf("echo: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code = runCall(t, g.URL, "fail"); code != 1 || !strings.Contains(out, "deliberate failure") || !strings.Contains(errOut, "isError") {
		t.Errorf("fail: exit %d, stdout %q, stderr %q, want 1 and the tool's error", code, out, errOut)
	}
	if _, errOut, code = runCall(t, g.URL, "fail", "--task"); code != 1 || !strings.Contains(errOut, ": failed") {
		t.Errorf("fail as a task: exit %d, stderr %q, want 1 and the failed status", code, errOut)
	}
	if _, errOut, code = runCall(t, g.URL, "echo", "text=x", "--task"); code != 2 || !strings.Contains(errOut, "serve --task echo") {
		t.Errorf("echo as a task: exit %d, stderr %q, want 2 naming --task echo", code, errOut)
	}
	if _, errOut, code = runCall(t, g.base, "echo", "text=x"); code != 2 || !strings.Contains(errOut, "did you mean "+g.URL+"?") {
		t.Errorf("call of the base URL: exit %d, stderr %q, want 2 and the fix", code, errOut)
	}
	if _, errOut, code = runCall(t, g.URL, "slow", "seconds=60", "--task", "--timeout", "2s"); code != 1 || !strings.Contains(errOut, "no result within --timeout 2s; cancelled it") {
		t.Errorf("slow past --timeout: exit %d, stderr %q, want 1, cancelled", code, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Errorf("the upstream never saw the cut task cancelled: %v", err)
	}
	if _, errOut, code = runCall(t, g.URL); code != 2 || !strings.Contains(errOut, "want the gateway's MCP URL and a tool name") {
		t.Errorf("no tool: exit %d, stderr %q", code, errOut)
	}
}

// TestCallWrongUpstream: a gateway whose --upstream lacks the server's
// /mcp logs the fix at start; taskgate call through it exits 2 pointing at
// the gateway's --upstream, and healthcheck says the upstream is no MCP
// endpoint while the gateway stays ready.
func TestCallWrongUpstream(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	srv := httptest.NewServer(testupstream.Mux(testupstream.Options{})) // MCP at /mcp only
	t.Cleanup(func() { closeBounded(t, srv) })
	up := srv.URL
	g := startGateway(t, up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !strings.Contains(g.stderr.String(), "did you mean "+up+"/mcp?") {
		if ctx.Err() != nil {
			t.Fatalf("no log line with the fix:\n%s", g.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, errOut, code := runCall(t, g.URL, "echo", "text=x"); code != 2 || !strings.Contains(errOut, "its --upstream") {
		t.Errorf("call through the gateway: exit %d, stderr %q", code, errOut)
	}
	out, err := exec.Command(taskgateBin, "healthcheck", "--url", g.base).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ready; the upstream: not an MCP endpoint") {
		t.Errorf("healthcheck: %v %s", err, out)
	}
}
