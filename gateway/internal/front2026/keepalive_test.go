package front2026

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestKeepAlive2026: a 2026-07-28 client's plain call is kept alive too,
// in front of a stateless upstream that answers with JSON at the end
// (forwarded) and in front of a session upstream (on the owner session).
func TestKeepAlive2026(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: stateless, JSONResponse: stateless}))
			defer up.Close()
			f := newFleet(t, up.URL+"/mcp")
			f.Add(func(c *frontrig.Config) { c.KeepAlive = 100 * time.Millisecond })
			gwtest.SlowModernCallVia(t, gwtest.IdleProxyURL(t, f.URLs[0]), "call")
		})
	}
}
