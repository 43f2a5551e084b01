package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// drainGateway is one replica with every tool a task candidate.
func drainGateway(t *testing.T, mod func(*Config)) (*Handler, *gwtest.Client, string) {
	t.Helper()
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(up.Close)
	return drainGatewayOn(t, up.URL+"/mcp", mod)
}

// drainGatewayOn is drainGateway in front of the upstream at upURL.
func drainGatewayOn(t *testing.T, upURL string, mod func(*Config)) (*Handler, *gwtest.Client, string) {
	t.Helper()
	f := newFleet(t, upURL)
	h := f.add(func(c *Config) {
		c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "*", policy.Task))
		if mod != nil {
			mod(c)
		}
	})
	c := &gwtest.Client{T: t, URLs: f.URLs}
	c.Initialize()
	return h, c, strings.TrimSuffix(f.URLs[0], "/mcp")
}

func taskCall(c *gwtest.Client, tool string, args any) gwtest.Reply {
	c.T.Helper()
	return c.Call("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}})
}

func wantRefused(t *testing.T, r gwtest.Reply, want string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != mcpwire.CodeInternalError || r.Error.Message != want {
		t.Fatalf("tools/call = %+v %s, want -32603 %q", r.Error, r.Result, want)
	}
}

func readyStatus(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Checks["gateway"]
}

func TestDrainLetsHeldTaskFinishAndRefusesNew(t *testing.T) {
	h, c, base := drainGateway(t, nil)
	task := c.StartTask("slow", map[string]any{"seconds": 0.5, "text": "x"}, nil)
	done := make(chan error, 1)
	go func() { done <- h.Drain(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for !h.runner.Draining.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if code, why := readyStatus(t, base); code != http.StatusServiceUnavailable || why != "draining" {
		t.Errorf("/readyz while draining = %d %q, want 503 draining", code, why)
	}
	wantRefused(t, taskCall(c, "echo", map[string]any{"text": "y"}), "this gateway replica is shutting down; retry on another replica")
	// Relayed requests still pass while draining.
	if r := c.Call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "plain"}}); r.Error != nil {
		t.Errorf("plain tools/call while draining: %+v", r.Error)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return after the held call finished")
	}
	c.WaitStatus(task.TaskID, "completed")
}

func TestDrainTimeoutFailsWhatRemains(t *testing.T) {
	h, c, _ := drainGateway(t, nil)
	task := c.StartTask("slow", map[string]any{"seconds": 30, "text": "x"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := h.Drain(ctx); err == nil {
		t.Fatal("Drain returned nil with a 30 s call held")
	}
	h.Close()
	wt := c.WaitStatus(task.TaskID, "failed")
	if want := "the gateway replica running the task stopped before the upstream answered"; wt.StatusMessage != want {
		t.Errorf("statusMessage = %q, want %q", wt.StatusMessage, want)
	}
	if n := h.runner.Inflight(); n != 0 {
		t.Errorf("%d calls still counted after Close", n)
	}
}

// TestMaxInflight: with MaxInflight 1, a task call while another is in
// flight is refused (and leaves no task behind); once that one ends, the
// next is accepted and the count is back to zero.
func TestMaxInflight(t *testing.T) {
	upURL, gate := gwtest.GatedUpstream(t, testupstream.Handler(testupstream.Options{}))
	h, c, _ := drainGatewayOn(t, upURL, func(cfg *Config) { cfg.MaxInflight = 1 })
	first := c.StartTask("slow", map[string]any{"seconds": 0, "text": gwtest.GateMarker}, nil) // in flight until the gate opens
	wantRefused(t, taskCall(c, "slow", map[string]any{"seconds": 0.1, "text": "b"}),
		"too many upstream calls in flight on this replica (limit 1, --max-inflight), and this principal holds at least its fair share of them; retry later")
	if r := c.Call("tasks/list", map[string]any{}); r.Error != nil || strings.Count(string(r.Result), "taskId") != 1 {
		t.Errorf("tasks/list after the refusal: %+v %s, want only the first task", r.Error, r.Result)
	}
	gate.Release()
	c.WaitStatus(first.TaskID, "completed")
	waitIdle(t, h)
	third := c.StartTask("slow", map[string]any{"seconds": 0.05, "text": "c"}, nil)
	c.WaitStatus(third.TaskID, "completed")
	if err := h.runner.Idle(context.Background()); err != nil || h.runner.Inflight() != 0 {
		t.Errorf("after the tasks: inflight %d, %v", h.runner.Inflight(), err)
	}
}

// TestMaxInflightModernHybrid: MaxInflight also bounds the hybrid calls
// of the 2026-07-28 front door: the call that outlived the hybrid wait (a
// task now) holds the one slot, a second call is refused, and once the
// task completed the slot is free again.
func TestMaxInflightModernHybrid(t *testing.T) {
	gwtest.Eras(t, func(t *testing.T, stateless bool) {
		upURL, gate := gwtest.GatedUpstream(t, testupstream.Handler(testupstream.Options{Stateless: stateless}))
		f := newFleet(t, upURL)
		h := f.add(func(c *Config) { c.Policy, c.MaxInflight = gwtest.HybridPolicy(nil, 100*time.Millisecond), 1 })
		c := &gwtest.ModernClient{T: t, URLs: f.URLs}
		// The first call learns the upstream's era; on a busy machine it
		// may itself outlive the hybrid wait, so its worker must be gone
		// before the slot is counted on.
		callAnswer(c, "echo", map[string]any{"text": "warm"})
		waitIdle(t, h)
		task := c.ToolTask("slow", map[string]any{"seconds": 0, "text": gwtest.GateMarker}) // in flight until the gate opens
		wantRefused(t, c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0.1}}),
			"too many upstream calls in flight on this replica (limit 1, --max-inflight), and this principal holds at least its fair share of them; retry later")
		gate.Release()
		c.WaitTask(task.TaskID, "completed")
		waitIdle(t, h)
		if text, isErr, _ := gwtest.ResultText(t, callAnswer(c, "echo", map[string]any{"text": "again"})); text != "again" || isErr {
			t.Fatalf("echo after the task = %q (isError %v)", text, isErr)
		}
		waitIdle(t, h)
		if n := h.runner.Inflight(); n != 0 {
			t.Errorf("%d calls still counted", n)
		}
	})
}

// TestDrainTimeoutAloneSaysLost: with no other replica sharing the store
// (Config.Alone: the embedded store), a task the drain leaves is failed
// saying it is lost, a rerunnable one too: nothing would run it again.
func TestDrainTimeoutAloneSaysLost(t *testing.T) {
	rerun, err := policy.NewRerunRule("*", true)
	if err != nil {
		t.Fatal(err)
	}
	for name, rerunnable := range map[string]bool{"plain": false, "rerunnable": true} {
		t.Run(name, func(t *testing.T) {
			h, c, _ := drainGateway(t, func(cfg *Config) {
				cfg.Alone = true
				if rerunnable {
					cfg.Policy = gwtest.RulesPolicy(append(gwtest.Rules(t, "*", policy.Task), rerun))
				}
			})
			task := c.StartTask("slow", map[string]any{"seconds": 30, "text": "x"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if err := h.Drain(ctx); err == nil {
				t.Fatal("Drain returned nil with a 30 s call held")
			}
			h.Close()
			if wt := c.WaitStatus(task.TaskID, "failed"); wt.StatusMessage != LostMessage {
				t.Errorf("statusMessage = %q, want %q", wt.StatusMessage, LostMessage)
			}
		})
	}
}
