package gwtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// EraUpstream is a testupstream behind a spy that records every POST (and
// DELETE), and whose server can be swapped for one of the other era.
type EraUpstream struct {
	URL  string // the MCP endpoint
	next atomic.Pointer[http.Handler]
	mu   sync.Mutex
	seen []UpstreamPost
}

// UpstreamPost is what EraUpstream recorded of one request.
type UpstreamPost struct {
	Method, Session, Version, Name, Auth string
}

// NewEraUpstream serves a testupstream of the given era until the test ends.
func NewEraUpstream(t testing.TB, stateless bool) *EraUpstream {
	t.Helper()
	u := &EraUpstream{}
	u.Swap(stateless)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			u.mu.Lock()
			u.seen = append(u.seen, UpstreamPost{Method: "DELETE", Session: r.Header.Get("Mcp-Session-Id")})
			u.mu.Unlock()
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			u.mu.Lock()
			u.seen = append(u.seen, UpstreamPost{m.Method, r.Header.Get("Mcp-Session-Id"),
				r.Header.Get("Mcp-Protocol-Version"), r.Header.Get("Mcp-Name"), r.Header.Get("Authorization")})
			u.mu.Unlock()
		}
		(*u.next.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL + "/mcp"
	return u
}

// Swap replaces the server with a fresh one of the given era.
func (u *EraUpstream) Swap(stateless bool) {
	u.Serve(testupstream.Handler(testupstream.Options{Stateless: stateless}))
}

// Serve replaces the server with h.
func (u *EraUpstream) Serve(h http.Handler) { u.next.Store(&h) }

// Posts returns the recorded requests of JSON-RPC method m ("" for all,
// "DELETE" for the session deletions).
func (u *EraUpstream) Posts(m string) []UpstreamPost {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []UpstreamPost
	for _, p := range u.seen {
		if m == "" || p.Method == m {
			out = append(out, p)
		}
	}
	return out
}
