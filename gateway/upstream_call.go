package gateway

// What the fronts ask of the upstream for themselves: every request they
// make goes through these methods, never through the upstream.Client
// directly, so the upstream side stays the one place that knows the
// client (the runner's calls go through its own upstreamCaller).

import (
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/upstream"
)

// call sends req on session s and waits for its answer.
func (u *upstreamSide) call(ctx context.Context, s *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions) (*jsonrpc.Response, error) {
	return u.client.Call(ctx, s, req, opts)
}

// post POSTs body as it is, with header, and hands back the upstream's
// HTTP response for the caller to relay or read.
func (u *upstreamSide) post(ctx context.Context, header http.Header, body io.Reader) (*http.Response, error) {
	return u.client.Forward(ctx, http.MethodPost, header, body)
}

// respond answers a request the upstream sent on session s.
func (u *upstreamSide) respond(ctx context.Context, s *upstream.Session, r *jsonrpc.Response) error {
	return u.client.Respond(ctx, s, r)
}

// closeSession ends session s upstream (DELETE).
func (u *upstreamSide) closeSession(ctx context.Context, s *upstream.Session) error {
	return u.client.CloseSession(ctx, s)
}
