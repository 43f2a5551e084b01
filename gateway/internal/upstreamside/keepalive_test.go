package upstreamside

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestKeepAliveThroughAnIdleTimeout: a call longer than a proxy's idle
// timeout succeeds with keep-alive on (SSE comments, or progress for the
// client's progressToken) and fails with it off; for an upstream that
// streams its answer and for one that answers with JSON only at the end.
// The calls are a session client's, forwarded (Forward, keepalive.go).
func TestKeepAliveThroughAnIdleTimeout(t *testing.T) {
	for _, json := range []bool{false, true} {
		for _, keep := range []time.Duration{100 * time.Millisecond, -1} {
			name := fmt.Sprintf("json=%v/keepalive=%v", json, keep)
			t.Run(name, func(t *testing.T) {
				up := httptest.NewServer(testupstream.Handler(testupstream.Options{JSONResponse: json}))
				defer up.Close()
				gw := relayOnly(t, up.URL+"/mcp", keep)
				gwtest.SlowCallsThroughIdleProxy(t, gwtest.IdleProxyURL(t, gw), "2025-06-18", keep)
			})
		}
	}
}
