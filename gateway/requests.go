package gateway

import (
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
)

// Every HTTP request the Handler serves is counted in
// taskgate_requests_total{method,outcome} and timed in
// taskgate_request_duration_seconds{method} (method: the MCP method of a
// POST, bounded by methodLabel, or GET/DELETE/other for the rest; outcome
// from the HTTP status: ok for 1xx–3xx, client_error, server_error), and,
// with Config.AccessLog, logged as one line when it ends. A streamed answer
// (SSE) ends when its stream does, so its duration is the stream's.

// requestMetrics are the two request families.
type requestMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRequestMetrics(register func(...prometheus.Collector)) requestMetrics {
	rm := requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_requests_total", Help: "HTTP requests served, per MCP method (GET, DELETE or other for non-POSTs) and outcome (ok, client_error, server_error from the HTTP status).",
		}, []string{"method", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskgate_request_duration_seconds", Help: "Time from a request's arrival to the end of its answer (of its stream, for SSE), per MCP method.",
			Buckets: taskBuckets,
		}, []string{"method"}),
	}
	register(rm.total, rm.duration)
	return rm
}

// recorder is the ResponseWriter the Handler serves through: it keeps the
// status and the bytes written, and the MCP method once the body is read.
// Flush and Unwrap keep streaming and http.ResponseController working.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	method string
	span   trace.Span // the request's server span; nil without tracing
	// pub and req point a 401's or 403's challenges at the gateway's
	// metadata (oauthmeta.go); nil pub: as written.
	pub *publicURLs
	req *http.Request
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
		if (code == http.StatusUnauthorized || code == http.StatusForbidden) && rec.pub != nil {
			pointChallenges(rec.Header(), rec.pub.metadataURL(rec.req))
		}
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(p)
	rec.bytes += int64(n)
	return n, err
}

func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if f, ok := rec.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// noteMethod tells w's recorder, if it is one, which MCP method the
// request carries.
func noteMethod(w http.ResponseWriter, method string) {
	if rec, ok := w.(*recorder); ok {
		rec.method = method
	}
}

// outcome is the outcome label of an HTTP status.
func outcome(status int) string {
	switch {
	case status >= 500:
		return "server_error"
	case status >= 400:
		return "client_error"
	}
	return "ok"
}

// served counts and times one finished request, and logs it with
// Config.AccessLog.
func (h *Handler) served(rec *recorder, r *http.Request, start time.Time) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http sends 200
	}
	method := rec.method
	if method == "" {
		method = r.Method
	}
	label := methodLabel(method)
	took := time.Since(start)
	if h.cfg.AccessLog { // first: once a request is counted, its line is out
		h.log.Info().Str("op", "access").Str("http_method", r.Method).Str("path", r.URL.Path).
			Str("method", label).Int("status", status).Int64("bytes", rec.bytes).
			Float64("duration_seconds", took.Seconds()).Str("remote", r.RemoteAddr).Msg("request")
	}
	h.metrics.requests.total.WithLabelValues(label, outcome(status)).Inc()
	h.metrics.requests.duration.WithLabelValues(label).Observe(took.Seconds())
	endRequest(rec.span, label, status)
}
