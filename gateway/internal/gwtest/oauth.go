package gwtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// OwnServer is an upstream that is its own authorization server (the
// 2025-03-26 revision's default): its MCP endpoint and, on its origin,
// protected resource and authorization server metadata and the endpoints
// they name.
type OwnServer struct {
	Srv     *httptest.Server
	Fetches atomic.Int64 // metadata documents served
	Got     atomic.Value // the last /token request's body
}

// NewOwnServer starts an OwnServer, closed when t ends.
func NewOwnServer(t *testing.T) *OwnServer {
	o := &OwnServer{}
	mcp := testupstream.Handler(testupstream.Options{})
	o.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		switch path.Clean(r.URL.Path) { // as servers that resolve ".." do
		case "/mcp":
			if r.Header.Get("Authorization") == "" {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="say resource_metadata=\"x\"", resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
				http.Error(w, "{}", http.StatusUnauthorized)
				return
			}
			mcp.ServeHTTP(w, r)
		case "/.well-known/oauth-protected-resource/mcp":
			o.Fetches.Add(1)
			WriteJSON(w, map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}, "scopes_supported": []string{"tools"}})
		case "/.well-known/oauth-authorization-server":
			o.Fetches.Add(1)
			WriteJSON(w, map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
				"token_endpoint": base + "/oauth/token", "registration_endpoint": base + "/register",
				"jwks_uri": "https://keys.example/jwks", "response_types_supported": []string{"code"}})
		case "/authorize":
			http.Redirect(w, r, base+"/login?"+r.URL.RawQuery, http.StatusFound)
		case "/oauth/token":
			b, _ := io.ReadAll(r.Body)
			o.Got.Store(string(b))
			WriteJSON(w, map[string]any{"access_token": "t", "token_type": "bearer"})
		case "/secret":
			w.Write([]byte("not an endpoint the metadata names"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(o.Srv.Close)
	return o
}

// WriteJSON answers with doc as a JSON document, as a metadata endpoint
// does (the gateway's own: identity's writeMetadata).
func WriteJSON(w http.ResponseWriter, doc any) {
	b, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
