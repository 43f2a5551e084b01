package main

import (
	"context"

	"github.com/rs/zerolog"
	"strings"
	"testing"
)

func TestTracingEnabled(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		ignored int
	}{
		{map[string]string{}, false, 0},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, 0},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, 0},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, 0},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, true, 1},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false, 0},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false, 0},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, 1},
	} {
		on, ignored := tracingEnabled(func(k string) string { return tc.env[k] })
		if on != tc.on || len(ignored) != tc.ignored {
			t.Errorf("%v: %v, ignored %v; want %v and %d ignored", tc.env, on, ignored, tc.on, tc.ignored)
		}
	}
}

func TestOpenTracingProtocols(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for _, p := range []string{"http/protobuf", "grpc"} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", p)
		tp, stop, err := openTracing(context.Background(), "r1", "v", zerolog.Nop())
		if err != nil || tp == nil {
			t.Fatalf("%s: %v", p, err)
		}
		stop(context.Background())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, _, err := openTracing(context.Background(), "r1", "v", zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "want http/protobuf or grpc") {
		t.Fatalf("http/json: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if tp, _, err := openTracing(context.Background(), "r1", "v", zerolog.Nop()); err != nil || tp != nil {
		t.Fatalf("without OTEL_*: %v %v, want off", tp, err)
	}
}
