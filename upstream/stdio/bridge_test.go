package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream"
)

// serverBin is the test MCP server (internal/testupstream/cmd/testupstream),
// built once; it serves stdio with --stdio. everythingBin is the go-sdk's own
// conformance server (a 2026-07-28 server over stdio), from the module
// cache.
var serverBin, everythingBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stdio-test")
	if err != nil {
		panic(err)
	}
	serverBin = filepath.Join(dir, "testupstream")
	out, err := exec.Command("go", "build", "-o", serverBin, "github.com/taskgate/taskgate/internal/testupstream/cmd/testupstream").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the test server: %v\n%s", err, out)
		os.Exit(1)
	}
	everythingBin = filepath.Join(dir, "everything-server")
	out, err = exec.Command("go", "build", "-o", everythingBin, everythingPkg).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building %s: %v\n%s", everythingPkg, err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// logBuf collects log lines, safe for concurrent use.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startBridge(t testing.TB, mod func(*Options)) (*Bridge, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	opts := Options{Command: []string{serverBin, "--stdio"}, Logger: zerolog.New(logs)}
	if mod != nil {
		mod(&opts)
	}
	b, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
		if t.Failed() {
			t.Logf("bridge log:\n%s", logs.String())
		}
	})
	waitReady(t, b)
	return b, logs
}

func waitReady(t testing.TB, b *Bridge) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.Ready(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("bridge not ready: %v", b.Ready(context.Background()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// client is one session on the bridge.
type client struct {
	t   *testing.T
	h   *http.Client
	sid string
	key string // the principal its requests carry (upstream.Principal); "": none
}

func newClient(t *testing.T, b *Bridge) *client {
	t.Helper()
	return newClientAs(t, b, "")
}

// newClientAs opens a session for principal key.
func newClientAs(t *testing.T, b *Bridge, key string) *client {
	t.Helper()
	c := &client{t: t, h: &http.Client{Transport: b.Transport()}, key: key}
	resp := c.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "t", "version": "1"}}})
	c.sid = resp.Header.Get("Mcp-Session-Id")
	ms := readAll(t, resp)
	if c.sid == "" || len(ms) != 1 || ms[0].Result == nil {
		t.Fatalf("initialize: session %q, %+v", c.sid, ms)
	}
	return c
}

func (c *client) post(body any) *http.Response {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, URL, bytes.NewReader(b))
	if c.key != "" {
		req = req.WithContext(upstream.WithPrincipal(req.Context(), upstream.Principal{Key: c.key}))
	}
	req.Header.Set("Content-Type", "application/json")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := c.h.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// readAll reads every message of a JSON or SSE answer.
func readAll(t *testing.T, resp *http.Response) []msg {
	t.Helper()
	var out []msg
	each(t, resp, func(m msg) bool { out = append(out, m); return true })
	return out
}

func each(t *testing.T, resp *http.Response, f func(msg) bool) {
	t.Helper()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m msg
		if err := json.NewDecoder(resp.Body).Decode(&m); err == nil {
			f(m)
		}
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m msg
		if json.Unmarshal([]byte(data), &m) == nil && !f(m) {
			return
		}
	}
}

// tool calls a tool and returns its text (or the error message).
func (c *client) tool(id int, name string, args map[string]any) string {
	c.t.Helper()
	ms := readAll(c.t, c.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}}))
	last := ms[len(ms)-1]
	if string(last.ID) != fmt.Sprint(id) {
		c.t.Fatalf("%s: answer id %s, want %d", name, last.ID, id)
	}
	if last.Error != nil {
		return "error: " + last.Error.Message
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(last.Result, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// TestBridgeSessions: two sessions share one child (Shared); ids and
// progress tokens the sessions chose alike never cross.
func TestBridgeSessions(t *testing.T) {
	b, logs := startBridge(t, func(o *Options) { o.Shared = true })
	a, z := newClient(t, b), newClient(t, b)
	var wg sync.WaitGroup
	got := make([][]msg, 2)
	for i, c := range []*client{a, z} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Same id, same progress token, in both sessions at once.
			got[i] = readAll(t, c.post(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": map[string]any{
				"name": "progress", "arguments": map[string]any{"steps": 3, "delayMs": 50}, "_meta": map[string]any{"progressToken": "tok"}}}))
		}()
	}
	wg.Wait()
	for i, ms := range got {
		progress := 0
		for _, m := range ms {
			if m.Method == "notifications/progress" {
				progress++
				if !strings.Contains(string(m.Params), `"progressToken":"tok"`) {
					t.Errorf("session %d: progress with another token: %s", i, m.Params)
				}
			}
		}
		if progress != 3 || string(ms[len(ms)-1].ID) != "5" || ms[len(ms)-1].Result == nil {
			t.Errorf("session %d: %d progress notifications, last %+v", i, progress, ms[len(ms)-1])
		}
	}
	if text := a.tool(6, "echo", map[string]any{"text": "hi"}); text != "hi" {
		t.Errorf("echo: %q", text)
	}
	if !strings.Contains(logs.String(), `testupstream stdio ready`) || !strings.Contains(logs.String(), `"op":"upstream_stderr"`) {
		t.Errorf("the child's stderr is not in the log:\n%s", logs.String())
	}
}

// TestBridgeElicitation: the child's request reaches the one session with
// a call in flight; its answer goes back to the child.
func TestBridgeElicitation(t *testing.T) {
	b, _ := startBridge(t, nil)
	c := newClient(t, b)
	resp := c.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "elicit", "arguments": map[string]any{}}})
	var final msg
	asked := 0
	each(t, resp, func(m msg) bool {
		switch {
		case m.Method == "elicitation/create":
			asked++
			r := c.post(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}})
			r.Body.Close()
			if r.StatusCode != http.StatusAccepted {
				t.Errorf("answer: HTTP %d", r.StatusCode)
			}
		case string(m.ID) == "9":
			final = m
			return false
		}
		return true
	})
	if asked != 1 || !strings.Contains(string(final.Result), "Hello, Ada!") {
		t.Fatalf("asked %d, final %+v", asked, final)
	}
}

// TestBridgeFaults: a shared child that exits fails its call with its
// status and comes back; garbage on stdout is skipped; an over-long
// notification is skipped, and the child keeps running.
func TestBridgeFaults(t *testing.T) {
	b, logs := startBridge(t, func(o *Options) { o.MaxMessage = 64 << 10; o.Shared = true })
	c := newClient(t, b)
	if text := c.tool(1, "garbage", nil); text != "ok" {
		t.Fatalf("garbage: %q", text)
	}
	if !strings.Contains(logs.String(), "not a JSON-RPC message") {
		t.Errorf("garbage not logged")
	}
	if text := c.tool(2, "exit", map[string]any{"code": 3}); text != "error: the upstream process exited with status 3" {
		t.Fatalf("exit: %q", text)
	}
	waitReady(t, b) // restarted; the session outlives the child (the bridge initializes the new one)
	if text := c.tool(3, "echo", map[string]any{"text": "back"}); text != "back" {
		t.Fatalf("after restart: %q", text)
	}
	before := c.tool(4, "counter", nil)
	if text := c.tool(5, "hugeline", map[string]any{"bytes": 100 << 10}); text != "ok" {
		t.Fatalf("hugeline: %q", text)
	}
	if !strings.Contains(logs.String(), "wrote a line over the limit; skipped") {
		t.Errorf("the over-long line is not in the log")
	}
	if after := c.tool(6, "counter", nil); before != "1" || after != "2" {
		t.Fatalf("counter %s then %s: the child did not keep running", before, after)
	}
}

// TestBridgeCommandErrors: a command that does not exist or cannot run is
// an error at Start naming it.
func TestBridgeCommandErrors(t *testing.T) {
	_, err := Start(Options{Command: []string{"surely-no-such-mcp-server"}})
	if err == nil || !strings.Contains(err.Error(), `"surely-no-such-mcp-server"`) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing command: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "server.txt")
	_ = os.WriteFile(plain, []byte("not a program"), 0o644)
	_, err = Start(Options{Command: []string{plain}})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("not executable: %v", err)
	}
	// A working directory it cannot start in is named, in every scope
	// (principal scope starts no child at Start; the others probe one).
	missing := filepath.Join(t.TempDir(), "gone")
	for _, o := range []Options{{Command: []string{serverBin, "--stdio"}, Dir: missing, PerPrincipal: true},
		{Command: []string{serverBin, "--stdio"}, Dir: plain, PerPrincipal: true},
		{Command: []string{serverBin, "--stdio"}, Dir: missing},
		{Command: []string{serverBin, "--stdio"}, Dir: plain, Shared: true}} {
		if b, err := Start(o); err == nil {
			_ = b.Close(context.Background())
			t.Errorf("Dir %s (per principal %v): started", o.Dir, o.PerPrincipal)
		} else if !strings.Contains(err.Error(), "cannot start") || !strings.Contains(err.Error(), o.Dir) {
			t.Errorf("Dir %s (per principal %v): %v", o.Dir, o.PerPrincipal, err)
		}
	}
}

// TestBridgeEnvAndDir: --upstream-env and --upstream-dir reach the child.
func TestBridgeEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	b, _ := startBridge(t, func(o *Options) { o.Env = []string{"TASKGATE_TEST_VALUE=v42"}; o.Dir = dir })
	c := newClient(t, b)
	if text := c.tool(1, "env", map[string]any{"name": "TASKGATE_TEST_VALUE"}); text != "v42 "+dir {
		t.Fatalf("env: %q, want %q", text, "v42 "+dir)
	}
}

// TestBridgePerSession: each session has a child of its own (its own
// state), the default; DELETE and idleness end them.
func TestBridgePerSession(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.MaxSessions = 2; o.SessionIdle = 300 * time.Millisecond })
	a, z := newClient(t, b), newClient(t, b)
	for i, want := range []string{"1", "2"} {
		if got := a.tool(i+1, "counter", nil); got != want {
			t.Fatalf("a counter: %q, want %q", got, want)
		}
	}
	if got := z.tool(1, "counter", nil); got != "1" {
		t.Fatalf("z counter: %q, want its own 1", got)
	}
	// A third session is refused.
	c := &client{t: t, h: &http.Client{Transport: b.Transport()}}
	ms := readAll(t, c.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}}))
	if len(ms) != 1 || ms[0].Error == nil || !strings.Contains(ms[0].Error.Message, "its limit of 2 sessions of the stdio server (--max-sessions)") {
		t.Fatalf("third session: %+v", ms)
	}
	req, _ := http.NewRequest(http.MethodDelete, URL, nil)
	req.Header.Set("Mcp-Session-Id", a.sid)
	resp, err := a.h.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	resp.Body.Close()
	if r := a.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("after DELETE: HTTP %d", r.StatusCode)
	}
	// z goes idle and is reaped.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := z.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
		r.Body.Close()
		if r.StatusCode == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not reaped")
		}
		time.Sleep(400 * time.Millisecond)
	}
	b.mu.Lock()
	n := len(b.fleet.procs)
	b.mu.Unlock()
	for n > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		b.mu.Lock()
		n = len(b.fleet.procs)
		b.mu.Unlock()
	}
	if n != 0 {
		t.Fatalf("%d children still running after their sessions ended", n)
	}
}

// TestBridgeGrandchildHoldsPipes: a child that leaves a process behind
// holding its stdout is still seen to exit (its call fails, it restarts),
// and Close does not wait for the leftover.
func TestBridgeGrandchildHoldsPipes(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) {
		o.Shared = true
		o.Command = []string{"/bin/sh", "-c", "sleep 60 & exec '" + serverBin + "' --stdio"}
	})
	c := newClient(t, b)
	start := time.Now()
	if text := c.tool(1, "exit", map[string]any{"code": 4}); text != "error: the upstream process exited with status 4" {
		t.Fatalf("exit: %q", text)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the exit was seen after %s", took)
	}
	waitReady(t, b)
	if text := c.tool(2, "echo", map[string]any{"text": "back"}); text != "back" {
		t.Fatalf("after restart: %q", text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start = time.Now()
	_ = b.Close(ctx)
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("Close took %s", took)
	}
}

// TestBridgeAnswersStayInTheirSession: another session cannot answer a
// session's question; on a shared child, a call of another session in
// flight makes a question unroutable, and it is refused rather than
// guessed.
func TestBridgeAnswersStayInTheirSession(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.Shared = true })
	a, z := newClient(t, b), newClient(t, b)
	resp := a.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "elicit", "arguments": map[string]any{}}})
	var final msg
	each(t, resp, func(m msg) bool {
		switch {
		case m.Method == "elicitation/create":
			// z tries first: refused, and a's call is unaffected.
			r := z.post(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Mallory"}}})
			r.Body.Close()
			if r.StatusCode != http.StatusNotFound {
				t.Errorf("another session's answer: HTTP %d, want 404", r.StatusCode)
			}
			r = a.post(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}})
			r.Body.Close()
		case string(m.ID) == "9":
			final = m
			return false
		}
		return true
	})
	if !strings.Contains(string(final.Result), "Hello, Ada!") {
		t.Fatalf("final: %+v", final)
	}

	// Two calls in flight: the question cannot be placed.
	slow := make(chan string, 1)
	go func() { slow <- z.tool(20, "slow", map[string]any{"seconds": 1.5, "text": "z"}) }()
	waitFor(t, "the slow call in flight", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.calls.CallsLocked()) == 1
	})
	if text := a.tool(21, "elicit", map[string]any{}); !strings.Contains(text, "cannot relay elicitation/create") {
		t.Fatalf("elicit with two calls in flight: %q", text)
	}
	if text := <-slow; text != "slept 1.5 s: z" {
		t.Fatalf("slow: %q", text)
	}
}

// TestBridgeAdoptedSessions: session ids another replica opened are
// served; made-up ids never lock out initialize.
func TestBridgeAdoptedSessions(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.MaxSessions = 2; o.Shared = true })
	for i := range 6 {
		c := &client{t: t, h: &http.Client{Transport: b.Transport()}, sid: fmt.Sprintf("made-up-%d", i)}
		if text := c.tool(1, "echo", map[string]any{"text": "x"}); text != "x" {
			t.Fatalf("adopted session %d: %q", i, text)
		}
	}
	newClient(t, b) // initialize still works
	newClient(t, b)
	b.mu.Lock()
	owned, adopted := b.owned, b.adopted
	b.mu.Unlock()
	if owned != 2 || adopted > 2 {
		t.Fatalf("owned %d, adopted %d; want 2 and at most 2", owned, adopted)
	}
}

// TestBridgeRelativeCommandInDir: a relative command path is found in
// Options.Dir, as exec runs it there.
func TestBridgeRelativeCommandInDir(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(serverBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := startBridge(t, func(o *Options) { o.Command = []string{"./server", "--stdio"}; o.Dir = dir })
	if text := newClient(t, b).tool(1, "echo", map[string]any{"text": "here"}); text != "here" {
		t.Fatalf("echo: %q", text)
	}
}

// TestBridgeProgressStaysWithItsChild: a progress notification reaches a
// call only from the child serving it. A session's child that names
// another session's token (guessed, or learnt) reaches nothing.
func TestBridgeProgressStaysWithItsChild(t *testing.T) {
	b, _ := startBridge(t, nil)
	a, z := newClient(t, b), newClient(t, b)
	stream := make(chan []string, 1)
	go func() {
		resp := z.post(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
			"name": "slow", "arguments": map[string]any{"seconds": 1.0, "text": "z"}, "_meta": map[string]any{"progressToken": "z-token"}}})
		var got []string
		each(t, resp, func(m msg) bool {
			if m.Method == "notifications/progress" {
				got = append(got, string(m.Params))
			}
			return m.Method != ""
		})
		stream <- got
	}()
	var tok string
	waitFor(t, "z's call in flight", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.calls.CallsLocked() {
			tok = c.Token
		}
		return tok != ""
	})
	if _, err := strconv.Atoi(tok[strings.LastIndexByte(tok, '-')+1:]); err == nil {
		t.Errorf("bridge token %q is sequential: another child could guess it", tok)
	}
	b.mu.Lock()
	pa, pz := b.sessions[a.sid].proc, b.sessions[z.sid].proc
	b.mu.Unlock()
	forge := func(text string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + strconv.Quote(tok) + `,"progress":1,"message":"` + text + `"}}`)
	}
	b.dispatch(pa, forge("from a's child"))
	b.dispatch(pz, forge("from z's child"))
	if got := <-stream; len(got) != 1 || !strings.Contains(got[0], "from z's child") || !strings.Contains(got[0], `"z-token"`) {
		t.Fatalf("z's stream got progress %q; want only its own child's, under its own token", got)
	}
}
