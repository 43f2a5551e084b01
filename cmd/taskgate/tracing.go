package main

// OpenTelemetry tracing, configured only by the standard OTEL_* variables
// (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
// on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set, or OTEL_TRACES_EXPORTER=otlp; off (no provider, nothing traced)
// otherwise, or with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// The exporters read the endpoint, headers, timeout and TLS settings
// themselves; the SDK reads OTEL_TRACES_SAMPLER(_ARG), the span limits and
// OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway"
)

// tracingEnabled reads whether the environment asks for traces.
// OTEL_TRACES_EXPORTER is a comma-separated list: otlp turns tracing on,
// none alone turns it off; other exporters are not built in (warned).
func tracingEnabled(getenv func(string) string) (on bool, ignored []string) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	if list := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); list != "" {
		for _, e := range strings.Split(list, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "otlp":
				on = true
			case "none", "":
			default:
				ignored = append(ignored, e)
			}
		}
		if on || strings.EqualFold(list, "none") {
			return on, ignored
		}
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", ignored
}

// openTracing builds the TracerProvider the environment asks for; nil
// when tracing is off. shutdown flushes and stops it.
func openTracing(ctx context.Context, replica, version string, log zerolog.Logger) (tp trace.TracerProvider, shutdown func(context.Context), err error) {
	on, ignored := tracingEnabled(os.Getenv)
	if len(ignored) > 0 {
		log.Warn().Strs("exporters", ignored).Msg("OTEL_TRACES_EXPORTER names exporters taskgate does not build in; only otlp is used")
	}
	if !on {
		return nil, func(context.Context) {}, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("invalid OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot set up the OTLP trace exporter: %v", err)
	}
	// Defaults first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "taskgate"), attribute.String("service.version", version),
			attribute.String("service.instance.id", replica)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, nil, fmt.Errorf("invalid OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(gateway.TraceIDGenerator()))
	return provider, func(ctx context.Context) { _ = provider.Shutdown(ctx) }, nil
}

// traceRedis makes the task store's Redis commands child spans of the
// request or task that sent them. Commands sent outside any span (the
// recoverer's sweeps, readiness pings, lease renewals) are not traced, and
// arguments (task results, answers) stay out of the spans.
func traceRedis(rdb redis.UniversalClient, tp trace.TracerProvider) error {
	if tp == nil {
		return nil
	}
	rdb.AddHook(redisTracing{tp.Tracer("github.com/taskgate/taskgate/taskstore")})
	return nil
}

type redisTracing struct{ tracer trace.Tracer }

func (redisTracing) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisTracing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return next(ctx, cmd)
		}
		ctx, span := h.start(ctx, cmd.Name(), 1)
		err := next(ctx, cmd)
		end(span, err)
		return err
	}
}

func (h redisTracing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return next(ctx, cmds)
		}
		ctx, span := h.start(ctx, "pipeline", len(cmds))
		err := next(ctx, cmds)
		end(span, err)
		return err
	}
}

func (h redisTracing) start(ctx context.Context, op string, n int) (context.Context, trace.Span) {
	return h.tracer.Start(ctx, "redis "+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system", "redis"), attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", op), attribute.Int("db.operation.batch.size", n)))
}

func end(span trace.Span, err error) {
	if err != nil && !errors.Is(err, redis.Nil) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
