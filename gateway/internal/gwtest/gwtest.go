// Package gwtest holds the test helpers that the tests of several gateway
// packages share. Only tests import it; its exported names exist for
// those tests, and none is used by production code.
//
//   - gwtest.go: LockedWriter, a writer safe for a logger's concurrent
//     writes that a test reads afterwards; WaitFor, a condition polled
//     until it holds; Traced, a tracer provider that records the spans;
//     CounterValue, a counter read; MiniTaskKey, the Redis key of a
//     task.
//   - metrics.go: Scrape, MetricValue and WaitMetric, a /metrics
//     endpoint read.
//   - client.go: raw clients over HTTP: Client (2025-11-25, a session),
//     ModernClient (2026-07-28, stateless), the answers they read (Reply,
//     ReadMessages, Detailed, WireTask, ResultText), Eras.
//   - sdk.go: a go-sdk client through the gateway (ConnectSDK, Echo), the
//     initialize answer it got (Capture).
//   - era.go: EraUpstream, an upstream that records what reaches it and
//     can change era.
//   - policy.go: fixed policies (Rules, RulesPolicy, HybridPolicy,
//     WithWait, DirectWait).
//   - idle.go: a proxy that cuts a connection quiet for a second in
//     front of a gateway (IdleProxyURL), slow calls through it
//     (SlowCallsThroughIdleProxy, SlowModernCallVia), InitBody, Post.
//   - counter.go: CommandCounter, a redis.Hook counting a store's
//     commands by name.
//   - gate.go: GatedUpstream, an upstream that holds the calls marked
//     with GateMarker until the test releases its Gate.
//   - tools.go: ToolAnswer and ToolNames, the fallback tools' answers
//     read.
//   - old.go: OldUpstream, a 2024-11-05 server over either of its
//     transports (OldTransports).
//   - frontrig/: the parts a front stands on, for the fronts' tests
//     (and fleets of Handlers, for gateway's).
//   - oauth.go: OwnServer, an upstream that is its own OAuth
//     authorization server (its metadata and endpoints); WriteJSON, a
//     metadata document answered.
package gwtest

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/taskgate/taskgate/gateway/internal/obs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// LockedWriter writes to W under Mu, so a test can read what a logger
// wrote (holding Mu) while the logger still writes from other goroutines.
type LockedWriter struct {
	W  io.Writer
	Mu *sync.Mutex
}

func (l LockedWriter) Write(p []byte) (int, error) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return l.W.Write(p)
}

// WaitFor polls cond until it holds, failing the test after 20 s.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Traced is one replica's tracer provider and what it recorded.
type Traced struct {
	TP  *sdktrace.TracerProvider
	Rec *tracetest.SpanRecorder
}

// NewTraced is a provider that records every span, with the gateway's id
// generator (obs.TraceIDGenerator).
func NewTraced() Traced {
	rec := tracetest.NewSpanRecorder()
	return Traced{TP: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(obs.TraceIDGenerator())), Rec: rec}
}

// Named is the ended spans whose names start with prefix.
func (tr Traced) Named(prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.Rec.Ended() {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

// CounterValue reads a Prometheus counter, -1 if it is none.
func CounterValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if c.Write(&m) != nil || m.Counter == nil {
		return -1
	}
	return m.Counter.GetValue()
}

// MiniTaskKey is the key of task id's hash among mr's keys; the test
// fails when there is none.
func MiniTaskKey(t testing.TB, mr *miniredis.Miniredis, id string) string {
	t.Helper()
	for _, k := range mr.Keys() {
		if strings.HasSuffix(k, ":t:"+id) {
			return k
		}
	}
	t.Fatalf("no task hash for %s among %v", id, mr.Keys())
	return ""
}
