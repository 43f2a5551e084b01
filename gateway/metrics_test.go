package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// scrape GETs base/metrics and parses the exposition.
func scrape(t *testing.T, mcpURL string) map[string]*dto.MetricFamily {
	t.Helper()
	return gwtest.Scrape(t, strings.TrimSuffix(mcpURL, "/mcp")+"/metrics")
}

// metricValue is the counter, gauge or histogram count of the series of
// family name whose labels include want; -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	return gwtest.MetricValue(fams, name, want)
}

// waitMetric polls /metrics until name{want} equals v.
func waitMetric(t *testing.T, url, name string, want map[string]string, v float64) {
	t.Helper()
	gwtest.WaitMetric(t, strings.TrimSuffix(url, "/mcp")+"/metrics", name, want, v)
}

func TestMetricsFollowTasks(t *testing.T) {
	rec := &testupstream.Recorder{}
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true, Recorder: rec}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "*", policy.Task)) })
	url := f.URLs[0]
	c := &gwtest.ModernClient{T: t, URLs: f.URLs, Auth: "Bearer metrics"}

	// Before any task: the families exist, live tasks at 0.
	fams := scrape(t, url)
	for _, name := range []string{"taskgate_tasks_live", "taskgate_held_calls", "taskgate_leases_recovered_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v := metricValue(fams, "taskgate_tasks_live", map[string]string{"status": "working"}); v != 0 {
		t.Errorf("live working before any task = %v", v)
	}

	// A completed task.
	c.WaitTask(c.ToolTask("echo", map[string]any{"text": "hi"}).TaskID, "completed")
	waitMetric(t, url, "taskgate_tasks_finished_total", map[string]string{"tool": "echo", "status": "completed"}, 1)
	fams = scrape(t, url)
	if v := metricValue(fams, "taskgate_tasks_created_total", map[string]string{"tool": "echo", "flavour": "modern"}); v != 1 {
		t.Errorf("created{echo,modern} = %v, want 1", v)
	}
	if v := metricValue(fams, "taskgate_task_duration_seconds", map[string]string{"tool": "echo", "status": "completed"}); v != 1 {
		t.Errorf("duration{echo,completed} count = %v, want 1", v)
	}
	if v := metricValue(fams, "taskgate_upstream_request_duration_seconds", map[string]string{"method": "tools/call"}); v < 1 {
		t.Errorf("upstream tools/call observations = %v, want ≥ 1", v)
	}
	if v := metricValue(fams, "taskgate_store_command_duration_seconds", map[string]string{"command": "evalsha"}); v < 1 {
		t.Errorf("store evalsha observations = %v, want ≥ 1", v)
	}

	// A failed task (JSON-RPC error from the tool).
	c.WaitTask(c.ToolTask("rpcerror", map[string]any{}).TaskID, "failed")
	waitMetric(t, url, "taskgate_tasks_finished_total", map[string]string{"tool": "rpcerror", "status": "failed"}, 1)

	// A task waiting for input is live as input_required, then its wait is
	// observed once answered.
	task := c.ToolTask("elicit", map[string]any{})
	d := c.WaitTask(task.TaskID, "input_required")
	waitMetric(t, url, "taskgate_tasks_live", map[string]string{"status": "input_required"}, 1)
	for key := range d.InputRequests {
		if r := c.Call("tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}}); r.Error != nil {
			t.Fatal(r.Error.Message)
		}
	}
	c.WaitTask(task.TaskID, "completed")
	waitMetric(t, url, "taskgate_task_input_wait_seconds", map[string]string{"tool": "elicit"}, 1)
	waitMetric(t, url, "taskgate_tasks_live", map[string]string{"status": "input_required"}, 0)

	// A running task is held and live; cancelling counts it cancelled.
	slow := c.ToolTask("slow", map[string]any{"seconds": 30})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.WaitFor(ctx, "slow", testupstream.Called, 1); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, url, "taskgate_held_calls", nil, 1)
	waitMetric(t, url, "taskgate_tasks_live", map[string]string{"status": "working"}, 1)
	if r := c.Call("tasks/cancel", map[string]any{"taskId": slow.TaskID}); r.Error != nil {
		t.Fatal(r.Error.Message)
	}
	waitMetric(t, url, "taskgate_tasks_finished_total", map[string]string{"tool": "slow", "status": "cancelled"}, 1)
	waitMetric(t, url, "taskgate_held_calls", nil, 0)
	waitMetric(t, url, "taskgate_tasks_live", map[string]string{"status": "working"}, 0)
}

func TestMetricsUpstreamErrorsAndStoreErrors(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	f := newFleet(t, up.URL+"/mcp")
	f.add(nil)
	url := f.URLs[0]
	c := &gwtest.ModernClient{T: t, URLs: f.URLs}
	if r := c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}); r.Error != nil {
		t.Fatal(r.Error.Message)
	}
	up.Close() // the upstream goes away
	if r := c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}); r.Error == nil {
		t.Fatal("a call to a stopped upstream succeeded")
	}
	fams := scrape(t, url)
	if v := metricValue(fams, "taskgate_upstream_errors_total", map[string]string{"reason": "unreachable"}); v < 1 {
		t.Errorf("upstream unreachable errors = %v, want ≥ 1", v)
	}
	f.MR.Close() // and so does Redis
	if r := c.Call("tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}); r.Error == nil ||
		!strings.Contains(r.Error.Message, "task store unavailable") {
		t.Fatalf("tasks/get with Redis down = %+v", r.Error)
	}
	fams = scrape(t, url)
	if v := metricValue(fams, "taskgate_store_errors_total", map[string]string{"command": "hgetall"}); v < 1 {
		t.Errorf("store hgetall errors = %v, want ≥ 1", v)
	}
}

func TestMetricsOnOwnListener(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	h := f.add(func(c *Config) { c.MetricsPath = "-" })
	resp, err := http.Get(strings.TrimSuffix(f.URLs[0], "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics with MetricsPath \"-\": HTTP %d, want 404", resp.StatusCode)
	}
	rr := httptest.NewRecorder()
	h.Metrics().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rr.Code != http.StatusOK || !strings.Contains(rr.Body.String(), "taskgate_held_calls") {
		t.Errorf("Handler.Metrics: HTTP %d %.200s", rr.Code, rr.Body.String())
	}
}

// TestIdleEmbeddedStoreHasNoErrors: a replica on the embedded store that
// serves a few requests reports no store errors (go-redis' CLIENT SETINFO
// on connect, which the embedded Redis refuses, used to count as one per
// connection).
func TestIdleEmbeddedStoreHasNoErrors(t *testing.T) {
	emb, err := taskstore.OpenEmbedded(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	store := taskstore.New(emb.Client(), taskstore.Options{})
	defer store.Close()
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	defer up.Close()
	gw := newGateway(t, up.URL+"/mcp", func(c *Config) { c.Store = store })
	c := &gwtest.ModernClient{T: t, URLs: []string{gw}}
	c.Call("tasks/get", map[string]any{"taskId": "6f1c2a44-0000-4000-8000-000000000000"})
	fams := scrape(t, gw)
	if f := fams["taskgate_store_errors_total"]; f != nil {
		for _, m := range f.GetMetric() {
			if m.GetCounter().GetValue() > 0 {
				t.Errorf("store errors on an idle embedded store: %v", m)
			}
		}
	}
}

// TestBuildAndPoolMetrics: taskgate_build_info names the build; the Redis
// client's pool is visible.
func TestBuildAndPoolMetrics(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	defer up.Close()
	gw := newGateway(t, up.URL+"/mcp", func(c *Config) { c.Store = newMiniStore(t); c.Version = "v9.9.9-test" })
	c := &gwtest.ModernClient{T: t, URLs: []string{gw}}
	c.Call("tasks/get", map[string]any{"taskId": "6f1c2a44-0000-4000-8000-000000000000"})
	fams := scrape(t, gw)
	if v := metricValue(fams, "taskgate_build_info", map[string]string{"version": "v9.9.9-test"}); v != 1 {
		t.Errorf("taskgate_build_info{version=v9.9.9-test} = %v", v)
	}
	if v := metricValue(fams, "taskgate_store_pool_connections", map[string]string{"state": "total"}); v < 1 {
		t.Errorf("pool connections after a store read = %v, want at least 1", v)
	}
	if v := metricValue(fams, "taskgate_store_pool_waits_total", map[string]string{"result": "hit"}) +
		metricValue(fams, "taskgate_store_pool_waits_total", map[string]string{"result": "miss"}); v < 1 {
		t.Errorf("pool hits+misses = %v, want at least one", v)
	}
}

// TestRequestMetricsAndAccessLog: every request is counted by MCP method
// and outcome and timed; with AccessLog each one is logged when it ends,
// without it none is.
func TestRequestMetricsAndAccessLog(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	defer up.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	gw := newGateway(t, up.URL+"/mcp", func(c *Config) {
		c.Store = newMiniStore(t)
		c.AccessLog = true
		c.Logger = zerolog.New(gwtest.LockedWriter{W: &logs, Mu: &mu})
	})
	c := &gwtest.ModernClient{T: t, URLs: []string{gw}}
	c.Call("tools/list", map[string]any{})
	resp, err := http.Post(gw, "text/plain", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain POST: HTTP %d", resp.StatusCode)
	}
	// A request is counted as its handler returns, which may be just after
	// the client has the answer: wait for the figures.
	waitMetric(t, gw, "taskgate_requests_total", map[string]string{"method": "tools/list", "outcome": "ok"}, 1)
	waitMetric(t, gw, "taskgate_requests_total", map[string]string{"method": "other", "outcome": "client_error"}, 1) // the unparsed text/plain POST
	waitMetric(t, gw, "taskgate_request_duration_seconds", map[string]string{"method": "tools/list"}, 1)
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	var access []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["op"] == "access" && l["path"] == "/mcp" { // not the scrape
			access = append(access, l)
		}
	}
	if len(access) != 2 {
		t.Fatalf("access lines = %d, want 2:\n%s", len(access), out)
	}
	// The lines come as handlers return, in either order.
	byMethod := map[any]map[string]any{}
	for _, a := range access {
		byMethod[a["method"]] = a
	}
	if a := byMethod["tools/list"]; a == nil || a["status"] != float64(200) || a["http_method"] != "POST" ||
		a["bytes"] == nil || a["bytes"] == float64(0) || a["remote"] == "" {
		t.Errorf("tools/list access line = %v", a)
	}
	if a := byMethod["other"]; a == nil || a["status"] != float64(415) {
		t.Errorf("text/plain access line = %v, want status 415", a)
	}

	// Off by default.
	logs.Reset()
	quiet := newGateway(t, up.URL+"/mcp", func(c *Config) {
		c.Store = newMiniStore(t)
		c.Logger = zerolog.New(gwtest.LockedWriter{W: &logs, Mu: &mu})
	})
	(&gwtest.ModernClient{T: t, URLs: []string{quiet}}).Call("tools/list", map[string]any{})
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), `"op":"access"`) {
		t.Errorf("access lines without AccessLog:\n%s", logs.String())
	}
}

// BenchmarkRequestAccounting is what every request pays for
// taskgate_requests_total and its histogram: the recorder and served
// (access log off), against a bare handler call.
func BenchmarkRequestAccounting(b *testing.B) {
	h := &Handler{metrics: obs.NewMetrics(func() float64 { return 0 })}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	w := httptest.NewRecorder()
	bare := func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			bare(w)
		}
	})
	b.Run("recorded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := &recorder{ResponseWriter: w}
			start := time.Now()
			bare(rec)
			noteMethod(rec, "tools/call")
			h.served(rec, r, start)
		}
	})
}
