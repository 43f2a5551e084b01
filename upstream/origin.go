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
// metadata names. It carries header (what the client sent) and nothing of
// the gateway's: neither Options.Header nor the URL's credentials. These
// paths serve anonymous clients (metadata is public, RFC 8414 §3, RFC
// 9728 §3; authorization and dynamic registration take no credential,
// RFC 7591 §3; the token endpoint takes the client's own, RFC 6749
// §2.3.1), and the operator's --upstream-header is whatever the upstream
// trusts the gateway with (an API key as much as an Authorization): sent
// here, it would let any client reach the upstream's origin as the
// operator.
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
	name, _ := ctx.Value(methodKey{}).(string)
	if name == "" {
		name = method
	}
	return c.roundTrip(c.rt, req, name)
}
