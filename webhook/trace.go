package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/taskstore"
)

// A delivery is a client span of its own trace, linked to its task's
// span (the traceparent the task record keeps): a delivery may happen
// hours after the task's trace ended, on another replica, so it is not a
// child (OpenTelemetry, "Links between spans").

var traceContext = propagation.TraceContext{}

func (d *Dispatcher) startSpan(ctx context.Context, ep Endpoint, del taskstore.Delivery) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("taskgate.webhook.endpoint", ep.Name),
		attribute.String("taskgate.webhook.event_id", del.EventID),
		attribute.String("taskgate.webhook.type", del.Type),
		attribute.String("taskgate.task_id", del.TaskID),
		attribute.Int("taskgate.webhook.attempt", del.Attempts), // counted by the claim
	)}
	if del.TraceParent != "" {
		tctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": del.TraceParent})
		if sc := trace.SpanContextFromContext(tctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return d.tracer.Start(trace.ContextWithSpan(ctx, nil), "webhook "+del.Type, opts...)
}

func endSpan(span trace.Span, status int, err error) {
	if span == nil {
		return
	}
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// injectTrace puts the delivery span's traceparent on the request, so a
// receiver that traces continues it.
func injectTrace(ctx context.Context, req *http.Request) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
