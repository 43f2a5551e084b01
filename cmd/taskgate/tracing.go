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
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway"
)

// tracingEnabled reads whether the environment asks for traces.
func tracingEnabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("invalid OTEL_TRACES_EXPORTER %q: taskgate exports traces with otlp (or none)", exp)
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
}

// openTracing builds the TracerProvider the environment asks for; nil
// when tracing is off. shutdown flushes and stops it.
func openTracing(ctx context.Context, replica, version string) (tp trace.TracerProvider, shutdown func(context.Context), err error) {
	on, err := tracingEnabled(os.Getenv)
	if err != nil || !on {
		return nil, func(context.Context) {}, err
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
		return nil, nil, fmt.Errorf("invalid OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(gateway.TraceIDGenerator()))
	return provider, func(ctx context.Context) { _ = provider.Shutdown(ctx) }, nil
}

// traceRedis makes the task store's Redis commands child spans of the
// request or task that sent them. Their arguments (task results, answers)
// stay out of the spans.
func traceRedis(rdb redis.UniversalClient, tp trace.TracerProvider) error {
	if tp == nil {
		return nil
	}
	return redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp), redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false))
}
