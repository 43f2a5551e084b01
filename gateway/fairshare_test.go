package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// syncBuffer is a log sink the handler's goroutines write to at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines(substr string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, substr) {
			var m map[string]any
			_ = json.Unmarshal([]byte(l), &m)
			out = append(out, m)
		}
	}
	return out
}

// fairGateway is one replica in front of a gated upstream (calls with
// gwtest.GateMarker wait for the gate), every tool a task, logging to log.
func fairGateway(t *testing.T, mod func(*Config)) (*Handler, string, *gwtest.Gate, *syncBuffer) {
	t.Helper()
	upURL, gate := gwtest.GatedUpstream(t, testupstream.Handler(testupstream.Options{}))
	f := newFleet(t, upURL)
	log := &syncBuffer{}
	h := f.add(func(c *Config) {
		c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "*", policy.Task))
		c.Logger = zerolog.New(log)
		if mod != nil {
			mod(c)
		}
	})
	return h, f.URLs[0], gate, log
}

// principalClient is a 2025-11-25 client whose Authorization makes it a
// principal of its own (the header's digest, without sign-in).
func principalClient(t *testing.T, url, auth string) *gwtest.Client {
	c := &gwtest.Client{T: t, URLs: []string{url}, Auth: auth}
	c.Initialize()
	return c
}

// retryAfter is a refusal's data.retryAfterMs and reason.
func retryAfter(t *testing.T, r gwtest.Reply) (int64, string) {
	t.Helper()
	var d struct {
		RetryAfterMs int64  `json:"retryAfterMs"`
		Reason       string `json:"reason"`
	}
	if r.Error == nil || json.Unmarshal(r.Error.Data, &d) != nil {
		t.Fatalf("refusal %+v: want data.retryAfterMs", r.Error)
	}
	return d.RetryAfterMs, d.Reason
}

// TestNoisyNeighbourNeverRefusesOthers: principal A starts held tasks as
// fast as it can; principal B's task creations are never refused for it
// (issue 36: with --max-inflight full of A's calls, 120 of 120 of B's
// were). A is refused past its share, with the limit, the flag and a
// retry hint; each refusal is counted by reason; the log has a sampled
// line, not one per refusal.
func TestNoisyNeighbourNeverRefusesOthers(t *testing.T) {
	h, url, gate, log := fairGateway(t, func(c *Config) { c.MaxInflight = 8 })
	a := principalClient(t, url, "Bearer alice")
	b := principalClient(t, url, "Bearer bob")
	start := time.Now()
	var refusals []gwtest.Reply
	held := 0
	for range 20 {
		if r := taskCall(a, "slow", map[string]any{"seconds": 0, "text": gwtest.GateMarker}); r.Error != nil {
			refusals = append(refusals, r)
		} else {
			held++
		}
	}
	var bTasks []string
	for i := range 4 {
		r := taskCall(b, "slow", map[string]any{"seconds": 0, "text": "b"})
		if r.Error != nil {
			t.Fatalf("B's task %d refused for A's load: %s", i, r.Error.Message)
		}
		var res struct {
			Task gwtest.WireTask `json:"task"`
		}
		_ = json.Unmarshal(r.Result, &res)
		bTasks = append(bTasks, res.Task.TaskID)
	}
	for _, id := range bTasks {
		b.WaitStatus(id, "completed")
	}
	if held != 4 || len(refusals) != 16 {
		t.Fatalf("A held %d and was refused %d, want 4 (half of --max-inflight) and 16", held, len(refusals))
	}
	for _, r := range refusals {
		if !strings.Contains(r.Error.Message, "--max-inflight-per-principal") {
			t.Fatalf("A's refusal %q does not name the flag", r.Error.Message)
		}
		if ms, reason := retryAfter(t, r); ms <= 0 || reason != "max_inflight_per_principal" {
			t.Fatalf("A's refusal: retryAfterMs %d reason %q", ms, reason)
		}
	}
	fams := scrape(t, url)
	if n := metricValue(fams, "taskgate_refusals_total", map[string]string{"reason": "max_inflight_per_principal"}); n != 16 {
		t.Errorf("taskgate_refusals_total{reason=max_inflight_per_principal} = %v, want 16", n)
	}
	if n := metricValue(fams, "taskgate_refusals_total", map[string]string{"reason": "fair_share"}); n != 0 {
		t.Errorf("taskgate_refusals_total{reason=fair_share} = %v, want 0", n)
	}
	// Sampled: a line per reason per 10 s (obs.refusalLogEvery) at most, the first
	// saying one refusal, not 16 lines.
	lines := log.lines(`"reason":"max_inflight_per_principal"`)
	most := 1 + int(time.Since(start)/(10*time.Second)) // obs.refusalLogEvery
	if len(lines) == 0 || len(lines) > most || lines[0]["refused"] != 1.0 {
		t.Errorf("refusal log lines = %v, want 1 to %d, the first with refused 1", lines, most)
	}
	gate.Release()
	waitIdle(t, h)
}

// TestTaskRateRefusesOnlyItsPrincipal: past --max-task-rate a principal's
// task creations are refused with the retry hint of its bucket; another
// principal's are not, and the refusal holds no in-flight slot.
func TestTaskRateRefusesOnlyItsPrincipal(t *testing.T) {
	h, url, _, _ := fairGateway(t, func(c *Config) { c.MaxTaskRate = 2 })
	a := principalClient(t, url, "Bearer alice")
	b := principalClient(t, url, "Bearer bob")
	for range 2 {
		a.StartTask("echo", map[string]any{"text": "a"}, nil)
	}
	waitIdle(t, h)
	r := taskCall(a, "echo", map[string]any{"text": "a"})
	if r.Error == nil || !strings.Contains(r.Error.Message, "--max-task-rate") {
		t.Fatalf("A's third task a minute = %+v, want refused naming --max-task-rate", r.Error)
	}
	if ms, reason := retryAfter(t, r); ms < 1000 || ms > 30000 || reason != obs.RefusedTaskRate {
		t.Fatalf("A's refusal: retryAfterMs %d (want about 30 s: a token every 30 s), reason %q", ms, reason)
	}
	if n := h.runner.Inflight(); n != 0 {
		t.Fatalf("the refusal holds %d in-flight slots", n)
	}
	b.StartTask("echo", map[string]any{"text": "b"}, nil)
	if n := metricValue(scrape(t, url), "taskgate_refusals_total", map[string]string{"reason": obs.RefusedTaskRate}); n != 1 {
		t.Errorf("taskgate_refusals_total{reason=max_task_rate} = %v, want 1", n)
	}
}
