package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// otlpSpan is one span an OTLP/HTTP receiver got, with its replica.
type otlpSpan struct {
	replica, name, traceID, spanID, parent string
	attrs                                  map[string]string
	links                                  []string // span ids
}

// otlpReceiver is a minimal OTLP/HTTP (protobuf) trace receiver.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpSpan
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, _ := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(data, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		replica := attrMap(rs.Resource.GetAttributes())["service.instance.id"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := otlpSpan{replica: replica, name: s.Name, traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId),
					parent: hex.EncodeToString(s.ParentSpanId), attrs: attrMap(s.Attributes)}
				for _, l := range s.Links {
					sp.links = append(sp.links, hex.EncodeToString(l.SpanId))
				}
				o.spans = append(o.spans, sp)
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return m
}

func (o *otlpReceiver) find(f func(otlpSpan) bool) []otlpSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []otlpSpan
	for _, s := range o.spans {
		if f(s) {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingAcrossReplicas: two replicas of the built binary, configured
// only by OTEL_* variables, export to an OTLP/HTTP receiver; a task
// created on one and cancelled on the other is one span, recorded by the
// second, under the creating request's span; polls link to it; the
// worker's upstream call and the Redis commands are spans of the same
// trace.
func TestTracingAcrossReplicas(t *testing.T) {
	recv := &otlpReceiver{}
	col := httptest.NewServer(recv)
	t.Cleanup(col.Close)
	up := newUpstream(t, testupstream.Options{})
	redisURL := "redis://" + redistest.Start(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=taskgate-e2e"}
	a := startGatewayEnv(t, env, up, "--task", "slow", "--redis-url", redisURL)
	b := startGatewayEnv(t, env, up, "--task", "slow", "--redis-url", redisURL)
	if !strings.Contains(a.stderr.String(), `"tracing":true`) {
		t.Fatalf("the startup line does not say tracing is on:\n%s", a.stderr.String())
	}
	c := newRawSession(t, a.URL, "")
	c.initialize()
	created := c.call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 30, "text": "x"}, "task": map[string]any{}})
	var res struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if created.Error != nil || json.Unmarshal(created.Result, &res) != nil || res.Task.TaskID == "" {
		t.Fatalf("create: %+v", created)
	}
	id := res.Task.TaskID
	c.url = b.URL
	c.call("tasks/get", map[string]any{"taskId": id})
	if r := c.call("tasks/cancel", map[string]any{"taskId": id}); r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}
	replicaOf := func(g *gateway) string { return "e2e-" + strings.TrimPrefix(g.base, "http://") }

	var task otlpSpan
	waitUntil(t, 15*time.Second, func() bool {
		ts := recv.find(func(s otlpSpan) bool { return s.name == "mcp.task slow" })
		if len(ts) == 1 {
			task = ts[0]
		}
		return len(ts) == 1
	})
	if task.replica != replicaOf(b) || task.attrs["taskgate.task_id"] != id || task.attrs["taskgate.outcome"] != "cancelled" {
		t.Errorf("task span: %+v; want it from %s (which cancelled it)", task, replicaOf(b))
	}
	// A exports the creating request's span in its own batches: it may
	// arrive after B's task span.
	var createSpans []otlpSpan
	waitUntil(t, 10*time.Second, func() bool {
		createSpans = recv.find(func(s otlpSpan) bool { return s.name == "mcp tools/call" && s.spanID == task.parent })
		return len(createSpans) > 0
	})
	if len(createSpans) != 1 || createSpans[0].replica != replicaOf(a) {
		t.Errorf("the task span's parent is not A's tools/call span: %+v", createSpans)
	}
	// The worker's upstream call ends when it hears of the cancel, at the
	// latest on its next lease renewal (5 s): its span is exported after that.
	waitUntil(t, 30*time.Second, func() bool {
		polls := recv.find(func(s otlpSpan) bool {
			return s.name == "mcp tasks/get" && s.replica == replicaOf(b) && len(s.links) == 1 && s.links[0] == task.spanID
		})
		calls := recv.find(func(s otlpSpan) bool { return s.name == "mcp.upstream tools/call" && s.parent == task.spanID })
		redis := recv.find(func(s otlpSpan) bool { return s.traceID == task.traceID && s.attrs["db.system"] == "redis" })
		return len(polls) == 1 && len(calls) == 1 && len(redis) > 0
	})
}
