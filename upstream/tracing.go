package upstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// propagator is W3C trace context and baggage: traceparent, tracestate
// and baggage, in headers and (MCP 2026-07-28, SEP-414) in params._meta.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// startSpan starts the client span of one request to the upstream; nil
// without a tracer. Its trace context goes on the request with inject.
func (c *Client) startSpan(ctx context.Context, method string) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "mcp.upstream "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("mcp.method.name", method), attribute.String("server.address", c.url.Host)))
}

// inject sets ctx's trace context on header, replacing any the caller
// sent (the upstream's parent is the gateway's client span).
func inject(ctx context.Context, header http.Header) {
	for _, k := range []string{"Traceparent", "Tracestate", "Baggage"} {
		header.Del(k)
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(header))
}

// endSpan records how the request went. A response's span ends when its
// body is closed (or read to its end), so a streamed answer is timed
// whole and an error on the way is recorded.
func endSpan(span trace.Span, resp *http.Response, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case resp != nil:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, resp.Status)
		}
		resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
		return
	}
	span.End()
}

// spanBody ends its span at EOF, on a read error, or when closed.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end(err)
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end(nil)
	return err
}

func (b *spanBody) end(err error) {
	b.once.Do(func() {
		if err != nil && err != io.EOF {
			b.span.RecordError(err)
			b.span.SetStatus(codes.Error, err.Error())
		}
		b.span.End()
	})
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
	params := map[string]json.RawMessage{}
	meta := map[string]json.RawMessage{}
	if len(m.Params) > 0 {
		_ = json.Unmarshal(m.Params, &params)
		_ = json.Unmarshal(params["_meta"], &meta) // a non-object _meta is replaced
	}
	// The client's own trace keys must not travel next to ours.
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		delete(meta, k)
	}
	for k, v := range carrier {
		meta[k] = mcpwire.MustMarshal(v)
	}
	params["_meta"] = mcpwire.MustMarshal(meta)
	out, err := mcpwire.WithMember(body, "params", mcpwire.MustMarshal(params))
	if err != nil {
		return body
	}
	return out
}
