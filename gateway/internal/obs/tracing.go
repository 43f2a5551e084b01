package obs

// OpenTelemetry tracing (Config.Tracer; nil: off, and none of this runs).
//
//	server span      one per MCP request: "mcp <method>", child of the
//	                 client's traceparent header; a traceparent in
//	                 params._meta (MCP 2026-07-28, SEP-414) is linked
//	task span        "mcp.task <tool>", from the task's creation to its
//	                 terminal status, child of the creating request's span.
//	                 Its ids are minted at creation and kept in the task
//	                 record (Redis), so the replica that finishes the task
//	                 (a worker, a cancel, the recoverer) records the span,
//	                 and polls, answers and cancels on any replica link to
//	                 it; the worker's upstream calls are its children.
//	client span      one per upstream request (upstream.Options.Tracer),
//	                 with traceparent/tracestate/baggage on the request
//
// A span can be recorded only by the process that started it, so the task
// span is recorded once, when the task ends, with its creation time as
// start and the ids minted at creation (TraceIDGenerator makes the SDK use
// them).

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/taskstore"
)

const tracerName = "github.com/taskgate/taskgate/gateway"

// propagator reads and writes W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracing makes the gateway's spans. A nil *tracing is off: every method
// returns at once.
type Tracing struct {
	tracer  trace.Tracer
	replica string
}

func NewTracing(tp trace.TracerProvider, replica string) *Tracing {
	if tp == nil {
		return nil
	}
	return &Tracing{tracer: tp.Tracer(tracerName), replica: replica}
}

// StartRequest starts the server span of an MCP request, child of its
// traceparent header, and puts it in the request's context; the caller
// ends it (EndRequest). No tracing: r as it is, and no span.
func (tr *Tracing) StartRequest(r *http.Request) (*http.Request, trace.Span) {
	if tr == nil {
		return r, nil
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := tr.tracer.Start(ctx, "mcp", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("taskgate.replica", tr.replica)))
	return r.WithContext(ctx), span
}

// EndRequest names and ends the server span once the request is served.
func EndRequest(span trace.Span, method string, status int) {
	if span == nil {
		return
	}
	span.SetName("mcp " + method)
	span.SetAttributes(attribute.String("mcp.method.name", method), attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// LinkMeta links the request's span to a trace context the client sent in
// params._meta (SEP-414) when its headers carried none.
func (tr *Tracing) LinkMeta(ctx context.Context, r *http.Request, meta map[string]string) {
	if tr == nil || len(meta) == 0 || r.Header.Get("Traceparent") != "" {
		return
	}
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), propagation.MapCarrier(meta)))
	if sc.IsValid() {
		trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("taskgate.link", "_meta traceparent")}})
	}
}

// TraceMeta is the trace context a client sent in params._meta (SEP-414):
// its traceparent, tracestate and baggage, when strings.
func TraceMeta(meta map[string]json.RawMessage) map[string]string {
	var out map[string]string
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		var v string
		if raw, ok := meta[k]; ok && json.Unmarshal(raw, &v) == nil && v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// taskTrace is what a task record keeps of its span: trace id, span id,
// the creating request's span id (its parent), and the sampled flag.
type taskTrace struct {
	Trace   trace.TraceID
	span    trace.SpanID
	parent  trace.SpanID
	sampled bool
}

func (t taskTrace) String() string {
	flags := "00"
	if t.sampled {
		flags = "01"
	}
	return t.Trace.String() + "-" + t.span.String() + "-" + t.parent.String() + "-" + flags
}

func parseTaskTrace(s string) (taskTrace, bool) {
	parts := strings.Split(s, "-")
	if len(parts) != 4 {
		return taskTrace{}, false
	}
	var t taskTrace
	if b, err := hex.DecodeString(parts[0]); err != nil || len(b) != 16 {
		return t, false
	} else {
		copy(t.Trace[:], b)
	}
	for i, dst := range []*trace.SpanID{&t.span, &t.parent} {
		b, err := hex.DecodeString(parts[i+1])
		if err != nil || len(b) != 8 {
			return taskTrace{}, false
		}
		copy(dst[:], b)
	}
	t.sampled = parts[3] == "01"
	return t, t.Trace.IsValid() && t.span.IsValid()
}

// MintTask makes the ids of a new task's span: the trace of ctx's span
// (a fresh one without), a new span id, ctx's span as parent. "" when off.
func (tr *Tracing) MintTask(ctx context.Context) string {
	if tr == nil {
		return ""
	}
	parent := trace.SpanContextFromContext(ctx)
	t := taskTrace{Trace: parent.TraceID(), parent: parent.SpanID(), sampled: parent.IsSampled()}
	if !parent.IsValid() {
		t.Trace, t.sampled = randomTraceID(), true
	}
	t.span = randomSpanID()
	return t.String()
}

// TaskContext is ctx with task t's span as the (remote) parent: the
// worker's upstream calls become its children.
func (tr *Tracing) TaskContext(ctx context.Context, t *taskstore.Task) context.Context {
	if tr == nil {
		return ctx
	}
	tt, ok := parseTaskTrace(t.Trace)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, tt.spanContext(tt.span))
}

func (t taskTrace) spanContext(span trace.SpanID) trace.SpanContext {
	var flags trace.TraceFlags
	if t.sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: t.Trace, SpanID: span, TraceFlags: flags, Remote: true})
}

// LinkTask links the span of the request in ctx (a poll, an answer, a
// cancel) to task t's span.
func (tr *Tracing) LinkTask(ctx context.Context, t *taskstore.Task) {
	if tr == nil || t == nil {
		return
	}
	tr.LinkTrace(ctx, t.ID, t.Trace)
}

// LinkTrace is linkTask from the task's id and Trace.
func (tr *Tracing) LinkTrace(ctx context.Context, id, traceIDs string) {
	if tr == nil || traceIDs == "" {
		return
	}
	tt, ok := parseTaskTrace(traceIDs)
	if !ok {
		return
	}
	span := trace.SpanFromContext(ctx)
	span.AddLink(trace.Link{SpanContext: tt.spanContext(tt.span), Attributes: []attribute.KeyValue{attribute.String("taskgate.task_id", id)}})
	span.SetAttributes(attribute.String("taskgate.task_id", id))
}

// EndTask records task t's span, from its creation to now, when it
// reached status on this replica.
func (tr *Tracing) EndTask(t *taskstore.Task, status taskstore.Status, inputWait time.Duration) {
	if tr == nil || t == nil {
		return
	}
	tt, ok := parseTaskTrace(t.Trace)
	if !ok {
		return
	}
	ctx := context.Background()
	if tt.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, tt.spanContext(tt.parent))
	}
	ctx = context.WithValue(ctx, forcedIDsKey{}, tt)
	start := t.CreatedAt
	if start.IsZero() {
		start = time.Now()
	}
	attrs := []attribute.KeyValue{
		attribute.String("taskgate.task_id", t.ID),
		attribute.String("mcp.tool.name", t.Tool),
		attribute.String("taskgate.owner", core.LogOwner(t.Owner)),
		attribute.String("taskgate.flavour", string(t.Protocol)),
		attribute.String("taskgate.outcome", string(status)),
		attribute.String("taskgate.replica", tr.replica),
		attribute.Int("taskgate.task.attempts", max(t.Attempts, 1)), // a durable task's (internal/runner/rerun.go)
	}
	if inputWait > 0 {
		attrs = append(attrs, attribute.Float64("taskgate.input_wait_seconds", inputWait.Seconds()))
	}
	_, span := tr.tracer.Start(ctx, "mcp.task "+t.Tool, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if status == taskstore.StatusFailed || status == OutcomeExpired {
		span.SetStatus(codes.Error, t.StatusMessage)
	}
	span.End()
}

// OutcomeExpired is the task span's outcome when the task's ttl ran out
// (or its record vanished) before a terminal status was written.
const OutcomeExpired taskstore.Status = "expired"

// forcedIDsKey carries the ids TraceIDGenerator gives the task span.
type forcedIDsKey struct{}

// TraceIDGenerator returns the id generator the gateway's TracerProvider
// needs (sdktrace.WithIDGenerator): random ids, except for a task's span,
// whose ids were minted when the task was created, maybe on another
// replica.
func TraceIDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tt, ok := ctx.Value(forcedIDsKey{}).(taskTrace); ok {
		return tt.Trace, tt.span
	}
	return randomTraceID(), randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if tt, ok := ctx.Value(forcedIDsKey{}).(taskTrace); ok {
		return tt.span
	}
	return randomSpanID()
}

func randomTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func randomSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}
