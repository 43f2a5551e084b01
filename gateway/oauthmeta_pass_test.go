package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/upstream"
)

// tomcatServer is an upstream that is its own authorization server and
// resolves paths as Tomcat does: a segment's ";parameters" are dropped
// before ".." is resolved, so "..;" climbs. It records what it got.
type tomcatServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request // their URL (as sent) and headers
}

func newTomcatServer(t testing.TB) *tomcatServer {
	s := &tomcatServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, &http.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone()})
		s.mu.Unlock()
		base := "http://" + r.Host
		segs := strings.Split(r.URL.Path, "/")
		for i, seg := range segs {
			segs[i], _, _ = strings.Cut(seg, ";")
		}
		switch path.Clean(strings.Join(segs, "/")) {
		case wellKnownServer:
			gwtest.WriteJSON(w, map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
				"token_endpoint": base + "/token", "registration_endpoint": base + "/register"})
		case "/authorize", "/token", "/register":
			w.Write([]byte("ok"))
		case "/admin/env":
			w.Write([]byte("SECRET"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *tomcatServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.got...)
}

// tomcatGateway is a gateway in front of s whose --upstream-header sets
// an operator's Authorization and an API key.
func tomcatGateway(t testing.TB, s *tomcatServer) http.Handler {
	return metaHandler(t, s.srv.URL+"/mcp", upstream.Options{Header: http.Header{
		"Authorization": {"Bearer operator"}, "X-Api-Key": {"k"}}}, nil)
}

// TestDiscoveryNoTraversal: below the well-known paths only plain
// segments go upstream: "..;" (which a Tomcat-style server resolves as
// "..") is refused, and the upstream never gets a request that resolves
// to another path.
func TestDiscoveryNoTraversal(t *testing.T) {
	up := newTomcatServer(t)
	gw := httptest.NewServer(tomcatGateway(t, up))
	t.Cleanup(gw.Close)
	for _, p := range []string{
		"/.well-known/oauth-authorization-server/..;/..;/admin/env",
		"/.well-known/openid-configuration/..;/..;/admin/env",
		"/admin/..;/.well-known/openid-configuration",
		"/.well-known/oauth-authorization-server/a;b",
		"/.well-known/oauth-authorization-server/...;/x",
	} {
		resp, err := http.Get(gw.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "SECRET") {
			t.Errorf("%s: %d %q, want 404", p, resp.StatusCode, body)
		}
	}
	for _, r := range up.requests() {
		if strings.Contains(r.URL.EscapedPath(), ";") {
			t.Errorf("the upstream got %s", r.URL.EscapedPath())
		}
	}
	// A plain path below the prefix still passes (RFC 8414 §3.1: an
	// issuer with a path).
	if status, _, _ := getDoc(t, gw.URL+"/.well-known/oauth-authorization-server/tenant-1"); status != http.StatusNotFound {
		t.Errorf("plain path below the prefix: %d, want the upstream's 404", status)
	}
	if n := len(up.requests()); n == 0 || up.requests()[n-1].URL.Path != wellKnownServer+"/tenant-1" {
		t.Errorf("a plain path below the prefix did not reach the upstream")
	}
}

// TestDiscoveryPassThroughHeaders: the endpoints' pass-through drops a
// client's Forwarded, X-Forwarded-* and X-Real-Ip, as the front door does;
// nothing of --upstream-header goes with it: Authorization stays the
// client's (client_secret_basic at /token) or absent (/authorize,
// /register), and the operator's API key stays the gateway's.
func TestDiscoveryPassThroughHeaders(t *testing.T) {
	up := newTomcatServer(t)
	gw := httptest.NewServer(tomcatGateway(t, up))
	t.Cleanup(gw.Close)
	forged := http.Header{"Forwarded": {"for=6.6.6.6"}, "X-Forwarded-For": {"6.6.6.6"}, "X-Real-Ip": {"6.6.6.6"},
		"X-Forwarded-Host": {"evil.example"}, "X-Forwarded-Proto": {"https"}}
	tok := forged.Clone()
	tok.Set("Authorization", "Basic Y2xpZW50OnNlY3JldA==")
	for _, tc := range []struct {
		path string
		hdr  http.Header
		auth string
	}{{"/token", tok, "Basic Y2xpZW50OnNlY3JldA=="}, {"/register", forged, ""}, {"/authorize", forged, ""}} {
		resp := gwtest.Post(t, gw.URL+tc.path, "application/x-www-form-urlencoded", "x=1", tc.hdr)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", tc.path, resp.StatusCode)
		}
		reqs := up.requests()
		got := reqs[len(reqs)-1]
		if got.URL.Path != tc.path {
			t.Fatalf("the upstream's last request is %s, want %s", got.URL.Path, tc.path)
		}
		for k := range forged {
			if v := got.Header.Values(k); len(v) > 0 {
				t.Errorf("%s: the client's %s reached the upstream: %q", tc.path, k, v)
			}
		}
		if a := got.Header.Get("Authorization"); a != tc.auth {
			t.Errorf("%s: the upstream got Authorization %q, want %q", tc.path, a, tc.auth)
		}
		if v := got.Header.Get("X-Api-Key"); v != "" {
			t.Errorf("%s: --upstream-header X-Api-Key went with it", tc.path)
		}
	}
}

// TestDiscoveryEscapedPath: an upstream MCP path with an escaped
// character is asked for its metadata with that path, escaped once
// (%20, not %2520).
func TestDiscoveryEscapedPath(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wellKnownResource+"/my mcp" {
			gwtest.WriteJSON(w, map[string]any{"resource": "http://" + r.Host + "/my%20mcp"})
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(up.Close)
	gw := metaGateway(t, up.URL+"/my%20mcp", nil)
	if status, doc, _ := getDoc(t, gw.URL+wellKnownResource+"/mcp"); status != 200 || doc["resource"] != gw.URL+"/mcp" {
		t.Fatalf("%d %v", status, doc)
	}
}

// FuzzDiscoveryPath: whatever path a client asks for, the upstream gets
// only requests whose path it cannot resolve to another one: no ";", no
// escapes, no ".." segment, nothing path.Clean changes; no OpenID
// Connect document of an issuer it does not name; never the operator's
// --upstream-header but on the MCP endpoint.
func FuzzDiscoveryPath(f *testing.F) {
	for _, s := range []string{"/.well-known/oauth-authorization-server/..;/..;/admin/env",
		"/.well-known/openid-configuration/x", "/a/..;/.well-known/openid-configuration",
		"/.well-known/oauth-authorization-server/%2e%2e;/admin", "/token", "/authorize?x=1",
		"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server/a%20b",
		"/internal/admin/.well-known/openid-configuration", "/.well-known/openid-configuration/tenant", "/mcp"} {
		f.Add(s)
	}
	up := newTomcatServer(f)
	h := tomcatGateway(f, up)
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.ParseRequestURI(raw)
		if err != nil || u.Host != "" || u.Scheme != "" {
			return
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL, r.RequestURI = u, raw
		before := len(up.requests())
		h.ServeHTTP(httptest.NewRecorder(), r)
		for _, got := range up.requests()[before:] {
			p := got.URL.EscapedPath()
			if strings.ContainsAny(p, ";%") || path.Clean(p) != p || strings.Contains(p, "/..") {
				t.Fatalf("for %q the upstream got %q", raw, p)
			}
			if strings.HasSuffix(p, wellKnownOIDC) && !strings.HasPrefix(p, "/.well-known/") {
				t.Fatalf("for %q the upstream got %q: an issuer its metadata does not name", raw, p)
			}
			if p != "/mcp" && (got.Header.Get("X-Api-Key") != "" || got.Header.Get("Authorization") == "Bearer operator") {
				t.Fatalf("for %q the upstream got the operator's --upstream-header", raw)
			}
		}
	})
}
