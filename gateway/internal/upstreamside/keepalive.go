package upstreamside

// Keep-alive for synchronous calls. A tool that runs for minutes dies on
// the client's request timeout (60 s in the TypeScript SDK) or on a load
// balancer's idle timeout long before it answers, when nothing crosses the
// connection meanwhile. So while a plain tools/call is in flight, its
// answer stream carries something every Config.KeepAlive without other
// traffic:
//
//	the client gave a progressToken → notifications/progress for it, with
//	                                  the time the tool has run (clients
//	                                  that reset their timeout on progress
//	                                  keep waiting); once the upstream sends
//	                                  progress of its own, comments instead
//	otherwise                       → an SSE comment (": keep-alive"),
//	                                  which clients ignore and proxies
//	                                  count as traffic
//
// An upstream that answers with a stream gets its quiet gaps filled
// (between events, never inside one). One that has sent nothing yet (a
// JSON answer comes only at the end) is waited for on a stream the
// gateway opens itself: the client asked for JSON or SSE
// (Streamable HTTP), so its answer then arrives as the stream's one
// event. The upstream's own answers and messages are unchanged.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// DefaultKeepAlive is Config.KeepAlive's default.
const DefaultKeepAlive = 15 * time.Second

// Beats is one call's keep-alive state: the beats it sends while its answer is quiet.
type Beats struct {
	Every    time.Duration
	msg      *mcpwire.Message // the call; its progressToken is read at the first beat (most calls never beat)
	token    json.RawMessage  // the client's progressToken; nil: comments
	read     bool             // token has been read from msg
	start    time.Time
	beats    int
	Upstream bool // the upstream sends progress itself
}

// KeepAliveFor returns the keep-alive of a forwarded request, or nil: only
// a tools/call is kept alive, when Config.KeepAlive is on.
func (u *Side) KeepAliveFor(msg *mcpwire.Message) *Beats {
	if u.KeepAlive <= 0 || msg.Kind != mcpwire.KindRequest || msg.MethodName() != "tools/call" {
		return nil
	}
	return &Beats{Every: u.KeepAlive, start: time.Now(), msg: msg}
}

var progressMarker = []byte(`"notifications/progress"`)

// saw notes what the upstream sent: its own progress turns ours off.
func (k *Beats) saw(p []byte) {
	if !k.Upstream && bytes.Contains(p, progressMarker) {
		k.Upstream = true
	}
}

// next is the next keep-alive message: a progress notification, or nil
// for a comment.
func (k *Beats) next() []byte {
	k.beats++
	if !k.read {
		k.read = true
		if t := k.msg.Meta()["progressToken"]; len(t) > 0 && string(t) != "null" {
			k.token = t
		}
	}
	if k.token == nil || k.Upstream {
		return nil
	}
	return mcpwire.Notification("notifications/progress", mcpwire.MustMarshal(map[string]any{
		"progressToken": k.token,
		"progress":      k.beats,
		"message":       fmt.Sprintf("taskgate: the tool is still running (%s)", time.Since(k.start).Round(time.Second)),
	}))
}

// beat writes one keep-alive to a raw stream w.
func (k *Beats) beat(w io.Writer) error {
	msg := k.next()
	if msg == nil {
		_, err := io.WriteString(w, ": keep-alive\n\n")
		return err
	}
	_, err := w.Write(mcpwire.AppendEvent(nil, nil, msg))
	return err
}

// BeatOn writes one keep-alive on a stream the gateway writes itself.
func (k *Beats) BeatOn(sse *mcpwire.Writer) error {
	if msg := k.next(); msg != nil {
		return sse.SendRaw(msg)
	}
	return sse.Comment("keep-alive")
}

// awaitHeaders sends a request with send and waits for the upstream's
// response headers, keeping the client's answer alive meanwhile. started
// reports that it opened the client's stream itself (200,
// text/event-stream), so the answer must follow as events
// (answerOnStream). A client that goes away ends the wait with its
// context's error.
func awaitHeaders(w http.ResponseWriter, r *http.Request, ka *Beats, send func() (*http.Response, error)) (resp *http.Response, started bool, err error) {
	// The round trip runs on this goroutine; a timer opens the client's
	// stream and beats only if the headers take longer than ka.Every (most
	// calls answer sooner, and then no other goroutine ever runs). mu
	// orders the timer's writes before the caller's: once done is set, the
	// timer no longer touches w.
	var mu sync.Mutex
	done := false
	flusher, _ := w.(http.Flusher)
	mu.Lock()
	var timer *time.Timer
	timer = time.AfterFunc(ka.Every, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if ka.beat(w) == nil && flusher != nil {
			flusher.Flush()
		}
		timer.Reset(ka.Every)
	})
	mu.Unlock()
	resp, err = send() // the request's context ends the upstream request too
	mu.Lock()
	done = true
	timer.Stop()
	mu.Unlock()
	if cerr := r.Context().Err(); cerr != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, started, cerr
	}
	return resp, started, err
}

// answerOnStream writes the upstream's answer to request id on the stream
// awaitHeaders opened: a stream's events relayed (kept alive as any
// relayed stream), a JSON answer as one event, anything else as a
// JSON-RPC error event. It returns what it saw of the answer, for latency
// learning.
func answerOnStream(w http.ResponseWriter, resp *http.Response, id json.RawMessage, ka *Beats) relaySeen {
	defer resp.Body.Close()
	seen := relaySeen{id: id, ka: ka}
	flusher, _ := w.(http.Flusher)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusOK && mt == "text/event-stream" && flusher != nil:
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		relayStream(w, flusher, resp.Body, *bp, &seen)
		return seen
	case mt == "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
		if err == nil && len(body) <= MaxAnswerBytes && json.Valid(body) {
			body = bytes.TrimSpace(body)
			_, _ = w.Write(mcpwire.AppendEvent(nil, nil, body))
			seen.Wrote(body)
			seen.Ended(io.EOF)
			return seen
		}
	}
	e := mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, fmt.Sprintf("the upstream answered HTTP %d without a JSON-RPC answer", resp.StatusCode))
	_, _ = w.Write(mcpwire.AppendEvent(nil, nil, mcpwire.ErrorMessage(id, e)))
	return seen
}
