package policy

import (
	"fmt"
	"path"
)

// Mode is what a rule asks for a tool.
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
)

func (m Mode) String() string {
	switch m {
	case Task:
		return "task"
	case TaskRequired:
		return "task-required"
	case Sync:
		return "sync"
	}
	return "none"
}

// Rule maps tool names matching Glob to a Mode. Glob uses path.Match
// syntax: * matches any run of characters (tool names have no slashes
// that matter here, so * also crosses "/"), ? one character, [a-z] a class.
type Rule struct {
	Glob string
	Mode Mode
}

// Rules are checked in order; the first match wins.
type Rules []Rule

// NewRule checks glob's syntax.
func NewRule(glob string, mode Mode) (Rule, error) {
	if glob == "" {
		return Rule{}, fmt.Errorf("empty tool glob")
	}
	if _, err := path.Match(glob, ""); err != nil {
		return Rule{}, fmt.Errorf("bad tool glob %q: %v", glob, err)
	}
	return Rule{Glob: glob, Mode: mode}, nil
}

// Match returns the first rule matching tool and its index, or ok=false.
func (rs Rules) Match(tool string) (r Rule, index int, ok bool) {
	for i, r := range rs {
		if match(r.Glob, tool) {
			return r, i, true
		}
	}
	return Rule{}, -1, false
}

// match is path.Match, except that * also matches "/" (tool names such as
// "github/create_issue" are one name, not a path).
func match(glob, name string) bool {
	if ok, _ := path.Match(glob, name); ok {
		return true
	}
	// Retry with "/" hidden from path.Match's segment rule.
	const sep = "\x00"
	ok, _ := path.Match(replaceSlash(glob, sep), replaceSlash(name, sep))
	return ok
}

func replaceSlash(s, with string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			out = append(out, with...)
		} else {
			out = append(out, s[i])
		}
	}
	return string(out)
}

// TaskSupport is a tool's execution.taskSupport in a 2025-11-25 tools/list
// ("Tool-Level Negotiation", ../shared/spec/tasks-2025-11-25.mdx).
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
// no rule → the upstream's own value.
func Legacy(rules Rules, tool string, upstream TaskSupport) (TaskSupport, string) {
	r, i, ok := rules.Match(tool)
	if !ok {
		return upstream, "no rule: as the upstream declared"
	}
	reason := fmt.Sprintf("rule %d: --%s %s", i+1, r.Mode, r.Glob)
	switch r.Mode {
	case Task:
		return TaskSupportOptional, reason
	case TaskRequired:
		return TaskSupportRequired, reason
	default:
		return TaskSupportAbsent, reason
	}
}
