package sse

// An upstream SSE session: its GET stream, the endpoint it names, what
// goes to that endpoint, and how it ends.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

type session struct {
	bridgesession.Core[*ask] // its GET streams, calls in flight, the server's requests unanswered, what its client declared

	id       string
	endpoint *url.URL           // where its messages are POSTed
	header   http.Header        // end-to-end headers of the client's initialize
	stop     context.CancelFunc // closes the SSE stream
	// principal is whose share the session counts in ("" for none).
	principal string
}

// mcpHeaders are the Streamable HTTP headers between the upstream client
// and the bridge; the SSE server gets none of them (the bridge sets its
// own Accept and Content-Type).
var mcpHeaders = map[string]bool{
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true, "Mcp-Method": true, "Mcp-Name": true,
	"Accept": true, "Content-Type": true, "Content-Length": true, "Accept-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Proxy-Connection": true, "Proxy-Authorization": true,
}

// passHeaders are h's headers for the SSE server: its authorization, the
// operator's headers, trace context.
func passHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, vv := range h {
		if mcpHeaders[k] || strings.HasPrefix(k, "Mcp-Param-") {
			continue
		}
		out[k] = vv
	}
	return out
}

// connect opens s's SSE stream and reads its endpoint event; the stream is
// then read by read. The stream lives until s.stop.
func (b *Bridge) connect(s *session) (*mcpwire.Reader, io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url.String(), nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	for k, vv := range s.header {
		req.Header[k] = vv
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	timer := time.AfterFunc(b.opts.InitTimeout, cancel) // stopped once the endpoint came
	defer timer.Stop()
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("GET %s: no answer within %s", b.url.Redacted(), b.opts.InitTimeout)
		}
		return nil, nil, fmt.Errorf("GET %s: %v", b.url.Redacted(), err)
	}
	if err := checkStream(resp); err != nil {
		resp.Body.Close()
		cancel()
		return nil, nil, fmt.Errorf("GET %s: %v", b.url.Redacted(), err)
	}
	rd := mcpwire.NewReader(resp.Body, b.opts.MaxMessage)
	endpoint, err := firstEndpoint(rd, b.url)
	if !timer.Stop() && err != nil {
		err = fmt.Errorf("no endpoint event within %s", b.opts.InitTimeout)
	}
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, nil, fmt.Errorf("the SSE stream of %s: %v", b.url.Redacted(), err)
	}
	s.endpoint = endpoint
	return rd, resp.Body, nil
}

// checkStream says why resp is not the SSE stream a GET on the server's
// URL opens (MCP 2024-11-05, Transports, "HTTP with SSE").
func checkStream(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("HTTP %d %s, not an SSE stream%s", resp.StatusCode, http.StatusText(resp.StatusCode), quoteBody(snippet))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		return fmt.Errorf("Content-Type %q, not text/event-stream: not an SSE stream", resp.Header.Get("Content-Type"))
	}
	return nil
}

func quoteBody(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%q)", b)
}

// firstEndpoint reads the stream's first event, which must be "endpoint"
// (MCP 2024-11-05, Transports, "HTTP with SSE": "When a client connects,
// the server MUST send an endpoint event containing a URI for the client to
// use for sending messages"), and returns the URI it names, resolved
// against base.
func firstEndpoint(rd *mcpwire.Reader, base *url.URL) (*url.URL, error) {
	ev, err := rd.Next()
	switch {
	case errors.Is(err, io.EOF):
		return nil, errors.New("it ended before its first event (the endpoint event)")
	case errors.Is(err, mcpwire.ErrTooLarge):
		return nil, fmt.Errorf("its first event is too large: %v", err)
	case err != nil:
		return nil, fmt.Errorf("it broke before its endpoint event: %v", err)
	case ev.Name != "endpoint":
		name := ev.Name
		if name == "" {
			name = "message"
		}
		return nil, fmt.Errorf("its first event is %q, not \"endpoint\": the server must name where to POST first (MCP 2024-11-05, Transports, \"HTTP with SSE\")", name)
	}
	return ResolveEndpoint(base, string(ev.Data))
}

// ResolveEndpoint resolves the URI of an endpoint event against the SSE
// URL base and checks that it is on base's origin. A server on another
// origin would get the client's messages (its arguments, its answers to
// elicitation) from a stream it does not own, so it is refused.
func ResolveEndpoint(base *url.URL, data string) (*url.URL, error) {
	data = strings.TrimSpace(data)
	if data == "" {
		return nil, errors.New("the endpoint event names no URI")
	}
	ref, err := url.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("the endpoint event's data %q is not a URI", truncate(data))
	}
	u := base.ResolveReference(ref)
	u.Fragment, u.RawFragment = "", ""
	if u.User != nil && ref.User != nil {
		return nil, errors.New("the endpoint event's URI carries credentials; refused")
	}
	if !sameOrigin(base, u) {
		return nil, fmt.Errorf("the endpoint event names %s, on another origin than %s; taskgate POSTs the client's messages only to the SSE server's own origin",
			u.Redacted(), origin(base))
	}
	return u, nil
}

// sameOrigin compares scheme, host and port (RFC 6454), default ports
// made explicit.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

func truncate(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// read passes the messages of s's stream on until it ends, then ends s.
func (b *Bridge) read(s *session, rd *mcpwire.Reader, body io.ReadCloser) {
	defer b.wg.Done()
	defer body.Close()
	for {
		ev, err := rd.Next()
		if err != nil {
			b.lost(s, streamEnd(err, b.opts.MaxMessage))
			return
		}
		switch ev.Name {
		case "", "message":
			b.dispatchData(s, ev.Data)
		default: // another endpoint event, or one the transport does not define
			b.log.Debug().Str("op", "sse").Str("session", s.id).Str("event", ev.Name).Msg("an SSE event that is not a message; ignored")
		}
	}
}

// streamEnd says why a session's stream ended.
func streamEnd(err error, max int) string {
	switch {
	case errors.Is(err, io.EOF):
		return "the server closed its SSE stream"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the server's SSE stream ended inside an event"
	case errors.Is(err, mcpwire.ErrTooLarge):
		return fmt.Sprintf("the server sent an event larger than %d bytes (what follows cannot be told apart from it)", max)
	case errors.Is(err, context.Canceled):
		return "the session's SSE stream was closed"
	}
	return "the server's SSE stream broke: " + err.Error()
}

// lost ends s, whose stream ended (unless s ended first, which closed it).
func (b *Bridge) lost(s *session, why string) {
	b.mu.Lock()
	if !s.Ended {
		// Logged before the session ends: its client, told so by the
		// end, must find the line already written (TestLostStream).
		b.log.Warn().Str("op", "sse").Str("session", s.id).Str("reason", why).
			Msg("the upstream's HTTP+SSE session ended; its client gets 404 and initializes again")
	}
	b.endSessionLocked(s, why)
	b.mu.Unlock()
	s.stop()
}

// errGone: the server answered a POST with 404, so it no longer knows the
// session (it restarted, or dropped it).
var errGone = errors.New("the server no longer knows this session (HTTP 404 on its endpoint)")

// post hands msg to s's endpoint, with the headers h (the client
// request's, else the session's). The answer, if any, comes on the stream.
func (b *Bridge) post(s *session, h http.Header, msg []byte) error {
	if len(msg) > b.opts.MaxMessage {
		return fmt.Errorf("the message is larger than %d bytes", b.opts.MaxMessage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), postTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint.String(), bytes.NewReader(msg))
	if err != nil {
		return err
	}
	if h == nil {
		h = s.header
	}
	for k, vv := range h {
		req.Header[k] = vv
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("POST %s: %v", s.endpoint.Redacted(), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errGone
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("POST %s: HTTP %d %s%s", s.endpoint.Redacted(), resp.StatusCode, http.StatusText(resp.StatusCode), quoteBody(snippet))
	}
	return nil
}

// postAsync is post for the stream's reader, which must not wait on the
// server (it may be writing to the stream meanwhile).
// Each is bounded by postTimeout. Nothing goes to an ended session's
// server: its stream is closed, which ended the session there too.
func (b *Bridge) postAsync(s *session, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.postAsyncLocked(s, msg)
}

func (b *Bridge) postAsyncLocked(s *session, msg []byte) {
	if s.Ended {
		return
	}
	go func() {
		if err := b.post(s, nil, msg); err != nil {
			b.log.Debug().Str("op", "sse").Str("session", s.id).Err(err).Msg("a message to the server was not delivered")
		}
	}()
}

// endSessionLocked drops s: its GET streams close, its calls in flight
// fail saying why, the server's requests it held are dropped. The caller
// calls s.stop once b.mu is released, which closes the SSE stream (and so
// ends the server's session).
func (b *Bridge) endSessionLocked(s *session, why string) {
	if s.Ended {
		return
	}
	s.Ended = true
	if b.sessions[s.id] == s {
		delete(b.sessions, s.id)
	}
	b.owned--
	b.shares.GiveLocked(s.principal)
	s.Streams.CloseLocked()
	b.calls.FailPeerLocked(s, func(c *call) []byte {
		return errorMessage(c.OrigID, -32603, "the upstream's HTTP+SSE session ended: "+why)
	})
}

// parseURL is upstream.ParseURL, for tests.
var parseURL = upstream.ParseURL
