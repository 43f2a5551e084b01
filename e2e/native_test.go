package e2e

// Upstreams that already have tasks (native tasks): taskgate in front of a
// TypeScript SDK server with tasks of its own (js/native-server.mjs:
// registerToolTask over an InMemoryTaskStore), driven by the SDK's client
// (js/native.mjs) through two replicas on one redis-server, the client
// alternating between them on every request.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
)

// nativeServer is a running js/native-server.mjs, stopped by its PID.
type nativeServer struct {
	t       *testing.T
	node    string
	addr    string
	cmd     *exec.Cmd
	created chan struct{} // a slow task was created
}

func startNativeServer(t *testing.T, node string) *nativeServer {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := &nativeServer{t: t, node: node, addr: addr, created: make(chan struct{}, 16)}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *nativeServer) URL() string { return "http://" + s.addr + "/mcp" }

func (s *nativeServer) start() {
	s.t.Helper()
	s.cmd, _ = s.spawn(false)
	s.waitListening()
}

// spawn starts a native-server.mjs process. A deferred one has loaded
// when spawn returns and listens once told so on the returned stdin.
func (s *nativeServer) spawn(deferred bool) (*exec.Cmd, io.Writer) {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	args := []string{"native-server.mjs", port}
	if deferred {
		args = append(args, "--listen-on-line")
	}
	cmd := exec.Command(s.node, args...)
	cmd.Dir = "js"
	var stdin io.Writer
	if deferred {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			s.t.Fatal(err)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	loaded := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "task-created slow "):
				select {
				case s.created <- struct{}{}:
				default:
				}
			case line == "native-server loaded":
				close(loaded)
			}
		}
	}()
	if deferred {
		select {
		case <-loaded:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			s.t.Fatal("native-server.mjs --listen-on-line did not load")
		}
	}
	return cmd, stdin
}

func (s *nativeServer) waitListening() {
	s.t.Helper()
	waitUntil(s.t, 20*time.Second, func() bool {
		c, err := net.Dial("tcp", s.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// restart stops the server and starts a new one on the same address: every
// session and task it had is gone, as after an upstream restart. The new
// process has loaded before the old one is killed, so the upstream is
// down for a moment, not for a node start (which a busy machine makes
// longer than the gateway's wait for an upstream coming back).
func (s *nativeServer) restart() {
	s.t.Helper()
	next, listen := s.spawn(true)
	s.stop()
	s.cmd = next
	if _, err := io.WriteString(listen, "listen\n"); err != nil {
		s.t.Fatal(err)
	}
	s.waitListening()
}

func (s *nativeServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

type nativeMsg struct {
	Type string `json:"type"`
	Task *struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"task"`
	Result json.RawMessage `json:"result"`
	Error  *jsErr          `json:"error"`
}

type jsErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type jsAttempt struct {
	Result json.RawMessage `json:"result"`
	Error  *jsErr          `json:"error"`
}

type nativeOut struct {
	Error        string   `json:"error"`
	ClientErrors []string `json:"clientErrors"`
	Tools        []struct {
		Name        string `json:"name"`
		TaskSupport string `json:"taskSupport"`
	} `json:"tools"`
	IDs   map[string]string `json:"ids"`
	Steps struct {
		Research        []nativeMsg `json:"research"`
		List            json.RawMessage
		Cancel          jsAttempt `json:"cancel"`
		AfterCancel     jsAttempt `json:"afterCancel"`
		CancelDone      jsAttempt `json:"cancelDone"`
		AfterCancelDone jsAttempt `json:"afterCancelDone"`
		GatewayTask     struct {
			Status string `json:"status"`
		} `json:"gatewayTask"`
		ForeignGet  jsAttempt `json:"foreignGet"`
		ForeignList []string  `json:"foreignList"`
		Broken      jsAttempt `json:"broken"`
		Survey      jsAttempt `json:"survey"`
		SlowPlain   jsAttempt `json:"slowPlain"`
		CancelHeld  jsAttempt `json:"cancelHeld"`
		Get         jsAttempt `json:"get"`
		Result      jsAttempt `json:"result"`
		Listed      jsAttempt `json:"listed"`
	} `json:"steps"`
	Elicitations int `json:"elicitations"`
}

func (o *nativeOut) taskSupport() map[string]string {
	m := map[string]string{}
	for _, t := range o.Tools {
		m[t.Name] = t.TaskSupport
	}
	return m
}

// runNative runs js/native.mjs; between, when set, runs once the script
// printed the id of the task it created, before it goes on.
func runNative(t *testing.T, node, mode string, urls []string, between func(id string)) *nativeOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "native.mjs", mode, strings.Join(urls, ","))
	cmd.Dir = "js"
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		if id, ok := strings.CutPrefix(line, "created "); ok && between != nil {
			between(id)
			_, _ = io.WriteString(stdin, "go\n")
		}
	}
	err = cmd.Wait()
	var out nativeOut
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); jerr != nil || err != nil || out.Error != "" {
		t.Fatalf("node native.mjs %s: %v %v %s\n%s\nstderr: %s", mode, err, jerr, out.Error, stdout.Bytes(), stderr.Bytes())
	}
	if len(out.ClientErrors) > 0 {
		t.Errorf("client errors: %v", out.ClientErrors)
	}
	return &out
}

// nativeFleet starts two replicas on one redis-server in front of srv.
func nativeFleet(t *testing.T, srv *nativeServer, args ...string) []string {
	urls, _ := nativeGateways(t, srv, args...)
	return urls
}

// nativeGateways is nativeFleet, with the replicas; held receives a value
// whenever one of them holds an upstream's task for a gateway task.
func nativeGateways(t *testing.T, srv *nativeServer, args ...string) (urls []string, held chan struct{}) {
	args = append([]string{"--redis-url", "redis://" + redistest.Start(t), "--poll-interval", "100ms"}, args...)
	held = make(chan struct{}, 16)
	for range 2 {
		g := startGateway(t, srv.URL(), args...)
		g.stderr.setTap(func(line string) {
			if strings.Contains(line, `"upstream task held"`) {
				select {
				case held <- struct{}{}:
				default:
				}
			}
		})
		urls = append(urls, g.URL)
	}
	return urls, held
}

func finalText(msgs []nativeMsg) (string, string) {
	created := ""
	for _, m := range msgs {
		if m.Type == "taskCreated" && m.Task != nil {
			created = m.Task.TaskID
		}
		if m.Type == "result" {
			var r struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			_ = json.Unmarshal(m.Result, &r)
			if len(r.Content) > 0 {
				return created, r.Content[0].Text
			}
		}
		if m.Error != nil {
			return created, "error: " + m.Error.Message
		}
	}
	return created, ""
}

func isUUID(s string) bool { return len(s) == 36 && strings.Count(s, "-") == 4 }

// TestNativeTasksPassThrough: with no rule naming them, the upstream's own
// task tools keep working through taskgate as they do directly: the
// upstream's task ids, its elicitation inside a task (on tasks/result),
// cancel, tasks/list merged with the gateway's own task, owner isolation,
// and a malformed CreateTaskResult refused with -32603.
func TestNativeTasksPassThrough(t *testing.T) {
	node := ensureJS(t)
	srv := startNativeServer(t, node)
	direct := runNative(t, node, "pass", []string{srv.URL()}, nil)
	through := runNative(t, node, "pass", nativeFleet(t, srv, "--task", "wait"), nil)

	ts := through.taskSupport()
	if ts["research"] != "required" || ts["slow"] != "optional" || ts["wait"] != "optional" {
		t.Errorf("taskSupport through taskgate: %v", ts)
	}
	for name, out := range map[string]*nativeOut{"direct": direct, "through": through} {
		id, text := finalText(out.Steps.Research)
		if id == "" || !strings.HasPrefix(text, "research on tides: angle-1") || out.Elicitations != 1 {
			t.Errorf("%s: research task %q: %q after %d elicitations", name, id, text, out.Elicitations)
		}
		if out.Steps.Cancel.Error != nil || !strings.Contains(string(out.Steps.AfterCancel.Result), `"cancelled"`) {
			t.Errorf("%s: cancel %+v, then %s", name, out.Steps.Cancel.Error, out.Steps.AfterCancel.Result)
		}
		if e := out.Steps.CancelDone.Error; e == nil || e.Code != -32602 || !strings.Contains(string(out.Steps.AfterCancelDone.Result), `"completed"`) {
			t.Errorf("%s: cancel of a completed task: %+v, then %s %+v", name, e, out.Steps.AfterCancelDone.Result, out.Steps.AfterCancelDone.Error)
		}
		if out.Steps.ForeignGet.Error == nil {
			t.Errorf("%s: another session read the task: %s", name, out.Steps.ForeignGet.Result)
		}
		for _, id := range out.Steps.ForeignList {
			if id == out.IDs["slow"] {
				t.Errorf("%s: another session lists the task", name)
			}
		}
	}
	// The upstream's task ids pass through as they are (not the gateway's
	// UUIDs: the TS store's are 32 hex digits).
	researchID, _ := finalText(through.Steps.Research)
	if isUUID(researchID) || isUUID(through.IDs["slow"]) || !isUUID(through.IDs["gatewayTask"]) {
		t.Errorf("ids: research %q, slow %q, gateway task %q", researchID, through.IDs["slow"], through.IDs["gatewayTask"])
	}
	if through.Steps.GatewayTask.Status != "completed" {
		t.Errorf("the gateway's own task: %s", through.Steps.GatewayTask.Status)
	}
	var listed []struct{ TaskID, Status string }
	if err := json.Unmarshal(through.Steps.List, &listed); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range listed {
		order = append(order, l.TaskID)
	}
	want := []string{through.IDs["slow"], researchID, through.IDs["gatewayTask"]}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("tasks/list = %v, want newest first %v", order, want)
	}
	if len(listed) == 3 && (listed[0].Status != "working" || listed[1].Status != "completed") {
		t.Errorf("tasks/list statuses: %+v", listed)
	}
	if e := through.Steps.Broken.Error; e == nil || e.Code != -32603 || !strings.Contains(e.Message, "CreateTaskResult") || !strings.Contains(e.Message, `"taskId":42`) {
		t.Errorf("malformed CreateTaskResult: %+v %s", e, through.Steps.Broken.Result)
	}
}

// TestNativeTasksRuled: a rule takes the upstream's task tools over. --task
// research: the client sees the gateway's task, whose worker holds the
// upstream's, relaying its elicitation; --sync survey: a plain call,
// answered through the upstream's task with its elicitation on the call's
// stream; --sync slow (optional upstream): a plain call.
func TestNativeTasksRuled(t *testing.T) {
	node := ensureJS(t)
	srv := startNativeServer(t, node)
	out := runNative(t, node, "ruled", nativeFleet(t, srv, "--task", "research", "--sync", "survey", "--sync", "slow"), nil)
	ts := out.taskSupport()
	if ts["research"] != "optional" || ts["survey"] != "" || ts["slow"] != "" {
		t.Errorf("taskSupport with rules: %v", ts)
	}
	id, text := finalText(out.Steps.Research)
	if !isUUID(id) || !strings.HasPrefix(text, "research on tides: angle-") {
		t.Errorf("research as the gateway's task %q: %q", id, text)
	}
	if !strings.Contains(string(out.Steps.Survey.Result), "survey on winds: angle-") {
		t.Errorf("survey as a sync call: %s %+v", out.Steps.Survey.Result, out.Steps.Survey.Error)
	}
	if !strings.Contains(string(out.Steps.SlowPlain.Result), "slow done after 10ms") {
		t.Errorf("slow as a sync call: %s %+v", out.Steps.SlowPlain.Result, out.Steps.SlowPlain.Error)
	}
	if out.Elicitations != 2 {
		t.Errorf("%d elicitations, want 2 (research, survey)", out.Elicitations)
	}
	if !strings.Contains(string(out.Steps.CancelHeld.Result), `"cancelled"`) {
		t.Errorf("cancel of a gateway task holding the upstream's: %s %+v", out.Steps.CancelHeld.Result, out.Steps.CancelHeld.Error)
	}
}

// TestNativeTaskUpstreamLost: the upstream restarts under a native task
// (its sessions and tasks gone): the task reads failed, with a message
// that says why, on any replica, and is never left working; the same for
// a gateway task holding the upstream's (--task slow).
func TestNativeTaskUpstreamLost(t *testing.T) {
	node := ensureJS(t)
	for _, tc := range []struct {
		name string
		args []string
		uuid bool // the client's task is the gateway's
	}{{"native", nil, false}, {"held", []string{"--task", "slow"}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startNativeServer(t, node)
			urls, held := nativeGateways(t, srv, tc.args...)
			out := runNative(t, node, "lost", urls, func(string) {
				// The upstream's task exists and, for a gateway task, its
				// worker holds it (the client has the gateway's id before
				// the worker's call reached the upstream).
				wait := srv.created
				if tc.uuid {
					wait = held
				}
				select {
				case <-wait:
				case <-time.After(20 * time.Second):
					t.Error("the upstream's task was never created, or held")
				}
				srv.restart()
			})
			if isUUID(out.IDs["slow"]) != tc.uuid {
				t.Errorf("task id %q: want the gateway's %v", out.IDs["slow"], tc.uuid)
			}
			var got struct {
				Status, StatusMessage string
			}
			if err := json.Unmarshal(out.Steps.Get.Result, &got); err != nil || got.Status != "failed" || !strings.Contains(got.StatusMessage, "lost") {
				t.Errorf("tasks/get after the upstream restarted: %s %+v", out.Steps.Get.Result, out.Steps.Get.Error)
			}
			if e := out.Steps.Result.Error; e == nil || !strings.Contains(e.Message, "lost") {
				t.Errorf("tasks/result: %s %+v", out.Steps.Result.Result, e)
			}
			if !strings.Contains(string(out.Steps.Listed.Result), `"failed"`) {
				t.Errorf("tasks/list: %s %+v", out.Steps.Listed.Result, out.Steps.Listed.Error)
			}
			if e := out.Steps.Cancel.Error; e == nil || !strings.Contains(e.Message, "terminal") {
				t.Errorf("tasks/cancel of the failed task: %s %+v", out.Steps.Cancel.Result, e)
			}
		})
	}
}

// TestNativeTasksModernClient: a 2026-07-28 client in front of an upstream
// with 2025-11-25 tasks of its own (translated: the client's SEP-2663 task
// is the gateway's, whose worker holds the upstream's task), no rule: the
// upstream's elicitation inside its task reaches the client as the task's
// inputRequests and its answer (tasks/update, on the other replica) goes
// back; a cancel cancels; another owner cannot see the task; a client
// without the tasks extension gets the required task tool as a plain call,
// its question as an MRTR round.
func TestNativeTasksModernClient(t *testing.T) {
	node := ensureJS(t)
	srv := startNativeServer(t, node)
	// A wait a busy machine cannot overrun: the upstream's question must
	// arrive within it to make an MRTR round, and the answered retry must
	// finish within it to be a plain result (the test asserts no timing).
	urls, _ := nativeGateways(t, srv, "--hybrid-wait", "3s")
	c := newMClient(t, urls, "Bearer native-modern", true)

	// research asks at once, within the hybrid wait: an MRTR round first
	// (SEP-2663, "MRTR → tasks composition"); its answer, on the other
	// replica, finishes the call within the wait: a plain result.
	r := c.call(0, "tools/call", map[string]any{"name": "research", "arguments": map[string]any{"topic": "tides"}})
	round := decodeCall(t, "first round", r.Result)
	if r.Error != nil || round.ResultType != "input_required" || len(round.InputRequests) != 1 || round.RequestState == nil {
		t.Fatalf("%s, want an input_required round with the upstream's question", r)
	}
	if strings.Contains(string(r.Result), "related-task") {
		t.Errorf("the round names the upstream's task: %s", r.Result)
	}
	responses := map[string]any{}
	for q, k := range inputKeys(t, "input_required", round.InputRequests) {
		if q != "Which angle on tides?" {
			t.Errorf("question %q", q)
		}
		responses[k] = accept("angle", "south")
	}
	r = c.call(1, "tools/call", map[string]any{"name": "research", "arguments": map[string]any{"topic": "tides"},
		"inputResponses": responses, "requestState": *round.RequestState})
	if res := decodeCall(t, "retry", r.Result); r.Error != nil || res.ResultType != "complete" || res.text() != "research on tides: south" {
		t.Errorf("retry = %s, want the plain result", r)
	}

	// With --task research on the other fleet: the gateway's task at once,
	// the question in tasks/get, the answer through tasks/update.
	ruled, _ := nativeGateways(t, srv, "--task", "research")
	c = newMClient(t, ruled, "Bearer native-modern", true)
	tk := c.createTask(0, "research", map[string]any{"topic": "tides"})
	ir, _ := c.waitTask(1, tk.TaskID, "the upstream's question", func(tk mTask) bool {
		return terminal(tk.Status) || len(tk.InputRequests) == 1
	})
	if ir.Status != "input_required" {
		t.Fatalf("task %s %+v, want input_required with the upstream's question", ir.Status, ir)
	}
	responses = map[string]any{}
	for q, k := range inputKeys(t, "tasks/get", ir.InputRequests) {
		if q != "Which angle on tides?" {
			t.Errorf("question %q", q)
		}
		responses[k] = accept("angle", "north")
	}
	c.update(1, tk.TaskID, responses)
	done, _ := c.waitTask(0, tk.TaskID, "terminal", func(tk mTask) bool { return terminal(tk.Status) })
	if done.Status != "completed" {
		t.Fatalf("task ended %s: %+v", done.Status, done)
	}
	checkInlinedResult(t, "research", done.Result, "research on tides: north", false)
	if strings.Contains(string(done.Result), "related-task") {
		t.Errorf("the upstream's task leaks into the result: %s", done.Result)
	}

	other := newMClient(t, ruled, "Bearer someone-else", true)
	if r := other.call(1, "tasks/get", map[string]any{"taskId": tk.TaskID}); r.Error == nil || r.Error.Code != codeInvalidParams {
		t.Errorf("another owner's tasks/get: %s, want -32602", r)
	}

	slow := c.createTask(0, "slow", map[string]any{"ms": 60000})
	c.cancel(1, slow.TaskID)
	if got := c.get(0, slow.TaskID); got.Status != "cancelled" {
		t.Errorf("after cancel: %s", got.Status)
	}

	plain := newMClient(t, ruled, "Bearer native-plain", false)
	r = plain.call(0, "tools/call", map[string]any{"name": "survey", "arguments": map[string]any{"topic": "winds"}})
	round = decodeCall(t, "first round", r.Result)
	if r.Error != nil || round.ResultType != "input_required" || len(round.InputRequests) != 1 || round.RequestState == nil {
		t.Fatalf("%s, want an input_required round with the upstream's question", r)
	}
	responses = map[string]any{}
	for _, k := range inputKeys(t, "input_required", round.InputRequests) {
		responses[k] = accept("angle", "west")
	}
	r = plain.call(1, "tools/call", map[string]any{"name": "survey", "arguments": map[string]any{"topic": "winds"},
		"inputResponses": responses, "requestState": *round.RequestState})
	if res := decodeCall(t, "retry", r.Result); r.Error != nil || res.ResultType != "complete" || res.text() != "survey on winds: west" {
		t.Errorf("retry = %s, want the plain result", r)
	}
}
