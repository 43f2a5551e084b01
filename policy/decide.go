package policy

import (
	"strings"
	"time"
)

// ClientKind is what the client declared it can do with tasks.
type ClientKind int

const (
	// ClientOlder: 2025-06-18 or before; no tasks at all. The zero value,
	// so a forgotten kind never creates a task.
	ClientOlder ClientKind = iota
	// Client2025: 2025-11-25; the client asks for a task per call with
	// params.task, for tools whose execution.taskSupport allows it.
	Client2025
	// Client2026: 2026-07-28 with the io.modelcontextprotocol/tasks
	// extension declared in the request's _meta; the server decides.
	Client2026
	// Client2026NoTasks: 2026-07-28 without the extension.
	Client2026NoTasks
	// ClientFallback: a client that can do no tasks (no params.task, no
	// tasks capability or extension) in front of a gateway that offers
	// fallback task tools (--fallback-tools): a task candidate runs, and
	// if it is still running after the hybrid wait it goes on as a task
	// the client follows through tools.
	ClientFallback
)

func (k ClientKind) String() string {
	switch k {
	case Client2025:
		return "2025-11-25"
	case Client2026:
		return "2026-07-28"
	case Client2026NoTasks:
		return "2026-07-28-no-tasks"
	case ClientFallback:
		return "fallback"
	}
	return "older"
}

// Stats is what has been learned about a tool's upstream latency (see
// Histogram.Stats). Count zero means the tool was never seen.
type Stats struct {
	Count    int
	P50, P95 time.Duration
}

// Decision is what the gateway does with one tools/call, and what a
// 2025-11-25 client is shown in tools/list.
type Decision struct {
	// Mode depends on the kind of client:
	//   - Client2026: Sync, Task (create the task at once) or Auto (start
	//     the call, wait up to HybridWait, then make it a task);
	//   - Client2025: Task, TaskRequired or Sync, mirroring TaskSupport;
	//     the client decides with params.task, which the gateway checks
	//     against TaskSupport (-32601 either way it does not fit);
	//   - Client2026NoTasks: Sync, or TaskRequired: refuse the call with
	//     -32021 (the tool needs the tasks extension);
	//   - ClientFallback: Auto for a task candidate (a task or
	//     task-required rule, or a learned p95 over --auto-after), with
	//     HybridWait set; Sync otherwise;
	//   - ClientOlder: Sync.
	Mode Mode
	// HybridWait is set when Mode is Auto.
	HybridWait time.Duration
	// TTL is the rule's ttl, zero when no rule sets one: the gateway then
	// uses the client's or its default, within --max-ttl either way.
	TTL time.Duration
	// PollInterval is the pollInterval to suggest: the rule's, else about a
	// quarter of the tool's p50 within [MinPollInterval, MaxPollInterval],
	// else Config.DefaultPoll (which may be zero: the store's default).
	PollInterval time.Duration
	// TaskSupport is the execution.taskSupport a 2025-11-25 client sees in
	// tools/list, whatever the kind of client of this call.
	TaskSupport TaskSupport
	// Rule is the 1-based index of the rule that matched, 0 for none.
	Rule int
	// Reason says why, for the debug audit log: "rule 3: deploy_*
	// (--task-required)", "p95 4.2s > auto-after 2s", "default: not seen yet".
	Reason string
}

// Decide applies the policy to one call of tool by a client of the given
// kind; upstream is the taskSupport the upstream declared for the tool
// and stats its learned latency. Rules come first (first match wins); a
// tool no rule matches, or an Auto rule, follows latency. cfg may be nil
// (no rules, defaults). See docs/ARCHITECTURE.md, "How a tools/call is
// decided".
func Decide(cfg *Config, tool Tool, client ClientKind, upstream TaskSupport, stats Stats) Decision {
	if cfg == nil {
		cfg = &Config{}
	}
	var d Decision
	var why reason
	mode := Auto
	r, i, ok := cfg.Rules.MatchTool(tool)
	if ok {
		mode, d.Rule, d.TTL = r.Mode, i+1, r.TTL
		why.add(r.describe(i))
	}

	slow := false
	if mode == Auto {
		slow = latency(cfg, stats, &why)
	}
	switch mode {
	case Task:
		d.TaskSupport = TaskSupportOptional
	case TaskRequired:
		d.TaskSupport = TaskSupportRequired
	case Sync:
		d.TaskSupport = TaskSupportAbsent
	default:
		d.TaskSupport = upstream
		if slow && !upstream.AllowsTask() {
			d.TaskSupport = TaskSupportOptional
		}
	}

	switch client {
	case Client2025:
		switch d.TaskSupport {
		case TaskSupportOptional:
			d.Mode = Task
		case TaskSupportRequired:
			d.Mode = TaskRequired
		default:
			d.Mode = Sync
		}
		if mode == Auto && d.TaskSupport == upstream {
			why.add("as the upstream declared")
		}
	case Client2026:
		switch {
		case mode == Sync:
			d.Mode = Sync
		case mode == TaskRequired, mode == Task && r.HybridWait == 0:
			d.Mode = Task
		default:
			d.Mode = Auto
			d.HybridWait = hybridWait(cfg, r, ok, slow, stats, &why)
		}
	case Client2026NoTasks:
		if mode == TaskRequired {
			d.Mode = TaskRequired
			why.add("client lacks the tasks extension")
		} else {
			d.Mode = Sync
			why.add("client cannot do tasks")
		}
	case ClientFallback:
		// Only what a rule or latency makes a candidate: a tool the
		// upstream merely declares task-capable is not one (it may be
		// fast), and a sync rule keeps its meaning.
		if mode == Task || mode == TaskRequired || mode == Auto && slow {
			d.Mode = Auto
			d.HybridWait = hybridWait(cfg, r, ok, slow, stats, &why)
			why.add("fallback task tools")
		} else {
			d.Mode = Sync
			why.add("not a task candidate")
		}
	default:
		d.Mode = Sync
		why.add("client cannot do tasks")
	}
	d.PollInterval = pollInterval(cfg, r, stats)
	d.Reason = why.String()
	return d
}

// latency reports whether a tool's learned p95 makes it a task candidate,
// and says why.
func latency(cfg *Config, st Stats, why *reason) bool {
	after := cfg.autoAfter()
	switch {
	case after < 0:
		why.add("default")
		return false
	case st.Count <= 0:
		why.add("default: not seen yet")
		return false
	case st.P95 > after:
		why.add("p95 " + short(st.P95) + " > auto-after " + short(after))
		return true
	default:
		why.add("p95 " + short(st.P95) + " ≤ auto-after " + short(after))
		return false
	}
}

// hybridWait is a modern auto call's budget: the rule's, else --hybrid-wait,
// cut to about twice the p50 of a slow tool so that a call that will not
// finish soon becomes a task soon.
func hybridWait(cfg *Config, r Rule, ruled, slow bool, st Stats, why *reason) time.Duration {
	if ruled && r.HybridWait > 0 {
		return r.HybridWait
	}
	w := cfg.hybridWait()
	if slow {
		switch learned := 2 * st.P50; {
		case learned >= w, w <= MinHybridWait:
		case learned < MinHybridWait:
			why.add("hybrid wait " + short(MinHybridWait) + " (2×p50 " + short(learned) + " is below the minimum)")
			return MinHybridWait
		default:
			why.add("hybrid wait " + short(learned) + " = 2×p50")
			return learned
		}
	}
	return w
}

// pollInterval is the rule's, else a quarter of the learned p50 clamped to
// [MinPollInterval, MaxPollInterval], else the default.
func pollInterval(cfg *Config, r Rule, st Stats) time.Duration {
	switch {
	case r.PollInterval > 0:
		return r.PollInterval
	case st.Count > 0:
		return min(max(st.P50/4, MinPollInterval), MaxPollInterval)
	default:
		return cfg.DefaultPoll
	}
}

// reason joins the parts of a decision's reason with "; ".
type reason struct{ b strings.Builder }

func (r *reason) add(s string) {
	if r.b.Len() > 0 {
		r.b.WriteString("; ")
	} else {
		r.b.Grow(64)
	}
	r.b.WriteString(s)
}

func (r *reason) String() string { return r.b.String() }

// short prints d to a useful precision: "4.213s", "350ms", "1.5ms".
func short(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		d = d.Round(time.Millisecond)
	case d >= 10*time.Microsecond:
		d = d.Round(10 * time.Microsecond)
	}
	return d.String()
}

// Native reports whether tool is a native tool, one whose tasks the
// upstream runs itself (it declared a taskSupport that allows tasks), and
// whether a task, task-required or sync rule takes it over (ruled): then
// the gateway decides, and owns any task, holding the upstream's own
// underneath. An auto rule, or none, leaves a native tool native. cfg may
// be nil.
func Native(cfg *Config, tool Tool, upstream TaskSupport) (native, ruled bool) {
	if !upstream.AllowsTask() {
		return false, false
	}
	return true, Ruled(cfg, tool)
}

// Ruled reports whether a task, task-required or sync rule names tool (an
// auto rule leaves the decision to latency, and an upstream's own tasks
// to the upstream). cfg may be nil.
func Ruled(cfg *Config, tool Tool) bool {
	if cfg == nil {
		return false
	}
	r, _, ok := cfg.Rules.MatchTool(tool)
	return ok && r.Mode != Auto
}
