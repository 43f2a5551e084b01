package stdio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/taskstore"
)

var testSecret = bytes.Repeat([]byte("k"), 32)

// quietRedis drops go-redis' dial failures (TestReplicasStoreDown causes
// them on purpose).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietRedis{}) }

// replica is one Bridge with a child per session, joined to a directory,
// its hop served on a real listener.
type replica struct {
	b     *Bridge
	srv   *httptest.Server
	hops  atomic.Int32 // hops that reached it
	leave func(context.Context)
}

// newDirectory is a taskstore on a fresh miniredis.
func newDirectory(t testing.TB) (*taskstore.Store, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	s := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { s.Close(); rdb.Close() })
	return s, m
}

func startReplica(t testing.TB, dir Directory, mod func(*Replicas)) *replica {
	t.Helper()
	return startReplicaWith(t, dir, nil, mod)
}

// startReplicaWith is startReplica with the bridge's options changed by
// bmod.
func startReplicaWith(t testing.TB, dir Directory, bmod func(*Options), mod func(*Replicas)) *replica {
	t.Helper()
	b, _ := startBridge(t, bmod)
	rp := &replica{b: b}
	rp.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != HopPath {
			http.NotFound(w, r)
			return
		}
		rp.hops.Add(1)
		b.HopHandler().ServeHTTP(w, r)
	}))
	cfg := Replicas{Directory: dir, Secret: testSecret}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.URL == "https" {
		rp.srv.StartTLS()
	} else {
		rp.srv.Start()
	}
	t.Cleanup(rp.srv.Close)
	cfg.URL = rp.srv.URL
	leave, err := b.JoinReplicas(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp.leave = leave
	t.Cleanup(func() { leave(context.Background()) })
	return rp
}

// on is client c's session, reached through replica r.
func (c *client) on(r *replica) *client {
	return &client{t: c.t, h: &http.Client{Transport: r.b.Transport()}, sid: c.sid}
}

func (c *client) send(method string, body []byte) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(method, URL, bytes.NewReader(body))
	req.Header.Set("Mcp-Session-Id", c.sid)
	resp, err := c.h.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicasSessionFollowsItsChild: a session opened on A is served by
// A's child whichever replica the request lands on: calls, a call's
// stream, the GET stream and DELETE through B, which starts no child.
func TestReplicasSessionFollowsItsChild(t *testing.T) {
	dir, _ := newDirectory(t)
	a, b := startReplica(t, dir, nil), startReplica(t, dir, nil)
	ca := newClient(t, a.b)
	if url, err := dir.SessionReplica(context.Background(), ca.sid); url != a.srv.URL || err != nil {
		t.Fatalf("record of the new session = %q, %v; want A's %q", url, err, a.srv.URL)
	}
	cb := ca.on(b)
	for i, via := range []*client{cb, ca, cb} {
		if got, want := via.tool(i+1, "counter", nil), []string{"1", "2", "3"}[i]; got != want {
			t.Fatalf("counter call %d = %q, want %q (one child, on A)", i+1, got, want)
		}
	}

	// The GET stream through B hears what A's child sends the session.
	get := cb.send(http.MethodGet, nil)
	if get.StatusCode != http.StatusOK || !strings.HasPrefix(get.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET through B: HTTP %d %s", get.StatusCode, get.Header.Get("Content-Type"))
	}
	heard := make(chan msg, 1)
	go func() {
		defer get.Body.Close()
		sc := bufio.NewScanner(get.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m msg
				_ = json.Unmarshal([]byte(data), &m)
				heard <- m
				return
			}
		}
	}()
	if got := ca.tool(4, "afterlog", map[string]any{"text": "xxxxxxx"}); got != "ok" { // a log of no call: the GET stream's
		t.Fatalf("afterlog: %q", got)
	}
	select {
	case m := <-heard:
		if m.Method != "notifications/message" || !strings.Contains(string(m.Params), "xxxxxxx") {
			t.Fatalf("GET stream through B got %+v", m)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the GET stream through B heard nothing")
	}

	// A call's stream through B: progress as it comes, then the answer.
	resp := cb.post(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": map[string]any{
		"name": "progress", "arguments": map[string]any{"steps": 3}, "_meta": map[string]any{"progressToken": "p"}}})
	ms := readAll(t, resp)
	if len(ms) != 4 || ms[0].Method != "notifications/progress" || !strings.Contains(string(ms[0].Params), `"progressToken":"p"`) || string(ms[3].ID) != "5" || ms[3].Result == nil {
		t.Fatalf("progress call through B: %+v", ms)
	}

	// DELETE through B ends the session on A, and its record.
	del := cb.send(http.MethodDelete, nil)
	del.Body.Close()
	if del.StatusCode != http.StatusOK {
		t.Fatalf("DELETE through B: HTTP %d", del.StatusCode)
	}
	for _, via := range []*client{ca, cb} {
		if r := via.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}); r.StatusCode != http.StatusNotFound {
			t.Fatalf("after DELETE: HTTP %d, want 404", r.StatusCode)
		}
	}
	waitFor(t, "the ended session's record to go", func() bool {
		url, _ := dir.SessionReplica(context.Background(), ca.sid)
		return url == ""
	})
	if a.hops.Load() < 5 || b.hops.Load() != 0 {
		t.Errorf("hops: %d to A, %d to B; want every request through B at A, none at B", a.hops.Load(), b.hops.Load())
	}
	b.b.mu.Lock()
	n := len(b.b.fleet.procs)
	b.b.mu.Unlock()
	if n != 0 {
		t.Errorf("B started %d children", n)
	}
}

// TestReplicasOwnerGone: when the replica running the child does not
// answer, the session is gone: 404, as from a restarted server.
func TestReplicasOwnerGone(t *testing.T) {
	dir, _ := newDirectory(t)
	a, b := startReplica(t, dir, nil), startReplica(t, dir, nil)
	ca := newClient(t, a.b)
	a.srv.Close()
	r := ca.on(b).post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	ms := readAll(t, r)
	if r.StatusCode != http.StatusNotFound || len(ms) != 1 || ms[0].Error == nil || ms[0].Error.Code != -32001 || string(ms[0].ID) != "1" {
		t.Fatalf("owner gone: HTTP %d %+v; want 404 Session not found", r.StatusCode, ms)
	}
}

// TestReplicasChildExits: a session whose child exits ends, its record
// with it, and the replica that forwarded its requests answers 404.
func TestReplicasChildExits(t *testing.T) {
	dir, _ := newDirectory(t)
	a, b := startReplica(t, dir, nil), startReplica(t, dir, nil)
	cb := newClient(t, a.b).on(b)
	if got := cb.tool(1, "exit", map[string]any{"code": 3}); !strings.Contains(got, "exited with status 3") {
		t.Fatalf("exit through B: %q", got)
	}
	waitFor(t, "the record of the session whose child exited to go", func() bool {
		url, _ := dir.SessionReplica(context.Background(), cb.sid)
		return url == ""
	})
	if r := cb.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("after its child exited: HTTP %d, want 404", r.StatusCode)
	}
}

// TestReplicasNoLoop: a request that arrived over the hop is served where
// it lands, never sent on; a record naming this replica for a session it
// does not have is a 404 here, and the record goes.
func TestReplicasNoLoop(t *testing.T) {
	dir, _ := newDirectory(t)
	a, b := startReplica(t, dir, nil), startReplica(t, dir, nil)
	ctx := context.Background()
	if err := dir.PutSessionReplica(ctx, "on-a", a.srv.URL, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A hop to B for a session recorded on A (a stale record, or a
	// forged detour) is not sent on to A.
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+HopPath, bytes.NewReader(body))
	req.Header.Set("Mcp-Session-Id", "on-a")
	req.Header.Set(HopHeader, signHop(testSecret, b.srv.URL, http.MethodPost, "on-a", time.Now(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || a.hops.Load() != 0 {
		t.Fatalf("hop to B for A's session: HTTP %d, %d hops on to A; want 404 and none", resp.StatusCode, a.hops.Load())
	}
	// B's own record of a session it does not have.
	if err := dir.PutSessionReplica(ctx, "stale-on-b", b.srv.URL, time.Minute); err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, h: &http.Client{Transport: b.b.Transport()}, sid: "stale-on-b"}
	if r := c.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("stale own record: HTTP %d, want 404", r.StatusCode)
	}
	waitFor(t, "the stale record to go", func() bool {
		url, _ := dir.SessionReplica(ctx, "stale-on-b")
		return url == ""
	})
	if b.hops.Load() != 1 { // the one sent above
		t.Errorf("B got %d hops; it sent some to itself", b.hops.Load())
	}
}

// TestHopAuth: the hop serves only requests signed with the shared
// secret, for this replica, method, session and body, within MaxSkew.
func TestHopAuth(t *testing.T) {
	dir, _ := newDirectory(t)
	a := startReplica(t, dir, nil)
	ca := newClient(t, a.b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	now := time.Now()
	other := bytes.Repeat([]byte("x"), 32)
	for _, tc := range []struct {
		name    string
		header  string
		session string
		status  int
	}{
		{"valid", signHop(testSecret, a.srv.URL, "POST", ca.sid, now, body), ca.sid, http.StatusOK},
		{"replayed", signHop(testSecret, a.srv.URL, "POST", ca.sid, now, body), ca.sid, http.StatusConflict},
		{"valid again, signed later", signHop(testSecret, a.srv.URL, "POST", ca.sid, now.Add(time.Millisecond), body), ca.sid, http.StatusOK},
		{"no session", signHop(testSecret, a.srv.URL, "POST", "", now, body), "", http.StatusBadRequest},
		{"missing", "", ca.sid, http.StatusUnauthorized},
		{"malformed", "t=12,s=zz", ca.sid, http.StatusBadRequest},
		{"no signature", "t=" + strings.Repeat("1", 13), ca.sid, http.StatusBadRequest},
		{"old", signHop(testSecret, a.srv.URL, "POST", ca.sid, now.Add(-time.Minute), body), ca.sid, http.StatusUnauthorized},
		{"future", signHop(testSecret, a.srv.URL, "POST", ca.sid, now.Add(time.Minute), body), ca.sid, http.StatusUnauthorized},
		{"another secret", signHop(other, a.srv.URL, "POST", ca.sid, now, body), ca.sid, http.StatusForbidden},
		{"another session", signHop(testSecret, a.srv.URL, "POST", "other", now, body), ca.sid, http.StatusForbidden},
		{"another method", signHop(testSecret, a.srv.URL, "DELETE", ca.sid, now, body), ca.sid, http.StatusForbidden},
		{"another body", signHop(testSecret, a.srv.URL, "POST", ca.sid, now, []byte(`{}`)), ca.sid, http.StatusForbidden},
		{"another replica", signHop(testSecret, "http://127.0.0.1:1", "POST", ca.sid, now, body), ca.sid, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, a.srv.URL+HopPath, bytes.NewReader(body))
			if tc.session != "" {
				req.Header.Set("Mcp-Session-Id", tc.session)
			}
			if tc.header != "" {
				req.Header.Set(HopHeader, tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("HTTP %d %s, want %d", resp.StatusCode, out, tc.status)
			}
			if refused := resp.Header.Get(hopErrorHeader) != ""; refused != (tc.status != http.StatusOK) {
				t.Errorf("%s = %q", hopErrorHeader, resp.Header.Get(hopErrorHeader))
			}
		})
	}

	// A hop whose header does not verify is refused before its body is
	// read: this one announces 1 MiB and sends none.
	conn, err := net.Dial("tcp", a.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second)) // a hang guard
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\nMcp-Session-Id: %s\r\n%s: %s\r\n\r\n",
		HopPath, ca.sid, HopHeader, signHop(other, a.srv.URL, "POST", ca.sid, now, body))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged hop whose body never comes: %v, %v; want 403 at once", resp, err)
	}

	// A replica with another secret: the client gets a 502 that says so.
	b := startReplica(t, dir, func(r *Replicas) { r.Secret = other })
	r := ca.on(b).post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	ms := readAll(t, r)
	if r.StatusCode != http.StatusBadGateway || len(ms) != 1 || ms[0].Error == nil || !strings.Contains(ms[0].Error.Message, "signature does not match") {
		t.Fatalf("hop with another secret: HTTP %d %+v", r.StatusCode, ms)
	}
}

// TestSeenHops: a hop's MAC is remembered while the hop is fresh, and
// forgotten after; past maxSeenHops fresh ones, a hop is refused rather
// than let through unchecked. A sender never signs two hops with one t.
func TestSeenHops(t *testing.T) {
	var s seenHops
	now := time.UnixMilli(1_700_000_000_000)
	sig := func(i int) hopSig {
		mac := sha256.Sum256([]byte(strconv.Itoa(i)))
		return hopSig{t: now.UnixMilli(), mac: mac[:]}
	}
	if err := s.add(sig(0), now, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.add(sig(0), now.Add(time.Second), time.Second); !errors.Is(err, errHopReplayed) || hopStatus(err) != http.StatusConflict {
		t.Fatalf("a repeat while fresh: %v (%d)", err, hopStatus(err))
	}
	later := now.Add(1001 * time.Millisecond) // stale now: checkHop refuses it first
	for i := 1; i < maxSeenHops; i++ {
		if err := s.add(sig(i), now, time.Second); err != nil {
			t.Fatalf("hop %d: %v", i, err)
		}
	}
	if err := s.add(sig(maxSeenHops), now, time.Second); !errors.Is(err, errHopBusy) || hopStatus(err) != http.StatusServiceUnavailable {
		t.Fatalf("past maxSeenHops fresh hops: %v (%d)", err, hopStatus(err))
	}
	// Once they are stale they are swept: a hop fresh at later is taken.
	fresh := sig(-1)
	fresh.t = later.UnixMilli()
	if err := s.add(fresh, later, time.Second); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if n := len(s.until); n != 1 {
		t.Fatalf("%d MACs remembered after the sweep, want 1", n)
	}

	var rp replicas
	a, b := rp.hopTime(now), rp.hopTime(now)
	if !b.After(a) {
		t.Fatalf("two hops signed in one millisecond: t %v then %v", a, b)
	}
}

// TestReplicasTLS: replicas that serve https hop with TLS, trusting what
// Replicas.TLS says; a certificate not trusted is a 502 that says so, not
// a 404 that would end the session.
func TestReplicasTLS(t *testing.T) {
	dir, _ := newDirectory(t)
	a := startReplica(t, dir, func(r *Replicas) { r.URL = "https" })
	roots := x509.NewCertPool()
	roots.AddCert(a.srv.Certificate())
	trusting := startReplica(t, dir, func(r *Replicas) { r.TLS = &tls.Config{RootCAs: roots} })
	distrusting := startReplica(t, dir, nil)
	ca := newClient(t, a.b)
	if !strings.HasPrefix(a.srv.URL, "https://") {
		t.Fatalf("A serves %s", a.srv.URL)
	}
	if got := ca.on(trusting).tool(1, "counter", nil); got != "1" {
		t.Fatalf("counter over a TLS hop: %q", got)
	}
	r := ca.on(distrusting).post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	ms := readAll(t, r)
	if r.StatusCode != http.StatusBadGateway || len(ms) != 1 || ms[0].Error == nil || !strings.Contains(ms[0].Error.Message, "certificate is not trusted") {
		t.Fatalf("hop to an untrusted certificate: HTTP %d %+v", r.StatusCode, ms)
	}
	if got := ca.tool(3, "counter", nil); got != "2" {
		t.Fatalf("the session after the refused hop: %q, want it alive (2)", got)
	}
}

// TestReplicasStoreDown: a session that is not here cannot be looked up
// while the store is down: 503, not a 404 that would end it.
func TestReplicasStoreDown(t *testing.T) {
	dir, m := newDirectory(t)
	b := startReplica(t, dir, nil)
	m.Close()
	c := &client{t: t, h: &http.Client{Transport: b.b.Transport()}, sid: "somewhere"}
	r := c.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	ms := readAll(t, r)
	if r.StatusCode != http.StatusServiceUnavailable || len(ms) != 1 || ms[0].Error == nil || !strings.Contains(ms[0].Error.Message, "store is unavailable") {
		t.Fatalf("store down: HTTP %d %+v", r.StatusCode, ms)
	}
	// A session that cannot be recorded is refused, its child stopped.
	c.sid = ""
	r = c.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	ms = readAll(t, r)
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Mcp-Session-Id") != "" || len(ms) != 1 || ms[0].Error == nil ||
		!strings.Contains(ms[0].Error.Message, "cannot record the session") {
		t.Fatalf("initialize with the store down: HTTP %d %+v", r.StatusCode, ms)
	}
	waitFor(t, "the unrecorded session's child to stop", func() bool {
		b.b.mu.Lock()
		defer b.b.mu.Unlock()
		return len(b.b.fleet.procs) == 0 && len(b.b.sessions) == 0
	})
}

// TestReplicasRecordsRenewed: records are renewed while their session
// lives, put back when lost, and removed when this replica leaves.
func TestReplicasRecordsRenewed(t *testing.T) {
	dir, m := newDirectory(t)
	a := startReplica(t, dir, func(r *Replicas) { r.TTL = 300 * time.Millisecond })
	ca := newClient(t, a.b)
	ctx := context.Background()
	m.FastForward(250 * time.Millisecond) // miniredis expires keys only when told
	waitFor(t, "a renewal", func() bool { return m.TTL("tg:stdio:"+hashID(ca.sid)) > 250*time.Millisecond })
	m.FlushAll()
	waitFor(t, "the lost record to be put back", func() bool {
		url, _ := dir.SessionReplica(ctx, ca.sid)
		return url == a.srv.URL
	})
	a.leave(ctx)
	if url, _ := dir.SessionReplica(ctx, ca.sid); url != "" {
		t.Errorf("after leave, the session is still recorded at %q", url)
	}
	if _, err := a.b.JoinReplicas(Replicas{Directory: dir, URL: a.srv.URL, Secret: testSecret}); err == nil {
		t.Error("a second JoinReplicas was accepted")
	}
}

func startBridgeOnly(t *testing.T) *Bridge {
	b, _ := startBridge(t, nil)
	return b
}

// TestJoinReplicasErrors: what JoinReplicas refuses.
func TestJoinReplicasErrors(t *testing.T) {
	dir, _ := newDirectory(t)
	shared, _ := startBridge(t, func(o *Options) { o.Shared = true })
	if _, err := shared.JoinReplicas(Replicas{Directory: dir, URL: "http://h:1", Secret: testSecret}); err == nil || !strings.Contains(err.Error(), "child per session") {
		t.Errorf("shared child: %v", err)
	}
	// A 2026-07-28 child shared by every client has no session to follow,
	// so no advertise URL, records or renewals (cmd asks PerSession);
	// without Shared, each 2025-11-25 client's session has its own child.
	stateless, _ := startBridge(t, func(o *Options) { o.Command, o.Shared = []string{everythingBin}, true })
	if stateless.st == nil || stateless.PerSession() {
		t.Error("a shared 2026-07-28 bridge reports a child per session")
	}
	if _, err := stateless.JoinReplicas(Replicas{Directory: dir, URL: "http://h:1", Secret: testSecret}); err == nil || !strings.Contains(err.Error(), "child per session") {
		t.Errorf("shared 2026-07-28 child: %v", err)
	}
	if !startBridgeOnly(t).PerSession() {
		t.Error("a bridge with a child per session reports none")
	}
	b := startBridgeOnly(t)
	for _, r := range []Replicas{
		{URL: "http://h:1", Secret: testSecret},
		{Directory: dir, URL: "h:1", Secret: testSecret},
		{Directory: dir, URL: "ftp://h:1", Secret: testSecret},
		{Directory: dir, URL: "http://h:1", Secret: []byte("short")},
	} {
		if _, err := b.JoinReplicas(r); err == nil {
			t.Errorf("JoinReplicas(%+v) accepted", r)
		}
	}
	_ = b.Close(context.Background())
	if _, err := b.JoinReplicas(Replicas{Directory: dir, URL: "http://h:1", Secret: testSecret}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a closed bridge: %v", err)
	}
}

// hashID is taskstore's digest of a session id in its key.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

func FuzzParseHop(f *testing.F) {
	zeros := strings.Repeat("0", 64)
	for _, s := range []string{"", "t=1,b=,s=", "t=1732630000123,b=" + zeros + ",s=" + strings.Repeat("ab", 32), "t=-1,b=" + zeros + ",s=" + zeros,
		"t=+1,b=" + zeros + ",s=" + zeros, "s=00,t=1,b=00", ",,", "t=99999999999999999999,b=" + zeros + ",s=" + zeros,
		signHop(testSecret, "http://h:1", "POST", "sid", time.Unix(0, 0), nil)} {
		f.Add(s, "POST", "sid")
	}
	f.Fuzz(func(t *testing.T, header, method, session string) {
		sig, err := parseHop(header)
		if err != nil {
			if hopStatus(err) < 400 || sig.t != 0 || sig.mac != nil || sig.body != nil {
				t.Fatalf("parseHop(%q) = %+v, %v", header, sig, err)
			}
			return
		}
		if sig.t < 0 || len(sig.mac) != 32 || len(sig.body) != 32 {
			t.Fatalf("parseHop(%q) accepted %+v", header, sig)
		}
		// Whatever parses, only the right signature passes.
		at := time.UnixMilli(sig.t)
		_, good := checkHop(testSecret, header, "http://h:1", method, session, at, time.Second)
		want := hmac.Equal(sig.mac, hopMAC(testSecret, "http://h:1", method, session, sig.t, sig.body))
		if (good == nil) != want {
			t.Fatalf("checkHop(%q) = %v, signature right: %v", header, good, want)
		}
		if _, err := checkHop(testSecret, header, "http://h:1", method, session, at.Add(2*time.Second), time.Second); err == nil {
			t.Fatalf("checkHop(%q) accepted a hop 2 s old with a 1 s skew", header)
		}
		body := []byte(header)
		fresh, err := checkHop(testSecret, signHop(testSecret, "http://h:1", method, session, at, body), "http://h:1", method, session, at, time.Second)
		if want := sha256.Sum256(body); err != nil || !bytes.Equal(fresh.body, want[:]) {
			t.Fatalf("a fresh signature: %x, %v", fresh.body, err)
		}
	})
}

// BenchmarkHop: a tools/call answered by the session's child on this
// replica, and the same call landing on another replica and forwarded over
// the hop (a directory lookup on miniredis, a loopback HTTP round trip).
func BenchmarkHop(bm *testing.B) {
	dir, _ := newDirectory(bm)
	a, b := startReplica(bm, dir, nil), startReplica(bm, dir, nil)
	post := func(h *http.Client, sid, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, URL, strings.NewReader(body))
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := h.Do(req)
		if err != nil {
			bm.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, out
	}
	onA, onB := &http.Client{Transport: a.b.Transport()}, &http.Client{Transport: b.b.Transport()}
	resp, _ := post(onA, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	for _, via := range []struct {
		name string
		h    *http.Client
	}{{"local", onA}, {"hop", onB}} {
		bm.Run(via.name, func(bm *testing.B) {
			for bm.Loop() {
				if resp, out := post(via.h, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`); resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"text":"x"`)) {
					bm.Fatalf("echo: HTTP %d %s", resp.StatusCode, out)
				}
			}
		})
	}
}
