package e2e

import (
	"context"
	"net/http"
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
// list with tasks in each state (and a task created meanwhile appearing
// by itself: live updates), a task waiting for input with its timeline,
// which completes on the open page once the client answers, the tools
// table, both replicas with their heartbeat's figures, the failures, and
// a cancel button whose cancel reaches the upstream and shows in the
// timeline; and, as a DNS-rebinding page would, the console reached by an
// attacker's name, refused. Every wait is on a DOM condition. With UPDATE_SCREENSHOTS=1 it saves the screenshots that
// docs/console.md shows into docs/.
func TestConsoleBrowser(t *testing.T) {
	browser := chromium(t)
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
	ir, _ := mc.waitStatus(replicaA, waiting, "input_required")
	mc.waitTask(replicaA, done, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	mc.waitTask(replicaA, failed, "terminal", func(tk mTask) bool { return terminal(tk.Status) })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx, closeBrowser := startChromium(ctx, browser, 1280, 800,
		// An attacker's DNS, after its page loaded: its name is 127.0.0.1.
		chromedp.Flag("host-resolver-rules", "MAP rebind.attacker.example 127.0.0.1"))
	defer closeBrowser()
	shot := screenshotter(t, bctx)
	// open loads path on B's console, waits for sel and returns main's text.
	open := func(path string, sel string) string {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(consoles[1]+path), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return mainText(t, bctx)
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
	// Live: a task created now appears in the open list by itself.
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS("#live-state"))); err != nil {
		t.Fatal(err)
	}
	fresh := mc.createTask(replicaA, "slow", map[string]any{"seconds": 0, "text": "fresh"}).TaskID
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/`+fresh+`"]`))); err != nil {
		t.Fatalf("the open tasks list never showed a task created meanwhile: %v", err)
	}
	// The task waiting for input: its timeline, the request and method.
	text = open("/tasks/"+waiting, "ol.timeline")
	shot("console-task.png")
	for _, want := range []string{"elicitation/create", "sent to the client", "Waiting for the client's answer", "Created (working)", "Status input_required"} {
		if !strings.Contains(text, want) {
			t.Errorf("the task page lacks %q:\n%s", want, text)
		}
	}
	// The client answers; the open page shows the task completed, and
	// the answer in its timeline, without a reload.
	key := inputKeys(t, "tasks/get", ir.InputRequests)["What is your name?"]
	if key == "" {
		t.Fatalf("input requests %+v, want the name question", ir.InputRequests)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS("#live-state"))); err != nil {
		t.Fatal(err)
	}
	mc.update(replicaB, waiting, map[string]any{key: accept("name", "Luca")})
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS("#task-status.s-completed"))); err != nil {
		t.Fatalf("the open task page never showed the task completed: %v", err)
	}
	text, _ = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	for _, want := range []string{"answered", "Status completed"} {
		if !strings.Contains(text, want) {
			t.Errorf("after the answer the timeline lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Luca") {
		t.Error("the timeline shows the client's answer")
	}
	// The tools table.
	if text = open("/tools", "table"); !strings.Contains(text, "slow") || !strings.Contains(text, "elicit") {
		t.Errorf("the tools table:\n%s", text)
	}
	// Both replicas, once each has published (every 200ms).
	ids := []string{replicaIDOf(t, replicas[0]), replicaIDOf(t, replicas[1])}
	for {
		text = open("/replicas", "table")
		// Replica A holds the running task's upstream call and lease.
		if strings.Contains(text, ids[0]) && strings.Contains(text, ids[1]) && strings.Count(text, " / 1000") == 2 && strings.Contains(text, "1 / 1000") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the replicas page never showed both replicas %v:\n%s", ids, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
	shot("console-replicas.png")
	for _, want := range []string{"Held calls", "Leases", "Last sweep", "redis, connections", "Upstream", "up"} {
		if !strings.Contains(text, want) {
			t.Errorf("the replicas page lacks %q:\n%s", want, text)
		}
	}
	// The failures: the rpcerror task under its message.
	if text = open("/failures", "h1"); !strings.Contains(text, failed) {
		t.Errorf("the failures page lacks the failed task:\n%s", text)
	}
	// Cancel the running task (held by A) with the button on B's console.
	open("/tasks/"+running, "button.danger")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("button.danger")), chromedp.WaitNotPresent(chromedp.CSS("button.danger"))); err != nil {
		t.Fatal(err)
	}
	if text, _ = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(text, "cancelled") || !strings.Contains(text, "Cancelled by the operator") {
		t.Errorf("after the cancel the page shows:\n%s", text)
	}
	if err := rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Fatalf("the upstream never saw the cancel: %v", err)
	}
	// DNS rebinding: Chromium reaches B's console as rebind.attacker.example
	// (resolved to 127.0.0.1); the console refuses the name, to the page
	// and to the page's own fetch, and shows no task.
	rebound := "http://rebind.attacker.example:" + consoles[1][strings.LastIndex(consoles[1], ":")+1:]
	if err := chromedp.Do(bctx, chromedp.Navigate(rebound+"/tasks/"+done), chromedp.WaitVisible(chromedp.CSS("body"))); err != nil {
		t.Fatal(err)
	}
	if text, _ = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("body"))); !strings.Contains(text, "--console-host") || strings.Contains(text, done) {
		t.Errorf("the console as rebind.attacker.example shows:\n%s", text)
	}
	status, err := chromedp.Run(bctx, chromedp.Evaluate[int](`fetch("/").then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusMisdirectedRequest {
		t.Errorf("the rebinding page's fetch of / = %d %v, want 421", status, err)
	}
}
