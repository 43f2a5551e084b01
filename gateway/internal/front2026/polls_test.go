package front2026

import (
	"net/http/httptest"
	"testing"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// TestPollLimitOff: a negative limit never refuses.
func TestPollLimitOff(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	t.Cleanup(up.Close)
	f := newFleet(t, up.URL+"/mcp")
	f.Add(func(c *frontrig.Config) { c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "*", policy.Task)) }) // the fixture's PollLimit: -1
	mc := &gwtest.ModernClient{T: t, URLs: f.URLs}
	task := mc.ToolTask("echo", map[string]any{"text": "x"})
	for i := 0; i < 100; i++ {
		if r := mc.Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error != nil {
			t.Fatalf("poll %d: %+v", i, r.Error)
		}
	}
}
