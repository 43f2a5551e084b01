package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestSlowBodiesCostWhatTheySend: a body that announces 4 MiB and sends
// one byte costs what it sent, and its connection is answered 408 once
// ReadTimeout passes. (It used to cost the announced 4 MiB each, held as
// long as the client liked: 100 such connections, 400 MiB.)
func TestSlowBodiesCostWhatTheySend(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	defer up.Close()
	client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Upstream: client, ReadTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var entered atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	const conns = 100
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 4<<20)
		cs = append(cs, c)
	}
	for deadline := time.Now().Add(10 * time.Second); entered.Load() < conns; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests reached the handler", entered.Load(), conns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var peak uint64
	for range 20 { // while the bodies are being read
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
		time.Sleep(5 * time.Millisecond)
	}
	if grew := int64(peak) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB for %d one-byte bodies", grew>>20, conns)
	}
	for i, c := range cs {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !bytes.Contains(body, []byte("did not arrive within")) {
			t.Fatalf("connection %d: %d %s, want 408", i, resp.StatusCode, body)
		}
	}
}

// TestStatelessSessionHeaderIsNoOwner: a 2026-07-28 client without
// Authorization cannot pick its owner with Mcp-Session-Id. Rotating the
// header opens no upstream session per value (one anonymous owner session
// serves them all), and the tasks stay anonymous ones (ttl at most ten
// minutes), each its own owner. (Each value used to be an owner: a held
// upstream session and a 24 h record per value, and the per-owner cap and
// the anonymous ttl cap escaped.)
func TestStatelessSessionHeaderIsNoOwner(t *testing.T) {
	var inits atomic.Int64
	rec := &testupstream.Recorder{}
	upH := testupstream.Handler(testupstream.Options{Recorder: rec})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"method":"initialize"`)) {
			inits.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		upH.ServeHTTP(w, r)
	}))
	defer up.Close()
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)) })
	for i := range 3 {
		c := &gwtest.ModernClient{T: t, URLs: f.URLs, Header: http.Header{"Mcp-Session-Id": {fmt.Sprintf("made-up-%d", i)}}}
		d := c.ToolTask("slow", map[string]any{"seconds": 0.01})
		if *d.TTLMs > core.AnonymousTTL.Milliseconds() {
			t.Errorf("task %d: ttl %d ms, want an anonymous task's (at most %d)", i, *d.TTLMs, core.AnonymousTTL.Milliseconds())
		}
		// Its id is its credential: another anonymous client reads it.
		other := &gwtest.ModernClient{T: t, URLs: f.URLs}
		other.WaitTask(d.TaskID, "completed")
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the upstream saw %d initialize requests, want 1 (one anonymous owner session)", n)
	}
}

// TestAnonymousTasksAreTheirOwnOwners: anonymous tasks share no owner, so
// one client does not use up another's per-owner cap; they are bounded
// per client address and in all instead.
func TestAnonymousTasksAreTheirOwnOwners(t *testing.T) {
	rig := newStoreRig(t, true, taskstore.Options{MaxTasksPerOwner: 1},
		Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)), Anonymous: AnonymousTasks{PerAddress: 2}})
	a := rig.c.ToolTask("slow", map[string]any{"seconds": 30})
	b := rig.c.ToolTask("slow", map[string]any{"seconds": 30}) // the per-owner cap of 1 does not apply
	r := rig.c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30}})
	if r.Error == nil || !strings.Contains(r.Error.Message, "from this address") {
		t.Errorf("third anonymous task from one address: %+v, want refused by the per-address cap", r)
	}
	for _, id := range []string{a.TaskID, b.TaskID} {
		rig.c.Call("tasks/cancel", map[string]any{"taskId": id})
	}
	// An authenticated client is an owner of its own, with its own cap.
	authed := &gwtest.ModernClient{T: t, URLs: rig.c.URLs, Auth: "Bearer x"}
	authed.ToolTask("slow", map[string]any{"seconds": 0.01})

	noAnon := newStoreRig(t, true, taskstore.Options{},
		Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)), Anonymous: AnonymousTasks{Disabled: true}})
	r = noAnon.c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0.01}})
	if r.Error == nil || !strings.Contains(r.Error.Message, "Authorization") {
		t.Errorf("anonymous task with anonymous tasks disabled: %+v, want refused", r)
	}
	// An "auto" call is made a plain one instead.
	r = noAnon.c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "plain"}})
	if r.Error != nil || !strings.Contains(string(r.Result), "plain") || strings.Contains(string(r.Result), `"task"`) {
		t.Errorf("auto call with anonymous tasks disabled: %+v, want the plain result", r)
	}
}

// TestTasksUpdateIsBounded: a tasks/update cannot make Redis run a script
// over more answers than a task can have outstanding (it used to take any
// number: 250,000 keys kept Redis busy 381 ms for every replica).
func TestTasksUpdateIsBounded(t *testing.T) {
	cmds := gwtest.NewCommandCounter()
	// Leases long enough that no renewal runs a script during the test.
	rig := newStoreRig(t, true, taskstore.Options{}, Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)),
		Lease: 10 * time.Minute, LeaseRenew: 5 * time.Minute}, cmds)
	d := rig.c.ToolTask("slow", map[string]any{"seconds": 30})
	many := map[string]any{}
	for i := range 10000 {
		many[fmt.Sprint(i)] = map[string]any{"action": "accept"}
	}
	cmds.Reset()
	r := rig.c.Call("tasks/update", map[string]any{"taskId": d.TaskID, "inputResponses": many})
	if r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams || !strings.Contains(r.Error.Message, "at most") {
		t.Errorf("tasks/update with 10000 answers: %+v, want -32602", r)
	}
	if n := cmds.Reset(); n["evalsha"]+n["eval"] != 0 {
		t.Errorf("the refused tasks/update ran scripts: %v", n)
	}
	r = rig.c.Call("tasks/update", map[string]any{"taskId": d.TaskID, "inputResponses": []int{1}})
	if r.Error == nil || !strings.Contains(r.Error.Message, "inputResponses must be an object") {
		t.Errorf("tasks/update with an array: %+v, want a message about inputResponses", r)
	}
	r = rig.c.Call("tasks/update", map[string]any{"taskId": d.TaskID, "inputResponses": map[string]any{strings.Repeat("k", 100): 1}})
	if r.Error != nil {
		t.Errorf("tasks/update with an unknown key: %+v, want it ignored", r)
	}
	rig.c.Call("tasks/cancel", map[string]any{"taskId": d.TaskID})
}

// newMiniStore is a store on an in-process Redis.
func newMiniStore(t *testing.T) *taskstore.Store {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	s := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { s.Close(); rdb.Close() })
	return s
}

// TestWorkerStopsWhenTheRecordIsGone: a task whose record vanished (Redis
// restarted without persistence, say) has its upstream call cancelled and
// its in-flight slot freed at the next lease renewal, not at its ttl.
func TestWorkerStopsWhenTheRecordIsGone(t *testing.T) {
	rig := newStoreRig(t, false, taskstore.Options{},
		Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)), Lease: 2 * time.Second, LeaseRenew: 100 * time.Millisecond})
	rig.c.Auth = "Bearer gone"
	rig.c.ToolTask("slow", map[string]any{"seconds": 60})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rig.rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	rig.mr.FlushAll()
	if err := rig.rec.WaitFor(ctx, "slow", testupstream.Cancelled, 1); err != nil {
		t.Fatalf("the upstream call was not cancelled: %v", err)
	}
	if err := rig.h.runner.Idle(ctx); err != nil {
		t.Fatalf("the in-flight slot was not freed: %d in flight", rig.h.runner.Inflight())
	}
}

// TestNoUpstreamSecrets: the upstream's address and password reach no
// client, neither in errors nor in /readyz, and no log line.
func TestNoUpstreamSecrets(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	client, err := upstream.New("http://user:s3cret@127.0.0.1:1/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Upstream: client, Store: newMiniStore(t), Logger: zerolog.New(gwtest.LockedWriter{W: &logs, Mu: &mu})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	var seen []string
	post := func(body string, header map[string]string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen = append(seen, string(b))
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
	post(gwtest.InitBody("2025-11-25"), nil)
	post(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen = append(seen, string(b))
	mu.Lock()
	seen = append(seen, logs.String())
	mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "127.0.0.1:1") {
			t.Errorf("the upstream's address or password shows: %s", s)
		}
	}
	if !strings.Contains(seen[0], "the upstream is unreachable") {
		t.Errorf("error = %s, want it to say the upstream is unreachable", seen[0])
	}
}

// TestOrigin: a browser page from a foreign Origin gets 403 (MCP
// 2026-07-28, Streamable HTTP transport: servers MUST validate Origin);
// localhost and configured origins pass and get CORS answers.
func TestOrigin(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	defer up.Close()
	do := func(url, method, origin string, header map[string]string) *http.Response {
		req, _ := http.NewRequest(method, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	def := newGateway(t, up.URL+"/mcp", nil)
	for origin, want := range map[string]int{
		"": http.StatusOK, "http://localhost:6274": http.StatusOK, "http://127.0.0.1": http.StatusOK,
		"http://evil.example": http.StatusForbidden, "null": http.StatusForbidden, "http://localhost.evil.example": http.StatusForbidden,
	} {
		if got := do(def, http.MethodPost, origin, nil).StatusCode; got != want {
			t.Errorf("default policy, Origin %q: %d, want %d", origin, got, want)
		}
	}
	conf := newGateway(t, up.URL+"/mcp", func(c *Config) { c.AllowedOrigins = []string{"https://app.example:8443"} })
	if got := do(conf, http.MethodPost, "http://localhost:6274", nil).StatusCode; got != http.StatusForbidden {
		t.Errorf("configured policy, localhost: %d, want 403", got)
	}
	resp := do(conf, http.MethodPost, "https://APP.example:8443", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "https://APP.example:8443" {
		t.Errorf("configured origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp = do(conf, http.MethodOptions, "https://app.example:8443",
		map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, mcp-protocol-version"})
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "mcp-protocol-version") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	any := newGateway(t, up.URL+"/mcp", func(c *Config) { c.AllowedOrigins = []string{"*"} })
	if got := do(any, http.MethodPost, "http://evil.example", nil).StatusCode; got != http.StatusOK {
		t.Errorf("'*': %d, want 200", got)
	}
	if _, err := New(Config{Upstream: mustUpstream(t, up.URL), AllowedOrigins: []string{"https://x/path"}}); err == nil {
		t.Error("an allowed origin with a path was accepted")
	}
}

func mustUpstream(t *testing.T, url string) *upstream.Client {
	c, err := upstream.New(url+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFrontDoorSmallItems: one Authorization only; a client's forwarding
// headers do not reach the upstream; batches are refused.
func TestFrontDoorSmallItems(t *testing.T) {
	got := make(chan http.Header, 8)
	upH := testupstream.Handler(testupstream.Options{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		upH.ServeHTTP(w, r)
	}))
	defer up.Close()
	url := newGateway(t, up.URL+"/mcp", nil)
	post := func(body string, header http.Header) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header = header
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	init := gwtest.InitBody("2025-06-18")
	if code, body := post(init, http.Header{"Authorization": {"Bearer a", "Bearer b"}}); code != http.StatusBadRequest || !strings.Contains(body, "more than one Authorization") {
		t.Errorf("two Authorization headers: %d %s", code, body)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.Header{"Mcp-Session-Id": {"mine", "alices"}}); code != http.StatusBadRequest || !strings.Contains(body, "more than one Mcp-Session-Id") {
		t.Errorf("two Mcp-Session-Id headers: %d %s", code, body)
	}
	if code, body := post(init, http.Header{"X-Forwarded-For": {"10.9.8.7"}, "Forwarded": {"for=10.9.8.7"}}); code != http.StatusOK {
		t.Fatalf("initialize: %d %s", code, body)
	}
	h := <-got
	if h.Get("X-Forwarded-For") == "10.9.8.7" || h.Get("Forwarded") != "" {
		t.Errorf("the client's forwarding headers reached the upstream: %v", h)
	}
	if code, body := post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, http.Header{}); code != http.StatusBadRequest || !strings.Contains(body, "batches") {
		t.Errorf("batch: %d %s", code, body)
	}
}

// TestAnonymousCapKeepsAutoCallsAlive: an "auto" call still running when
// the anonymous caps leave no room for a task answers when it ends, as a
// plain call, instead of being cut off.
func TestAnonymousCapKeepsAutoCallsAlive(t *testing.T) {
	rig := newStoreRig(t, true, taskstore.Options{},
		Config{Policy: gwtest.HybridPolicy(nil, 100*time.Millisecond), Anonymous: AnonymousTasks{PerAddress: 1}})
	first := rig.c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0.5, "text": "a"}})
	if !strings.Contains(string(first.Result), `"task"`) {
		t.Fatalf("first auto call: %s %+v, want a task", first.Result, first.Error)
	}
	second := rig.c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0.5, "text": "b"}})
	if second.Error != nil || !strings.Contains(string(second.Result), "slept 0.5 s") {
		t.Errorf("second auto call past the per-address cap: %s %+v, want its plain result", second.Result, second.Error)
	}
}

// TestCORSAnswerSurvivesTheUpstreamsHeaders: an upstream's own
// Access-Control-* headers do not replace the front door's answer for an
// allowed origin.
func TestCORSAnswerSurvivesTheUpstreamsHeaders(t *testing.T) {
	upH := testupstream.Handler(testupstream.Options{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "https://elsewhere.example")
		w.Header().Set("Vary", "Accept-Encoding")
		upH.ServeHTTP(w, r)
	}))
	defer up.Close()
	gw := newGateway(t, up.URL+"/mcp", func(c *Config) { c.AllowedOrigins = []string{"https://app.example"} })
	resp := gwtest.Post(t, gw, "application/json", gwtest.InitBody("2025-06-18"),
		http.Header{"Accept": {"application/json, text/event-stream"}, "Origin": {"https://app.example"}})
	io.Copy(io.Discard, resp.Body)
	if got := resp.Header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != "https://app.example" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") ||
		!strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("CORS answer: %v", resp.Header)
	}
}

// TestEndStreamsClosesListens: EndStreams (a shutdown, before the server
// waits for open requests) ends a subscriptions/listen stream with its
// closing response at once.
func TestEndStreamsClosesListens(t *testing.T) {
	rig := newStoreRig(t, true, taskstore.Options{}, Config{Policy: gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task))})
	done := make(chan gwtest.Reply, 1)
	go func() {
		r := rig.c.Call("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{}}})
		done <- r
	}()
	time.Sleep(100 * time.Millisecond) // let the stream open; the assertion below does not depend on it
	rig.h.EndStreams()
	select {
	case r := <-done:
		if r.Error != nil || r.Result == nil {
			t.Errorf("listen closed with %+v, want its closing result", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listen stream did not end after EndStreams")
	}
}
