package upstreamside

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// copyBufs recycles relay buffers: a fresh 32 KiB per request is the
// largest allocation of a pass-through and shows up as GC time under load.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Relay copies an upstream response to the client: end-to-end headers,
// the status unchanged, and the body streamed. An SSE body is flushed after
// Every read, so each event reaches the client as it arrives; nothing is
// buffered. When the client goes away, the write fails and closing the
// Upstream body aborts the upstream request.
func (u *Side) Relay(w http.ResponseWriter, r *http.Request, resp *http.Response) {
	u.relayBody(w, r, resp, nil)
}

// relayAnswer relays the answer to a client's request. id is the
// request's id: when the upstream's stream breaks off (not a clean end of
// stream, which a resumable server may do on purpose) before a JSON-RPC
// response passed, the client gets a -32603 response for id naming the
// Upstream instead of a stream that just stops, which would leave its
// request pending. tool, when not empty, names a forwarded tools/call
// whose latency is learned: once the answer is relayed, the time since
// start is recorded (latency.go), unless the answer was not a 200, the
// stream broke off before the JSON-RPC response, or the answer asked for
// the user's input (an elicitation or sampling request of a session
// Upstream, an MRTR input_required result), whose time cannot be told
// apart from the tool's.
func (u *Side) relayAnswer(w http.ResponseWriter, r *http.Request, resp *http.Response, id json.RawMessage, tool string, start time.Time) {
	u.relayAnswerKept(w, r, resp, id, tool, start, nil)
}

// relayAnswerKept is relayAnswer keeping a streamed answer alive (ka; nil:
// not).
func (u *Side) relayAnswerKept(w http.ResponseWriter, r *http.Request, resp *http.Response, id json.RawMessage, tool string, start time.Time, ka *Beats) {
	if encoded(resp) {
		ka = nil // nothing can go between compressed bytes
	}
	seen := relaySeen{id: id, ka: ka}
	u.relayBody(w, r, resp, &seen)
	u.learnFrom(&seen, resp.StatusCode, tool, start)
}

// encoded reports whether resp's body has a content coding.
func encoded(resp *http.Response) bool {
	ce := resp.Header.Get("Content-Encoding")
	return ce != "" && ce != "identity"
}

// learnFrom records tool's latency from what a relay saw of its answer.
func (u *Side) learnFrom(seen *relaySeen, status int, tool string, start time.Time) {
	if tool != "" && (seen.Complete || seen.Answered) && !seen.Input && status == http.StatusOK {
		u.observe(tool, seen.End.Sub(start))
	}
}

// RelayRequest relays the answer to msg: a request's through relayAnswer
// (learn: the tool whose latency it teaches), anything else as it is.
func (u *Side) RelayRequest(w http.ResponseWriter, r *http.Request, resp *http.Response, msg *mcpwire.Message, learn string, start time.Time) {
	if msg.Kind != mcpwire.KindRequest {
		u.Relay(w, r, resp)
		return
	}
	u.relayAnswer(w, r, resp, msg.ID, learn, start)
}

// relaySeen is what a relay saw of the body it copied. Allocation-free.
type relaySeen struct {
	Complete bool      // the body was read to its end and written whole
	Answered bool      // a chunk that looks like a JSON-RPC response was written
	Input    bool      // it holds a request for the user's input
	End      time.Time // when the last chunk was written, or the body ended

	id   json.RawMessage // the request's id, answered if its stream breaks; nil: none
	tail [4]byte         // the last four bytes written
	ka   *Beats          // fills quiet gaps of the stream; nil: none
}

// inputMarkers betray a request for the user's input in an answer's bytes;
// answerMarkers a JSON-RPC response. A marker split across two reads goes
// unseen; that costs one sample's accuracy, never a wrong answer.
var (
	inputMarkers  = [][]byte{[]byte(`"elicitation/create"`), []byte(`"sampling/createMessage"`), []byte(`"input_required"`)}
	answerMarkers = [][]byte{[]byte(`"result"`), []byte(`"error"`)}
)

// Wrote notes chunk p, just written to the client.
func (s *relaySeen) Wrote(p []byte) {
	if s == nil {
		return
	}
	s.End = time.Now()
	if len(p) >= len(s.tail) {
		copy(s.tail[:], p[len(p)-len(s.tail):])
	} else {
		copy(s.tail[:], s.tail[len(p):])
		copy(s.tail[len(s.tail)-len(p):], p)
	}
	if !s.Input && containsAny(p, inputMarkers) {
		s.Input = true
	}
	// A client that stops reading once it has its response may close the
	// connection before the upstream's end of stream reaches us: the
	// response itself is what counts.
	if !s.Answered && containsAny(p, answerMarkers) {
		s.Answered = true
	}
	if s.ka != nil {
		s.ka.saw(p)
	}
}

// atBoundary reports whether what was written so far ends between events,
// where a keep-alive may go.
func (s *relaySeen) atBoundary() bool {
	return s.tail == [4]byte{} || s.endsEvent()
}

// endsEvent reports whether the bytes written end with a blank line (LF or
// CRLF line ends).
func (s *relaySeen) endsEvent() bool {
	return (s.tail[2] == '\n' && s.tail[3] == '\n') || s.tail == [4]byte{'\r', '\n', '\r', '\n'}
}

// Ended notes the end of the body: err is the read error that ended it.
func (s *relaySeen) Ended(err error) {
	if s == nil {
		return
	}
	if s.Complete = err == io.EOF; s.Complete {
		s.End = time.Now()
	}
}

// brokeOff answers the request with a -32603 event when its stream ended
// with err before the response passed (see relayAnswer).
func (s *relaySeen) brokeOff(w io.Writer, err error) {
	if s == nil || s.id == nil || s.Answered || err == io.EOF {
		return
	}
	var b bytes.Buffer
	if !s.endsEvent() && s.tail != [4]byte{} {
		b.WriteString("\n\n") // end whatever event was cut, so ours parses alone
	}
	e := mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "the upstream broke off its answer before responding: "+upstream.Reason(err))
	_, _ = w.Write(mcpwire.AppendEvent(b.Bytes(), nil, mcpwire.ErrorMessage(s.id, e)))
}

func containsAny(p []byte, markers [][]byte) bool {
	for _, m := range markers {
		if bytes.Contains(p, m) {
			return true
		}
	}
	return false
}

// relayBody is relay; seen, when not nil, is told what the body held.
func (u *Side) relayBody(w http.ResponseWriter, r *http.Request, resp *http.Response, seen *relaySeen) {
	defer resp.Body.Close()
	stream := CopyResponseHeader(w, resp)
	if resp.ContentLength >= 0 && !stream && bodyAllowed(r.Method, resp.StatusCode) {
		// Keep the upstream's framing: a known length stays a length.
		w.Header()["Content-Length"] = []string{strconv.FormatInt(resp.ContentLength, 10)}
	}
	w.WriteHeader(resp.StatusCode)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	flusher, _ := w.(http.Flusher)
	switch {
	case stream && flusher != nil:
		relayStream(w, flusher, resp.Body, buf, seen)
	case seen != nil:
		copySeen(w, resp.Body, buf, seen)
	default:
		_, _ = io.CopyBuffer(WriterOnly{w}, resp.Body, buf)
	}
}

// copySeen copies body to w through buf, telling seen what passes.
func copySeen(w io.Writer, body io.Reader, buf []byte, seen *relaySeen) {
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			seen.Wrote(buf[:n])
		}
		if err != nil {
			seen.Ended(err)
			return
		}
	}
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
// only when the first event takes longer than headerWait. seen (may be
// nil) is told what was written and how the body ended.
func relayStream(w http.ResponseWriter, f http.Flusher, body io.ReadCloser, buf []byte, seen *relaySeen) {
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
	var quiet <-chan time.Time // the keep-alive, when the stream has one
	var ka *Beats
	if seen != nil && seen.ka != nil {
		ka = seen.ka
		t := time.NewTicker(ka.Every)
		defer t.Stop()
		quiet = t.C
	}
	flushed, wrote := false, false
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
		case <-quiet:
			if !wrote && seen.atBoundary() {
				if ka.beat(w) != nil {
					return
				}
				f.Flush()
				flushed = true
			}
			wrote = false
			continue
		}
		wrote = true
		for {
			if len(c.p) > 0 {
				if _, err := w.Write(c.p); err != nil {
					return
				}
				seen.Wrote(c.p)
			}
			if c.err != nil {
				seen.Ended(c.err)
				seen.brokeOff(w, c.err)
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

// CopyResponseHeader copies the upstream's end-to-end response headers and
// reports whether the body is an SSE stream.
func CopyResponseHeader(w http.ResponseWriter, resp *http.Response) (stream bool) {
	CopyUpstreamHeader(w.Header(), resp.Header)
	return IsStream(resp)
}

// CopyUpstreamHeader copies an upstream response's end-to-end headers to
// dst, keeping the CORS answer the front door made for an allowed Origin
// (frontdoor.go): the upstream's own Access-Control-* would otherwise
// replace it, and the browser would refuse the answer.
func CopyUpstreamHeader(dst, src http.Header) {
	origin := dst["Access-Control-Allow-Origin"]
	if origin == nil {
		upstream.CopyHeader(dst, src)
		return
	}
	expose := dst["Access-Control-Expose-Headers"]
	upstream.CopyHeader(dst, src)
	for k := range dst {
		if strings.HasPrefix(k, "Access-Control-") {
			delete(dst, k)
		}
	}
	dst["Access-Control-Allow-Origin"], dst["Access-Control-Expose-Headers"] = origin, expose
	if !strings.Contains(strings.Join(dst.Values("Vary"), ","), "Origin") {
		dst.Add("Vary", "Origin")
	}
}

func IsStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	if ct == "text/event-stream" {
		return true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// WriterOnly hides ReadFrom, so io.CopyBuffer uses our pooled buffer.
type WriterOnly struct{ io.Writer }

// bodyAllowed reports whether a response may carry a body (RFC 9110 §6.4.1).
func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status != http.StatusNoContent &&
		status != http.StatusNotModified && status >= 200
}
