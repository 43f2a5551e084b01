package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestConsoleBrowser drives the console of a two-replica deployment with
// headless Chromium (Debian's chromium): log in with the form, the tasks
// list with tasks in each state, a task waiting for input, the tools
// table, both replicas, and a cancel button whose cancel reaches the
// upstream. With UPDATE_SCREENSHOTS=1 it saves the screenshots that
// docs/console.md shows into docs/.
func TestConsoleBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("headless Chromium is not installed (apt-get install chromium): " + err.Error())
	}
	t.Parallel()
	const token = "console-browser-token"
	rec := &testupstream.Recorder{}
	up := newUpstream(t, testupstream.Options{Recorder: rec})
	redisURL := "redis://" + redistest.Start(t)
	var replicas []*gateway
	var consoles []string
	for range 2 {
		caddr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, startGateway(t, up, append(slices.Clone(twoReplicaFlags), "--redis-url", redisURL,
			"--latency-sync", "200ms", "--console-listen", caddr, "--console-token", token)...))
		consoles = append(consoles, "http://"+caddr)
	}
	mc := newMClient(t, []string{replicas[0].URL, replicas[1].URL}, "Bearer browser-client", true)
	running := mc.createTask(replicaA, "slow", map[string]any{"seconds": 60, "text": "running"}).TaskID
	waiting := mc.createTask(replicaB, "elicit", map[string]any{}).TaskID
	done := mc.createTask(replicaA, "slow", map[string]any{"seconds": 0, "text": "done"}).TaskID
	failed := mc.createTask(replicaB, "rpcerror", map[string]any{}).TaskID
	mc.waitStatus(replicaA, waiting, "input_required")
	mc.waitTask(replicaA, done, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	mc.waitTask(replicaA, failed, "terminal", func(tk mTask) bool { return terminal(tk.Status) })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(browser),
		chromedp.NoSandbox, chromedp.WindowSize(1280, 800))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	shots := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		shots = "../docs"
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// open loads path on B's console, waits for sel and returns main's text.
	open := func(path string, sel string) string {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(consoles[1]+path), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	// Log in on B's console with the form; the list shows every task.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(consoles[1]+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("table")),
	); err != nil {
		t.Fatal(err)
	}
	text := open("/", "table")
	shot("console-tasks.png")
	for _, want := range []string{running, waiting, done, failed, "input_required", "working", "slow", "elicit"} {
		if !strings.Contains(text, want) {
			t.Errorf("the tasks list lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "browser-client") {
		t.Error("the tasks list shows the client's credential")
	}
	// The task waiting for input: its request and method.
	text = open("/tasks/"+waiting, "ol.timeline")
	shot("console-task.png")
	if !strings.Contains(text, "elicitation/create") || !strings.Contains(text, "waiting for the client") {
		t.Errorf("the task page lacks its input request:\n%s", text)
	}
	// The tools table.
	if text = open("/tools", "table"); !strings.Contains(text, "slow") || !strings.Contains(text, "elicit") {
		t.Errorf("the tools table:\n%s", text)
	}
	// Both replicas, once each has published (every 200ms).
	ids := []string{replicaIDOf(t, replicas[0]), replicaIDOf(t, replicas[1])}
	for {
		text = open("/replicas", "table")
		if strings.Contains(text, ids[0]) && strings.Contains(text, ids[1]) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the replicas page never showed both replicas %v:\n%s", ids, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Cancel the running task (held by A) with the button on B's console.
	open("/tasks/"+running, "button.danger")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("button.danger")), chromedp.WaitNotPresent(chromedp.CSS("button.danger"))); err != nil {
		t.Fatal(err)
	}
	if text, _ = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(text, "cancelled") {
		t.Errorf("after the cancel the page shows:\n%s", text)
	}
	if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Fatalf("the upstream never saw the cancel: %v", err)
	}
}
