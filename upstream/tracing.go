package upstream

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// propagator is W3C trace context and baggage: traceparent, tracestate
// and baggage, in headers and (MCP 2026-07-28, SEP-414) in params._meta.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// startSpan starts the client span of one request to the upstream and
// sets its trace context on header, replacing any the caller sent (the
// upstream's parent is this span). end records the outcome. Without a
// tracer it does nothing.
func (c *Client) startSpan(ctx context.Context, method string, header http.Header) (context.Context, func(*http.Response, error)) {
	if c.tracer == nil {
		return ctx, func(*http.Response, error) {}
	}
	ctx, span := c.tracer.Start(ctx, "mcp.upstream "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("mcp.method.name", method), attribute.String("server.address", c.url.Host)))
	for _, k := range []string{"Traceparent", "Tracestate", "Baggage"} {
		header.Del(k)
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(header))
	return ctx, func(resp *http.Response, err error) {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case resp != nil:
			span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
			if resp.StatusCode >= 500 {
				span.SetStatus(codes.Error, resp.Status)
			}
		}
		span.End()
	}
}

// withTraceMeta puts ctx's trace context into a request message's
// params._meta (traceparent, tracestate, baggage: MCP 2026-07-28, SEP-414),
// for upstreams that follow traces through MCP itself.
func withTraceMeta(ctx context.Context, body []byte) []byte {
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return body
	}
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || (len(m.Params) > 0 && !mcpwire.IsObject(m.Params)) {
		return body
	}
	p := m.Params
	for k, v := range carrier {
		p = mcpwire.WithMeta(p, k, v)
	}
	out, err := mcpwire.WithMember(body, "params", p)
	if err != nil {
		return body
	}
	return out
}
