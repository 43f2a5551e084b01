package obs

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Every HTTP request the Handler serves is counted in
// taskgate_requests_total{method,outcome} and timed in
// taskgate_request_duration_seconds{method} (method: the MCP method of a
// POST, bounded by MethodLabel, or GET/DELETE/other for the rest; outcome
// from the HTTP status: ok for 1xx–3xx, client_error, server_error), and,
// with Config.AccessLog, logged as one line when it ends. A streamed answer
// (SSE) ends when its stream does, so its duration is the stream's.

// RequestMetrics are the two request families.
type RequestMetrics struct {
	Total    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

func NewRequestMetrics(register func(...prometheus.Collector)) RequestMetrics {
	rm := RequestMetrics{
		Total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_requests_total", Help: "HTTP requests served, per MCP method (GET, DELETE or other for non-POSTs) and outcome (ok, client_error, server_error from the HTTP status).",
		}, []string{"method", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_request_duration_seconds", Help: "Time from a request's arrival to the end of its answer (of its stream, for SSE), per MCP method.",
			Buckets: TaskBuckets,
		}, []string{"method"}),
	}
	register(rm.Total, rm.Duration)
	return rm
}

// Outcome is the outcome label of an HTTP status.
func Outcome(status int) string {
	switch {
	case status >= 500:
		return "server_error"
	case status >= 400:
		return "client_error"
	}
	return "ok"
}
