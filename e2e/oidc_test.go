package e2e

// The gateway as a resource server in front of a real OpenID provider
// that nobody here wrote: oidc-provider (npm, oidc/provider.mjs), issuing
// JWT access tokens (RFC 9068) for the gateway's URL by RFC 8707
// resource indicators, or opaque ones checked by RFC 7662 introspection.
// Its keys rotate (a new kid) while the gateway runs, and it goes down.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/authtest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// oidcProvider is a running oidc/provider.mjs, stopped by its PID.
type oidcProvider struct {
	issuer string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// startOIDC starts the provider on addr, signing with the first of keys
// (private JWKs), issuing tokens in format ("jwt" or "opaque").
func startOIDC(t *testing.T, node, addr string, keys []jose.JSONWebKey, format string) *oidcProvider {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	p := &oidcProvider{issuer: "http://" + addr, out: &syncBuffer{}, exited: make(chan struct{})}
	ready := make(chan struct{})
	p.out.setTap(func(line string) {
		if strings.HasPrefix(line, "ready ") {
			close(ready)
		}
	})
	p.cmd = exec.Command(node, "provider.mjs")
	p.cmd.Dir = "oidc"
	p.cmd.Env = append(os.Environ(), "PORT="+port, "KEYS="+file, "FORMAT="+format)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("oidc-provider output:\n%s", p.out.String())
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("oidc-provider exited before it was ready:\n%s", p.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("oidc-provider not ready after 30 s:\n%s", p.out.String())
	}
	return p
}

// stop ends the provider (SIGTERM, then SIGKILL) and waits for it.
func (p *oidcProvider) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// token gets an access token for resource with scope by the client
// credentials grant of client "app".
func (p *oidcProvider) token(t *testing.T, resource, scope string) string {
	t.Helper()
	return p.tokenAs(t, "app", resource, scope)
}

// tokenAs is token for another client of the provider ("app" or "bob"):
// another principal (a client credentials token has no subject).
func (p *oidcProvider) tokenAs(t *testing.T, client, resource, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope}}
	req, _ := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, client+"-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.AccessToken == "" {
		t.Fatalf("token: HTTP %d %s", resp.StatusCode, body)
	}
	return tr.AccessToken
}

// privateJWK is a new P-256 signing key as a private JWK with kid.
func privateJWK(t *testing.T, kid string) jose.JSONWebKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: "ES256", Use: "sig"}
}

// kidOf is the kid in a JWT's header.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		KID string `json:"kid"`
	}
	_ = json.Unmarshal(b, &h)
	return h.KID
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func withToken(token string) *http.Client { return &http.Client{Transport: bearerTransport{token}} }

// postMCP sends tools/list to url with the Authorization values given.
func postMCP(t *testing.T, url string, authz ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	for _, a := range authz {
		req.Header.Add("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// oidcNode is the Node 22 that e2e/oidc installs (oidc-provider 9
// supports Node 22 and later).
func oidcNode(t *testing.T) string {
	t.Helper()
	node, _ := filepath.Abs("oidc/node_modules/.bin/node")
	if _, err := os.Stat(node); err != nil {
		t.Fatal("run `npm ci` in e2e/oidc first (scripts/test.sh does)")
	}
	return node
}

// TestAuthIssuerOIDCProvider: --auth-issuer in front of oidc-provider.
// Its JWT access tokens for the gateway's URL pass and reach a real
// upstream through the go-sdk client; tokens for another resource, or
// without the required scope, do not; after the provider restarts with a
// new signing key (a new kid) its new tokens pass at once; with the
// provider down, tokens already checked still pass and a token the
// gateway cannot check gets 503.
func TestAuthIssuerOIDCProvider(t *testing.T) {
	node := oidcNode(t)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	k1 := privateJWK(t, "k1")
	op := startOIDC(t, node, addr, []jose.JSONWebKey{k1}, "jwt")
	g := startGateway(t, newUpstream(t, testupstream.Options{}), "--auth-issuer", op.issuer, "--auth-required-scopes", "mcp:tools")

	tok1 := op.token(t, g.URL, "mcp:tools")
	if kid := kidOf(t, tok1); kid != "k1" {
		t.Fatalf("token signed with kid %q, want k1", kid)
	}
	gc := connectGo(t, g.URL, "2025-11-25", withToken(tok1), false)
	if text, isErr := gc.callText(t, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "signed in"}}); text != "signed in" || isErr {
		t.Fatalf("echo: %q %v", text, isErr)
	}

	resp := postMCP(t, g.URL)
	if resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="http://`+strings.TrimPrefix(g.base, "http://")+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp := postMCP(t, g.URL, "Bearer "+op.token(t, "http://127.0.0.1:1/other", "mcp:tools")); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("another resource's token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp := postMCP(t, g.URL, "Bearer "+op.token(t, g.URL, "mcp:admin")); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope", scope="mcp:tools"`) {
		t.Fatalf("without the scope: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	// Key rotation: the provider comes back on its address signing with k2.
	op.stop()
	k2 := privateJWK(t, "k2")
	op = startOIDC(t, node, addr, []jose.JSONWebKey{k2, k1}, "jwt")
	tok2 := op.token(t, g.URL, "mcp:tools")
	if kid := kidOf(t, tok2); kid != "k2" {
		t.Fatalf("after rotation the token is signed with kid %q, want k2", kid)
	}
	gc2 := connectGo(t, g.URL, "2025-11-25", withToken(tok2), false)
	if text, _ := gc2.callText(t, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "rotated"}}); text != "rotated" {
		t.Fatalf("after rotation: %q", text)
	}

	// The provider down: checked tokens pass; an unknown kid is 503.
	op.stop()
	if text, _ := gc.callText(t, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still"}}); text != "still" {
		t.Fatalf("with the issuer down: %q", text)
	}
	c := map[string]any{"iss": op.issuer, "sub": "mallory", "aud": g.URL, "scope": "mcp:tools",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	forged := authtest.Sign(t, authtest.NewKey(t, "k3", jose.ES256), c)
	resp = postMCP(t, g.URL, "Bearer "+forged)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("unknown kid with the issuer down: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// The process's stderr reaches the test through a pipe: wait for the
	// fourth refusal's line.
	refusals := func() int { return strings.Count(g.stderr.String(), `"op":"auth","status":`) }
	for deadline := time.Now().Add(10 * time.Second); refusals() < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	logs := g.stderr.String()
	for _, tok := range []string{tok1, tok2, forged} {
		if strings.Contains(logs, tok) || strings.Contains(logs, strings.Split(tok, ".")[2]) {
			t.Fatal("a token is in the gateway's log")
		}
	}
	if n := refusals(); n != 4 {
		t.Fatalf("%d refusal log lines, want 4:\n%s", n, logs)
	}
}

// TestAuthIntrospectionOIDCProvider: --auth-introspection-url in front of
// oidc-provider's RFC 7662 endpoint, with opaque tokens; the gateway's
// client secret comes from the environment.
func TestAuthIntrospectionOIDCProvider(t *testing.T) {
	node := oidcNode(t)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	op := startOIDC(t, node, addr, []jose.JSONWebKey{privateJWK(t, "k1")}, "opaque")
	g := startGatewayEnv(t, []string{"TASKGATE_AUTH_CLIENT_SECRET=gateway-secret"}, newUpstream(t, testupstream.Options{}),
		"--auth-issuer", op.issuer, "--auth-introspection-url", op.issuer+"/token/introspection", "--auth-client-id", "gateway")
	tok := op.token(t, g.URL, "mcp:tools")
	if strings.Count(tok, ".") == 2 {
		t.Fatalf("the provider issued a JWT, not an opaque token")
	}
	gc := connectGo(t, g.URL, "2025-11-25", withToken(tok), false)
	if text, _ := gc.callText(t, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "opaque"}}); text != "opaque" {
		t.Fatalf("echo: %q", text)
	}
	if resp := postMCP(t, g.URL, "Bearer made-up-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown token: %d", resp.StatusCode)
	}
	if resp := postMCP(t, g.URL, "Bearer "+op.token(t, "http://127.0.0.1:1/other", "mcp:tools")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another resource's token: %d", resp.StatusCode)
	}
	other := op.token(t, g.URL, "mcp:tools") // never shown to the gateway
	op.stop()
	// The cached answer still serves (for at most 60 s); a token never
	// checked cannot be: 503.
	if text, _ := gc.callText(t, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "cached"}}); text != "cached" {
		t.Fatalf("cached: %q", text)
	}
	if resp := postMCP(t, g.URL, "Bearer "+other); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("introspection down: %d", resp.StatusCode)
	}
}
