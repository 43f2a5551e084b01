package policy

import (
	"sync"
	"testing"
	"time"
)

const ms = time.Millisecond

func ptr(b bool) *bool { return &b }

// TestDecideTable is the table of what each rule means per client
// (docs/ARCHITECTURE.md, "How a tools/call is decided").
func TestDecideTable(t *testing.T) {
	rules := mustRules(t, "t", Task, "req", TaskRequired, "s", Sync)
	type want struct {
		mode Mode
		ts   TaskSupport
	}
	tests := []struct {
		tool     string
		upstream TaskSupport
		legacy   want
		modern   Mode
		noExt    Mode
		older    Mode
		fallback Mode
	}{
		{"t", "", want{Task, TaskSupportOptional}, Task, Sync, Sync, Auto},
		{"req", "", want{TaskRequired, TaskSupportRequired}, Task, TaskRequired, Sync, Auto},
		{"s", TaskSupportOptional, want{Sync, TaskSupportAbsent}, Sync, Sync, Sync, Sync},
		{"none", "", want{Sync, TaskSupportAbsent}, Auto, Sync, Sync, Sync},
		{"none", TaskSupportForbidden, want{Sync, TaskSupportForbidden}, Auto, Sync, Sync, Sync},
		{"none", TaskSupportOptional, want{Task, TaskSupportOptional}, Auto, Sync, Sync, Sync},
		{"none", TaskSupportRequired, want{TaskRequired, TaskSupportRequired}, Auto, Sync, Sync, Sync},
	}
	cfg := &Config{Rules: rules}
	for _, tt := range tests {
		tool := Tool{Name: tt.tool}
		if d := Decide(cfg, tool, Client2025, tt.upstream, Stats{}); d.Mode != tt.legacy.mode || d.TaskSupport != tt.legacy.ts {
			t.Errorf("%s (upstream %q), legacy: %v %q, want %v %q", tt.tool, tt.upstream, d.Mode, d.TaskSupport, tt.legacy.mode, tt.legacy.ts)
		}
		for fl, want := range map[ClientKind]Mode{Client2026: tt.modern, Client2026NoTasks: tt.noExt, ClientOlder: tt.older, ClientFallback: tt.fallback} {
			d := Decide(cfg, tool, fl, tt.upstream, Stats{})
			if d.Mode != want {
				t.Errorf("%s (upstream %q), %v: %v, want %v (%s)", tt.tool, tt.upstream, fl, d.Mode, want, d.Reason)
			}
			if d.TaskSupport != tt.legacy.ts {
				t.Errorf("%s, %v: TaskSupport %q, want the legacy view %q", tt.tool, fl, d.TaskSupport, tt.legacy.ts)
			}
			if d.Mode == Auto && d.HybridWait != DefaultHybridWait {
				t.Errorf("%s, %v: hybrid wait %v, want the default", tt.tool, fl, d.HybridWait)
			}
		}
	}
}

// TestDecidePrecedence: first match wins, flag rules before file rules,
// globs and annotation conditions both have to match.
func TestDecidePrecedence(t *testing.T) {
	file, err := ParseFile("rules.json", []byte(`{"rules": [
  {"tool": "deploy_*", "mode": "sync"},
  {"annotations": {"readOnlyHint": true}, "mode": "sync"},
  {"tool": "gh/*", "annotations": {"destructiveHint": true}, "mode": "task-required", "ttl": "2h"},
  {"tool": "gh/*", "mode": "task", "pollInterval": "3s"},
  {"annotations": {"openWorldHint": false}, "mode": "auto", "hybridWait": "5s"},
  {"tool": "report_?", "mode": "task", "hybridWait": "300ms"}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	flags := mustRules(t, "deploy_*", TaskRequired, "fast*", Sync)
	cfg := &Config{Rules: append(flags, file...)}
	ro, nd := Annotations{ReadOnlyHint: ptr(true)}, Annotations{DestructiveHint: ptr(false)}
	tests := []struct {
		tool   Tool
		rule   int
		mode   Mode // for a modern client with the extension
		wait   time.Duration
		ttl    time.Duration
		poll   time.Duration
		reason string
	}{
		{Tool{Name: "deploy_prod"}, 1, Task, 0, 0, 0, "rule 1: deploy_* (--task-required)"},
		{Tool{Name: "fast_lookup", Annotations: ro}, 2, Sync, 0, 0, 0, "rule 2: fast* (--sync)"},
		{Tool{Name: "lookup", Annotations: ro}, 4, Sync, 0, 0, 0, "rule 4: * readOnlyHint=true (rules.json:3)"},
		// Absent destructiveHint is true (the spec's default).
		{Tool{Name: "gh/create_issue"}, 5, Task, 0, 2 * time.Hour, 0, "rule 5: gh/* destructiveHint=true (rules.json:4)"},
		{Tool{Name: "gh/create_issue", Annotations: nd}, 6, Task, 0, 0, 3 * time.Second, "rule 6: gh/* (rules.json:5)"},
		// Read-only is never destructive: rule 4 first anyway.
		{Tool{Name: "gh/list", Annotations: ro}, 4, Sync, 0, 0, 0, "rule 4: * readOnlyHint=true (rules.json:3)"},
		{Tool{Name: "memory", Annotations: Annotations{OpenWorldHint: ptr(false)}}, 7, Auto, 5 * time.Second, 0, 0,
			"rule 7: * openWorldHint=false (rules.json:6); default: not seen yet"},
		{Tool{Name: "report_1"}, 8, Auto, 300 * ms, 0, 0, "rule 8: report_? (rules.json:7)"},
		{Tool{Name: "report_12"}, 0, Auto, DefaultHybridWait, 0, 0, "default: not seen yet"},
	}
	for _, tt := range tests {
		d := Decide(cfg, tt.tool, Client2026, "", Stats{})
		if d.Rule != tt.rule || d.Mode != tt.mode || d.HybridWait != tt.wait || d.TTL != tt.ttl || d.PollInterval != tt.poll || d.Reason != tt.reason {
			t.Errorf("%+v:\n got rule %d %v wait %v ttl %v poll %v %q\nwant rule %d %v wait %v ttl %v poll %v %q", tt.tool,
				d.Rule, d.Mode, d.HybridWait, d.TTL, d.PollInterval, d.Reason, tt.rule, tt.mode, tt.wait, tt.ttl, tt.poll, tt.reason)
		}
	}
	// A task rule with hybridWait is still "optional" to a 2025-11-25 client.
	if d := Decide(cfg, Tool{Name: "report_1"}, Client2025, "", Stats{}); d.TaskSupport != TaskSupportOptional || d.Mode != Task {
		t.Errorf("report_1, legacy: %v %q", d.Mode, d.TaskSupport)
	}
}

func TestAnnotationsMatch(t *testing.T) {
	T, F := ptr(true), ptr(false)
	tests := []struct {
		when, have Annotations
		want       bool
	}{
		{Annotations{}, Annotations{}, true},
		{Annotations{ReadOnlyHint: T}, Annotations{}, false}, // default false
		{Annotations{ReadOnlyHint: F}, Annotations{}, true},
		{Annotations{DestructiveHint: T}, Annotations{}, true}, // default true
		{Annotations{DestructiveHint: T}, Annotations{ReadOnlyHint: T}, false},
		{Annotations{DestructiveHint: T}, Annotations{ReadOnlyHint: T, DestructiveHint: T}, false},
		{Annotations{DestructiveHint: F}, Annotations{DestructiveHint: F}, true},
		{Annotations{IdempotentHint: T}, Annotations{}, false}, // default false
		{Annotations{IdempotentHint: T}, Annotations{ReadOnlyHint: T}, true},
		{Annotations{OpenWorldHint: T}, Annotations{}, true}, // default true
		{Annotations{OpenWorldHint: F}, Annotations{OpenWorldHint: F}, true},
		{Annotations{ReadOnlyHint: F, OpenWorldHint: T}, Annotations{OpenWorldHint: F}, false},
	}
	for i, tt := range tests {
		if got := tt.when.Match(tt.have); got != tt.want {
			t.Errorf("case %d: Match = %v, want %v", i, got, tt.want)
		}
	}
}

// TestLatencyBoundaries: p95 exactly at --auto-after is not slow, one
// nanosecond more is; the hybrid wait is min(--hybrid-wait, 2×p50) with
// a floor; pollInterval is p50/4 clamped to [250ms, 30s].
func TestLatencyBoundaries(t *testing.T) {
	cfg := &Config{AutoAfter: 2 * time.Second, HybridWait: time.Second, DefaultPoll: 5 * time.Second}
	tests := []struct {
		name   string
		stats  Stats
		legacy TaskSupport // upstream declared nothing
		wait   time.Duration
		poll   time.Duration
		reason string // for the modern client
	}{
		{"never seen", Stats{}, "", time.Second, 5 * time.Second, "default: not seen yet"},
		{"p95 at auto-after", Stats{1, 400 * ms, 2 * time.Second}, "", time.Second, 250 * ms, "p95 2s ≤ auto-after 2s"},
		{"p95 just over", Stats{1, 400 * ms, 2*time.Second + 1}, TaskSupportOptional, 800 * ms, 250 * ms,
			"p95 2s > auto-after 2s; hybrid wait 800ms = 2×p50"},
		{"2×p50 at hybrid-wait", Stats{9, 500 * ms, 3 * time.Second}, TaskSupportOptional, time.Second, 250 * ms, "p95 3s > auto-after 2s"},
		{"2×p50 just under", Stats{9, 500*ms - 1, 3 * time.Second}, TaskSupportOptional, time.Second - 2, 250 * ms,
			"p95 3s > auto-after 2s; hybrid wait 1s = 2×p50"},
		{"2×p50 above", Stats{9, 1500 * ms, 3 * time.Second}, TaskSupportOptional, time.Second, 375 * ms, "p95 3s > auto-after 2s"},
		{"p50 tiny", Stats{9, 1 * ms, 3 * time.Second}, TaskSupportOptional, MinHybridWait, 250 * ms,
			"p95 3s > auto-after 2s; hybrid wait 10ms (2×p50 2ms is below the minimum)"},
		{"poll at low clamp", Stats{9, time.Second, time.Second}, "", time.Second, 250 * ms, "p95 1s ≤ auto-after 2s"},
		{"poll above low clamp", Stats{9, time.Second + 4, time.Second}, "", time.Second, 250*ms + 1, "p95 1s ≤ auto-after 2s"},
		{"poll at high clamp", Stats{9, 120 * time.Second, 120 * time.Second}, TaskSupportOptional, time.Second, 30 * time.Second,
			"p95 2m0s > auto-after 2s"},
		{"poll over high clamp", Stats{9, 120*time.Second + 4, 121 * time.Second}, TaskSupportOptional, time.Second, 30 * time.Second,
			"p95 2m1s > auto-after 2s"},
		{"poll under high clamp", Stats{9, 120*time.Second - 4, 121 * time.Second}, TaskSupportOptional, time.Second, 30*time.Second - 1,
			"p95 2m1s > auto-after 2s"},
	}
	tool := Tool{Name: "x"}
	for _, tt := range tests {
		d := Decide(cfg, tool, Client2026, "", tt.stats)
		if d.Mode != Auto || d.HybridWait != tt.wait || d.PollInterval != tt.poll || d.Reason != tt.reason {
			t.Errorf("%s: modern %v wait %v poll %v %q; want auto wait %v poll %v %q", tt.name, d.Mode, d.HybridWait, d.PollInterval, d.Reason, tt.wait, tt.poll, tt.reason)
		}
		if d := Decide(cfg, tool, Client2025, "", tt.stats); d.TaskSupport != tt.legacy {
			t.Errorf("%s: legacy %q, want %q (%s)", tt.name, d.TaskSupport, tt.legacy, d.Reason)
		}
		// What the upstream requires stays required; a rule beats latency.
		if d := Decide(cfg, tool, Client2025, TaskSupportRequired, tt.stats); d.TaskSupport != TaskSupportRequired {
			t.Errorf("%s: upstream required became %q", tt.name, d.TaskSupport)
		}
		ruled := &Config{Rules: mustRules(t, "x", Sync), AutoAfter: cfg.AutoAfter}
		if d := Decide(ruled, tool, Client2025, "", tt.stats); d.TaskSupport != TaskSupportAbsent || d.Mode != Sync {
			t.Errorf("%s: --sync x gave %v %q", tt.name, d.Mode, d.TaskSupport)
		}
	}
}

func TestDecideLatencyOff(t *testing.T) {
	slow := Stats{100, 10 * time.Second, time.Minute}
	d := Decide(&Config{AutoAfter: -1}, Tool{Name: "x"}, Client2025, "", slow)
	if d.TaskSupport != TaskSupportAbsent || d.Reason != "default; as the upstream declared" {
		t.Errorf("auto-after off: %q %q", d.TaskSupport, d.Reason)
	}
	// Zero AutoAfter is the default 2s, and a nil config works.
	if d := Decide(nil, Tool{Name: "x"}, Client2025, "", Stats{1, time.Second, 2*time.Second + 1}); d.TaskSupport != TaskSupportOptional {
		t.Errorf("nil config: %q (%s)", d.TaskSupport, d.Reason)
	}
}

func TestDecideReasonsPerFlavour(t *testing.T) {
	cfg := &Config{Rules: mustRules(t, "req", TaskRequired)}
	tests := []struct {
		tool   string
		fl     ClientKind
		reason string
	}{
		{"req", Client2026NoTasks, "rule 1: req (--task-required); client lacks the tasks extension"},
		{"req", ClientOlder, "rule 1: req (--task-required); client cannot do tasks"},
		{"other", Client2026NoTasks, "default: not seen yet; client cannot do tasks"},
		{"other", Client2025, "default: not seen yet; as the upstream declared"},
	}
	for _, tt := range tests {
		if d := Decide(cfg, Tool{Name: tt.tool}, tt.fl, "", Stats{}); d.Reason != tt.reason {
			t.Errorf("%s, %v: %q, want %q", tt.tool, tt.fl, d.Reason, tt.reason)
		}
	}
}

func TestCurrent(t *testing.T) {
	var c Current
	if c.Load() == nil || len(c.Load().Rules) != 0 {
		t.Fatal("zero Current should hold an empty Config")
	}
	a := &Config{Rules: mustRules(t, "*", Task)}
	b := &Config{Rules: mustRules(t, "*", Sync)}
	c.Store(a)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if m := c.Decide(Tool{Name: "x"}, Client2026, "", Stats{}).Mode; m != Task && m != Sync {
					t.Errorf("mode %v: neither the old nor the new rules", m)
					return
				}
			}
		}()
	}
	for range 100 {
		c.Store(b)
		c.Store(a)
	}
	wg.Wait()
	if NewCurrent(b).Decide(Tool{Name: "x"}, Client2026, "", Stats{}).Mode != Sync {
		t.Error("NewCurrent did not store")
	}
}

// BenchmarkDecide: the decision for one tools/call, with flag and file
// rules like an operator would write, in the costly cases: no rule
// matches (every rule is tried, latency decides, the reason is built).
func BenchmarkDecide(b *testing.B) {
	file, err := ParseFile("rules.json", []byte(`{"rules": [
  {"tool": "deploy_*", "mode": "task-required", "ttl": "2h"},
  {"annotations": {"readOnlyHint": true}, "mode": "sync"},
  {"tool": "gh/*", "annotations": {"destructiveHint": true}, "mode": "task-required"},
  {"tool": "report_?", "mode": "task", "hybridWait": "300ms"},
  {"tool": "search_*", "mode": "auto", "pollInterval": "2s"},
  {"tool": "[a-c]*_export", "mode": "task"}
]}`))
	if err != nil {
		b.Fatal(err)
	}
	flags, _ := NewRule("admin_*", Sync)
	flags2, _ := NewRule("slow_*", Task)
	flags3, _ := NewRule("batch_*", TaskRequired)
	cfg := &Config{Rules: append(Rules{flags, flags2, flags3}, file...), AutoAfter: 2 * time.Second, HybridWait: time.Second}
	tool := Tool{Name: "github/create_pull_request", Annotations: Annotations{ReadOnlyHint: ptr(false), OpenWorldHint: ptr(true)}}
	slow := Stats{Count: 500, P50: 300 * ms, P95: 4200 * ms}
	b.Run("modern/no-rule/slow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Decide(cfg, tool, Client2026, "", slow)
		}
	})
	b.Run("legacy/no-rule/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Decide(cfg, tool, Client2025, "", Stats{Count: 500, P50: 30 * ms, P95: 90 * ms})
		}
	})
	b.Run("modern/first-rule", func(b *testing.B) {
		b.ReportAllocs()
		deploy := Tool{Name: "admin_reset"}
		for b.Loop() {
			Decide(cfg, deploy, Client2026, "", slow)
		}
	})
	lat := NewLatencies(0)
	for i := range 1000 {
		lat.Observe(tool.Name, time.Duration(i)*ms)
	}
	cur := NewCurrent(cfg)
	b.Run("with-stats-lookup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cur.Decide(tool, Client2026, "", lat.Stats(tool.Name))
		}
	})
}

// TestDecideFallbackLatency: for a client with fallback task tools, a tool
// no rule names becomes a candidate once its learned p95 passes
// --auto-after, with the hybrid wait in force.
func TestDecideFallbackLatency(t *testing.T) {
	cfg := &Config{AutoAfter: 2 * time.Second, HybridWait: time.Second}
	fast := Stats{Count: 50, P50: 100 * ms, P95: 300 * ms}
	if d := Decide(cfg, Tool{Name: "x"}, ClientFallback, "", fast); d.Mode != Sync {
		t.Fatalf("fast tool: %v (%s), want Sync", d.Mode, d.Reason)
	}
	slow := Stats{Count: 50, P50: 3 * time.Second, P95: 5 * time.Second}
	d := Decide(cfg, Tool{Name: "x"}, ClientFallback, "", slow)
	if d.Mode != Auto || d.HybridWait != time.Second {
		t.Fatalf("slow tool: %v wait %v (%s), want Auto with the configured wait", d.Mode, d.HybridWait, d.Reason)
	}
}
