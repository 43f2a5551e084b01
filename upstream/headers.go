package upstream

import (
	"encoding/base64"
	"encoding/json"
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
	var named []string // the headers src's Connection header names
	for _, v := range src["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				named = append(named, http.CanonicalHeaderKey(f))
			}
		}
	}
	for k, vv := range src {
		if hopByHop[k] || len(named) > 0 && namedIn(named, k) {
			continue
		}
		dst[k] = vv
	}
}

// namedIn reports whether names (canonical) holds name.
func namedIn(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// HeaderValue encodes s for an Mcp-Name or Mcp-Param-* header: as is when
// it is plain printable ASCII without leading or trailing space, else as
// =?base64?…?= (MCP 2026-07-28, Streamable HTTP transport, section "Value
// Encoding"). A value that itself looks like the sentinel is encoded too,
// so it round-trips.
func HeaderValue(s string) string {
	if needsBase64(s) {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
	}
	return s
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	if strings.HasPrefix(s, "=?base64?") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return true
		}
	}
	return false
}

// nameOf returns the params.name (or params.uri) of a tools/call,
// prompts/get or resources/read body, for the Mcp-Name header.
func nameOf(method string, body []byte) (string, bool) {
	switch method {
	case "tools/call", "prompts/get", "resources/read":
	default:
		return "", false
	}
	var m struct {
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return "", false
	}
	if method == "resources/read" {
		return m.Params.URI, m.Params.URI != ""
	}
	return m.Params.Name, m.Params.Name != ""
}
