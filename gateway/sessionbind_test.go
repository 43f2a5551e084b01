package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/authtest"
)

// sessionHTTP sends one request to the MCP endpoint as the holder of
// token, in session sid ("" for none), and returns the status, the
// Mcp-Session-Id of the answer and its body.
func sessionHTTP(t *testing.T, method, url, token, sid, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if method == http.MethodGet {
		// A GET stream that is let through stays open: its status is
		// enough, so the request ends once the header is in.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// signedFleet is a fleet of replicas in front of an era upstream
// (stateless or a session server), each validating iss's JWTs for public,
// mod changing its Config after that.
func signedFleet(t *testing.T, iss *authtest.Issuer, public string, stateless bool, replicas int, mod func(*Config)) (*fleet, *gwtest.EraUpstream) {
	t.Helper()
	up := gwtest.NewEraUpstream(t, stateless)
	fl := newFleet(t, up.URL)
	for range replicas {
		g, err := auth.New(auth.Config{Issuer: iss.URL, Audience: []string{public}})
		if err != nil {
			t.Fatal(err)
		}
		fl.add(func(c *Config) {
			c.Auth, c.PublicURL = g, public
			if mod != nil {
				mod(c)
			}
		})
	}
	return fl, up
}

const initialize2025 = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestSessionBoundToPrincipal is issue 36's first finding: with sign-in on,
// Bob's valid token plus Alice's Mcp-Session-Id reached Alice's session
// (a tools/call got 200, his DELETE ended it). Every session kind the
// gateway hands out is bound to the principal that opened it: a session
// upstream passed through (token forwarded, and --auth-forward=false), and
// the session the gateway holds itself in front of a stateless upstream.
// Bob gets what an unknown id gets, on either replica; Alice, with a
// refreshed token too, keeps her session; the attempts are counted.
func TestSessionBoundToPrincipal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		strip     bool
	}{
		{"session upstream, token forwarded", false, false},
		{"session upstream, --auth-forward=false", false, true},
		{"stateless upstream, the gateway's session", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iss := authtest.NewIssuer(t, "", false)
			const public = "http://gw.test/mcp"
			fl, up := signedFleet(t, iss, public, tc.stateless, 2, func(c *Config) { c.AuthStrip = tc.strip })
			token := func(sub, jti string) string {
				c := iss.Claims(public)
				c["sub"], c["jti"] = sub, jti
				return "Bearer " + iss.Token(c)
			}
			alice, alice2, bob := token("alice", "a1"), token("alice", "a2"), token("bob", "b1")

			status, sid, body := sessionHTTP(t, http.MethodPost, fl.URLs[0], alice, "", initialize2025)
			if status != http.StatusOK || sid == "" {
				t.Fatalf("alice's initialize: HTTP %d, session %q: %s", status, sid, body)
			}
			sessionHTTP(t, http.MethodPost, fl.URLs[0], alice, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
			const call = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`

			for i, url := range fl.URLs {
				for _, req := range []struct{ method, body string }{
					{http.MethodPost, call}, {http.MethodPost, list}, {http.MethodGet, ""}, {http.MethodDelete, ""},
				} {
					st, _, b := sessionHTTP(t, req.method, url, bob, sid, req.body)
					if st != http.StatusNotFound {
						t.Errorf("replica %d: bob's %s %.20s in alice's session: HTTP %d, want 404: %s", i, req.method, req.body, st, b)
					}
					if req.method == http.MethodPost && !strings.Contains(b, `"code":-32001`) {
						t.Errorf("replica %d: bob's %s: %s, want the unknown-session error", i, req.method, b)
					}
				}
			}
			// Exactly what an unknown id gets.
			_, _, unknown := sessionHTTP(t, http.MethodPost, fl.URLs[1], bob, "no-such-session", list)
			_, _, foreign := sessionHTTP(t, http.MethodPost, fl.URLs[1], bob, sid, list)
			if unknown != foreign {
				t.Errorf("an unknown session: %s\nalice's session: %s\nbob can tell them apart", unknown, foreign)
			}
			// Alice's session is untouched, with her refreshed token and on
			// the other replica too.
			for i, tok := range []string{alice, alice2} {
				st, _, b := sessionHTTP(t, http.MethodPost, fl.URLs[i], tok, sid, list)
				if st != http.StatusOK || !strings.Contains(b, `"tools"`) {
					t.Fatalf("alice's tools/list (token %d) after bob's attempts: HTTP %d: %s", i+1, st, b)
				}
			}
			var refused float64
			for _, h := range fl.hs {
				refused += gwtest.CounterValue(h.metrics.SessionRefusals.WithLabelValues("other_principal"))
			}
			if refused != 9 { // 4 on each replica, and one more
				t.Errorf("other_principal refusals counted: %v, want 9", refused)
			}
			if len(up.Posts("DELETE")) != 0 {
				t.Errorf("bob's DELETE reached the upstream")
			}
			// Alice ends her session: its binding goes, and the id is
			// unknown to her too.
			if st, _, b := sessionHTTP(t, http.MethodDelete, fl.URLs[1], alice, sid, ""); st/100 != 2 {
				t.Fatalf("alice's DELETE: HTTP %d: %s", st, b)
			}
			if st, _, _ := sessionHTTP(t, http.MethodPost, fl.URLs[1], alice, sid, list); st != http.StatusNotFound {
				t.Errorf("alice's ended session: HTTP %d, want 404", st)
			}
		})
	}
}

// TestSessionBindingFailsClosed: an initialize whose session cannot be
// bound (the store is down) hands out no session id.
func TestSessionBindingFailsClosed(t *testing.T) {
	iss := authtest.NewIssuer(t, "", false)
	const public = "http://gw.test/mcp"
	fl, _ := signedFleet(t, iss, public, false, 1, nil)
	tok := "Bearer " + iss.Token(iss.Claims(public))
	fl.MR.SetError("LOADING the store is restarting")
	// A 2025-06-18 client: its session is passed through, recorded by
	// nothing but its binding.
	status, sid, body := sessionHTTP(t, http.MethodPost, fl.URLs[0], tok, "", strings.Replace(initialize2025, "2025-11-25", "2025-06-18", 1))
	fl.MR.SetError("")
	if sid != "" || !bytes.Contains([]byte(body), []byte(`"error"`)) {
		t.Fatalf("initialize with the store down: HTTP %d, session %q: %s; want an error and no session", status, sid, body)
	}
}
