package sse

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/upstream"
)

// asPrincipal is a transport that sends each request for principal key,
// as the gateway does (upstream.WithPrincipal on the request's context).
type asPrincipal struct {
	rt  http.RoundTripper
	key string
}

func (a asPrincipal) RoundTrip(r *http.Request) (*http.Response, error) {
	return a.rt.RoundTrip(r.WithContext(upstream.WithPrincipal(r.Context(), upstream.Principal{Key: a.key})))
}

func principalClient(t *testing.T, b *Bridge, key string) *client {
	c := newClient(t, b)
	c.h.Transport = asPrincipal{rt: b.Transport(), key: key}
	return c
}

// TestSessionShare: one principal cannot hold every HTTP+SSE session of
// the upstream: past half of --max-sessions its initialize is refused
// naming --max-sessions-per-principal, another principal still opens
// one, and a session ending (DELETE) frees the share.
func TestSessionShare(t *testing.T) {
	srv := sseServer(t)
	b, _ := startBridge(t, srv.URL+"/sse", func(o *Options) { o.MaxSessions = 4; o.SessionIdle = time.Hour })
	m1, m2, m3 := principalClient(t, b, "mallory"), principalClient(t, b, "mallory"), principalClient(t, b, "mallory")
	m1.initialize(map[string]any{})
	m2.initialize(map[string]any{})
	if m := m3.initialize(map[string]any{}); m.Error == nil || !strings.Contains(m.Error.Message, "--max-sessions-per-principal") || m3.sid != "" {
		t.Fatalf("Mallory's third session: %+v (session %q), want refused", m, m3.sid)
	}
	bob := principalClient(t, b, "bob")
	if m := bob.initialize(map[string]any{}); m.Error != nil || bob.sid == "" {
		t.Fatalf("Bob refused for Mallory's sessions: %+v", m)
	}
	r := m1.send(http.MethodDelete, nil)
	r.Body.Close()
	if m := m3.initialize(map[string]any{}); m.Error != nil || m3.sid == "" {
		t.Fatalf("Mallory after a DELETE: %+v", m)
	}
}
