package upstreamside

// What the fronts ask of the upstream for themselves: every request they
// make goes through these methods, never through the upstream.Client
// directly, so the upstream side stays the one place that knows the
// Client (the runner's calls go through its own upstreamCaller).

import (
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/upstream"
)

// Call sends req on session s and waits for its answer.
func (u *Side) Call(ctx context.Context, s *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions) (*jsonrpc.Response, error) {
	return u.client.Call(ctx, s, req, opts)
}

// Post POSTs body as it is, with header, and hands back the upstream's
// HTTP response for the caller to relay or read.
func (u *Side) Post(ctx context.Context, header http.Header, body io.Reader) (*http.Response, error) {
	return u.client.Forward(ctx, http.MethodPost, header, body)
}

// Pass sends a request the gateway does not handle itself (a session's
// GET stream, its DELETE, a POST no front claims) upstream as it came:
// the relay's one way out, so the Handler, like the fronts, never reaches
// the upstream.Client directly.
func (u *Side) Pass(ctx context.Context, method string, header http.Header, body io.Reader) (*http.Response, error) {
	return u.client.Forward(ctx, method, header, body)
}

// Respond answers a request the upstream sent on session s.
func (u *Side) Respond(ctx context.Context, s *upstream.Session, r *jsonrpc.Response) error {
	return u.client.Respond(ctx, s, r)
}

// CloseSession ends session s upstream (DELETE).
func (u *Side) CloseSession(ctx context.Context, s *upstream.Session) error {
	return u.client.CloseSession(ctx, s)
}
