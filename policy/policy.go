package policy

import (
	"strconv"
	"strings"
	"time"
)

// Mode is what a rule asks for a tool. What each mode means to each kind of
// client is the table in docs/ARCHITECTURE.md ("How a tools/call is
// decided"); Decide implements it.
type Mode int

const (
	// Task: the tool may run as a task ("optional" to 2025-11-25 clients,
	// a task for modern clients with the extension, sync otherwise).
	Task Mode = iota + 1
	// TaskRequired: the tool must run as a task ("required" to 2025-11-25
	// clients; -32021 for modern clients without the extension).
	TaskRequired
	// Sync: never a task.
	Sync
	// Auto: what a tool that matches no rule gets (the upstream's
	// taskSupport, made "optional" by learned latency, for 2025-11-25
	// clients; a hybrid call for modern clients), but stops the search so
	// that later rules do not apply, and lets a rules-file rule set ttl,
	// pollInterval and hybridWait. As a Decision's mode: start the call and
	// wait up to Decision.HybridWait before turning it into a task.
	Auto
)

func (m Mode) String() string {
	switch m {
	case Task:
		return "task"
	case TaskRequired:
		return "task-required"
	case Sync:
		return "sync"
	case Auto:
		return "auto"
	}
	return "none"
}

// ParseMode reads a mode as String writes it.
func ParseMode(s string) (Mode, bool) {
	for _, m := range []Mode{Task, TaskRequired, Sync, Auto} {
		if s == m.String() {
			return m, true
		}
	}
	return 0, false
}

// Rule maps tools to a Mode. A tool matches when its name matches Glob and
// its annotations match When. Glob uses path.Match syntax, except that *
// and ? also match "/" (tool names such as "github/create_issue" are one
// name, not a path): * matches any run of characters, ? one character,
// [a-z] a class.
type Rule struct {
	Glob string
	Mode Mode
	// When restricts the rule to tools with these annotation values; a nil
	// field matches any value (see Annotations.Match).
	When Annotations
	// TTL, PollInterval and HybridWait override what the task gets; zero
	// means the rule does not set them (see Decision).
	TTL, PollInterval, HybridWait time.Duration
	// Rerun, when set, says whether a task of the tool may run again after
	// its replica or the upstream failed under it (rerun.go); nil: the
	// rule does not say. A rule with Rerun and no Mode says only that.
	Rerun *bool
	// Source says where the rule came from, for decision reasons:
	// "--task" for a flag, "rules.json:12" for a rules-file line. NewRule
	// sets the flag form.
	Source string
}

// Rules are checked in order; the first match wins.
type Rules []Rule

// NewRule checks glob's syntax. The rule's Source is the flag that sets
// mode ("--task", "--task-required", "--sync").
func NewRule(glob string, mode Mode) (Rule, error) {
	if err := checkGlob(glob); err != nil {
		return Rule{}, err
	}
	return Rule{Glob: glob, Mode: mode, Source: "--" + mode.String()}, nil
}

// Match returns the first rule matching a tool known only by name (its
// annotations taken as absent, i.e. the spec's defaults) and its index, or
// ok=false.
func (rs Rules) Match(tool string) (r Rule, index int, ok bool) {
	return rs.MatchTool(Tool{Name: tool})
}

// MatchTool returns the first rule matching tool and its index, or ok=false.
func (rs Rules) MatchTool(tool Tool) (r Rule, index int, ok bool) {
	for i := range rs {
		if rs[i].Mode == 0 {
			continue // a rerun rule only (rerun.go)
		}
		if rs[i].When.Match(tool.Annotations) && match(rs[i].Glob, tool.Name) {
			return rs[i], i, true
		}
	}
	return Rule{}, -1, false
}

// describe names rule i for a decision's reason: "rule 3: deploy_*
// readOnlyHint=false (rules.json:12)".
func (r *Rule) describe(i int) string {
	var b strings.Builder
	b.Grow(32 + len(r.Glob) + len(r.Source))
	b.WriteString("rule ")
	b.WriteString(strconv.Itoa(i + 1))
	b.WriteString(": ")
	b.WriteString(r.Glob)
	r.When.appendConditions(&b)
	if r.Source != "" {
		b.WriteString(" (")
		b.WriteString(r.Source)
		b.WriteByte(')')
	}
	return b.String()
}

// TaskSupport is a tool's execution.taskSupport in a 2025-11-25 tools/list
// (MCP 2025-11-25, Tasks (utilities/tasks), section "Tool-Level
// Negotiation").
// The empty value means the field is absent, which clients treat as forbidden.
type TaskSupport string

const (
	TaskSupportAbsent    TaskSupport = ""
	TaskSupportForbidden TaskSupport = "forbidden"
	TaskSupportOptional  TaskSupport = "optional"
	TaskSupportRequired  TaskSupport = "required"
)

// AllowsTask reports whether a client may call the tool as a task.
func (ts TaskSupport) AllowsTask() bool {
	return ts == TaskSupportOptional || ts == TaskSupportRequired
}

// Legacy is the execution.taskSupport a 2025-11-25 client is shown for
// tool, given the rules and what the upstream itself declared:
// --task → optional, --task-required → required, --sync → absent, and
// no rule → the upstream's own value. It is Decide for a 2025-11-25 client
// and a tool whose latency is unknown.
func Legacy(rules Rules, tool string, upstream TaskSupport) (TaskSupport, string) {
	d := Decide(&Config{Rules: rules}, Tool{Name: tool}, Client2025, upstream, Stats{})
	return d.TaskSupport, d.Reason
}
