package upstream

import (
	"net/http"
	"strings"
)

// hopByHop are the headers that describe one connection, not the message
// (RFC 9110 §7.6.1). A proxy must not forward them.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	// Length and host belong to the hop too: Go recomputes them.
	"Content-Length": true,
	"Host":           true,
}

// CopyHeader adds every end-to-end header of src to dst: everything except
// the hop-by-hop headers and those src's Connection header names. MCP's own
// headers (Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name,
// Mcp-Param-*, Last-Event-ID) and Authorization, Accept, Content-Type and any
// unknown header pass untouched. Values are shared, not copied: neither
// side may modify them afterwards.
func CopyHeader(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if hopByHop[k] {
			continue
		}
		if len(conn) > 0 && namedIn(conn, k) {
			continue
		}
		dst[k] = vv
	}
}

// namedIn reports whether the Connection header values list name.
func namedIn(connection []string, name string) bool {
	for _, v := range connection {
		for _, f := range strings.Split(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(f)) == name {
				return true
			}
		}
	}
	return false
}
