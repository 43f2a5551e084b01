package stdio

import (
	"net/http"

	"github.com/taskgate/taskgate/upstream"
)

// URL is the upstream URL to give the upstream client with Transport: the
// host is never resolved.
const URL = "http://stdio.taskgate.invalid/mcp"

// Transport returns an http.RoundTripper that serves each request with the
// Bridge in process: no socket, so nothing else on the machine can reach
// the child. The response body streams as the Bridge writes it.
func (b *Bridge) Transport() http.RoundTripper { return upstream.InProcessTransport(b) }
