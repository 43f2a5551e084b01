package gateway

// How a tools/call is decided (DESIGN.md): policy.Decide, with the rules in
// force (Config.Policy, read per call so a reload applies to the next call),
// the tool as the upstream declared it (the catalogue, toolslist.go), what
// the client declared, and the tool's learned latency (latency.go). Every
// decision is logged at debug with its reason, for audit.

import (
	"context"
	"time"

	"github.com/taskgate/taskgate/policy"
)

// decide applies the policy in force to a call of tool by a client of the
// given flavour. learn is the name to record the call's latency under: the
// tool when the upstream listed it, else "" (not learned).
func (h *Handler) decide(ctx context.Context, tool string, flavour policy.Flavour) (d policy.Decision, learn string) {
	decl, listed := h.toolInfo(ctx, tool)
	d = policy.Decide(h.policy.Load(), decl.tool(tool), flavour, decl.ts, h.lat.Stats(tool))
	if ev := h.log.Debug(); ev.Enabled() {
		ev.Str("op", "decide").Str("tool", tool).Str("flavour", flavour.String()).Str("mode", d.Mode.String()).
			Str("task_support", string(d.TaskSupport)).Int("rule", d.Rule)
		if d.Mode == policy.Auto {
			ev.Dur("hybrid_wait", d.HybridWait)
		}
		ev.Msg(d.Reason)
	}
	if listed {
		learn = tool
	}
	return d, learn
}

// taskTTL is the ttl of a task the policy decided on: the rule's, else
// what the client asked for (0: the store's default). A task of an
// anonymous owner lives at most anonymousTTL: its id is its only bearer.
func taskTTL(d policy.Decision, asked time.Duration, owner string) time.Duration {
	ttl := asked
	if d.TTL > 0 {
		ttl = d.TTL
	}
	if owner == "anonymous" && ttl > anonymousTTL {
		ttl = anonymousTTL
	}
	return ttl
}
