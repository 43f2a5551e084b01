package upstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestClientSpans: a client span lasts until the streamed answer is read,
// the upstream gets its traceparent, and the client's own trace keys in
// _meta are replaced by the gateway's.
func TestClientSpans(t *testing.T) {
	var gotHeader, gotMeta string
	var stale bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get("Traceparent")
		var m struct {
			Params struct {
				Meta map[string]string `json:"_meta"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &m)
		gotMeta, stale = m.Params.Meta["traceparent"], m.Params.Meta["tracestate"] != ""
		w.Header().Set("Content-Type", "application/json")
		w.(http.Flusher).Flush()
		time.Sleep(200 * time.Millisecond) // the answer streams in late
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	t.Cleanup(srv.Close)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c, err := New(srv.URL, Options{Tracer: tp})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"tracestate":"client=1","traceparent":"00-11111111111111111111111111111111-2222222222222222-01","progressToken":"p"}}}`)
	resp, err := c.post(context.Background(), nil, "tools/call", body)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "mcp.upstream tools/call" {
		t.Fatalf("spans: %v", spans)
	}
	s := spans[0]
	if d := s.EndTime().Sub(s.StartTime()); d < 150*time.Millisecond {
		t.Errorf("the span lasted %s: it ended before the answer was read", d)
	}
	want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
	if gotHeader != want || gotMeta != want || stale {
		t.Errorf("traceparent header %q, _meta %q (stale tracestate kept: %v); want %q", gotHeader, gotMeta, stale, want)
	}
}
