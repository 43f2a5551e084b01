package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
)

// gateMarker is the text that marks a tool call for a callGate.
const gateMarker = "held-at-the-gate"

// callGate holds the upstream requests that carry gateMarker before they
// reach the upstream, until release: a call that stays in flight exactly
// as long as the test needs, however slow the machine, where a tool that
// sleeps a fixed time would end early under load.
type callGate struct {
	released chan struct{}
	once     sync.Once
}

// gatedUpstream serves next behind a gate and returns its MCP endpoint.
// The gate is released at the test's end, before the server closes
// (which waits for its handlers).
func gatedUpstream(t *testing.T, next http.Handler) (string, *callGate) {
	g := &callGate{released: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(gateMarker)) {
			select {
			case <-g.released:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.release()
		srv.Close()
	})
	return srv.URL + "/mcp", g
}

// release lets the held requests (and later ones) through.
func (g *callGate) release() { g.once.Do(func() { close(g.released) }) }

// waitIdle waits until h has no upstream call and no task worker left.
func waitIdle(t *testing.T, h *Handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.runner.Idle(ctx); err != nil {
		t.Fatalf("the replica did not go idle: %v (%d calls in flight)", err, h.runner.Inflight())
	}
}

// callAnswer calls tool name and returns its CallToolResult: the direct
// answer or, when the call outlived the hybrid wait (a busy machine can
// stretch any call past a short one), its task's result.
func callAnswer(c *gwtest.ModernClient, name string, args map[string]any) json.RawMessage {
	c.T.Helper()
	r := c.Call("tools/call", map[string]any{"name": name, "arguments": args})
	if r.Error != nil {
		c.T.Fatalf("tools/call %s: error %d %s", name, r.Error.Code, r.Error.Message)
	}
	var d detailed
	if json.Unmarshal(r.Result, &d) == nil && d.ResultType == "task" {
		return c.WaitTask(d.TaskID, "completed").Result
	}
	return r.Result
}
