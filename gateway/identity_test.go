package gateway

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/authtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/upstream"
)

// TestPrincipalOwnsTasks: with validation on, two replicas on a real
// redis-server, 2026-07-28 clients. A task alice created with one token is
// read, listed and cancelled with another token of hers (a refreshed one)
// on the other replica, through the extension and through the fallback
// tools; bob's valid token gets -32602 (the fallback tools: "task not
// found") and lists nothing. Alice has one owner session upstream.
func TestPrincipalOwnsTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	iss := authtest.NewIssuer(t, "", false)
	const public = "http://gw.test/mcp"
	addr := redistest.Start(t)
	up := gwtest.NewEraUpstream(t, false) // a session server: 2026-07-28 clients get owner sessions
	fl := newFleet(t, up.URL)
	fl.Redis = func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }
	for range 2 {
		g, err := auth.New(auth.Config{Issuer: iss.URL, Audience: []string{public}})
		if err != nil {
			t.Fatal(err)
		}
		fl.add(func(c *Config) {
			c.Auth, c.PublicURL = g, public
			c.Policy = gwtest.HybridPolicy(gwtest.Rules(t, "slow", policy.Task), 200*time.Millisecond)
			c.Fallback = FallbackTools{Enabled: true}
		})
	}
	token := func(sub string, n int) string {
		c := iss.Claims(public)
		c["sub"], c["jti"] = sub, sub+string(rune('0'+n)) // another string, the same principal
		return "Bearer " + iss.Token(c)
	}
	alice1, alice2, bob := token("alice", 1), token("alice", 2), token("bob", 1)
	if alice1 == alice2 {
		t.Fatal("the two tokens of alice are one string")
	}
	onA := &gwtest.ModernClient{T: t, URLs: fl.URLs[:1], Auth: alice1}
	onB := &gwtest.ModernClient{T: t, URLs: fl.URLs[1:], Auth: alice2}
	bobB := &gwtest.ModernClient{T: t, URLs: fl.URLs[1:], Auth: bob}

	t.Run("extension", func(t *testing.T) {
		onA.T, onB.T, bobB.T = t, t, t
		id := onA.ToolTask("slow", map[string]any{"seconds": 30}).TaskID
		if d := onB.WaitTask(id, "working"); d.TaskID != id {
			t.Fatalf("alice's second token: %+v", d)
		}
		if r := bobB.Call("tasks/get", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("bob's tasks/get: %+v %s", r.Error, r.Result)
		}
		if r := bobB.Call("tasks/cancel", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("bob's tasks/cancel: %+v %s", r.Error, r.Result)
		}
		if r := onB.Call("tasks/cancel", map[string]any{"taskId": id}); r.Error != nil {
			t.Fatalf("alice's cancel with her second token: %+v", r.Error)
		}
		onA.WaitTask(id, "cancelled")
	})

	t.Run("fallback tools", func(t *testing.T) {
		as := func(v string) func(http.Header) { return func(h http.Header) { h.Set("Authorization", v) } }
		var started gwtest.ToolAnswer
		gwtest.OKResult(t, gwtest.MPost(t, fl.URLs[0], "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "m"}},
			gwtest.ModernMeta(), as(alice1)), &started)
		id := started.StructuredContent.TaskID
		if id == "" || started.IsError {
			t.Fatalf("started: %+v", started)
		}
		var a gwtest.ToolAnswer
		gwtest.OKResult(t, gwtest.MPost(t, fl.URLs[1], "tools/call", map[string]any{"name": "taskgate_task_status", "arguments": map[string]any{"taskId": id}},
			gwtest.ModernMeta(), as(bob)), &a)
		if !a.IsError || !strings.Contains(a.Text(), "task not found") {
			t.Fatalf("bob's status: %+v", a)
		}
		a = gwtest.ToolAnswer{}
		gwtest.OKResult(t, gwtest.MPost(t, fl.URLs[1], "tools/call", map[string]any{"name": "taskgate_task_result", "arguments": map[string]any{"taskId": id, "waitSeconds": 9}},
			gwtest.ModernMeta(), as(alice2)), &a)
		if a.Text() != "slept 1 s: m" {
			t.Fatalf("alice's result with her second token: %+v", a)
		}
	})

	// One owner session upstream for alice, whichever token and replica.
	sessions := map[string]bool{}
	for _, p := range up.Posts("") {
		if p.Session != "" && (p.Auth == alice1 || p.Auth == alice2) {
			sessions[p.Session] = true
		}
	}
	if len(sessions) != 1 {
		t.Errorf("alice's requests went on %d upstream sessions, want her one owner session", len(sessions))
	}
}

// TestFreshestTokenForLaterCalls: the requests the gateway makes later on
// a task's behalf carry the freshest token its principal presented, on
// any replica. Alice creates a task on replica A with one token; the
// upstream holds it as its own task (a stateless upstream with native
// tasks asking two questions); she answers it with a refreshed token on
// replica B; A's worker then resumes and polls the upstream's task with
// the refreshed token, not the one that created the task. The token is
// in the store only sealed.
func TestFreshestTokenForLaterCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	iss := authtest.NewIssuer(t, "", false)
	const public = "http://gw.test/mcp"
	addr := redistest.Start(t)
	up := gwtest.NewEraUpstream(t, true)
	native := testupstream.Handler(testupstream.Options{Stateless: true, NativeTasks: true, Elicit2: true})
	up.Serve(native)
	fl := newFleet(t, up.URL)
	fl.Redis = func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }
	var hs []*Handler
	for range 2 {
		g, err := auth.New(auth.Config{Issuer: iss.URL, Audience: []string{public}})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, fl.add(func(c *Config) {
			c.Auth, c.PublicURL = g, public
			c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "elicit2", policy.Task))
		}))
	}
	// Replica A's clock jumps past credLocal once B took the new token, as
	// if the answer came later: A then asks the store.
	var skew atomic.Int64
	hs[0].creds.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	token := func(n int) string {
		c := iss.Claims(public)
		c["jti"] = string(rune('0' + n))
		return "Bearer " + iss.Token(c)
	}
	first, refreshed := token(1), token(2)
	onA := &gwtest.ModernClient{T: t, URLs: fl.URLs[:1], Auth: first}
	onB := &gwtest.ModernClient{T: t, URLs: fl.URLs[1:], Auth: refreshed}

	tk := onA.ToolTask("elicit2", map[string]any{})
	ir := onA.WaitTask(tk.TaskID, "input_required")
	responses := map[string]any{}
	for k, in := range ir.InputRequests {
		for q, v := range map[string]string{"name": "Ada", "color": "teal"} {
			if strings.Contains(string(in.Params), testupstream.Elicit2Questions[q]) {
				responses[k] = map[string]any{"action": "accept", "content": map[string]any{q: v}}
			}
		}
	}
	before := len(up.Posts(""))
	for _, p := range up.Posts("") {
		if p.Auth != first {
			t.Fatalf("before the refresh, the upstream got %s without the first token", p.Method)
		}
	}
	skew.Store(int64(time.Minute))
	if r := onB.Call("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": responses}); r.Error != nil {
		t.Fatalf("tasks/update with the refreshed token on B: %+v", r.Error)
	}
	done := onB.WaitTask(tk.TaskID, "completed")
	if text, _, _ := gwtest.ResultText(t, done.Result); text != testupstream.Elicit2Text("Ada", "teal") {
		t.Fatalf("result %s", done.Result)
	}
	later := up.Posts("")[before:]
	if len(later) == 0 {
		t.Fatal("the upstream got no request after the answer")
	}
	for _, p := range later {
		if p.Auth != refreshed {
			t.Errorf("after the refresh, the upstream got %s with the first token %v, want the refreshed one", p.Method, p.Auth == first)
		}
	}
	// In the store, only sealed.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	keys, err := rdb.Keys(context.Background(), "*:cred:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("credential records %v %v, want alice's one", keys, err)
	}
	for _, k := range keys {
		v, _ := rdb.Get(context.Background(), k).Bytes()
		for _, tok := range []string{first, refreshed} {
			if bytes.Contains(v, []byte(strings.TrimPrefix(tok, "Bearer "))) {
				t.Fatalf("the store holds a token in clear under %s", k)
			}
		}
	}
}

// TestPrincipalSharesPollLimit: the per-owner poll limit counts a
// principal's polls whatever token they carry: a refreshed token does
// not get a fresh budget.
func TestPrincipalSharesPollLimit(t *testing.T) {
	iss := authtest.NewIssuer(t, "", false)
	const public = "http://gw.test/mcp"
	fl, _ := signedFleet(t, iss, public, false, 1, func(c *Config) {
		c.PollLimit = 0.5 // a burst of one poll, then one in 2 s
		c.Policy = gwtest.HybridPolicy(gwtest.Rules(t, "slow", policy.Task), 200*time.Millisecond)
	})
	token := func(n int) string {
		c := iss.Claims(public)
		c["jti"] = string(rune('0' + n))
		return "Bearer " + iss.Token(c)
	}
	first := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: token(1)}
	refreshed := &gwtest.ModernClient{T: t, URLs: fl.URLs, Auth: token(2)}
	id := first.ToolTask("slow", map[string]any{"seconds": 30}).TaskID
	if r := first.Call("tasks/get", map[string]any{"taskId": id}); r.Error != nil {
		t.Fatalf("the first poll: %+v", r.Error)
	}
	if r := refreshed.Call("tasks/get", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != mcpwire.CodeRateLimited {
		t.Fatalf("the second poll, with the refreshed token: %+v, want the poll limit's error", r.Error)
	}
}

// TestNewBadPublicURL: New refuses a Config.PublicURL that
// identity.ParsePublicURL refuses (its cases: TestParsePublicURL).
func TestNewBadPublicURL(t *testing.T) {
	up, err := upstream.New("http://127.0.0.1:1/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Upstream: up, PublicURL: "https://x/mcp#f"}); err == nil {
		t.Error("New with a fragment in PublicURL: no error")
	}
}
