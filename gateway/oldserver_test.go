package gateway

// Fallback tools and keep-alives in front of a server of the oldest
// protocol version (2024-11-05), reached over Streamable HTTP and over the
// HTTP+SSE transport of its era (issue 28): they work as in front of any
// session server.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/sse"
)

// oldUpstream is a go-sdk server limited to 2024-11-05, served over
// Streamable HTTP ("http") or go-sdk's HTTP+SSE handler ("sse"), and the
// upstream client the gateway reaches it with.
func oldUpstream(t *testing.T, transport string, opts testupstream.Options) (string, *upstream.Client) {
	t.Helper()
	opts.ProtocolVersion = "2024-11-05"
	if transport == "http" {
		srv := httptest.NewServer(testupstream.Handler(opts))
		t.Cleanup(srv.Close)
		c, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return srv.URL + "/mcp", c
	}
	s := testupstream.NewServer(opts)
	srv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	url := srv.URL + "/sse"
	br, err := sse.New(sse.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close(context.Background()) })
	c, err := upstream.New(url, upstream.Options{Transport: br.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	return url, c
}

var oldTransports = []string{"http", "sse"}

// TestFallbackOldServer: a 2025-11-25 client that declares no tasks in
// front of a 2024-11-05 server (presented to it as 2025-11-25): a fast call
// of a task candidate is answered directly; a slow call answers early with
// a task id (the session told the tools appeared), and the fallback tools
// read its status and its result back; the server ran the call once.
func TestFallbackOldServer(t *testing.T) {
	for _, transport := range oldTransports {
		t.Run(transport, func(t *testing.T) {
			rec := &testupstream.Recorder{}
			url, client := oldUpstream(t, transport, testupstream.Options{Recorder: rec})
			f := newFleet(t, url)
			f.add(func(c *Config) {
				c.Upstream = client
				// echo, a task candidate too, has a long hybrid wait: it is
				// answered directly however busy the machine.
				c.Policy = hybridPolicy(append(rules(t, "slow", policy.Task), withWait(rules(t, "echo", policy.Task), directWait)...),
					300*time.Millisecond)
				c.Fallback = FallbackTools{Enabled: true}
			})
			c := &gwtest.Client{T: t, URLs: f.URLs}
			c.InitializeAs("2025-11-25", map[string]any{})
			if a := callTool(c, "echo", map[string]any{"text": "quick"}); a.text() != "quick" || a.StructuredContent.TaskID != "" {
				t.Fatalf("fast call: %+v", a)
			}
			msgs := c.CallAll("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 1.2, "text": "late"}})
			if len(msgs) != 2 || msgs[0].Method != "notifications/tools/list_changed" {
				t.Fatalf("the fallback answer: %+v, want list_changed then the result", msgs)
			}
			var started toolAnswer
			_ = json.Unmarshal(msgs[1].Result, &started)
			id := started.StructuredContent.TaskID
			if id == "" || started.StructuredContent.Status != "working" || !strings.Contains(started.text(), "taskgate_task_result") {
				t.Fatalf("started: %s", msgs[1].Result)
			}
			if names := toolNames(t, c.Call("tools/list", map[string]any{}).Result); !names["taskgate_task_status"] || !names["taskgate_task_result"] || !names["slow"] {
				t.Fatalf("tools/list after the fallback task: %v", names)
			}
			if a := callTool(c, "taskgate_task_status", map[string]any{"taskId": id}); a.StructuredContent.Status != "working" && a.StructuredContent.Status != "completed" {
				t.Errorf("status: %+v", a)
			}
			if a := callTool(c, "taskgate_task_result", map[string]any{"taskId": id}); a.text() != "slept 1.2 s: late" || a.IsError {
				t.Errorf("result: %+v", a)
			}
			if n := rec.Count("slow", testupstream.Completed); n != 1 {
				t.Errorf("the server completed slow %d times, want once", n)
			}
		})
	}
}

// TestKeepAliveOldServer: in front of a 2024-11-05 server, a call longer
// than a proxy's idle timeout survives with keep-alive on (comments, and
// progress for the client's token) and fails with it off, for a
// 2025-11-25 session; a 2026-07-28 client's call (on the gateway's owner
// session upstream) survives it too.
func TestKeepAliveOldServer(t *testing.T) {
	for _, transport := range oldTransports {
		for _, keep := range []time.Duration{100 * time.Millisecond, -1} {
			t.Run(transport+"/keepalive="+keep.String(), func(t *testing.T) {
				url, client := oldUpstream(t, transport, testupstream.Options{})
				f := newFleet(t, url)
				f.add(func(c *Config) { c.Upstream, c.KeepAlive = client, keep })
				via := gwtest.IdleProxyURL(t, f.URLs[0])
				gwtest.SlowCallsThroughIdleProxy(t, via, "2025-11-25", keep)
				if keep < 0 {
					return
				}
				gwtest.SlowModernCallVia(t, via, "a 2026-07-28 call")
			})
		}
	}
}
