package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// seenHeaders records the trace context of the upstream's requests.
type seenHeaders struct {
	mu       sync.Mutex
	parents  []string // traceparent headers of tools/call
	metaSeen []string // params._meta.traceparent of tools/call
}

func (s *seenHeaders) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				s.mu.Lock()
				s.parents = append(s.parents, r.Header.Get("Traceparent"))
				if tp, ok := m.Params.Meta["traceparent"].(string); ok {
					s.metaSeen = append(s.metaSeen, tp)
				}
				s.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestTracingTaskAcrossReplicas: a task created on replica A (under the
// client's trace) is polled and cancelled on replica B; B records the one
// task span, with the ids A minted, from the task's creation; A's server
// span is its parent, B's poll links to it, the worker's upstream call on A
// is its child, and the upstream gets the trace context in its headers and
// in params._meta.
func TestTracingTaskAcrossReplicas(t *testing.T) {
	seen := &seenHeaders{}
	up := httptest.NewServer(seen.wrap(testupstream.Handler(testupstream.Options{})))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	a, b := gwtest.NewTraced(), gwtest.NewTraced()
	for _, tr := range []gwtest.Traced{a, b} {
		f.add(func(c *Config) {
			c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task))
			c.Tracer = tr.TP
			c.Upstream, _ = upstream.New(up.URL+"/mcp", upstream.Options{Tracer: tr.TP})
		})
	}
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.Initialize()
	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceparent := "00-" + clientTrace + "-00f067aa0ba902b7-01"
	task := startTraced(t, c, f.URLs[0], traceparent) // on A
	gwtest.WaitFor(t, func() bool {                   // the worker's call reached the upstream
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return len(seen.parents) == 1
	})

	// Poll and cancel on B.
	c.URLs = []string{f.URLs[1]}
	c.GetTask(task)
	if r := c.Call("tasks/cancel", map[string]any{"taskId": task}); r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}

	created := a.Named("mcp tools/call")
	if len(created) != 1 || created[0].SpanContext().TraceID().String() != clientTrace || created[0].Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("A's tools/call span: %d spans, want one in the client's trace under its span", len(created))
	}
	tasks := b.Named("mcp.task slow")
	if len(tasks) != 1 || len(a.Named("mcp.task")) != 0 {
		t.Fatalf("task spans: %d on B, %d on A; want one, on B (which cancelled it)", len(tasks), len(a.Named("mcp.task")))
	}
	ts := tasks[0]
	if ts.SpanContext().TraceID().String() != clientTrace || ts.Parent().SpanID() != created[0].SpanContext().SpanID() {
		t.Errorf("task span: trace %s parent %s; want the client's trace under A's tools/call span", ts.SpanContext().TraceID(), ts.Parent().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range ts.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["taskgate.task_id"] != task || attrs["mcp.tool.name"] != "slow" || attrs["taskgate.outcome"] != "cancelled" ||
		attrs["taskgate.flavour"] != "legacy" || !strings.HasPrefix(attrs["taskgate.owner"], "session:") {
		t.Errorf("task span attributes: %v", attrs)
	}
	if d := ts.EndTime().Sub(ts.StartTime()); d <= 0 || time.Since(ts.StartTime()) > time.Minute {
		t.Errorf("task span from %s to %s", ts.StartTime(), ts.EndTime())
	}
	// B's poll links to it.
	linked := false
	for _, s := range b.Named("mcp tasks/get") {
		for _, l := range s.Links() {
			linked = linked || l.SpanContext.SpanID() == ts.SpanContext().SpanID()
		}
	}
	if !linked {
		t.Errorf("B's tasks/get span does not link to the task span")
	}
	// The worker's upstream call on A is the task span's child, and the
	// upstream saw that context.
	var call sdktrace.ReadOnlySpan
	gwtest.WaitFor(t, func() bool {
		for _, s := range a.Named("mcp.upstream tools/call") {
			if s.Parent().SpanID() == ts.SpanContext().SpanID() {
				call = s
			}
		}
		return call != nil
	})
	want := "00-" + clientTrace + "-" + call.SpanContext().SpanID().String() + "-01"
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.parents) != 1 || seen.parents[0] != want || len(seen.metaSeen) != 1 || seen.metaSeen[0] != want {
		t.Errorf("upstream saw traceparent %v, _meta %v; want %s", seen.parents, seen.metaSeen, want)
	}
}

// startTraced creates a task of slow at url with traceparent.
func startTraced(t *testing.T, c *gwtest.Client, url, traceparent string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 77, "method": "tools/call",
		"params": map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30, "text": "x"}, "task": map[string]any{"ttl": 60000}}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.SID)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	gwtest.ReadMessages(t, resp, func(m gwtest.Reply) bool {
		var r struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		_ = json.Unmarshal(m.Result, &r)
		id = r.Task.TaskID
		return false
	})
	if id == "" {
		t.Fatal("no task created")
	}
	return id
}

// TestTracingCompletedOnWorker: a task that completes is recorded by the
// replica whose worker ended it, once.
func TestTracingCompletedOnWorker(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	tr := gwtest.NewTraced()
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) {
		c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "echo", policy.Task))
		c.Tracer = tr.TP
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.Initialize()
	task := c.StartTask("echo", map[string]any{"text": "hi"}, nil)
	c.WaitStatus(task.TaskID, "completed")
	gwtest.WaitFor(t, func() bool { return len(tr.Named("mcp.task echo")) == 1 })
	s := tr.Named("mcp.task echo")[0]
	if s.Parent().SpanID() != tr.Named("mcp tools/call")[0].SpanContext().SpanID() || s.SpanContext().TraceID() != tr.Named("mcp tools/call")[0].SpanContext().TraceID() {
		t.Errorf("the task span is not the child of the request that created it")
	}
	if !s.SpanContext().IsValid() || s.SpanContext().TraceFlags() != trace.FlagsSampled {
		t.Errorf("task span context %v", s.SpanContext())
	}
}

// discardExporter drops what the batcher hands it: the cost measured is
// the gateway's and the SDK's, not an exporter's network.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracing: a 2025-11-25 tasks/get of a completed task through
// Handler.ServeHTTP (in process, render cache warm) with tracing off
// (Config.Tracer nil) and on (every span sampled, batched, discarded).
func BenchmarkTracing(b *testing.B) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	b.Cleanup(up.Close)
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			mr := miniredis.RunT(b)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			b.Cleanup(func() { rdb.Close() })
			client, _ := upstream.New(up.URL+"/mcp", upstream.Options{})
			rule, _ := policy.NewRule("echo", policy.Task)
			cfg := Config{Upstream: client, Store: taskstore.New(rdb, taskstore.Options{}), PollLimit: -1,
				Policy: policy.NewCurrent(&policy.Config{Rules: policy.Rules{rule}}), ReplicaID: "bench"}
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithIDGenerator(TraceIDGenerator()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				cfg.Tracer = tp
			}
			h, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { h.Close() })
			srv := httptest.NewServer(h)
			b.Cleanup(srv.Close)
			c := &gwtest.Client{T: &testing.T{}, URLs: []string{srv.URL + "/mcp"}}
			c.InitializeAs("2025-11-25", map[string]any{})
			r := c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}, "task": map[string]any{}})
			var ct struct {
				Task struct {
					TaskID string `json:"taskId"`
				} `json:"task"`
			}
			_ = json.Unmarshal(r.Result, &ct)
			id := ct.Task.TaskID
			for deadline := time.Now().Add(10 * time.Second); ; {
				if wt, _ := c.GetTask(id); wt.Status == "completed" || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			body := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"` + id + `"}}`
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", c.SID)
				req.Header.Set("MCP-Protocol-Version", "2025-11-25")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// TestTracingExpiredTask: a task whose ttl runs out while its call is
// still running ends its span ("expired") on the worker's replica.
func TestTracingExpiredTask(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	tr := gwtest.NewTraced()
	f := newFleet(t, up.URL+"/mcp")
	f.add(func(c *Config) {
		c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task))
		c.Tracer = tr.TP
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.Initialize()
	r := c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30, "text": "x"}, "task": map[string]any{"ttl": 1000}})
	if r.Error != nil {
		t.Fatalf("create: %+v", r.Error)
	}
	gwtest.WaitFor(t, func() bool { return len(tr.Named("mcp.task slow")) == 1 })
	for _, kv := range tr.Named("mcp.task slow")[0].Attributes() {
		if kv.Key == "taskgate.outcome" && kv.Value.Emit() != "expired" {
			t.Fatalf("outcome %s, want expired", kv.Value.Emit())
		}
	}
}
