package gateway

// Outages (issue 7): Redis or the upstream goes away while the gateway
// serves. Every test runs in-process Handlers against a real redis-server
// (internal/redistest, AOF on so its data survives a restart) and a real
// go-sdk upstream (internal/testupstream) that the test can stop and start
// on the same address.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// hangGuard bounds every request an outage test sends. It is not a speed
// assertion: a request that needs the store fails within milliseconds with
// the fail-fast client options; one that hangs is a bug, and this catches
// it long before the test's own timeout.
const hangGuard = 10 * time.Second

const storeDownMsg = "task store unavailable"

// stoppableUpstream is a go-sdk test upstream on a fixed loopback address
// that can be stopped (listener and connections closed at once, like a
// killed process) and started again, fresh, on the same address.
type stoppableUpstream struct {
	t    *testing.T
	opts testupstream.Options
	addr string
	URL  string // the MCP endpoint

	mu  sync.Mutex
	srv *http.Server
}

func newStoppableUpstream(t *testing.T, opts testupstream.Options) *stoppableUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &stoppableUpstream{t: t, opts: opts, addr: ln.Addr().String()}
	u.URL = "http://" + u.addr + "/mcp"
	u.serve(ln)
	t.Cleanup(u.stop)
	return u
}

func (u *stoppableUpstream) serve(ln net.Listener) {
	srv := &http.Server{Handler: testupstream.Handler(u.opts)}
	u.mu.Lock()
	u.srv = srv
	u.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// stop closes the listener and every connection without waiting for the
// handlers: to the gateway it looks like the upstream process died.
func (u *stoppableUpstream) stop() {
	u.mu.Lock()
	srv := u.srv
	u.srv = nil
	u.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// start serves a fresh upstream (no sessions) on the same address again.
func (u *stoppableUpstream) start() {
	u.t.Helper()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ln net.Listener
		if ln, err = net.Listen("tcp", u.addr); err == nil {
			u.serve(ln)
			return
		}
	}
	u.t.Fatalf("restart upstream on %s: %v", u.addr, err)
}

// outageRig is gateway replicas on one redis-server in front of one
// stoppable upstream.
type outageRig struct {
	t     *testing.T
	redis *redistest.Server
	up    *stoppableUpstream
	rec   *testupstream.Recorder
	urls  []string // each replica's MCP endpoint
	bases []string // each replica's base URL (/readyz)
	hs    []*Handler
}

// outageRules: slow is a task (both flavours), echo is always sync, fail
// is auto with a long hybrid wait (gwtest.DirectWait: a modern client's call is
// answered directly, however busy the machine, so it needs no store), every
// other tool follows the policy's defaults.
func outageRules(t *testing.T) policy.Rules {
	return append(gwtest.Rules(t, "slow", policy.Task, "echo", policy.Sync), gwtest.WithWait(gwtest.Rules(t, "fail", policy.Auto), gwtest.DirectWait)...)
}

// quietRedis keeps go-redis from logging every refused dial of an outage.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...interface{}) {}

var quietRedisOnce sync.Once

func newOutageRig(t *testing.T, replicas int, upOpts testupstream.Options, mods ...func(i int, c *Config)) *outageRig {
	t.Helper()
	quietRedisOnce.Do(func() { redis.SetLogger(quietRedis{}) })
	rig := &outageRig{t: t, rec: &testupstream.Recorder{}}
	// AOF, fsync on every write: what the tests write survives Stop/Restart.
	rig.redis = redistest.NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always")
	upOpts.Recorder = rig.rec
	rig.up = newStoppableUpstream(t, upOpts)
	f := &fleet{Fleet: &frontrig.Fleet{T: t, Up: rig.up.URL, Redis: func() redis.UniversalClient {
		// The production client options (fail fast), as --redis-url gives them.
		o, err := taskstore.ParseURL("redis://" + rig.redis.Addr)
		if err != nil {
			t.Fatal(err)
		}
		return redis.NewUniversalClient(o)
	}}}
	for i := 0; i < replicas; i++ {
		f.add(func(c *Config) {
			c.ReplicaID, c.Policy, c.LatencySync = fmt.Sprintf("r%d", i), gwtest.HybridPolicy(outageRules(t), 200*time.Millisecond), -1
			for _, mod := range mods {
				mod(i, c)
			}
		})
		rig.urls = append(rig.urls, f.URLs[i])
		rig.bases = append(rig.bases, strings.TrimSuffix(f.URLs[i], "/mcp"))
	}
	rig.hs = f.hs
	return rig
}

// restartRedis starts the stopped redis-server again with its data, and
// waits until every replica is ready.
func (rig *outageRig) restartRedis() {
	rig.t.Helper()
	rig.redis.Start()
	// Every replica: each one's Redis pool may still answer with the dial
	// error it cached during the outage until its own redial succeeds
	// (go-redis retries in the background about once a second).
	for i := range rig.urls {
		rig.waitReady(i, http.StatusOK)
	}
}

// readyz returns replica i's /readyz status and checks.
func (rig *outageRig) readyz(i int) (int, map[string]string) {
	rig.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rig.bases[i]+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rig.t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Checks
}

// upstreamUp is replica i's taskgate_upstream_up, as /metrics shows it.
func (rig *outageRig) upstreamUp(i int) string {
	rig.t.Helper()
	resp, err := http.Get(rig.bases[i] + "/metrics")
	if err != nil {
		rig.t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "taskgate_upstream_up "); ok {
			return v
		}
	}
	return "missing"
}

// waitReady polls replica i's /readyz until it answers status.
func (rig *outageRig) waitReady(i, status int) map[string]string {
	rig.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, checks := rig.readyz(i)
		if got == status {
			return checks
		}
		if time.Now().After(deadline) {
			rig.t.Fatalf("/readyz of replica %d = %d %v, want %d", i, got, checks, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outageClient sends JSON-RPC requests to one replica, each bounded by
// hangGuard: a 2025-11-25 (or older) client with a session, or (modern) a
// 2026-07-28 client declaring the tasks extension.
type outageClient struct {
	t       *testing.T
	url     string
	modern  bool
	noExt   bool   // modern, without the tasks extension
	version string // legacy: the protocol version it initializes with
	sid     string
	id      int
}

func (c *outageClient) on(url string) *outageClient {
	d := *c
	d.url = url
	return &d
}

// call sends one request and returns the HTTP status and the response to
// it. A request not answered within hangGuard fails the test as hung.
func (c *outageClient) call(method string, params map[string]any) (int, gwtest.Reply) {
	c.t.Helper()
	status, r, _ := c.send(method, params)
	return status, r
}

func (c *outageClient) send(method string, params map[string]any) (int, gwtest.Reply, http.Header) {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	c.id++
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	if c.modern {
		caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
		if !c.noExt {
			caps["extensions"] = map[string]any{core.TasksExtension: map[string]any{}}
		}
		params["_meta"] = map[string]any{core.MetaProtocolVersion: core.Version2026, core.MetaClientCaps: caps}
		header.Set("MCP-Protocol-Version", core.Version2026)
		header.Set("Mcp-Method", method)
		for _, k := range []string{"name", "taskId"} {
			if v, ok := params[k].(string); ok {
				header.Set("Mcp-Name", v)
			}
		}
	} else if c.sid != "" {
		header.Set("Mcp-Session-Id", c.sid)
		header.Set("MCP-Protocol-Version", c.version)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(string(body)))
	req.Header = header
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			c.t.Fatalf("%s hung: no answer within %v", method, hangGuard)
		}
		c.t.Fatalf("%s: %v", method, err)
	}
	var out gwtest.Reply
	err = gwtest.ScanMessages(resp, func(m gwtest.Reply) bool {
		if string(m.ID) == fmt.Sprint(c.id) && m.Method == "" {
			out = m
			return false
		}
		return true
	})
	if err != nil || (out.Result == nil && out.Error == nil) {
		if ctx.Err() != nil {
			c.t.Fatalf("%s hung: no response within %v (after %v)", method, hangGuard, time.Since(start))
		}
		c.t.Fatalf("%s: HTTP %d without a response (%v)", method, resp.StatusCode, err)
	}
	return resp.StatusCode, out, resp.Header
}

// initialize opens a session with the client's version and returns the
// initialize response; the session id is kept.
func (c *outageClient) initialize() (int, gwtest.Reply) {
	c.t.Helper()
	status, r, header := c.send("initialize", map[string]any{
		"protocolVersion": c.version,
		"capabilities":    map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		"clientInfo":      map[string]any{"name": "outage", "version": "0"},
	})
	if r.Error != nil {
		if header.Get("Mcp-Session-Id") != "" {
			c.t.Errorf("a failed initialize handed out session %q", header.Get("Mcp-Session-Id"))
		}
		return status, r
	}
	c.sid = header.Get("Mcp-Session-Id")
	if c.sid == "" {
		c.t.Fatalf("initialize %s: no session id", c.version)
	}
	c.notify("notifications/initialized")
	return status, r
}

func (c *outageClient) notify(method string) {
	c.t.Helper()
	body := `{"jsonrpc":"2.0","method":"` + method + `"}`
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("MCP-Protocol-Version", c.version)
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// mustResult calls and fails the test on a JSON-RPC error.
func (c *outageClient) mustResult(method string, params map[string]any) json.RawMessage {
	c.t.Helper()
	status, r := c.call(method, params)
	if r.Error != nil || status != http.StatusOK {
		c.t.Fatalf("%s: HTTP %d, error %+v", method, status, r.Error)
	}
	return r.Result
}

// task starts a task of tool and returns its id.
func (c *outageClient) task(tool string, args map[string]any) string {
	c.t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	if !c.modern {
		params["task"] = map[string]any{"ttl": 60000}
	}
	res := c.mustResult("tools/call", params)
	var ct struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
		TaskID     string `json:"taskId"`
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(res, &ct)
	id := ct.Task.TaskID
	if c.modern {
		id = ct.TaskID
		if ct.ResultType != "task" {
			id = ""
		}
	}
	if id == "" {
		c.t.Fatalf("tools/call %s: no task: %s", tool, res)
	}
	return id
}

// taskState is a task as tasks/get shows it, either flavour.
type taskState struct {
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
	Error         *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// waitTask polls tasks/get until the task is terminal and returns it.
func (c *outageClient) waitTask(id string) taskState {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ts taskState
		if err := json.Unmarshal(c.mustResult("tasks/get", map[string]any{"taskId": id}), &ts); err != nil {
			c.t.Fatal(err)
		}
		switch ts.Status {
		case "completed", "failed", "cancelled":
			return ts
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s still %s (%s)", id, ts.Status, ts.StatusMessage)
		}
		time.Sleep(200 * time.Millisecond) // within any poll rate limit
	}
}

// wantRPCError checks a JSON-RPC -32603 answered with HTTP 200 whose
// message contains every one of want.
func wantRPCError(t *testing.T, what string, status int, r gwtest.Reply, want ...string) {
	t.Helper()
	if r.Error == nil {
		t.Errorf("%s: HTTP %d result %s, want a -32603 error", what, status, r.Result)
		return
	}
	if r.Error.Code != mcpwire.CodeInternalError || status != http.StatusOK {
		t.Errorf("%s: HTTP %d error %d %q, want HTTP 200 and -32603", what, status, r.Error.Code, r.Error.Message)
	}
	for _, w := range want {
		if !strings.Contains(r.Error.Message, w) {
			t.Errorf("%s: error message %q does not say %q", what, r.Error.Message, w)
		}
	}
}

// wantCachedTask checks a tasks/get answered, during a store outage, from
// the replica's render cache: HTTP 200 and the completed task id.
func wantCachedTask(t *testing.T, what string, status int, r gwtest.Reply, id string) {
	t.Helper()
	var ts taskState
	if r.Error != nil || status != http.StatusOK || json.Unmarshal(r.Result, &ts) != nil || ts.TaskID != id || ts.Status != "completed" {
		t.Errorf("%s: HTTP %d error %+v result %s, want task %s completed from the render cache", what, status, r.Error, r.Result, id)
	}
}

// waitNoticesLost waits until replica i's render cache has been told its
// removal notices are no longer live (the store's pub/sub connection saw
// Redis go away).
func (rig *outageRig) waitNoticesLost(i int) {
	rig.t.Helper()
	renders := rig.hs[i].f2025.Renders
	for deadline := time.Now().Add(hangGuard); renders.Live(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			rig.t.Fatalf("replica %d: the removal notices still look live %s after Redis stopped", i, hangGuard)
		}
	}
}

// resultTextOf is the text of a CallToolResult.
func resultTextOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	text, _, _ := gwtest.ResultText(t, raw)
	return text
}

// TestRedisOutageStoreRequestsFailFast: while Redis is down, every request
// that needs the task store is answered at once with -32603 "task store
// unavailable" (never hangs, never passes through to the upstream), on the
// replica that knows the session and on one that has never seen it; the
// one exception is a tasks/get of a finished task the replica has in its
// render cache, which is answered from there (servableInOutage). Once
// Redis is back, the same requests work again on the same session.
func TestRedisOutageStoreRequestsFailFast(t *testing.T) {
	rig := newOutageRig(t, 2, testupstream.Options{})
	legacyA := &outageClient{t: t, url: rig.urls[0], version: core.Version2025}
	legacyA.initialize()
	legacyB := legacyA.on(rig.urls[1]) // replica 1 never saw the session
	legacyDone := legacyA.task("slow", map[string]any{"seconds": 0, "text": "before"})
	if ts := legacyA.waitTask(legacyDone); ts.Status != "completed" {
		t.Fatalf("task before the outage: %+v", ts)
	}
	modern := &outageClient{t: t, url: rig.urls[0], modern: true}
	modernDone := modern.task("slow", map[string]any{"seconds": 0})
	modern.waitTask(modernDone)

	rig.redis.Stop()
	// Replica 0 rendered both finished tasks (their last polls) and keeps
	// them in its render cache. Wait until it knows the removal notices
	// are lost: its polls of them then read the stamp, which fails, and
	// must still be answered from the cache (servableInOutage). Before
	// that they are answered from the cache without a read (zeroRTT), so
	// both ways give the same answer, whenever the loss is noticed.
	rig.waitNoticesLost(0)
	calls := rig.rec.Count("", testupstream.Called)
	for _, c := range []struct {
		name   string
		cl     *outageClient
		cached bool
	}{{"replica-with-session-cached", legacyA, true}, {"replica-without-session-cached", legacyB, false}} {
		cl := c.cl
		for _, m := range []struct {
			method string
			params map[string]any
		}{
			{"tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{"ttl": 60000}}},
			{"tasks/get", map[string]any{"taskId": legacyDone}},
			{"tasks/result", map[string]any{"taskId": legacyDone}},
			{"tasks/list", map[string]any{}},
			{"tasks/cancel", map[string]any{"taskId": legacyDone}},
		} {
			status, r := cl.call(m.method, m.params)
			if c.cached && m.method == "tasks/get" {
				wantCachedTask(t, c.name+" legacy tasks/get", status, r, legacyDone)
				continue
			}
			wantRPCError(t, c.name+" legacy "+m.method, status, r, storeDownMsg)
		}
	}
	// A new 2025-11-25 session must be recorded before its id is handed out.
	fresh := &outageClient{t: t, url: rig.urls[1], version: core.Version2025}
	status, r := fresh.initialize()
	wantRPCError(t, "initialize 2025-11-25", status, r, storeDownMsg)

	for _, m := range []struct {
		method string
		params map[string]any
	}{
		{"tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0}}},
		{"tasks/get", map[string]any{"taskId": modernDone}},
		{"tasks/update", map[string]any{"taskId": modernDone, "inputResponses": map[string]any{"1": map[string]any{"action": "decline"}}}},
		{"tasks/cancel", map[string]any{"taskId": modernDone}},
		{"subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{modernDone}}}},
	} {
		for i, url := range rig.urls {
			status, r := modern.on(url).call(m.method, m.params)
			if i == 0 && m.method == "tasks/get" {
				wantCachedTask(t, "replica 0 modern tasks/get", status, r, modernDone)
				continue
			}
			wantRPCError(t, fmt.Sprintf("replica %d modern %s", i, m.method), status, r, storeDownMsg)
		}
	}
	if n := rig.rec.Count("", testupstream.Called); n != calls {
		t.Errorf("the upstream saw %d tool calls during the outage; a request needing the store must not reach it", n-calls)
	}

	rig.restartRedis()
	for i, cl := range []*outageClient{legacyA, legacyB} {
		if ts := cl.waitTask(legacyDone); ts.Status != "completed" {
			t.Errorf("replica %d: task from before the outage is %s after it", i, ts.Status)
		}
		id := cl.task("slow", map[string]any{"seconds": 0, "text": "after"})
		if ts := cl.waitTask(id); ts.Status != "completed" {
			t.Errorf("replica %d: task after the outage: %+v", i, ts)
		}
	}
	if ts := modern.on(rig.urls[1]).waitTask(modernDone); ts.Status != "completed" {
		t.Errorf("modern task from before the outage is %s after it", ts.Status)
	}
}

// TestRedisOutagePassThroughKeepsWorking: with Redis down, what does not
// need the store still flows: a 2025-11-25 session opened before the
// outage keeps its plain tools/call and tools/list (on a replica whose
// cache has it and on one whose cache does not: the session is then served
// as pass-through), an older client initializes and calls, and a
// 2026-07-28 client's plain calls reach a modern upstream.
func TestRedisOutagePassThroughKeepsWorking(t *testing.T) {
	t.Run("legacy-upstream", func(t *testing.T) {
		rig := newOutageRig(t, 2, testupstream.Options{})
		a := &outageClient{t: t, url: rig.urls[0], version: core.Version2025}
		a.initialize()
		rig.redis.Stop()
		t.Cleanup(rig.redis.Start) // the Handlers close with Redis up

		older := &outageClient{t: t, url: rig.urls[1], version: "2025-06-18"}
		if status, r := older.initialize(); r.Error != nil || status != http.StatusOK {
			t.Fatalf("initialize 2025-06-18 during the outage: HTTP %d %+v", status, r.Error)
		}
		for name, cl := range map[string]*outageClient{
			"2025-11-25 session, cached":     a,
			"2025-11-25 session, not cached": a.on(rig.urls[1]),
			"2025-06-18 session":             older,
			"2025-06-18 session, other":      older.on(rig.urls[0]),
		} {
			res := cl.mustResult("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "through"}})
			if got := resultTextOf(t, res); got != "through" {
				t.Errorf("%s: echo = %q", name, got)
			}
			// slow is a task candidate, but a call without params.task is plain.
			res = cl.mustResult("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0, "text": "plain"}})
			if got := resultTextOf(t, res); got != "slept 0 s: plain" {
				t.Errorf("%s: plain slow = %q", name, got)
			}
			var tl struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if json.Unmarshal(cl.mustResult("tools/list", nil), &tl) != nil || len(tl.Tools) == 0 {
				t.Errorf("%s: tools/list has no tools", name)
			}
		}
	})
	t.Run("modern-upstream", func(t *testing.T) {
		rig := newOutageRig(t, 1, testupstream.Options{Stateless: true})
		m := &outageClient{t: t, url: rig.urls[0], modern: true}
		m.mustResult("tools/list", nil) // era detection, before the outage
		rig.redis.Stop()
		t.Cleanup(rig.redis.Start)
		for name, cl := range map[string]*outageClient{
			"with the extension":    m,
			"without the extension": {t: t, url: rig.urls[0], modern: true, noExt: true},
		} {
			res := cl.mustResult("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "modern"}})
			if got := resultTextOf(t, res); got != "modern" {
				t.Errorf("%s: echo = %q", name, got)
			}
			// Auto. A fast answer comes back directly, no task, no store.
			res = cl.mustResult("tools/call", map[string]any{"name": "fail", "arguments": map[string]any{}})
			if got := resultTextOf(t, res); !strings.Contains(got, "deliberate failure") {
				t.Errorf("%s: fail = %q", name, got)
			}
			if json.Unmarshal(cl.mustResult("tools/list", nil), new(struct{})) != nil {
				t.Errorf("%s: tools/list", name)
			}
		}
		// Without the extension a task rule means a plain call.
		res := (&outageClient{t: t, url: rig.urls[0], modern: true, noExt: true}).
			mustResult("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0, "text": "noext"}})
		if got := resultTextOf(t, res); got != "slept 0 s: noext" {
			t.Errorf("slow without the extension = %q", got)
		}
	})
}

// TestRedisOutageWorkerResultKept pins docs/ARCHITECTURE.md invariant 5 across a real
// outage: tasks are running when Redis stops, the upstream finishes while it
// is down, and once Redis is back (with its data) the tasks read completed
// with the upstream's result, on the other replica too.
func TestRedisOutageWorkerResultKept(t *testing.T) {
	rig := newOutageRig(t, 2, testupstream.Options{})
	legacy := &outageClient{t: t, url: rig.urls[0], version: core.Version2025}
	legacy.initialize()
	modern := &outageClient{t: t, url: rig.urls[0], modern: true}
	legacyID := legacy.task("slow", map[string]any{"seconds": 1, "text": "legacy kept"})
	modernID := modern.task("slow", map[string]any{"seconds": 1, "text": "modern kept"})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := rig.rec.WaitFor(ctx, "slow", testupstream.Called, 2); err != nil {
		t.Fatal(err)
	}
	rig.redis.Stop()
	if err := rig.rec.WaitFor(ctx, "slow", testupstream.Completed, 2); err != nil {
		t.Fatal(err)
	}
	// The workers have the results and cannot write them; the store says so.
	time.Sleep(300 * time.Millisecond)
	status, r := legacy.call("tasks/get", map[string]any{"taskId": legacyID})
	wantRPCError(t, "tasks/get during the outage", status, r, storeDownMsg)
	rig.restartRedis()

	for i, url := range rig.urls {
		ts := legacy.on(url).waitTask(legacyID)
		if ts.Status != "completed" {
			t.Errorf("replica %d: legacy task %s (%s), want completed", i, ts.Status, ts.StatusMessage)
		}
		res := legacy.on(url).mustResult("tasks/result", map[string]any{"taskId": legacyID})
		if got := resultTextOf(t, res); got != "slept 1 s: legacy kept" {
			t.Errorf("replica %d: legacy tasks/result = %q", i, got)
		}
		ts = modern.on(url).waitTask(modernID)
		if ts.Status != "completed" {
			t.Errorf("replica %d: modern task %s (%s), want completed", i, ts.Status, ts.StatusMessage)
		}
		if got := resultTextOf(t, ts.Result); got != "slept 1 s: modern kept" {
			t.Errorf("replica %d: modern result = %q", i, got)
		}
	}
}

// TestRedisOutageReadiness: /readyz turns 503, naming the store (and
// saying the upstream is fine), while Redis is down, and 200 once it is
// back.
func TestRedisOutageReadiness(t *testing.T) {
	rig := newOutageRig(t, 1, testupstream.Options{})
	if status, checks := rig.readyz(0); status != http.StatusOK {
		t.Fatalf("/readyz before the outage = %d %v", status, checks)
	}
	rig.redis.Stop()
	checks := rig.waitReady(0, http.StatusServiceUnavailable)
	if !strings.Contains(checks["store"], storeDownMsg) || checks["upstream"] != "ok" {
		t.Errorf("/readyz checks during the outage = %v, want the store named unavailable and the upstream ok", checks)
	}
	rig.restartRedis()
	if status, checks := rig.readyz(0); status != http.StatusOK || checks["store"] != "ok" {
		t.Errorf("/readyz after the outage = %d %v", status, checks)
	}
}

// TestUpstreamOutage: the upstream dies mid-call, or is down when a task's
// worker starts: the task ends failed with a message naming the upstream,
// never stuck working; a plain call gets HTTP 200 and -32603 naming the
// upstream; /readyz stays 200 (the store answers: clients can still read
// their tasks) with the upstream named unreachable in its body and
// taskgate_upstream_up 0, except on the replica that requires the upstream
// (Config.ReadyRequiresUpstream), which says 503 until it is back.
func TestUpstreamOutage(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		rig := newOutageRig(t, 2, testupstream.Options{Stateless: stateless}, func(i int, c *Config) {
			c.ReadyRequiresUpstream = i == 1
		})
		for i := range rig.urls {
			if status, checks := rig.readyz(i); status != http.StatusOK || checks["upstream"] != "ok" || rig.upstreamUp(i) != "1" {
				t.Fatalf("replica %d before the outage: /readyz %d %v, taskgate_upstream_up %s", i, status, checks, rig.upstreamUp(i))
			}
		}
		var cl *outageClient
		if stateless {
			cl = &outageClient{t: t, url: rig.urls[0], modern: true}
			cl.mustResult("tools/list", nil)
		} else {
			cl = &outageClient{t: t, url: rig.urls[0], version: core.Version2025}
			cl.initialize()
		}
		running := cl.task("slow", map[string]any{"seconds": 30, "text": "never"})
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := rig.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
			t.Fatal(err)
		}
		rig.up.stop()

		// Mid-call: the worker's call breaks off.
		ts := cl.on(rig.urls[1]).waitTask(running)
		// Clients are told it was the upstream, never its address.
		if ts.Status != "failed" || !strings.Contains(ts.StatusMessage, "the upstream") || strings.Contains(ts.StatusMessage, rig.up.URL) {
			t.Errorf("task whose upstream died: %s %q, want failed naming the upstream (not its address)", ts.Status, ts.StatusMessage)
		}
		if stateless {
			if ts.Error == nil || ts.Error.Code != mcpwire.CodeInternalError || !strings.Contains(ts.Error.Message, "the upstream") {
				t.Errorf("modern failed task error = %+v, want -32603 naming the upstream", ts.Error)
			}
		} else {
			status, r := cl.call("tasks/result", map[string]any{"taskId": running})
			wantRPCError(t, "tasks/result of the broken task", status, r, "the upstream")
		}

		// Down when the worker starts: created (the store is fine), then failed.
		id := cl.task("slow", map[string]any{"seconds": 0, "text": "down"})
		ts = cl.waitTask(id)
		if ts.Status != "failed" || !strings.Contains(ts.StatusMessage, "the upstream is unreachable") {
			t.Errorf("task started while the upstream is down: %s %q, want failed saying the upstream is unreachable", ts.Status, ts.StatusMessage)
		}

		// Plain calls: HTTP 200, -32603 naming the upstream.
		for i, url := range rig.urls {
			status, r := cl.on(url).call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}})
			wantRPCError(t, fmt.Sprintf("replica %d: echo", i), status, r, "the upstream", "unreachable")
			status, r = cl.on(url).call("tools/list", nil)
			wantRPCError(t, fmt.Sprintf("replica %d: tools/list", i), status, r, "the upstream", "unreachable")
		}

		for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable} {
			status, checks := rig.readyz(i)
			if status != want || !strings.Contains(checks["upstream"], "unreachable") || strings.Contains(checks["upstream"], rig.up.URL) || checks["store"] != "ok" {
				t.Errorf("replica %d: /readyz with the upstream down = %d %v, want %d, the upstream unreachable (without its address) and the store ok", i, status, checks, want)
			}
			if up := rig.upstreamUp(i); up != "0" {
				t.Errorf("replica %d: taskgate_upstream_up with the upstream down = %s, want 0", i, up)
			}
		}
		rig.up.start()
		rig.waitReady(1, http.StatusOK)
		if status, checks := rig.readyz(0); status != http.StatusOK || checks["upstream"] != "ok" || rig.upstreamUp(0) != "1" {
			t.Errorf("/readyz after the upstream came back: %d %v, taskgate_upstream_up %s", status, checks, rig.upstreamUp(0))
		}
		if !stateless {
			// The restarted upstream forgot the session; a new one works.
			cl = &outageClient{t: t, url: rig.urls[1], version: core.Version2025}
			cl.initialize()
		}
		id = cl.task("slow", map[string]any{"seconds": 0, "text": "back"})
		if ts := cl.waitTask(id); ts.Status != "completed" {
			t.Errorf("task after the upstream came back: %+v", ts)
		}
	})
}
