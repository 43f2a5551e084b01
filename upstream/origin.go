package upstream

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// Endpoint is the upstream's MCP endpoint without its credentials: the
// origin and path the gateway maps the upstream's OAuth discovery from
// (MCP 2025-06-18, Authorization).
func (c *Client) Endpoint() *url.URL {
	u := *c.url
	u.User = nil
	return &u
}

// ForwardPath is Forward to another path, escapedPath as it goes on the
// wire, (and raw query) on the upstream's origin: its OAuth metadata and,
// for a server that is its own authorization server, the endpoints that
// metadata names. Options.Header goes with it, as to the MCP endpoint,
// except an Authorization: on these endpoints Authorization is the
// client's own credential (client_secret_basic at the token endpoint, RFC
// 6749 §2.3.1) or none (authorization, dynamic registration, RFC 7591
// §3), and the operator's would replace it or sign an anonymous client in
// as the operator. The URL's credentials do not go either.
func (c *Client) ForwardPath(ctx context.Context, method, escapedPath, rawQuery string, header http.Header, body io.Reader) (*http.Response, error) {
	p, err := url.PathUnescape(escapedPath)
	if err != nil {
		return nil, err
	}
	req, err := c.newRequest(ctx, method, body)
	if err != nil {
		return nil, err
	}
	u := c.Endpoint()
	u.Path, u.RawPath, u.RawQuery, u.Fragment = p, escapedPath, rawQuery, ""
	req.URL = u
	CopyHeader(req.Header, header)
	for k, vv := range c.header {
		if http.CanonicalHeaderKey(k) != "Authorization" {
			req.Header[k] = vv
		}
	}
	name, _ := ctx.Value(methodKey{}).(string)
	if name == "" {
		name = method
	}
	return c.roundTrip(c.rt, req, name)
}
