package policy

// Which tools may run again: a task whose replica died, or whose upstream
// call failed on the way (a connection reset, a 503, a lost session), is
// run again only when its tool is safe to repeat (docs/durable.md). The
// upstream says so with its tool annotations, readOnlyHint or
// idempotentHint (MCP 2025-11-25, "Tool Annotations"): that is the
// upstream's promise, and the operator's to overrule. A rule that says
// "rerun" (--rerun, --no-rerun, "rerun" in the rules file) beats any
// hint; the first matching rule that says it wins.

// NewRerunRule is the rule of --rerun GLOB (rerun true) or --no-rerun
// GLOB (false); it sets no mode.
func NewRerunRule(glob string, rerun bool) (Rule, error) {
	if err := checkGlob(glob); err != nil {
		return Rule{}, err
	}
	src := "--rerun"
	if !rerun {
		src = "--no-rerun"
	}
	return Rule{Glob: glob, Rerun: &rerun, Source: src}, nil
}

// MatchRerun returns the first rule that matches tool and says whether it
// reruns, with its index, or ok=false.
func (rs Rules) MatchRerun(tool Tool) (r Rule, index int, ok bool) {
	for i := range rs {
		if rs[i].Rerun != nil && rs[i].When.Match(tool.Annotations) && match(rs[i].Glob, tool.Name) {
			return rs[i], i, true
		}
	}
	return Rule{}, -1, false
}

// Rerunnable reports whether a task of tool may run again, and why: a
// rule that says so (first match), else the tool's annotations
// (readOnlyHint or idempotentHint true), else not. cfg may be nil.
func Rerunnable(cfg *Config, tool Tool) (rerun bool, why string) {
	if cfg != nil {
		if r, i, ok := cfg.Rules.MatchRerun(tool); ok {
			return *r.Rerun, r.describe(i)
		}
	}
	switch {
	case val(tool.Annotations.ReadOnlyHint, false):
		return true, "readOnlyHint: true (the upstream's promise)"
	case val(tool.Annotations.IdempotentHint, false):
		return true, "idempotentHint: true (the upstream's promise)"
	}
	return false, "neither readOnlyHint nor idempotentHint"
}
