package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/authtest"
)

const authPublicURL = "https://gw.example/mcp"

// authGateway is a pass-through gateway validating iss's tokens for
// authPublicURL with the scope mcp:tools, in front of an upstream that
// records the Authorization it gets; logs collects its log lines.
type authGateway struct {
	url   string
	mu    sync.Mutex
	logs  bytes.Buffer
	upGot []string // the Authorization of each request the upstream got ("" for none)
}

func newAuthGateway(t *testing.T, iss *authtest.Issuer, strip bool) *authGateway {
	t.Helper()
	ag := &authGateway{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ag.mu.Lock()
		ag.upGot = append(ag.upGot, r.Header.Get("Authorization"))
		ag.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	}))
	t.Cleanup(up.Close)
	guard, err := auth.New(auth.Config{Issuer: iss.URL, Audience: []string{authPublicURL}, RequiredScopes: []string{"mcp:tools"}})
	if err != nil {
		t.Fatal(err)
	}
	ag.url = newGateway(t, up.URL+"/mcp", func(c *Config) {
		c.Auth, c.AuthStrip, c.PublicURL = guard, strip, authPublicURL
		c.Logger = zerolog.New(gwtest.LockedWriter{W: &ag.logs, Mu: &ag.mu})
	})
	return ag
}

func (ag *authGateway) upstreamGot() []string {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return append([]string(nil), ag.upGot...)
}

func (ag *authGateway) logLines() string {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return ag.logs.String()
}

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// TestAuthRefusals is issue 26's list of bad credentials at the gateway:
// each gets its precise status and challenge, one log line that does not
// quote the token, and nothing reaches the upstream.
func TestAuthRefusals(t *testing.T) {
	iss := authtest.NewIssuer(t, "", false)
	ag := newAuthGateway(t, iss, false)
	with := func(change func(map[string]any)) string {
		c := iss.Claims(authPublicURL)
		change(c)
		return iss.Token(c)
	}
	valid := iss.Token(iss.Claims(authPublicURL))
	parts := strings.Split(valid, ".")
	meta := `resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"`
	invalid := "Bearer " + meta + `, error="invalid_token", scope="mcp:tools"`
	for _, tc := range []struct {
		name      string
		auth      []string
		status    int
		challenge string
	}{
		{"no token", nil, 401, "Bearer " + meta + `, scope="mcp:tools"`},
		{"another scheme", []string{"Basic YTpi"}, 401, "Bearer " + meta + `, scope="mcp:tools"`},
		{"malformed JWT", []string{"Bearer not.a.jwt"}, 401, invalid},
		{"bad signature", []string{"Bearer " + parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))}, 401, invalid},
		{"alg none", []string{"Bearer eyJhbGciOiJub25lIiwia2lkIjoiazEifQ." + parts[1] + "."}, 401, invalid},
		{"expired", []string{"Bearer " + with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })}, 401, invalid},
		{"wrong audience", []string{"Bearer " + with(func(c map[string]any) { c["aud"] = "http://127.0.0.1:9/mcp" })}, 401, invalid},
		{"unknown kid", []string{"Bearer " + authtest.Sign(t, authtest.NewKey(t, "k9", jose.ES256), iss.Claims(authPublicURL))}, 401, invalid},
		{"missing scope", []string{"Bearer " + with(func(c map[string]any) { c["scope"] = "openid" })}, 403,
			"Bearer " + meta + `, error="insufficient_scope", scope="mcp:tools"`},
		{"two Authorization headers", []string{"Bearer " + valid, "Bearer " + valid}, 400, ""},
		{"token over 16 KiB", []string{"Bearer " + strings.Repeat("a", auth.MaxTokenSize+1)}, 400, "Bearer " + meta + `, error="invalid_request", scope="mcp:tools"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(ag.logLines(), "\n")
			resp := gwtest.Post(t, ag.url, "application/json", toolsList, http.Header{"Authorization": tc.auth})
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if e := decodeError(t, resp); e.Error.Code == 0 || e.Error.Message == "" {
				t.Fatalf("no JSON-RPC error in the body: %+v", e)
			}
			logs := ag.logLines()
			if strings.Count(logs, "\n") != before+1 {
				t.Fatalf("want one log line for the refusal, got:\n%s", logs)
			}
			for _, v := range tc.auth {
				if tok := strings.TrimPrefix(v, "Bearer "); len(tok) > 8 && strings.Contains(logs, tok) {
					t.Fatal("a log line quotes the token")
				}
			}
		})
	}
	if got := ag.upstreamGot(); len(got) != 0 {
		t.Fatalf("refused requests reached the upstream: %d", len(got))
	}
	metrics, err := http.Get(strings.TrimSuffix(ag.url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	for _, want := range []string{`taskgate_auth_refusals_total{reason="no_token"} 2`, `taskgate_auth_refusals_total{reason="invalid_token"} 6`,
		`taskgate_auth_refusals_total{reason="insufficient_scope"} 1`, `taskgate_auth_refusals_total{reason="invalid_request"} 1`,
		`taskgate_auth_refusals_total{reason="unavailable"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The valid token passes, and is forwarded as sent.
	resp := gwtest.Post(t, ag.url, "application/json", toolsList, http.Header{"Authorization": {"Bearer " + valid}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("valid token: status %d", resp.StatusCode)
	}
	if got := ag.upstreamGot(); len(got) != 1 || got[0] != "Bearer "+valid {
		t.Fatalf("the upstream got Authorization %q", got)
	}
}

// TestAuthIssuerDown: a token that cannot be checked gets 503 with
// Retry-After, never a pass.
func TestAuthIssuerDown(t *testing.T) {
	iss := authtest.NewIssuer(t, "", false)
	iss.Down.Store(true)
	ag := newAuthGateway(t, iss, false)
	resp := gwtest.Post(t, ag.url, "application/json", toolsList, http.Header{"Authorization": {"Bearer " + iss.Token(iss.Claims(authPublicURL))}})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if len(ag.upstreamGot()) != 0 {
		t.Fatal("the request reached the upstream")
	}
	if !strings.Contains(ag.logLines(), `"op":"auth","status":503`) {
		t.Fatalf("no log line: %s", ag.logLines())
	}
}

// TestAuthStrip: with --auth-forward=false the upstream never sees the
// client's token.
func TestAuthStrip(t *testing.T) {
	iss := authtest.NewIssuer(t, "", false)
	ag := newAuthGateway(t, iss, true)
	resp := gwtest.Post(t, ag.url, "application/json", toolsList, http.Header{"Authorization": {"Bearer " + iss.Token(iss.Claims(authPublicURL))}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := ag.upstreamGot(); len(got) != 1 || got[0] != "" {
		t.Fatalf("the upstream got Authorization %q", got)
	}
}

// TestAuthEveryMethod: the session stream (GET) and its end (DELETE) need
// the token too; a browser's CORS preflight, which carries none, does not.
func TestAuthEveryMethod(t *testing.T) {
	iss := authtest.NewIssuer(t, "", false)
	ag := newAuthGateway(t, iss, false)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, ag.url, nil)
		req.Header.Set("Mcp-Session-Id", "s1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without a token: %d %q", method, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	req, _ := http.NewRequest(http.MethodOptions, ag.url, nil)
	req.Header.Set("Origin", "http://localhost:3000")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight: %d", resp.StatusCode)
	}
	if got := ag.upstreamGot(); len(got) != 0 {
		t.Errorf("the upstream got %d requests", len(got))
	}
}
