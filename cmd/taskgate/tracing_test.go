package main

import (
	"context"
	"strings"
	"testing"
)

func TestTracingEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		on   bool
		fail string
	}{
		{map[string]string{}, false, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false, ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, `invalid OTEL_TRACES_EXPORTER "zipkin"`},
	} {
		on, err := tracingEnabled(func(k string) string { return tc.env[k] })
		if on != tc.on || (tc.fail == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.fail)) {
			t.Errorf("%v: %v, %v; want %v, %q", tc.env, on, err, tc.on, tc.fail)
		}
	}
}

func TestOpenTracingProtocols(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for _, p := range []string{"http/protobuf", "grpc"} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", p)
		tp, stop, err := openTracing(context.Background(), "r1", "v")
		if err != nil || tp == nil {
			t.Fatalf("%s: %v", p, err)
		}
		stop(context.Background())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, _, err := openTracing(context.Background(), "r1", "v"); err == nil || !strings.Contains(err.Error(), "want http/protobuf or grpc") {
		t.Fatalf("http/json: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if tp, _, err := openTracing(context.Background(), "r1", "v"); err != nil || tp != nil {
		t.Fatalf("without OTEL_*: %v %v, want off", tp, err)
	}
}
