package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestOAuthIntrospectionOnly: the gateway validates tokens with the demo
// authorization server's introspection endpoint alone (no
// --auth-issuer). The SDK's OAuth client signs in through the gateway:
// the gateway's metadata names the upstream's authorization server (it
// used to name none, and the SDK failed with "HTTP 404: Invalid OAuth
// error response"), and a tool call passes. A forged token, which the
// demo server answers with HTTP 401 {"active":false,...}, gets 401
// invalid_token, and disturbs no one: the signed-in client's next call
// and a second client's sign-in right after it pass (they used to get
// 503 for 2 s: "the introspection endpoint ... failed just now").
//
// The demo server listens on the ports MCP_PORT and MCP_AUTH_PORT name,
// so each test starts one of its own on free ports.
func TestOAuthIntrospectionOnly(t *testing.T) {
	node := ensureJS(t)
	srv := startOAuthServer(t, node)
	gw := startGateway(t, srv.URL(), "--auth-introspection-url", srv.Issuer()+"/introspect")
	out := runOAuth(t, node, "forged", gw.URL)

	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		Scopes               []string `json:"scopes_supported"`
	}
	getJSON(t, gw.base+"/.well-known/oauth-protected-resource/mcp", &doc)
	if doc.Resource != gw.URL || len(doc.AuthorizationServers) != 1 || !strings.HasPrefix(doc.AuthorizationServers[0], srv.Issuer()) ||
		len(doc.Scopes) != 1 || doc.Scopes[0] != "mcp:tools" {
		t.Errorf("the gateway's metadata: %+v", doc)
	}
	if out.Steps.Greet != "Hello, first!" {
		t.Errorf("greet after signing in: %q", out.Steps.Greet)
	}
	if out.Forged.Status != http.StatusUnauthorized || !strings.Contains(out.Forged.Challenge, `error="invalid_token"`) {
		t.Errorf("the forged token: %d %q, want 401 invalid_token", out.Forged.Status, out.Forged.Challenge)
	}
	if a := out.Steps.AfterForged; a.Error != nil || string(a.Result) != `"Hello, again!"` {
		t.Errorf("the signed-in client right after the forged token: %s %+v", a.Result, a.Error)
	}
	if a := out.Steps.SecondGreet; a.Error != nil || string(a.Result) != `"Hello, second!"` {
		t.Errorf("a new client signing in right after the forged token: %s %+v", a.Result, a.Error)
	}
}
