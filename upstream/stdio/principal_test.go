package stdio

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/taskgate/taskgate/upstream"
)

// childOf is the child serving session sid, nil when the session is gone.
func childOf(b *Bridge, sid string) *proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.sessions[sid]; s != nil {
		return s.proc
	}
	return nil
}

// running counts the bridge's children now.
func running(b *Bridge) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.fleet.procs)
}

// TestBridgePrincipalScope (issue 37, item 3): with PerPrincipal, the
// sessions of one principal share one child, another principal's never
// do, a session without a principal gets its own; calls of two sessions on
// one child with the same ids, at once, each get their own answer; the
// child stops with its principal's last session, and the next session
// starts a new one.
func TestBridgePrincipalScope(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.PerPrincipal = true; o.MaxSessions = 4; o.SessionIdle = time.Hour })
	a1, a2 := newClientAs(t, b, "alice"), newClientAs(t, b, "alice")
	bob, anon := newClientAs(t, b, "bob"), newClient(t, b)
	pa := childOf(b, a1.sid)
	switch {
	case pa == nil || childOf(b, a2.sid) != pa:
		t.Fatal("alice's two sessions are not on one child")
	case childOf(b, bob.sid) == pa || childOf(b, anon.sid) == pa || childOf(b, bob.sid) == childOf(b, anon.sid):
		t.Fatal("another principal's session, or one without a principal, shares alice's child")
	case running(b) != 3:
		t.Fatalf("%d children, want 3 (alice, bob, the session without a principal)", running(b))
	}
	if err := testutil.CollectAndCompare(b.metrics.children, strings.NewReader(`
# HELP taskgate_stdio_children Running children of --upstream-command on this replica: session (a client session's own), principal (a principal's, --upstream-scope principal), shared (--upstream-shared, or the 2026-07-28 child), warm (started ahead, waiting for a session).
# TYPE taskgate_stdio_children gauge
taskgate_stdio_children{scope="principal"} 2
taskgate_stdio_children{scope="session"} 1
taskgate_stdio_children{scope="shared"} 0
taskgate_stdio_children{scope="warm"} 0
`)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, c := range []*client{a1, a2, a1, a2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := strings.Repeat("x", i+1) + c.sid
			if got := c.tool(7, "echo", map[string]any{"text": text}); got != text {
				t.Errorf("session %d: echo %q, want %q", i, got, text)
			}
		}()
	}
	wg.Wait()
	deleteSession(t, b, a1.sid)
	if got := a2.tool(1, "echo", map[string]any{"text": "still"}); got != "still" || childOf(b, a2.sid) != pa {
		t.Fatalf("alice's other session after one ended: %q", got)
	}
	deleteSession(t, b, a2.sid)
	<-pa.exited // stopped with her last session
	a3 := newClientAs(t, b, "alice")
	if p := childOf(b, a3.sid); p == nil || p == pa {
		t.Fatal("alice's next session is not on a new child")
	}
}

// TestBridgePrincipalShare (issue 37, item 6): the per-principal share
// bounds the sessions on a principal's child; --max-sessions bounds the
// children, so a principal with a child here still opens sessions when
// the children are at the limit, and a new principal is refused.
func TestBridgePrincipalShare(t *testing.T) {
	heard := &refusals{}
	b, _ := startBridge(t, func(o *Options) {
		o.PerPrincipal = true
		o.MaxSessions = 2
		o.MaxSessionsPerPrincipal = 3
		o.SessionIdle = time.Hour
	})
	for i := range 3 {
		if sid, msg, _, _ := initializeAs(t, b, "alice", heard); sid == "" {
			t.Fatalf("alice's session %d: %s", i+1, msg)
		}
	}
	if _, _, reason, _ := initializeAs(t, b, "alice", heard); reason != "max_sessions_per_principal" {
		t.Fatalf("alice's fourth session: reason %q, want max_sessions_per_principal", reason)
	}
	if sid, msg, _, _ := initializeAs(t, b, "bob", heard); sid == "" {
		t.Fatalf("bob: %s", msg)
	}
	if _, _, reason, _ := initializeAs(t, b, "carol", heard); reason != "max_sessions" {
		t.Fatalf("a third principal's child: reason %q, want max_sessions", reason)
	}
	if sid, msg, _, _ := initializeAs(t, b, "bob", heard); sid == "" {
		t.Fatalf("bob's second session on his child, with the children at --max-sessions: %s", msg)
	}
	if n := running(b); n != 2 {
		t.Fatalf("%d children for 5 sessions of 2 principals, want 2", n)
	}
}

// TestBridgePrincipalChildExits: when a principal's child exits, every
// session on it ends (404, its clients initialize again), and the
// principal's next session gets a new child.
func TestBridgePrincipalChildExits(t *testing.T) {
	b, logs := startBridge(t, func(o *Options) { o.PerPrincipal = true })
	a1, a2 := newClientAs(t, b, "alice"), newClientAs(t, b, "alice")
	p := childOf(b, a1.sid)
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	waitFor(t, "the sessions-ended log line", func() bool {
		return strings.Contains(logs.String(), "a principal's upstream process exited; its sessions ended")
	})
	for _, c := range []*client{a1, a2} {
		r := c.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Fatalf("after the child exited: HTTP %d, want 404", r.StatusCode)
		}
	}
	a3 := newClientAs(t, b, "alice")
	if got := a3.tool(1, "echo", map[string]any{"text": "y"}); got != "y" || childOf(b, a3.sid) == p {
		t.Fatalf("a new session: %q", got)
	}
}

// TestReplicasPrincipalChild (issue 37, item 3): the replica running a
// principal's child records it; an initialize of that principal on
// another replica hops there, so its session is on the same child, and
// its later requests follow; another principal's session on that replica
// gets a child there. When the child's last session ends, its record goes.
func TestReplicasPrincipalChild(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	ca := newClientAs(t, a.b, "alice")
	if url, err := dir.SessionReplica(context.Background(), principalRecord("alice")); url != a.srv.URL || err != nil {
		t.Fatalf("record of alice's child = %q, %v; want A's %q", url, err, a.srv.URL)
	}
	cb := newClientAs(t, b.b, "alice") // through B
	if a.hops.Load() == 0 {
		t.Fatal("alice's initialize on B did not hop to A")
	}
	if p := childOf(a.b, cb.sid); p == nil || p != childOf(a.b, ca.sid) {
		t.Fatal("alice's session opened through B is not on her child on A")
	}
	if got := cb.tool(2, "echo", map[string]any{"text": "via B"}); got != "via B" {
		t.Fatalf("a call of alice's second session through B: %q", got)
	}
	bob := newClientAs(t, b.b, "bob")
	if running(b.b) != 1 || childOf(b.b, bob.sid) == nil || running(a.b) != 1 {
		t.Fatalf("children: A %d, B %d; want alice's on A and bob's on B", running(a.b), running(b.b))
	}
	deleteSession(t, a.b, ca.sid)
	deleteSession(t, b.b, cb.sid) // hops to A: her last session there
	waitFor(t, "the record of alice's child to go", func() bool {
		url, err := dir.SessionReplica(context.Background(), principalRecord("alice"))
		return url == "" && err == nil
	})
}

// TestHopPrincipalForged: a hop naming another principal than the one
// it was signed for is refused: the MAC binds the principal.
func TestHopPrincipalForged(t *testing.T) {
	dir, _ := newDirectory(t)
	a := startReplicaWith(t, dir, func(o *Options) { o.PerPrincipal = true }, nil)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+HopPath, bytes.NewReader(body))
	req.Header.Set(HopHeader, signHop(testSecret, a.srv.URL, http.MethodPost, principalRecord("alice"), time.Now(), body))
	req.Header.Set(hopPrincipalHeader, base64.RawURLEncoding.EncodeToString([]byte("mallory")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a hop re-addressed to mallory: HTTP %d %q, want refused", resp.StatusCode, resp.Header.Get(hopErrorHeader))
	}
	// (Not running(a.b): the child that probed the server's versions at
	// start may not have exited yet.)
	a.b.mu.Lock()
	children := len(a.b.fleet.principals)
	a.b.mu.Unlock()
	if children != 0 {
		t.Fatal("a forged hop started a child")
	}
}

// hopRecorder is a Replicas.Client transport that keeps a copy of every
// hop it sends: a captured hop, as an attacker on the network sees it.
type hopRecorder struct {
	mu   sync.Mutex
	hops []capturedHop
}

type capturedHop struct {
	method string
	header http.Header
	body   []byte
}

func (h *hopRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h.mu.Lock()
	h.hops = append(h.hops, capturedHop{r.Method, r.Header.Clone(), body})
	h.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// replay sends the captured hop h to the replica r.
func (h capturedHop) replay(t *testing.T, to *replica) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(h.method, to.srv.URL+HopPath, bytes.NewReader(h.body))
	req.Header = h.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestHopBoundToReplica: a hop captured on its way to one replica and
// replayed, fresh, to another is refused there (each replica remembers
// only the hops it accepted itself): the MAC binds the replica it was
// addressed to. A principal's initialize signed for A starts no child on
// B, and a session's request signed for A is not served by B.
func TestHopBoundToReplica(t *testing.T) {
	dir, _ := newDirectory(t)
	per := func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour }
	rec := &hopRecorder{}
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	c := startReplicaWith(t, dir, per, func(r *Replicas) { r.Client = &http.Client{Transport: rec} })
	newClientAs(t, a.b, "alice")         // her child, and its claim, on A
	viaC := newClientAs(t, c.b, "alice") // hops to A
	if got := viaC.tool(2, "echo", map[string]any{"text": "via C"}); got != "via C" {
		t.Fatalf("a call of alice's session through C: %q", got)
	}
	rec.mu.Lock()
	hops := append([]capturedHop(nil), rec.hops...)
	rec.mu.Unlock()
	if len(hops) != 2 || hops[0].header.Get(hopPrincipalHeader) == "" || hops[1].header.Get("Mcp-Session-Id") != viaC.sid {
		t.Fatalf("C sent %d hops, want alice's initialize and her call", len(hops))
	}
	for i, what := range []string{"alice's initialize", "a call of alice's session"} {
		resp := hops[i].replay(t, b)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(hopErrorHeader) != errHopForged.Error() {
			t.Errorf("%s signed for A, replayed to B: HTTP %d %q; want 403, refused as forged", what, resp.StatusCode, resp.Header.Get(hopErrorHeader))
		}
	}
	b.b.mu.Lock()
	children, sessions := len(b.b.fleet.principals), len(b.b.sessions)
	b.b.mu.Unlock()
	if children != 0 || sessions != 0 {
		t.Fatalf("B has %d principals' children and %d sessions after the replays; want none", children, sessions)
	}
	// To A, the one it was signed for, it is a replay.
	if resp := hops[0].replay(t, a); resp.StatusCode != http.StatusConflict {
		t.Fatalf("alice's initialize replayed to A: HTTP %d %q; want 409", resp.StatusCode, resp.Header.Get(hopErrorHeader))
	}
}

// TestHopRerunMarkBound: the rerun mark a hop carries is bound by its MAC:
// a verified hop with the mark added on the way, or a marked one with the
// mark stripped, is refused; each as signed is served.
func TestHopRerunMarkBound(t *testing.T) {
	dir, _ := newDirectory(t)
	a := startReplicaWith(t, dir, func(o *Options) { o.PerPrincipal = true }, nil)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	send := func(signedMarked, sentMarked bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, a.srv.URL+HopPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(HopHeader, signHop(testSecret, a.srv.URL, http.MethodPost, hopMACID(principalRecord("alice"), signedMarked), time.Now(), body))
		req.Header.Set(hopPrincipalHeader, base64.RawURLEncoding.EncodeToString([]byte("alice")))
		if sentMarked {
			req.Header.Set(rerunHeader, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name                     string
		signedMarked, sentMarked bool
		refused                  bool
	}{
		{"mark added on the way", false, true, true},
		{"mark stripped on the way", true, false, true},
		{"unmarked, as signed", false, false, false},
		{"marked, as signed", true, true, false},
	} {
		resp := send(tc.signedMarked, tc.sentMarked)
		forged := resp.Header.Get(hopErrorHeader) == errHopForged.Error()
		if forged != tc.refused {
			t.Errorf("%s: HTTP %d %q; refused as forged = %v, want %v", tc.name, resp.StatusCode, resp.Header.Get(hopErrorHeader), forged, tc.refused)
		}
	}
}

// TestReplicasInitializeNamingASession: an initialize that carries a
// session id (the gateway passes the client's headers on, and its session
// guard lets a principal name its own session) opens a new session for
// the principal on its context, whichever replica the named session lives
// on. It is not sent on as a request of that session: the hop would carry
// no principal, and the replica running the session would open one that
// counts in nobody's share, on a child of its own, so that one principal
// could take every child of that replica (--max-sessions) from the others.
func TestReplicasInitializeNamingASession(t *testing.T) {
	dir, _ := newDirectory(t)
	heard := &refusals{}
	per := func(o *Options) {
		o.PerPrincipal = true
		o.MaxSessions = 3
		o.MaxSessionsPerPrincipal = 1
		o.SessionIdle = time.Hour
	}
	a, b := startReplicaWith(t, dir, per, nil), startReplicaWith(t, dir, per, nil)
	bob := newClientAs(t, a.b, "bob") // his child, and his one session, on A
	initialize := func(through *replica) (sid, reason string) {
		t.Helper()
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		ctx := upstream.WithPrincipal(context.Background(), upstream.Principal{Key: "bob", Refused: heard.add})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Session-Id", bob.sid) // his own session, which lives on A
		resp, err := (&http.Client{Transport: through.b.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Error *struct {
				Data struct {
					Reason string `json:"reason"`
				} `json:"data"`
			} `json:"error"`
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if m.Error != nil {
			return "", m.Error.Data.Reason
		}
		return resp.Header.Get("Mcp-Session-Id"), ""
	}
	for _, through := range []*replica{b, a} {
		if sid, reason := initialize(through); reason != "max_sessions_per_principal" {
			t.Fatalf("bob's second initialize naming his session, through %s: session %q, reason %q; want max_sessions_per_principal",
				map[*replica]string{a: "A", b: "B"}[through], sid, reason)
		}
	}
	// The replica running the session refuses such a hop too (one from a
	// replica of a version that sent it on).
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+HopPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", bob.sid)
	req.Header.Set(HopHeader, signHop(testSecret, a.srv.URL, http.MethodPost, bob.sid, time.Now(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("an initialize hopped as a request of bob's session: HTTP %d, session %q; want 400", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	for name, r := range map[string]*replica{"A": a, "B": b} {
		r.b.mu.Lock()
		n, owned := len(r.b.sessions), r.b.owned
		r.b.mu.Unlock()
		if want := map[string]int{"A": 1, "B": 0}[name]; n != want || owned != want {
			t.Fatalf("%s has %d sessions, %d children counted; want %d (bob's one session, on his child on A)", name, n, owned, want)
		}
	}
}

// TestBridgePrincipalIsolation (issue 37, item 3, "what it never shares"):
// a principal's child's log messages reach the GET streams of that
// principal's sessions, never another principal's; the child's question
// on a call of one of her sessions is answered only by that session, not
// by another of hers nor by another principal's; and a cancellation names
// only the canceller's own calls: one of her sessions, or another
// principal, sending notifications/cancelled with the id of her call in
// flight cancels nothing.
func TestBridgePrincipalIsolation(t *testing.T) {
	b, _ := startBridge(t, func(o *Options) { o.PerPrincipal = true; o.SessionIdle = time.Hour })
	a1, a2, bob := newClientAs(t, b, "alice"), newClientAs(t, b, "alice"), newClientAs(t, b, "bob")
	a2s, bobs := a2.stream(), bob.stream()
	// afterlog logs once its call is over: on the GET streams of the
	// sessions its child serves, all of them at once.
	if got := a1.tool(2, "afterlog", map[string]any{"text": "alice-secret"}); got != "ok" {
		t.Fatalf("alice's afterlog: %q", got)
	}
	if m := next(t, a2s, "alice's log on her other session"); m.Method != "notifications/message" || !strings.Contains(string(m.Params), "alice-secret") {
		t.Fatalf("alice's other session's GET stream: %s %s", m.Method, m.Params)
	}
	if got := bob.tool(2, "afterlog", map[string]any{"text": "bob's"}); got != "ok" {
		t.Fatalf("bob's afterlog: %q", got)
	}
	if m := next(t, bobs, "bob's log"); m.Method != "notifications/message" || !strings.Contains(string(m.Params), "bob's") {
		t.Fatalf("bob's GET stream: %s %s; want his own child's log first (alice's went out before)", m.Method, m.Params)
	}

	status := func(c *client, body map[string]any) int {
		t.Helper()
		r := c.post(body)
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return r.StatusCode
	}
	var final msg
	asked := false
	each(t, a1.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "elicit", "arguments": map[string]any{}}}), func(m msg) bool {
		switch {
		case m.Method == "elicitation/create":
			asked = true
			mallory := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Mallory"}}}
			for name, c := range map[string]*client{"alice's other session": a2, "bob": bob} {
				if s := status(c, mallory); s != http.StatusNotFound {
					t.Errorf("%s answering alice's question: HTTP %d, want 404", name, s)
				}
				cancel := map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 9, "reason": "not yours"}}
				if s := status(c, cancel); s != http.StatusAccepted {
					t.Errorf("%s cancelling id 9: HTTP %d", name, s)
				}
			}
			a1.answer(m, map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}})
		case string(m.ID) == "9":
			final = m
			return false
		}
		return true
	})
	if !asked || !strings.Contains(string(final.Result), "Hello, Ada!") {
		t.Fatalf("alice's elicit (asked %v): %s %+v; want her own answer, the call not cancelled", asked, final.Result, final.Error)
	}
}

// TestBridgePrincipalScopeServesNoStatelessChild (issue 37, item 3:
// "what it never shares: anything with another principal"): a child that
// speaks 2026-07-28 as well as 2025-11-25 (the test server as the go-sdk
// makes one) is served statelessly under session scope, one child for
// every 2026-07-28 request whoever sends it; under principal scope the
// bridge starts no such child and answers a 2026-07-28 request of no
// session as a session server does (400, -32600), so the gateway takes it
// for a session upstream and serves its 2026-07-28 clients through the
// sessions it holds per owner, which join their principals' children.
func TestBridgePrincipalScopeServesNoStatelessChild(t *testing.T) {
	dual := []string{serverBin, "--stdio", "--protocol-version", "2026-07-28"}
	pidOf := func(b *Bridge, key string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctx = upstream.WithPrincipal(ctx, upstream.Principal{Key: key})
		resp := post2026(t, ctx, b, "tools/call", map[string]any{"name": "pid", "arguments": map[string]any{}}, map[string]string{"Mcp-Name": "pid"})
		a := answer(t, resp)
		var r struct {
			Content []struct{ Text string } `json:"content"`
		}
		if resp.StatusCode != http.StatusOK || a.Error != nil || json.Unmarshal(a.Result, &r) != nil || len(r.Content) == 0 {
			t.Fatalf("%s's 2026-07-28 pid call: HTTP %d %s %+v", key, resp.StatusCode, a.Result, a.Error)
		}
		return r.Content[0].Text
	}

	t.Run("session", func(t *testing.T) {
		b, _ := startBridge(t, func(o *Options) { o.Command = dual })
		if b.st == nil {
			t.Fatal("session scope serves the dual-version child with sessions only; want its stateless child")
		}
		if a, o := pidOf(b, "alice"), pidOf(b, "bob"); a != o {
			t.Fatalf("session scope: alice's 2026-07-28 call ran in %s, bob's in %s; want the one stateless child", a, o)
		}
	})

	t.Run("principal", func(t *testing.T) {
		b, logs := startBridge(t, func(o *Options) { o.Command = dual; o.PerPrincipal = true; o.SessionIdle = time.Hour })
		if b.st != nil {
			t.Fatal("principal scope serves a stateless child: it would serve every principal's 2026-07-28 clients")
		}
		if n := running(b); n != 0 {
			t.Fatalf("%d children before any session, want none (no probe, no stateless child)", n)
		}
		if !strings.Contains(logs.String(), "served with sessions, a child per principal") {
			t.Errorf("no log line says principal scope serves sessions:\n%s", logs.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctx = upstream.WithPrincipal(ctx, upstream.Principal{Key: "alice"})
		for _, method := range []string{"server/discover", "tools/call"} {
			resp := post2026(t, ctx, b, method, map[string]any{"name": "pid", "arguments": map[string]any{}}, nil)
			if a := answer(t, resp); resp.StatusCode != http.StatusBadRequest || a.Error == nil || a.Error.Code != -32600 {
				t.Fatalf("a 2026-07-28 %s of no session: HTTP %d %s %+v; want 400 and -32600, as from a session server", method, resp.StatusCode, a.Result, a.Error)
			}
		}
		if n := running(b); n != 0 {
			t.Fatalf("%d children after 2026-07-28 requests of no session, want none", n)
		}
		// The sessions (the gateway's own for a 2026-07-28 client among
		// them) are on their principals' children.
		a1, a2, bob := newClientAs(t, b, "alice"), newClientAs(t, b, "alice"), newClientAs(t, b, "bob")
		pa, pb := a1.tool(1, "pid", nil), bob.tool(1, "pid", nil)
		if pa == "" || a2.tool(1, "pid", nil) != pa || pb == pa {
			t.Fatalf("alice's sessions ran in %s and %s, bob's in %s; want hers on one child, his on another", pa, a2.tool(2, "pid", nil), pb)
		}
	})
}

// seamDirectory is a Directory whose PutSessionReplica first runs put,
// once, when set: initialize records a new session there after its child
// is given to it and before the session is added (replicas.go,
// recordSession), so put runs in that window.
type seamDirectory struct {
	Directory
	mu  sync.Mutex
	put func(id string)
}

func (d *seamDirectory) PutSessionReplica(ctx context.Context, id, url string, ttl time.Duration) error {
	d.mu.Lock()
	put := d.put
	d.put = nil
	d.mu.Unlock()
	if put != nil {
		put(id)
	}
	return d.Directory.PutSessionReplica(ctx, id, url, ttl)
}

// TestBridgeChildDiesAsSessionJoins: a session whose child exits, and
// whose exit is processed, between the child given to the session and the
// session added (a principal's child it joins, or its own) is not opened
// on the dead child, where each of its requests would fail until it idled
// out: its initialize is refused, its record goes, and the client's next
// initialize gets a live child.
func TestBridgeChildDiesAsSessionJoins(t *testing.T) {
	for _, tc := range []struct {
		name      string
		principal bool
	}{{"principal's child", true}, {"session's own child", false}} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := newDirectory(t)
			dir := &seamDirectory{Directory: base}
			r := startReplicaWith(t, dir, func(o *Options) { o.PerPrincipal = tc.principal; o.SessionIdle = time.Hour }, nil)
			if tc.principal {
				newClientAs(t, r.b, "alice") // her child
			}
			// The seam holds the joining session's initialize while the
			// child it was given is killed, and its exit processed.
			reached, resume := make(chan string, 1), make(chan struct{})
			dir.mu.Lock()
			dir.put = func(id string) { reached <- id; <-resume }
			dir.mu.Unlock()
			answered := make(chan *http.Response, 1)
			go func() {
				body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
				ctx := upstream.WithPrincipal(context.Background(), upstream.Principal{Key: "alice"})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, URL, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := (&http.Client{Transport: r.b.Transport()}).Do(req)
				if err != nil {
					resp = nil
				}
				answered <- resp
			}()
			joining := <-reached
			r.b.mu.Lock()
			var p *proc // the child the joining session was given: its own, or alice's
			for _, q := range r.b.fleet.procs {
				if (q.sess != nil && q.sess.id == joining) || (tc.principal && q.principal == "alice") {
					p = q
				}
			}
			r.b.mu.Unlock()
			if p == nil {
				close(resume)
				t.Fatal("no child given to the joining session")
			}
			_ = p.cmd.Process.Kill()
			waitFor(t, "the child's exit to be processed", func() bool {
				r.b.mu.Lock()
				defer r.b.mu.Unlock()
				for _, q := range r.b.fleet.procs {
					if q == p {
						return false
					}
				}
				return true
			})
			close(resume)
			resp := <-answered
			if resp == nil {
				t.Fatal("the initialize got no answer")
			}
			sid, ms := resp.Header.Get("Mcp-Session-Id"), readAll(t, resp)
			if sid != "" || len(ms) != 1 || ms[0].Error == nil {
				t.Fatalf("initialize as its child died: session %q, %+v; want it refused", sid, ms)
			}
			// (Its count is given back as its initialize returns, once the
			// answer is written.)
			waitFor(t, "no session, child or principal's child left counted", func() bool {
				r.b.mu.Lock()
				defer r.b.mu.Unlock()
				return len(r.b.sessions) == 0 && r.b.owned == 0 && len(r.b.fleet.principals) == 0
			})
			waitFor(t, "the refused session's record to go", func() bool {
				url, err := base.SessionReplica(context.Background(), joining)
				return url == "" && err == nil
			})
			again := newClientAs(t, r.b, "alice")
			if got := again.tool(2, "echo", map[string]any{"text": "again"}); got != "again" {
				t.Fatalf("a call of the session opened again: %q", got)
			}
		})
	}
}
