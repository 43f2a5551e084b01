package policy

import "strings"

// Tool is what the policy knows about a tool: its name and the annotations
// the upstream gave it in tools/list.
type Tool struct {
	Name        string
	Annotations Annotations
}

// Annotations are a tool's behaviour hints ("ToolAnnotations" in the MCP
// 2026-07-28 schema; the same in the MCP 2025-11-25 schema). A nil field is
// absent. The JSON tags are the spec's names, so a tool's
// "annotations" object decodes straight into this struct.
type Annotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// effective returns the hints as the spec defines them when absent:
// readOnlyHint false, destructiveHint true, idempotentHint false,
// openWorldHint true. destructiveHint and idempotentHint are "meaningful
// only when readOnlyHint == false"; a read-only tool is taken as neither
// destructive nor anything but idempotent, so that a rule on
// destructiveHint=true never catches a read-only tool.
func (a Annotations) effective() (readOnly, destructive, idempotent, openWorld bool) {
	readOnly, destructive, idempotent, openWorld = val(a.ReadOnlyHint, false), val(a.DestructiveHint, true),
		val(a.IdempotentHint, false), val(a.OpenWorldHint, true)
	if readOnly {
		destructive, idempotent = false, true
	}
	return
}

func val(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// Match reports whether a tool with annotations have meets the conditions
// in a: every non-nil field of a equals have's effective value (absent
// hints take the spec's defaults, see effective).
func (a Annotations) Match(have Annotations) bool {
	if a.ReadOnlyHint == nil && a.DestructiveHint == nil && a.IdempotentHint == nil && a.OpenWorldHint == nil {
		return true
	}
	ro, de, id, ow := have.effective()
	return (a.ReadOnlyHint == nil || *a.ReadOnlyHint == ro) &&
		(a.DestructiveHint == nil || *a.DestructiveHint == de) &&
		(a.IdempotentHint == nil || *a.IdempotentHint == id) &&
		(a.OpenWorldHint == nil || *a.OpenWorldHint == ow)
}

// appendConditions writes the set conditions as " readOnlyHint=true ...".
func (a Annotations) appendConditions(b *strings.Builder) {
	for _, c := range []struct {
		name string
		v    *bool
	}{{"readOnlyHint", a.ReadOnlyHint}, {"destructiveHint", a.DestructiveHint},
		{"idempotentHint", a.IdempotentHint}, {"openWorldHint", a.OpenWorldHint}} {
		if c.v == nil {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(c.name)
		if *c.v {
			b.WriteString("=true")
		} else {
			b.WriteString("=false")
		}
	}
}
