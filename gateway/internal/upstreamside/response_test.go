package upstreamside

import (
	"io"
	"net/http"
	"strings"
)

// upstreamResponse is an upstream HTTP response with the given content type and body.
func upstreamResponse(ct, body string) *http.Response {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": {ct}, "Mcp-Session-Id": {"s-1"}, "X-Custom": {"kept"}, "Content-Length": {"999"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
	}
}
