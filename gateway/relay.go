package gateway

import (
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/taskgate/taskgate/upstream"
)

// copyBufs recycles relay buffers: a fresh 32 KiB per request is the
// largest allocation of a pass-through and shows up as GC time under load.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay copies an upstream response to the client: end-to-end headers,
// the status unchanged, and the body streamed. An SSE body is flushed after
// every read, so each event reaches the client as it arrives; nothing is
// buffered. When the client goes away, the write fails and closing the
// upstream body aborts the upstream request.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, resp *http.Response) {
	defer resp.Body.Close()
	upstream.CopyHeader(w.Header(), resp.Header)
	stream := isStream(resp)
	if resp.ContentLength >= 0 && !stream && bodyAllowed(r.Method, resp.StatusCode) {
		// Keep the upstream's framing: a known length stays a length.
		w.Header()["Content-Length"] = []string{itoa(resp.ContentLength)}
	}
	w.WriteHeader(resp.StatusCode)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	if !stream {
		_, _ = io.CopyBuffer(writerOnly{w}, resp.Body, buf)
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // headers now: the client may be waiting on them
	}
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			if err != io.EOF && r.Context().Err() == nil {
				h.log.Debug().Str("op", "relay").Err(err).Msg("upstream stream ended with an error")
			}
			return
		}
	}
}

func isStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	if ct == "text/event-stream" {
		return true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// writerOnly hides ReadFrom, so io.CopyBuffer uses our pooled buffer.
type writerOnly struct{ io.Writer }

// bodyAllowed reports whether a response may carry a body (RFC 9110 §6.4.1).
func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status != http.StatusNoContent &&
		status != http.StatusNotModified && status >= 200
}
