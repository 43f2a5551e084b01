package gateway

// Keep-alives in front of a server of the oldest protocol version
// (2024-11-05), reached over Streamable HTTP and over the HTTP+SSE
// transport of its era (issue 28): they work as in front of any session
// server, for a 2025-11-25 session and a 2026-07-28 client alike (both
// fronts: the Handler's test). The fallback tools in front of such a
// server are front2025's (fallback_flow_test.go).

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestKeepAliveOldServer: in front of a 2024-11-05 server, a call longer
// than a proxy's idle timeout survives with keep-alive on (comments, and
// progress for the client's token) and fails with it off, for a
// 2025-11-25 session; a 2026-07-28 client's call (on the gateway's owner
// session upstream) survives it too.
func TestKeepAliveOldServer(t *testing.T) {
	for _, transport := range gwtest.OldTransports {
		for _, keep := range []time.Duration{100 * time.Millisecond, -1} {
			t.Run(transport+"/keepalive="+keep.String(), func(t *testing.T) {
				url, client := gwtest.OldUpstream(t, transport, testupstream.Options{})
				f := newFleet(t, url)
				f.add(func(c *Config) { c.Upstream, c.KeepAlive = client, keep })
				via := gwtest.IdleProxyURL(t, f.URLs[0])
				gwtest.SlowCallsThroughIdleProxy(t, via, "2025-11-25", keep)
				if keep < 0 {
					return
				}
				gwtest.SlowModernCallVia(t, via, "a 2026-07-28 call")
			})
		}
	}
}
