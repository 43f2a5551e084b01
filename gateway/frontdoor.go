package gateway

// The front door: what every request to the MCP endpoint passes before it
// is routed. A browser page may call the endpoint only from an allowed
// Origin (MCP 2026-07-28, Streamable HTTP transport: servers MUST validate
// Origin, against DNS rebinding); a request carries at most one
// Authorization (the owner is made from it, and the upstream must see the
// same credential) and at most one Mcp-Session-Id (the one checked is the
// one served); and what a client says about addresses
// (Forwarded, X-Forwarded-*) is not passed on as if a proxy had said it.

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/taskgate/taskgate/gateway/internal/identity"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// originPolicy decides which Origin headers are allowed.
type originPolicy struct {
	any     bool                // "*": every origin
	exact   map[string]bool     // allowed origins, normalized
	hosts   map[string]bool     // the default: these hosts, any scheme and port
	refusal func(string) string // the 403's message for an origin
}

// newOriginPolicy builds the policy of Config.AllowedOrigins (nil: the
// default of localhost and listenHost).
func newOriginPolicy(allowed []string, listenHost string) (*originPolicy, error) {
	p := &originPolicy{exact: map[string]bool{}}
	if allowed == nil {
		p.hosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
		if h := strings.Trim(listenHost, "[]"); h != "" && !net.ParseIP(h).IsUnspecified() {
			p.hosts[strings.ToLower(h)] = true
		}
		return p, nil
	}
	for _, o := range allowed {
		if o == "*" {
			p.any = true
			continue
		}
		n, ok := normalOrigin(o)
		if !ok {
			return nil, fmt.Errorf("gateway: allowed origin %q is not an origin (scheme://host[:port], nothing else)", o)
		}
		p.exact[n] = true
	}
	return p, nil
}

// normalOrigin is origin as scheme://host[:port], lower case, the
// scheme's default port left out; ok is false for anything else ("null",
// a path, userinfo).
func normalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, true
}

func (p *originPolicy) allows(origin string) bool {
	if p.any {
		return true
	}
	n, ok := normalOrigin(origin)
	if !ok {
		return false
	}
	if p.exact[n] {
		return true
	}
	u, _ := url.Parse(n)
	return p.hosts[u.Hostname()]
}

// corsHeaders are the request headers a browser client of MCP sends.
const corsHeaders = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"

// frontDoor applies the front door to a request of the MCP endpoint. It
// answers (and reports false) a request it refuses and a CORS preflight;
// an allowed cross-origin request goes on with its CORS headers set.
func (h *Handler) frontDoor(w http.ResponseWriter, r *http.Request) bool {
	if len(r.Header.Values("Authorization")) > 1 {
		h.log.Warn().Str("op", "auth").Int("status", http.StatusBadRequest).Str("remote", r.RemoteAddr).Msg("request refused: more than one Authorization header")
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeInvalidRequest,
			"Invalid Request: more than one Authorization header; send one credential"))
		return false
	}
	if len(r.Header.Values("Mcp-Session-Id")) > 1 {
		// The gateway checks the first (internal/identity/sessionbind.go);
		// a server that read another would serve a session nobody checked.
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeInvalidRequest,
			"Invalid Request: more than one Mcp-Session-Id header; send one session"))
		return false
	}
	identity.DropForwarding(r.Header)
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's cross-origin request
	}
	if !h.origins.allows(origin) {
		h.log.Warn().Str("op", "origin").Str("origin", origin).Msg("request from a disallowed Origin refused")
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusForbidden, mcpwire.CodeInvalidRequest,
			"Forbidden: Origin "+origin+" is not allowed here (the gateway's --allowed-origins)"))
		return false
	}
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", origin)
	hdr.Add("Vary", "Origin")
	hdr.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		hdr.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
		allow := corsHeaders
		if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
			allow = asked // the origin is allowed: so are the headers it sends (Mcp-Param-*)
		}
		hdr.Set("Access-Control-Allow-Headers", allow)
		hdr.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}
