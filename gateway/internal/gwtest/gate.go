package gwtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// GateMarker is the text that marks a tool call for a Gate.
const GateMarker = "held-at-the-gate"

// Gate holds the upstream requests that carry GateMarker before they
// reach the upstream, until release: a call that stays in flight exactly
// as long as the test needs, however slow the machine, where a tool that
// sleeps a fixed time would end early under load.
type Gate struct {
	released chan struct{}
	once     sync.Once
}

// GatedUpstream serves next behind a gate and returns its MCP endpoint.
// The gate is released at the test's end, before the server closes
// (which waits for its handlers).
func GatedUpstream(t *testing.T, next http.Handler) (string, *Gate) {
	g := &Gate{released: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(GateMarker)) {
			select {
			case <-g.released:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.Release()
		srv.Close()
	})
	return srv.URL + "/mcp", g
}

// Release lets the held requests (and later ones) through.
func (g *Gate) Release() { g.once.Do(func() { close(g.released) }) }
