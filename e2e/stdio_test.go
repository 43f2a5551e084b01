package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// stdioUpstream is the startGateway upstream for the test server run as
// an --upstream-command child.
func stdioUpstream(t *testing.T) string {
	t.Helper()
	if stdioBuildErr != nil {
		t.Fatalf("test server binary unavailable: %v", stdioBuildErr)
	}
	return "stdio:" + stdioServerBin + " --stdio"
}

// recordChild feeds rec with the events the stdio test server prints on
// its stderr, which the gateway logs ("upstream_stderr").
func recordChild(g *gateway, rec *testupstream.Recorder) {
	g.stderr.setTap(func(line string) {
		var l struct {
			Op   string `json:"op"`
			Line string `json:"line"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Op != "upstream_stderr" {
			return
		}
		f := strings.Fields(l.Line)
		if len(f) == 3 && f[0] == "testupstream-event" {
			rec.Add(testupstream.Event{Tool: f[1], Kind: testupstream.EventKind(f[2])})
		}
	})
}

// TestStdioTasksTypeScript runs the TypeScript SDK's task scenarios
// (js/tasks.mjs) against gateways whose upstream is a stdio child: one
// replica, and two replicas sharing Redis, each with its own child, the
// client alternating between them on every request.
func TestStdioTasksTypeScript(t *testing.T) {
	node := ensureJS(t)
	for _, replicas := range []int{1, 2} {
		for _, sc := range []string{"lifecycle", "cancel"} {
			t.Run(strings.Repeat("two-replicas/", replicas-1)+sc, func(t *testing.T) {
				t.Parallel()
				rec := &testupstream.Recorder{}
				args := slices.Clone(taskFlags)
				if replicas > 1 {
					// The client alternates replicas on every request, here
					// with one shared child per replica (the default, a child
					// per session followed across replicas, is
					// TestStdioReplicasTasks).
					args = append(args, "--redis-url", "redis://"+redistest.Start(t), "--upstream-shared")
				}
				var urls []string
				for range replicas {
					g := startGateway(t, stdioUpstream(t), args...)
					recordChild(g, rec)
					urls = append(urls, g.URL)
				}
				out := runTasksNode(t, node, sc, urls)
				checkSession(t, out)
				switch sc {
				case "lifecycle":
					checkLifecycle(t, out, rec, false)
				case "cancel":
					checkCancel(t, out, rec)
				}
				checkNoProgressAfterTerminal(t, out)
				if len(urls) > 1 {
					checkAlternation(t, out)
				}
			})
		}
	}
}

// TestStdioChildExits: a shared child that exits mid-call fails the task
// with its exit status, a plain call gets -32603 with it, /readyz names the
// upstream down until the child is back, and then calls work again.
func TestStdioChildExits(t *testing.T) {
	g := startGateway(t, stdioUpstream(t), "--task", "exit", "--upstream-shared")
	c := newRawSession(t, g.URL, "")
	c.initialize()
	created := c.call("tools/call", map[string]any{"name": "exit", "arguments": map[string]any{"code": 7}, "task": map[string]any{}})
	var res struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if created.Error != nil || json.Unmarshal(created.Result, &res) != nil || res.Task.TaskID == "" {
		t.Fatalf("create: %+v", created)
	}
	var task struct {
		Status        string `json:"status"`
		StatusMessage string `json:"statusMessage"`
	}
	waitUntil(t, 15*time.Second, func() bool {
		r := c.call("tasks/get", map[string]any{"taskId": res.Task.TaskID})
		_ = json.Unmarshal(r.Result, &task)
		return task.Status == "failed"
	})
	if !strings.Contains(task.StatusMessage, "the upstream process exited with status 7") {
		t.Errorf("failed task message: %q", task.StatusMessage)
	}
	// A plain call of the same tool.
	waitReady(t, g)
	plain := c.call("tools/call", map[string]any{"name": "exit", "arguments": map[string]any{"code": 9}})
	if plain.Error == nil || plain.Error.Code != -32603 || !strings.Contains(plain.Error.Message, "exited with status 9") {
		t.Errorf("plain call of a tool that exits: %+v", plain)
	}
	waitReady(t, g)
	if r := c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "back"}}); r.Error != nil || !strings.Contains(string(r.Result), "back") {
		t.Errorf("after the restart: %+v", r)
	}
	if !strings.Contains(g.stderr.String(), "restarting it") {
		t.Errorf("the restart is not logged")
	}
}

// waitReady polls /readyz until it answers 200.
// waitReady waits until /readyz says the gateway is ready and its
// upstream (the child) is up: readiness itself is the store's, and stays
// 200 while the child restarts.
func waitReady(t *testing.T, g *gateway) {
	t.Helper()
	waitUntil(t, 20*time.Second, func() bool {
		resp, err := http.Get(g.base + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Checks map[string]string `json:"checks"`
		}
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&body) == nil && body.Checks["upstream"] == "ok"
	})
}

// TestStdioStartErrors: a command that cannot run stops serve at once
// with one line naming it; --upstream and --upstream-command together are
// refused.
func TestStdioStartErrors(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--upstream-command", "surely-no-such-mcp-server --flag"}, `cannot run "surely-no-such-mcp-server"`},
		{[]string{"serve", "--upstream-command", stdioServerBin, "--upstream", "http://127.0.0.1:1/mcp"}, "not both"},
		{[]string{"serve", "--upstream-command", "a 'b"}, "unclosed single quote"},
		{[]string{"serve", "--upstream", "http://127.0.0.1:1/mcp", "--upstream-env", "A=1"}, "--upstream-env goes with --upstream-command"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, taskgateBin, tc.args...).CombinedOutput()
		cancel()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err == nil || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v: %v\n%s\nwant one line with %q", tc.args, err, out, tc.want)
		}
	}
}

// What js/everything.mjs prints.
type everythingOut struct {
	Tools []json.RawMessage `json:"tools"`
	Steps struct {
		Echo        json.RawMessage `json:"echo"`
		Progress    []streamMsg     `json:"progress"`
		Elicit      []streamMsg     `json:"elicit"`
		Sample      []streamMsg     `json:"sample"`
		AfterCancel struct {
			Status string `json:"status"`
		} `json:"afterCancel"`
		Native    []streamMsg `json:"native"`
		NativeGet struct {
			Status string `json:"status"`
		} `json:"nativeGet"`
		ForeignGet struct {
			Error *tsErr `json:"error"`
		} `json:"foreignGet"`
	} `json:"steps"`
	Seen struct {
		Elicitations, Samples, Progress int
	} `json:"seen"`
	ClientErrors []string `json:"clientErrors"`
	Error        string   `json:"error"`
}

type streamMsg struct {
	Type string `json:"type"`
	Task *struct {
		TaskID string `json:"taskId"`
	} `json:"task"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *tsErr `json:"error"`
}

// final is the text of a stream's result message, or what went wrong.
func final(ms []streamMsg) string {
	for _, m := range ms {
		if m.Type == "result" && m.Result != nil && len(m.Result.Content) > 0 {
			return m.Result.Content[0].Text
		}
		if m.Error != nil {
			return "error: " + m.Error.Message
		}
	}
	return fmt.Sprintf("no result in %+v", ms)
}

func runEverything(t *testing.T, node, mode, url string) everythingOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "everything.mjs", mode, url)
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	raw, err := cmd.Output()
	var out everythingOut
	if jerr := json.Unmarshal(bytes.TrimSpace(raw), &out); jerr != nil || err != nil || out.Error != "" {
		t.Fatalf("node everything.mjs %s %s: %v %v %s\n%s", mode, url, err, jerr, out.Error, raw)
	}
	if len(out.ClientErrors) > 0 {
		t.Errorf("client errors: %v", out.ClientErrors)
	}
	return out
}

// startEverythingHTTP runs the reference server over Streamable HTTP, for
// comparison; it is stopped by its PID.
func startEverythingHTTP(t *testing.T, node, script string) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitUntil(t, 20*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://127.0.0.1:" + port + "/mcp"
}

// TestStdioReferenceServer: the reference server from npm
// (@modelcontextprotocol/server-everything) in its stdio mode, through
// taskgate, with the TypeScript SDK: the same tools and answers as the
// same server over HTTP; tasks with progress, elicitation and sampling
// relayed from the child; cancel.
func TestStdioReferenceServer(t *testing.T) {
	node := ensureJS(t)
	script, err := filepath.Abs("js/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	command := "stdio:" + node + " '" + script + "' stdio"

	direct := runEverything(t, node, "plain", startEverythingHTTP(t, node, script))
	through := runEverything(t, node, "plain", startGateway(t, command).URL)
	if len(direct.Tools) < 10 || len(direct.Tools) != len(through.Tools) {
		t.Fatalf("tools: %d over HTTP, %d through taskgate over stdio", len(direct.Tools), len(through.Tools))
	}
	for i := range direct.Tools {
		if canonicalJSON(direct.Tools[i]) != canonicalJSON(through.Tools[i]) {
			t.Errorf("tool %d differs:\nHTTP:  %s\nstdio: %s", i, direct.Tools[i], through.Tools[i])
		}
	}
	if canonicalJSON(direct.Steps.Echo) != canonicalJSON(through.Steps.Echo) || !strings.Contains(string(through.Steps.Echo), "Echo: hello") {
		t.Errorf("echo: HTTP %s, stdio %s", direct.Steps.Echo, through.Steps.Echo)
	}

	g := startGateway(t, command, "--task", "trigger-long-running-operation", "--task", "trigger-elicitation-request",
		"--task", "trigger-sampling-request", "--poll-interval", "100ms")
	out := runEverything(t, node, "tasks", g.URL)
	if got := final(out.Steps.Progress); !strings.Contains(got, "Long running operation completed") || out.Seen.Progress < 1 {
		t.Errorf("long-running task: %q with %d progress notifications", got, out.Seen.Progress)
	}
	if got := final(out.Steps.Elicit); !strings.Contains(got, "declined") || out.Seen.Elicitations != 1 {
		t.Errorf("elicitation task: %q, %d elicitations", got, out.Seen.Elicitations)
	}
	if got := final(out.Steps.Sample); !strings.Contains(got, "sampled(1)") || out.Seen.Samples != 1 {
		t.Errorf("sampling task: %q, %d samples", got, out.Seen.Samples)
	}
	if out.Steps.AfterCancel.Status != "cancelled" {
		t.Errorf("after cancel: %q", out.Steps.AfterCancel.Status)
	}
}

// TestStdioExtTasksClient: 2026-07-28 clients (the SDK v2 with
// @modelcontextprotocol/ext-tasks) in front of a stdio child, across two
// replicas: the gateway's owner sessions on the child carry the extension
// tasks, input and cancel as in front of a session server over HTTP. Here
// each replica has one shared child, which serves the owner session the
// replicas share through Redis on both (with a child per session, the
// default, the session follows its child: TestStdioReplicasModernClient).
func TestStdioExtTasksClient(t *testing.T) {
	node := ensureJS(t)
	d := &modernDeployment{rec: &testupstream.Recorder{}}
	args := []string{"--task", "elicit", "--task", "slow", "--task", "fail", "--task", "rpcerror", "--poll-interval", "100ms",
		"--redis-url", "redis://" + redistest.Start(t), "--upstream-shared"}
	for range 2 {
		g := startGateway(t, stdioUpstream(t), args...)
		recordChild(g, d.rec)
		d.urls = append(d.urls, g.URL)
	}
	out := runExtTasks(t, node, "elicit,elicit2,outcomes,cancel", d.urls)
	checkExtTasks(t, out, d, false)
}

// TestStdioToolsCommand: taskgate tools lists a stdio server's tools with
// the policy's decisions, and stops its child.
func TestStdioToolsCommand(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, out, stderr := toolsJSON(t, ctx, "--upstream-command", strings.TrimPrefix(stdioUpstream(t), "stdio:"), "--task", "slow")
	found := map[string]string{}
	for _, r := range rows {
		found[r.Tool] = r.Legacy
	}
	if _, ok := found["echo"]; !ok || found["slow"] != "optional" {
		t.Fatalf("tools: %s", out)
	}
	if !strings.Contains(stderr, "stdio: ") {
		t.Errorf("the progress line does not name the stdio server: %s", stderr)
	}
}

// TestStdioPerSession: each client session has a child of its own (its
// own state), by default; on shutdown the gateway stops them. The
// deprecated --upstream-per-session is accepted, with a warning.
func TestStdioPerSession(t *testing.T) {
	g := startGateway(t, stdioUpstream(t), "--upstream-per-session")
	counter := func(s *rawSession) string {
		r := s.call("tools/call", map[string]any{"name": "counter", "arguments": map[string]any{}})
		var res struct {
			Content []struct{ Text string } `json:"content"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Content) == 0 {
			t.Fatalf("counter: %+v", r)
		}
		return res.Content[0].Text
	}
	a, b := newRawSession(t, g.URL, ""), newRawSession(t, g.URL, "")
	a.initialize()
	b.initialize()
	if got := []string{counter(a), counter(a), counter(b)}; !slices.Equal(got, []string{"1", "2", "1"}) {
		t.Fatalf("counters a, a, b = %v, want 1 2 1 (a process per session)", got)
	}
	pids := childPIDs(g.stderr.String())
	if len(pids) != 2 {
		t.Fatalf("children started: %v, want 2", pids)
	}
	if !strings.Contains(g.stderr.String(), "--upstream-per-session is deprecated") {
		t.Errorf("no deprecation warning for --upstream-per-session")
	}
	g.stop()
	waitUntil(t, 10*time.Second, func() bool {
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil && !zombie(pid) {
				return false
			}
		}
		return true
	})
}

// childPIDs are the pids of the children the gateway's log says it started.
func childPIDs(log string) []int {
	var pids []int
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			PID     int    `json:"pid"`
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "upstream process ready" {
			pids = append(pids, l.PID)
		}
	}
	return pids
}

// zombie reports whether pid has exited but not been reaped yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// TestNativeUpstreamTasks: the reference server's own task tool
// (simulate-research-query, taskSupport "required", which asks for
// clarification inside its task) through two replicas sharing Redis, the
// TypeScript SDK's tasks client alternating between them: the call passes
// through with params.task, the upstream's task is followed with
// tasks/get and tasks/result on either replica, its elicitation answered.
// A rule on another tool leaves it native (a rule naming it would take it
// over: native_test.go).
func TestNativeUpstreamTasks(t *testing.T) {
	node := ensureJS(t)
	script, err := filepath.Abs("js/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	up := startEverythingHTTP(t, node, script)
	redisURL := "redis://" + redistest.Start(t)
	args := []string{"--task", "trigger-long-running-operation", "--redis-url", redisURL}
	a, b := startGateway(t, up, args...), startGateway(t, up, args...)
	out := runEverything(t, node, "native", a.URL+","+b.URL)
	if got := final(out.Steps.Native); !strings.Contains(strings.ToLower(got), "research") || strings.HasPrefix(got, "error") {
		t.Errorf("native task: %q", got)
	}
	if out.Seen.Elicitations != 1 || out.Steps.NativeGet.Status != "completed" {
		t.Errorf("elicitations %d, status after %q; want 1 and completed", out.Seen.Elicitations, out.Steps.NativeGet.Status)
	}
	if e := out.Steps.ForeignGet.Error; e == nil || e.Code != codeInvalidParams {
		t.Errorf("another session's tasks/get of the upstream's task: %+v, want -32602", out.Steps.ForeignGet)
	}
	// A session the gateway serves no tasks for (a 2025-06-18 client) does
	// not reach another owner's upstream task either.
	var id string
	for _, m := range out.Steps.Native {
		if m.Type == "taskCreated" && m.Task != nil {
			id = m.Task.TaskID
		}
	}
	older := newRawSession(t, b.URL, "")
	if m := older.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "older", "version": "1"}}); m.Error != nil {
		t.Fatalf("initialize 2025-06-18: %+v", m.Error)
	}
	if r := older.call("tasks/get", map[string]any{"taskId": id}); id == "" || r.Error == nil || r.Error.Code != codeInvalidParams {
		t.Errorf("a 2025-06-18 session's tasks/get of another owner's upstream task %q: %+v %s, want -32602", id, r.Error, r.Result)
	}
	logs := a.stderr.String() + b.stderr.String()
	if !strings.Contains(logs, "upstream task passed through") || strings.Contains(logs, `"op":"created"`) {
		t.Errorf("want the upstream's task passed through and no gateway task:\n%s", logs)
	}
}

// TestStdioChildAsksOnGetStream: through the gateway, a request of a
// session's own child that names no call reaches the client on its GET
// stream (a real go-sdk client, which answers what comes on any stream):
// roots/list asked right after initialized, as server-filesystem does
// (held by the bridge until the client opens the stream), and an
// elicitation while two calls of the session are in flight.
func TestStdioChildAsksOnGetStream(t *testing.T) {
	g := startGateway(t, stdioUpstream(t)+" --roots-at-start")
	rec := &testupstream.Recorder{}
	recordChild(g, rec)
	gc := connectGo(t, g.URL, "2025-11-25", &http.Client{}, true)
	if got, _ := gc.callText(t, &mcp.CallToolParams{Name: "startroots"}); got != root1+","+root2 {
		t.Fatalf("the roots the child got at start: %q, want %q", got, root1+","+root2)
	}
	slow := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := gc.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 2, "text": "s"}})
		slow <- err
	}()
	waitUntil(t, 15*time.Second, func() bool { return rec.Count("slow", testupstream.Called) == 1 })
	if got, _ := gc.callText(t, &mcp.CallToolParams{Name: "elicit", Arguments: map[string]any{}}); got != "Hello, "+goName+"!" {
		t.Fatalf("elicit with another call in flight: %q", got)
	}
	if err := <-slow; err != nil {
		t.Fatalf("slow: %v", err)
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if len(gc.elicitations) != 1 || gc.rootsRequests != 1 {
		t.Fatalf("the client was asked %d elicitations and %d roots/list, want 1 and 1", len(gc.elicitations), gc.rootsRequests)
	}
}

// TestStdioTasksAskOnGetStream: with two tasks of a session held on its
// child, a question of the child names neither: it reaches the client on
// the session's GET stream (not a guessed task), and the client's answer
// reaches the child, which completes the task that asked.
func TestStdioTasksAskOnGetStream(t *testing.T) {
	g := startGateway(t, stdioUpstream(t), "--task", "slow", "--task", "elicit", "--poll-interval", "100ms")
	rec := &testupstream.Recorder{}
	recordChild(g, rec)
	s := newRawSession(t, g.URL, "")
	if m := s.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "taskgate-e2e-raw", "version": "1.0.0"}}); m.Error != nil {
		t.Fatalf("initialize: %s", m.Error)
	}
	if status, _ := s.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d", status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	asked := make(chan rpcMsg, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m rpcMsg
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &m) == nil && m.Method == "elicitation/create" {
				asked <- m
				return
			}
		}
	}()
	task := func(name string, args map[string]any) string {
		var res struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		mustDecode(t, s.mustResult("tools/call", map[string]any{"name": name, "arguments": args, "task": map[string]any{}}), &res)
		return res.Task.TaskID
	}
	task("slow", map[string]any{"seconds": 3, "text": "s"})
	waitUntil(t, 15*time.Second, func() bool { return rec.Count("slow", testupstream.Called) == 1 })
	id := task("elicit", map[string]any{})
	var m rpcMsg
	select {
	case m = <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("no elicitation on the GET stream")
	}
	if status, _ := s.post(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}); status != http.StatusAccepted {
		t.Fatalf("the answer: HTTP %d", status)
	}
	var st struct {
		Status string `json:"status"`
	}
	waitUntil(t, 20*time.Second, func() bool {
		mustDecode(t, s.mustResult("tasks/get", map[string]any{"taskId": id}), &st)
		return st.Status == "completed"
	})
	if r := s.mustResult("tasks/result", map[string]any{"taskId": id}); !strings.Contains(string(r), "Hello, Ada!") {
		t.Fatalf("the elicit task's result: %s", r)
	}
}
