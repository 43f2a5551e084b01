package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/authtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// BenchmarkTasksGetAuth: a 2026-07-28 tasks/get of a completed task,
// served in process by a gateway validating JWT access tokens
// (Config.Auth, as --auth-issuer) and by the same gateway without, one
// request of each in turn on one store, so both legs see the same
// machine. It reports each leg's median time per request and the
// throughput of the auth leg relative to the other, from those medians
// (issue 26: at least 0.9; the token is verified once, then served from
// the guard's cache).
func BenchmarkTasksGetAuth(b *testing.B) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		b.Fatal(err)
	}
	defer mr.Close()
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	defer up.Close()
	iss := authtest.NewIssuer(b, "", false)
	guard, err := auth.New(auth.Config{Issuer: iss.URL, Audience: []string{authPublicURL}})
	if err != nil {
		b.Fatal(err)
	}
	authz := "Bearer " + iss.Token(iss.Claims(authPublicURL))
	echo, err := policy.NewRule("echo", policy.Task)
	if err != nil {
		b.Fatal(err)
	}
	gateway := func(a Authenticator) *Handler {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		b.Cleanup(func() { rdb.Close() })
		store := taskstore.New(rdb, taskstore.Options{})
		b.Cleanup(func() { store.Close() })
		client, err := upstream.New(up.URL+"/mcp", upstream.Options{})
		if err != nil {
			b.Fatal(err)
		}
		h, err := New(Config{Upstream: client, Store: store, PollLimit: -1, Policy: gwtest.RulesPolicy(policy.Rules{echo}),
			Auth: a, PublicURL: authPublicURL})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		return h
	}
	plain, guarded := gateway(nil), gateway(guard)
	plainGet, guardedGet := benchTask(b, plain, authz), benchTask(b, guarded, authz)

	// Each leg's time per request, medians compared: on a shared machine
	// a preemption or a GC pause lands on one request of one leg, and a
	// sum would carry it into the ratio.
	var plainTimes, guardedTimes []time.Duration
	timed := func(get func(), into *[]time.Duration) {
		t0 := time.Now()
		get()
		*into = append(*into, time.Since(t0))
	}
	for b.Loop() {
		if len(plainTimes)%2 == 0 { // each leg goes first every other time
			timed(plainGet, &plainTimes)
			timed(guardedGet, &guardedTimes)
		} else {
			timed(guardedGet, &guardedTimes)
			timed(plainGet, &plainTimes)
		}
	}
	mPlain, mGuarded := median(plainTimes), median(guardedTimes)
	b.ReportMetric(float64(mPlain.Nanoseconds()), "ns/get-plain")
	b.ReportMetric(float64(mGuarded.Nanoseconds()), "ns/get-auth")
	b.ReportMetric(mPlain.Seconds()/mGuarded.Seconds(), "auth/plain-throughput")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// benchTask starts an echo task on h as the client of authz, waits for it
// to complete, and returns a function sending one tasks/get for it.
func benchTask(b *testing.B, h *Handler, authz string) func() {
	b.Helper()
	send := func(method string, params map[string]any) (gwtest.Reply, int) {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{core.TasksExtension: map[string]any{}}},
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", name)
		}
		req.Header.Set("Authorization", authz)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out gwtest.Reply
		if err := gwtest.ScanMessages(rec.Result(), func(m gwtest.Reply) bool { out = m; return string(m.ID) != "1" }); err != nil {
			b.Fatal(err)
		}
		return out, rec.Code
	}
	r, _ := send("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}})
	var task struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &task) != nil || task.TaskID == "" {
		b.Fatalf("tools/call: %s %+v", r.Result, r.Error)
	}
	for deadline := time.Now().Add(20 * time.Second); task.Status != "completed"; {
		if time.Now().After(deadline) {
			b.Fatalf("task %s still %s", task.TaskID, task.Status)
		}
		time.Sleep(5 * time.Millisecond)
		r, _ = send("tasks/get", map[string]any{"taskId": task.TaskID})
		if r.Error != nil || json.Unmarshal(r.Result, &task) != nil {
			b.Fatalf("tasks/get: %s %+v", r.Result, r.Error)
		}
	}
	id := task.TaskID
	return func() {
		if r, code := send("tasks/get", map[string]any{"taskId": id}); code != http.StatusOK || r.Error != nil {
			b.Fatalf("tasks/get: HTTP %d %+v", code, r.Error)
		}
	}
}
