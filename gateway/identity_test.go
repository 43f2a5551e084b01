package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/internal/authtest"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// TestPrincipalOwnsTasks: with validation on, two replicas on a real
// redis-server, 2026-07-28 clients. A task alice created with one token is
// read, listed and cancelled with another token of hers (a refreshed one)
// on the other replica, through the extension and through the fallback
// tools; bob's valid token gets -32602 (the fallback tools: "task not
// found") and lists nothing.
func TestPrincipalOwnsTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	iss := authtest.NewIssuer(t, "", false)
	const public = "http://gw.test/mcp"
	addr := redistest.Start(t)
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	fl.redis = func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }
	for range 2 {
		g, err := auth.New(auth.Config{Issuer: iss.URL, Audience: []string{public}})
		if err != nil {
			t.Fatal(err)
		}
		fl.add(func(c *Config) {
			c.Auth, c.PublicURL = g, public
			c.Policy = hybridPolicy(rules(t, "slow", policy.Task), 200*time.Millisecond)
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
	onA := &modernClient{t: t, urls: fl.urls[:1], auth: alice1}
	onB := &modernClient{t: t, urls: fl.urls[1:], auth: alice2}
	bobB := &modernClient{t: t, urls: fl.urls[1:], auth: bob}

	t.Run("extension", func(t *testing.T) {
		onA.t, onB.t, bobB.t = t, t, t
		id := onA.toolTask("slow", map[string]any{"seconds": 30}).TaskID
		if d := onB.waitTask(id, "working"); d.TaskID != id {
			t.Fatalf("alice's second token: %+v", d)
		}
		if r := bobB.call("tasks/get", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("bob's tasks/get: %+v %s", r.Error, r.Result)
		}
		if r := bobB.call("tasks/cancel", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("bob's tasks/cancel: %+v %s", r.Error, r.Result)
		}
		if r := onB.call("tasks/cancel", map[string]any{"taskId": id}); r.Error != nil {
			t.Fatalf("alice's cancel with her second token: %+v", r.Error)
		}
		onA.waitTask(id, "cancelled")
	})

	t.Run("fallback tools", func(t *testing.T) {
		as := func(v string) func(http.Header) { return func(h http.Header) { h.Set("Authorization", v) } }
		var started toolAnswer
		okResult(t, mpost(t, fl.urls[0], "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1, "text": "m"}},
			modernMeta(), as(alice1)), &started)
		id := started.StructuredContent.TaskID
		if id == "" || started.IsError {
			t.Fatalf("started: %+v", started)
		}
		var a toolAnswer
		okResult(t, mpost(t, fl.urls[1], "tools/call", map[string]any{"name": "taskgate_task_status", "arguments": map[string]any{"taskId": id}},
			modernMeta(), as(bob)), &a)
		if !a.IsError || !strings.Contains(a.text(), "task not found") {
			t.Fatalf("bob's status: %+v", a)
		}
		a = toolAnswer{}
		okResult(t, mpost(t, fl.urls[1], "tools/call", map[string]any{"name": "taskgate_task_result", "arguments": map[string]any{"taskId": id, "waitSeconds": 9}},
			modernMeta(), as(alice2)), &a)
		if a.text() != "slept 1 s: m" {
			t.Fatalf("alice's result with her second token: %+v", a)
		}
	})
}
