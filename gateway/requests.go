package gateway

import (
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/identity"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"go.opentelemetry.io/otel/trace"
)

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
	// metadata (internal/identity/oauthmeta.go); nil pub: as written.
	pub *identity.PublicURLs
	req *http.Request
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
		if (code == http.StatusUnauthorized || code == http.StatusForbidden) && rec.pub != nil {
			identity.PointChallenges(rec.Header(), rec.pub.MetadataURL(rec.req))
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
	label := obs.MethodLabel(method)
	took := time.Since(start)
	if h.cfg.AccessLog { // first: once a request is counted, its line is out
		h.log.Info().Str("op", "access").Str("http_method", r.Method).Str("path", r.URL.Path).
			Str("method", label).Int("status", status).Int64("bytes", rec.bytes).
			Float64("duration_seconds", took.Seconds()).Str("remote", r.RemoteAddr).Msg("request")
	}
	h.metrics.Requests.Total.WithLabelValues(label, obs.Outcome(status)).Inc()
	h.metrics.Requests.Duration.WithLabelValues(label).Observe(took.Seconds())
	obs.EndRequest(rec.span, label, status)
}
