package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// TestPollRateLimit: tasks/get much faster than pollInterval gets HTTP 429
// with Retry-After and retryAfterMs, for both flavours; tasks/list of
// 2025-11-25 too; the client that waits as told is served again.
func TestPollRateLimit(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) { c.Policy, c.PollLimit = gwtest.RulesPolicy(gwtest.Rules(t, "*", policy.Task)), 2 }) // bursts of 4
	url := f.URLs[0]

	type refusal struct {
		status     int
		retryAfter string
		code       int
		retryMs    int64
	}
	// pollUntilRefused polls with poll until it is refused, at most 50 times.
	pollUntilRefused := func(poll func() (*http.Response, gwtest.Reply)) (int, refusal) {
		for n := 1; n <= 50; n++ {
			resp, r := poll()
			if r.Error == nil {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("poll %d: HTTP %d with a result", n, resp.StatusCode)
				}
				continue
			}
			var data struct {
				RetryAfterMs int64 `json:"retryAfterMs"`
			}
			_ = json.Unmarshal(r.Error.Data, &data)
			return n, refusal{resp.StatusCode, resp.Header.Get("Retry-After"), r.Error.Code, data.RetryAfterMs}
		}
		t.Fatal("50 polls in a row were all served")
		return 0, refusal{}
	}
	check := func(what string, n int, got refusal) {
		t.Helper()
		if n != 5 {
			t.Errorf("%s: refused at poll %d, want 5 (a burst of 4)", what, n)
		}
		if got.status != http.StatusTooManyRequests || got.code != mcpwire.CodeRateLimited || got.retryAfter != "1" ||
			got.retryMs <= 0 || got.retryMs > 500 {
			t.Errorf("%s: refusal = %+v, want HTTP 429, Retry-After 1, code %d, 0 < retryAfterMs ≤ 500", what, got, mcpwire.CodeRateLimited)
		}
	}

	// 2026-07-28.
	mc := &gwtest.ModernClient{T: t, URLs: f.URLs, Auth: "Bearer poller"}
	task := mc.ToolTask("echo", map[string]any{"text": "x"})
	modernGet := func(id, auth string) func() (*http.Response, gwtest.Reply) {
		return func() (*http.Response, gwtest.Reply) {
			meta := gwtest.ModernMeta()
			meta[core.MetaClientCaps] = map[string]any{"extensions": map[string]any{core.TasksExtension: map[string]any{}}}
			resp := gwtest.MPost(t, url, "tasks/get", map[string]any{"taskId": id}, meta, func(h http.Header) { h.Set("Authorization", auth) })
			return resp, gwtest.OneReply(t, resp)
		}
	}
	n, got := pollUntilRefused(modernGet(task.TaskID, "Bearer poller"))
	check("2026-07-28 tasks/get", n, got)
	// Another owner polling the same id has its own bucket (and is told
	// "not found", not rate limited).
	if resp, r := modernGet(task.TaskID, "Bearer other")(); resp.StatusCode == http.StatusTooManyRequests || r.Error == nil || r.Error.Code != mcpwire.CodeInvalidParams {
		t.Errorf("another owner's first poll: HTTP %d %+v", resp.StatusCode, r.Error)
	}
	// Waiting as told is enough.
	time.Sleep(time.Duration(got.retryMs) * time.Millisecond)
	if resp, r := modernGet(task.TaskID, "Bearer poller")(); r.Error != nil {
		t.Errorf("after waiting retryAfterMs: HTTP %d %+v", resp.StatusCode, r.Error)
	}

	// 2025-11-25: tasks/get and tasks/list.
	lc := &gwtest.Client{T: t, URLs: f.URLs, Auth: "Bearer legacy"}
	lc.Initialize()
	lt := lc.StartTask("echo", map[string]any{"text": "y"}, nil)
	legacyPoll := func(method string, params any) func() (*http.Response, gwtest.Reply) {
		return func() (*http.Response, gwtest.Reply) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := lc.Do(ctx, map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
			var out gwtest.Reply
			gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool { out = m; return false })
			return resp, out
		}
	}
	n, got = pollUntilRefused(legacyPoll("tasks/get", map[string]any{"taskId": lt.TaskID}))
	check("2025-11-25 tasks/get", n, got)
	n, got = pollUntilRefused(legacyPoll("tasks/list", map[string]any{}))
	check("2025-11-25 tasks/list", n, got)

	fams := scrape(t, url)
	for _, m := range []string{"tasks/get", "tasks/list"} {
		if v := metricValue(fams, "taskgate_poll_rate_limited_total", map[string]string{"method": m}); v < 1 {
			t.Errorf("poll_rate_limited_total{%s} = %v, want ≥ 1", m, v)
		}
	}
}
