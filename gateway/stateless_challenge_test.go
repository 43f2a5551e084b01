package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestStatelessUpstreamChallenge: credentials the stateless upstream
// refuses get the client its 401 and WWW-Authenticate challenge, at
// initialize (server/discover) and later, so its authorization flow starts;
// the challenge's resource_metadata names the gateway's metadata
// (internal/identity/oauthmeta.go), whose resource is the URL the client calls.
func TestStatelessUpstreamChallenge(t *testing.T) {
	inner := testupstream.Handler(testupstream.Options{Stateless: true})
	const challenge = `Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"`
	var refuse atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" || refuse.Load() {
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	fl.add(nil)
	pointed := `Bearer resource_metadata="` + strings.TrimSuffix(fl.URLs[0], "/mcp") + `/.well-known/oauth-protected-resource/mcp"`
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	check := func(what string, resp *http.Response) {
		t.Helper()
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != pointed {
			t.Errorf("%s: HTTP %d, WWW-Authenticate %q; want 401 with the upstream's challenge", what, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// Before any initialize with good credentials, and after.
	for _, first := range []bool{true, false} {
		bad := &gwtest.Client{T: t, URLs: fl.URLs, Auth: "Bearer bad"}
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		check(fmt.Sprintf("initialize with a refused token (first %v)", first), bad.Do(context.Background(), m))
		if first {
			(&gwtest.Client{T: t, URLs: fl.URLs, Auth: "Bearer good"}).InitializeAs("2025-11-25", map[string]any{})
		}
	}

	c := &gwtest.Client{T: t, URLs: fl.URLs, Auth: "Bearer good"}
	c.InitializeAs("2025-11-25", map[string]any{})
	refuse.Store(true) // the token expires
	resp := c.Do(context.Background(), map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	check("tools/list after the token expired", resp)
	// The GET stream too: its upstream listen is refused.
	req, _ := http.NewRequest(http.MethodGet, fl.URLs[0], nil)
	req.Header.Set("Mcp-Session-Id", c.SID)
	req.Header.Set("Authorization", c.Auth)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	check("GET after the token expired", resp)
}
