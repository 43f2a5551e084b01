package gateway

import (
	"io"
	"mime"
	"net/http"
	"runtime"
	"sync"
	"time"

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
	stream := copyResponseHeader(w, resp)
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
	if flusher == nil {
		_, _ = io.CopyBuffer(writerOnly{w}, resp.Body, buf)
		return
	}
	h.relayStream(w, flusher, resp.Body, buf)
}

// headerWait is how long a stream's headers may wait for its first event
// before they are flushed on their own.
const headerWait = 50 * time.Millisecond

type chunk struct {
	p   []byte
	err error
}

// relayStream copies an SSE body and flushes whenever no more bytes are
// pending, so every event reaches the client as soon as it arrived. Bytes
// that are already there when a chunk is written (typically the end of a
// POST's stream right after its response event) go out in the same write:
// a JSON-RPC answer costs one write to the client instead of three
// (headers, event, end of stream). The headers are flushed on their own
// only when the first event takes longer than headerWait.
func (h *Handler) relayStream(w http.ResponseWriter, f http.Flusher, body io.ReadCloser, buf []byte) {
	chunks := make(chan chunk, 1)
	free := make(chan []byte, 1) // the buffer the reader may fill next
	spare := copyBufs.Get().(*[]byte)
	free <- *spare
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	defer func() {
		// Unblock and wait for the reader before the buffers go back to
		// the pool: closing the body ends a Read in progress.
		_ = body.Close()
		close(stop)
		<-readerDone
		copyBufs.Put(spare)
	}()
	go func() {
		defer close(readerDone)
		cur := buf
		for {
			n, err := body.Read(cur)
			select {
			case chunks <- chunk{cur[:n], err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
			select {
			case cur = <-free:
			case <-stop:
				return
			}
		}
	}()
	timer := time.NewTimer(headerWait)
	defer timer.Stop()
	flushed := false
	for {
		var c chunk
		select {
		case c = <-chunks:
		case <-timer.C:
			if !flushed {
				f.Flush()
				flushed = true
			}
			continue
		}
		for {
			if len(c.p) > 0 {
				if _, err := w.Write(c.p); err != nil {
					return
				}
			}
			if c.err != nil {
				return // the handler's return writes what is left, at once
			}
			free <- c.p[:cap(c.p)]
			// Let the reader see whether more is already there.
			runtime.Gosched()
			select {
			case c = <-chunks:
				continue
			default:
			}
			break
		}
		f.Flush()
		flushed = true
	}
}

// copyResponseHeader copies the upstream's end-to-end response headers and
// reports whether the body is an SSE stream.
func copyResponseHeader(w http.ResponseWriter, resp *http.Response) (stream bool) {
	upstream.CopyHeader(w.Header(), resp.Header)
	return isStream(resp)
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
