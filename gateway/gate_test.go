package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
)

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
	var d gwtest.Detailed
	if json.Unmarshal(r.Result, &d) == nil && d.ResultType == "task" {
		return c.WaitTask(d.TaskID, "completed").Result
	}
	return r.Result
}
