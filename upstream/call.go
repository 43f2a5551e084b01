package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// maxEventBytes bounds one SSE event or JSON answer, so a broken upstream
// cannot make the gateway buffer without limit. Tool results larger than
// this are refused.
const maxEventBytes = 64 << 20

// Session is what every request on one upstream MCP session carries.
// The zero value is a sessionless (stateless) upstream.
type Session struct {
	// ID is the upstream's Mcp-Session-Id; empty for a stateless upstream.
	ID string
	// ProtocolVersion is sent as MCP-Protocol-Version when set.
	ProtocolVersion string
	// Header holds further headers sent on every request, typically the
	// client's Authorization. It is not modified.
	Header http.Header
	// Authorization, when set, is asked on every request for the
	// Authorization to send instead of Header's ("": Header's): the
	// freshest token of the client a task's later requests are made for.
	Authorization func(ctx context.Context) string
}

// CallOptions receive what the upstream sends while it works on a call.
// Both callbacks run on the goroutine reading the response stream, in
// stream order; they must not block for long. A server→client request is
// answered later, from any goroutine, with Client.Respond.
type CallOptions struct {
	// OnRequest receives server→client requests (elicitation/create,
	// sampling/createMessage, roots/list, ping). Nil means such requests
	// are answered with a -32601 error at once, so the upstream does not
	// wait forever.
	OnRequest func(*jsonrpc.Request)
	// OnNotification receives notifications (progress, logging, ...).
	// Nil means they are dropped.
	OnNotification func(*jsonrpc.Request)
	// Body, when set, is req already encoded (jsonrpc.EncodeMessage), and
	// Name its Mcp-Name: a caller that runs Call on a goroutine which then
	// waits long does the encoding, which needs a deep stack, on its own.
	Body []byte
	Name string
}

var (
	// ErrSessionNotFound: the upstream answered 404 to a request carrying a
	// session id, so the session is gone and must be initialized again
	// (Streamable HTTP, "Session Management").
	ErrSessionNotFound = errors.New("the upstream no longer knows the session")
	// ErrNoResponse: the upstream closed the stream without answering.
	ErrNoResponse = errors.New("the upstream closed the stream without a response")
)

// StatusError is an HTTP error status from the upstream that carried no
// JSON-RPC answer. URL (its password masked) is for logs; the message does
// not name it.
type StatusError struct {
	URL    string
	Status int
	Body   string // at most 512 bytes of it, for the message
	// Authenticate is the answer's WWW-Authenticate challenges on a 401 or
	// 403, which a gateway answering for the upstream passes on (MCP
	// Authorization: the client learns where to get a token from them).
	Authenticate []string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("the upstream answered HTTP %d", e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// ProtocolError means the upstream's bytes are not valid MCP. URL (its
// password masked) is for logs; the message does not name it.
type ProtocolError struct {
	URL string
	Err error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("the upstream sent an invalid message: %v", e.Err)
}
func (e *ProtocolError) Unwrap() error { return e.Err }

// Call sends req (which must have an ID) on session s and returns the
// upstream's response, which may carry a JSON-RPC error in Response.Error.
// A Go error means no response was had: the upstream was unreachable
// (ErrUnreachable), the session is gone (ErrSessionNotFound), the stream
// broke (ErrNoResponse), ctx ended, or the bytes were not MCP.
//
// Cancelling ctx aborts the HTTP request. To also tell the upstream to stop
// working, send Cancel: MCP says a dropped connection is not a cancellation.
func (c *Client) Call(ctx context.Context, s *Session, req *jsonrpc.Request, opts CallOptions) (*jsonrpc.Response, error) {
	r, _, err := c.call(ctx, s, req, opts)
	return r, err
}

// Encode is req encoded for Call's CallOptions.Body, and its Mcp-Name for
// CallOptions.Name.
func Encode(req *jsonrpc.Request) (body []byte, name string, err error) {
	if body, err = jsonrpc.EncodeMessage(req); err != nil {
		return nil, "", err
	}
	name, _ = nameOf(req.Method, body)
	return body, name, nil
}

// call is Call that also returns the HTTP response headers.
func (c *Client) call(ctx context.Context, s *Session, req *jsonrpc.Request, opts CallOptions) (*jsonrpc.Response, http.Header, error) {
	body, err := encodeCall(req, opts)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.postNamed(ctx, s, req.Method, opts.Name, body)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.answer(ctx, s, resp, req.ID, opts)
	return r, resp.Header, err
}

// encodeCall is the body of a call of req: opts.Body, or req encoded.
func encodeCall(req *jsonrpc.Request, opts CallOptions) ([]byte, error) {
	if !req.ID.IsValid() {
		return nil, fmt.Errorf("upstream: call %s: request has no id", req.Method)
	}
	if opts.Body != nil {
		return opts.Body, nil
	}
	body, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return nil, fmt.Errorf("upstream: encode %s: %w", req.Method, err)
	}
	return body, nil
}

// answer reads the upstream's answer to request id from resp, and closes
// resp's body.
func (c *Client) answer(ctx context.Context, s *Session, resp *http.Response, id jsonrpc.ID, opts CallOptions) (*jsonrpc.Response, error) {
	defer resp.Body.Close()
	if err := c.checkStatus(resp, s); err != nil {
		if r := c.errorAnswer(err, id); r != nil {
			return r, nil
		}
		return nil, err
	}
	var (
		r   *jsonrpc.Response
		err error
	)
	switch mediaType(resp) {
	case "text/event-stream":
		r, err = c.readStream(ctx, s, resp.Body, id, opts)
		if err == nil {
			drainStream(resp.Body)
		}
	case "application/json":
		var data []byte
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxEventBytes+1))
		switch {
		case err != nil:
			err = c.broken(ctx, err)
		case len(data) > maxEventBytes:
			err = &ProtocolError{URL: c.URL(), Err: fmt.Errorf("response larger than %d bytes", maxEventBytes)}
		default:
			r, err = c.decodeResponse(data, id)
		}
	default:
		err = &ProtocolError{URL: c.URL(), Err: fmt.Errorf("unexpected Content-Type %q for a request", resp.Header.Get("Content-Type"))}
	}
	return r, err
}

// mediaType is resp's Content-Type without its parameters.
func mediaType(resp *http.Response) string {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return ct
}

// readStream consumes an SSE response until the response to id arrives.
func (c *Client) readStream(ctx context.Context, s *Session, body io.Reader, id jsonrpc.ID, opts CallOptions) (*jsonrpc.Response, error) {
	sr := mcpwire.NewReader(body, maxEventBytes)
	for {
		if r, err, end := c.nextEvent(ctx, s, sr, id, opts); end {
			return r, err
		}
	}
}

// nextEvent reads one event of an SSE response and acts on it; end says
// the call is over: r is the response to id, or err why there is none.
func (c *Client) nextEvent(ctx context.Context, s *Session, sr *mcpwire.Reader, id jsonrpc.ID, opts CallOptions) (r *jsonrpc.Response, err error, end bool) {
	ev, err := sr.Next()
	if err != nil {
		if err == io.EOF {
			return nil, c.broken(ctx, ErrNoResponse), true
		}
		return nil, c.broken(ctx, err), true
	}
	if len(ev.Data) == 0 {
		return nil, nil, false // a comment (keep-alive), or an event without data
	}
	msg, err := jsonrpc.DecodeMessage(ev.Data)
	if err != nil {
		return nil, &ProtocolError{URL: c.URL(), Err: err}, true
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if m.ID == id {
			return m, nil, true
		}
		// A response to some other request on a shared stream: not ours.
	case *jsonrpc.Request:
		switch {
		case m.ID.IsValid() && opts.OnRequest != nil:
			opts.OnRequest(m)
		case m.ID.IsValid():
			c.refuse(ctx, s, m)
		case opts.OnNotification != nil:
			opts.OnNotification(m)
		}
	}
	return nil, nil, false
}

// refuse answers a server→client request nobody handles, so the upstream
// does not wait for an answer that will never come.
func (c *Client) refuse(ctx context.Context, s *Session, m *jsonrpc.Request) {
	_ = c.Respond(ctx, s, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
		Code: jsonrpc.CodeMethodNotFound, Message: "method " + m.Method + " is not supported by this client"}})
}

// broken explains a stream that ended early: the caller's own cancellation
// is returned as such; anything else is the upstream's doing.
func (c *Client) broken(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, ErrNoResponse) {
		return err
	}
	return fmt.Errorf("%w: %s", ErrNoResponse, Reason(err))
}

func (c *Client) decodeResponse(data []byte, id jsonrpc.ID) (*jsonrpc.Response, error) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, &ProtocolError{URL: c.URL(), Err: err}
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok || r.ID != id {
		return nil, &ProtocolError{URL: c.URL(), Err: fmt.Errorf("the JSON body is not the response to request %v", id.Raw())}
	}
	return r, nil
}

// errorAnswer returns the JSON-RPC error response an HTTP error status
// carried, if it carried one for this id (stateless servers answer a bad
// request with HTTP 400 and a JSON-RPC error body).
func (c *Client) errorAnswer(err error, id jsonrpc.ID) *jsonrpc.Response {
	var se *statusBodyError
	if !errors.As(err, &se) {
		return nil
	}
	r, derr := c.decodeResponse(se.body, id)
	if derr != nil || r.Error == nil {
		return nil
	}
	return r
}

// statusBodyError keeps the body of an error status for errorAnswer.
type statusBodyError struct {
	*StatusError
	body []byte
}

func (e *statusBodyError) Unwrap() error { return e.StatusError }

// checkStatus turns a non-2xx status into an error.
func (c *Client) checkStatus(resp *http.Response, s *Session) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if resp.StatusCode == http.StatusNotFound && s != nil && s.ID != "" {
		return ErrSessionNotFound
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	short := body
	if len(short) > 512 {
		short = short[:512]
	}
	se := &StatusError{URL: c.URL(), Status: resp.StatusCode, Body: string(bytes.TrimSpace(short))}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		se.Authenticate = resp.Header.Values("WWW-Authenticate")
	}
	return &statusBodyError{StatusError: se, body: body}
}

// post sends one JSON-RPC message.
func (c *Client) post(ctx context.Context, s *Session, method string, body []byte) (*http.Response, error) {
	return c.postNamed(ctx, s, method, "", body)
}

// postNamed is post with the request's Mcp-Name given (name; "": read from
// body).
func (c *Client) postNamed(ctx context.Context, s *Session, method, name string, body []byte) (*http.Response, error) {
	req, span, err := c.newPost(ctx, s, method, name, body)
	if err != nil {
		return nil, err
	}
	if method == "" {
		method = "response"
	}
	resp, err := c.roundTrip(c.own, req, method)
	endSpan(span, resp, err)
	return resp, err
}

// newPost is the request of post, and its client span (nil without a
// tracer), which the caller ends (endSpan).
func (c *Client) newPost(ctx context.Context, s *Session, method, name string, body []byte) (*http.Request, trace.Span, error) {
	var span trace.Span
	if c.tracer != nil {
		name := method
		if name == "" {
			name = "response"
		}
		ctx, span = c.startSpan(ctx, name)
		if method != "" {
			body = withTraceMeta(ctx, body)
		}
	}
	req, err := c.newRequest(ctx, http.MethodPost, bytes.NewReader(body))
	if err != nil {
		endSpan(span, nil, err)
		return nil, nil, err
	}
	h := req.Header
	if s != nil {
		for k, vv := range s.Header {
			h[k] = vv
		}
		if s.Authorization != nil {
			if v := s.Authorization(ctx); v != "" {
				h["Authorization"] = []string{v}
			}
		}
		if s.ID != "" {
			h.Set("Mcp-Session-Id", s.ID)
		}
		if s.ProtocolVersion != "" {
			h.Set("MCP-Protocol-Version", s.ProtocolVersion)
		}
	}
	c.setHeader(h)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if method != "" {
		// Standard request headers (MCP 2026-07-28, Streamable HTTP
		// transport): required by modern servers, ignored by older ones.
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", HeaderValue(name))
		} else if name, ok := nameOf(method, body); ok {
			h.Set("Mcp-Name", HeaderValue(name))
		}
	}
	if span != nil {
		inject(ctx, h)
	}
	return req, span, nil
}

// Respond posts the answer to a server→client request on session s.
func (c *Client) Respond(ctx context.Context, s *Session, r *jsonrpc.Response) error {
	body, err := jsonrpc.EncodeMessage(r)
	if err != nil {
		return fmt.Errorf("upstream: encode response: %w", err)
	}
	return c.send(ctx, s, "", body)
}

// Notify posts a notification on session s.
func (c *Client) Notify(ctx context.Context, s *Session, method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("upstream: encode %s: %w", method, err)
	}
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
	if err != nil {
		return fmt.Errorf("upstream: encode %s: %w", method, err)
	}
	return c.send(ctx, s, method, body)
}

// Cancel tells the upstream to stop working on request id
// (notifications/cancelled, MCP "Cancellation"). The caller should also
// cancel the context of the Call, which aborts the HTTP request.
func (c *Client) Cancel(ctx context.Context, s *Session, id jsonrpc.ID, reason string) error {
	params := map[string]any{"requestId": id.Raw()}
	if reason != "" {
		params["reason"] = reason
	}
	return c.Notify(ctx, s, "notifications/cancelled", params)
}

// send posts a notification or response, which the upstream accepts with
// 202 (or any 2xx) and no body we need.
func (c *Client) send(ctx context.Context, s *Session, method string, body []byte) error {
	resp, err := c.post(ctx, s, method, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := c.checkStatus(resp, s); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// Draining limits: the rest of a stream after its response is normally just
// its end, already on the wire.
const (
	drainBytes = 64 << 10
	drainWait  = 50 * time.Millisecond
)

// drainStream reads what is left of a response stream once its response
// arrived, so the connection goes back to the pool: Go closes a connection
// whose body was closed before its end, and a new TCP connection per call
// costs more than the call. A server that keeps the stream open after the
// response (Streamable HTTP says it SHOULD close it) is cut after drainWait.
func drainStream(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainBytes))
	t.Stop()
}
