package front2025

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// TestStatelessUpstreamSession: a 2025-11-25 client in front of a
// stateless upstream: the gateway answers initialize itself (a session it
// issues, any replica serving it; the upstream's serverInfo; tasks offered),
// requests go upstream as 2026-07-28 ones, a plain call leaves no task in
// tasks/list, a task-augmented call is the gateway's task, ping is answered
// here, DELETE ends the session and a request of it then gets 404.
func TestStatelessUpstreamSession(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true, Recorder: rec}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	pol := func(c *frontrig.Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)) }
	fl.Add(pol)
	fl.Add(pol)
	c := &gwtest.Client{T: t, URLs: fl.URLs}
	c.Initialize() // fails the test without a session id, 2025-11-25 and tasks

	if r := c.Call("ping", map[string]any{}); r.Error != nil || string(r.Result) != "{}" {
		t.Errorf("ping: %+v %s", r.Error, r.Result)
	}
	// The session id alone is no credential: another Authorization gets
	// 404, as for an unknown session.
	thief := &gwtest.Client{T: t, URLs: fl.URLs, SID: c.SID, Auth: "Bearer someone-else"}
	if resp := thief.Do(context.Background(), map[string]any{"jsonrpc": "2.0", "id": 9, "method": "ping"}); resp.StatusCode != http.StatusNotFound {
		resp.Body.Close()
		t.Errorf("another principal's request of the session: HTTP %d, want 404", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	r := c.Call("tools/list", map[string]any{})
	if r.Error != nil || !strings.Contains(string(r.Result), `"name":"slow","execution":{"taskSupport":"optional"}`) && !strings.Contains(string(r.Result), `"taskSupport":"optional"`) {
		t.Errorf("tools/list: %+v %s", r.Error, r.Result)
	}
	if strings.Contains(string(r.Result), "resultType") {
		t.Errorf("tools/list carries the 2026-07-28 resultType: %s", r.Result)
	}
	r = c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}})
	if text, isErr, _ := gwtest.ResultText(t, r.Result); text != "hi" || isErr {
		t.Errorf("echo: %+v %s", r.Error, r.Result)
	}
	task := c.StartTask("slow", map[string]any{"seconds": 0.1}, nil)
	if task.TTL == nil || *task.TTL > core.AnonymousTTL.Milliseconds() {
		t.Errorf("an unauthenticated session's task lives %v ms, want at most %d", task.TTL, core.AnonymousTTL.Milliseconds())
	}
	c.WaitStatus(task.TaskID, "completed")
	r = c.Call("tasks/list", map[string]any{})
	var list struct {
		Tasks []gwtest.WireTask `json:"tasks"`
	}
	if err := json.Unmarshal(r.Result, &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID {
		t.Errorf("tasks/list = %s, want only the task (no task of the plain call)", r.Result)
	}
	if n := rec.Count("echo", testupstream.Called); n != 1 {
		t.Errorf("the upstream ran echo %d times", n)
	}

	// DELETE ends the session on every replica.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, fl.URLs[0], nil)
	req.Header.Set("Mcp-Session-Id", c.SID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("DELETE: HTTP %d", resp.StatusCode)
	}
	// (The other replica's cache of the session is re-checked against
	// Redis within its recheck interval.)
	for _, u := range fl.URLs {
		one := &gwtest.Client{T: t, URLs: []string{u}, SID: c.SID}
		gwtest.WaitFor(t, func() bool {
			resp := one.Do(context.Background(), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
			resp.Body.Close()
			return resp.StatusCode == http.StatusNotFound
		})
	}
}

// TestStatelessUpstreamSessionStream: the GET stream of a session the
// gateway holds carries what the upstream's subscriptions/listen delivers
// (here a tools/list_changed) and the gateway's own notifications of the
// session's tasks (a task's status).
func TestStatelessUpstreamSessionStream(t *testing.T) {
	inner := testupstream.Handler(testupstream.Options{Stateless: true})
	var listens atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			var req struct {
				Params struct {
					Notifications map[string]any `json:"notifications"`
				} `json:"params"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.Params.Notifications["toolsListChanged"] != true {
				http.Error(w, "no filter", http.StatusBadRequest)
				return
			}
			listens.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"x\"}}}\n\n")
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"x\"}}}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	fl.Add(func(c *frontrig.Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task)) })
	c := &gwtest.Client{T: t, URLs: fl.URLs}
	c.Initialize()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fl.URLs[0], nil)
	req.Header.Set("Mcp-Session-Id", c.SID)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	task := c.StartTask("slow", map[string]any{"seconds": 0.1}, nil)
	sawList, sawStatus := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !(sawList && sawStatus) {
		line := sc.Text()
		if strings.Contains(line, "subscriptions/acknowledged") || strings.Contains(line, "subscriptionId") {
			t.Errorf("the GET stream carries the 2026-07-28 subscription: %s", line)
		}
		sawList = sawList || strings.Contains(line, "notifications/tools/list_changed")
		sawStatus = sawStatus || strings.Contains(line, "notifications/tasks/status") && strings.Contains(line, task.TaskID)
	}
	if !sawList || !sawStatus || listens.Load() != 1 {
		t.Errorf("GET stream: list_changed %v, task status %v, %d listens upstream", sawList, sawStatus, listens.Load())
	}
}

// TestStatelessUpstreamSessionBounds: what a session the gateway holds
// keeps of its client is bounded.
func TestStatelessUpstreamSessionBounds(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	fl.Add(nil)
	big := strings.Repeat("x", 70<<10)
	resp := rawPost(t, fl.URLs[0], "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"`+big+`","version":"1"}}}`)
	r := gwtest.OneReply(t, resp)
	if r.Error == nil || r.Error.Code != -32602 || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("an initialize of %d bytes: %+v, session %q; want -32602 and no session", len(big), r.Error, resp.Header.Get("Mcp-Session-Id"))
	}
}
