package front2025

// tools/list for 2025-11-25 sessions: each tool's execution.taskSupport is
// what the policy makes of it (MCP 2025-11-25, Tasks, "Tool-Level
// Negotiation"; policy.Decide for a 2025-11-25 client):
//
//	task rule             "optional"
//	task-required rule    "required"
//	sync rule             absent (execution dropped when nothing else is in it)
//	no rule, auto rule    as the upstream declared, "optional" once the
//	                      tool's learned p95 exceeds --auto-after
//
// A rule applies to the upstream's own task tools too (it declared
// taskSupport: a native tool): the gateway then owns their tasks and holds
// the upstream's underneath, and a sync rule's plain call of a tool the
// upstream requires tasks for is answered through the upstream's task
// (native.go, internal/runner/native.go). With no rule they stay the
// upstream's.
//
// Only tools whose value changes are re-encoded; every other byte of the
// answer (nextCursor, unknown fields of the result and of each tool) is
// kept. What the upstream itself declared goes into the tool catalogue
// (internal/decide/catalog.go), which a tools/call on any replica reads.

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
)

func (f *Front) toolsList(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	s := f.sessions.session(r)
	withFallback := fallback.FirstPage(msg.Params) && f.fallbackListed(r.Context(), s)
	if !s.tasks2025() && !withFallback {
		f.Up.Forward(w, r, msg, f.UpstreamHeader(r), "")
		return
	}
	a := f.Up.ForwardForRewrite(w, r, msg, upstreamside.IdentityHeader(f.UpstreamHeader(r)), msg.Raw)
	if a == nil {
		return
	}
	defer a.Close()
	if a.Result == nil {
		a.Write(w, r, f.Log, nil)
		return
	}
	result, err := f.toolsListResult(r.Context(), s, a.Result, withFallback)
	if err != nil {
		f.Log.Warn().Str("op", "tools/list").Err(err).Msg("cannot read the upstream's tools/list result; relayed unchanged")
		a.Write(w, r, f.Log, nil)
		return
	}
	out := json.RawMessage(nil)
	if result != nil {
		if out, err = mcpwire.WithMember(a.Msg, "result", result); err != nil {
			out = nil
		}
	}
	a.Write(w, r, f.Log, out)
}

// toolsListResult is the upstream's tools/list result as session s sees
// it: each tool's taskSupport as the policy makes it (a 2025-11-25
// session), the fallback task tools added (withFallback); nil when nothing
// changes. What the upstream declared is learned either way.
func (f *Front) toolsListResult(ctx context.Context, s *sessionInfo, upstream json.RawMessage, withFallback bool) (json.RawMessage, error) {
	var result json.RawMessage
	if s.tasks2025() {
		cfg := f.Decider.Rules()
		var declared map[string]decide.ToolDecl
		var err error
		result, declared, err = decide.RewriteTools(upstream, func(name string, decl decide.ToolDecl) policy.TaskSupport {
			d := policy.Decide(cfg, decl.Tool(name), policy.Client2025, decl.TaskSupport, f.Decider.Latency(name))
			if d.TaskSupport == policy.TaskSupportRequired && f.Fallback != nil && s.noTasks {
				// A client without tasks refuses to call a "required" tool
				// itself; with the fallback tools it gets a task anyway.
				d.TaskSupport = policy.TaskSupportOptional
			}
			if d.TaskSupport != decl.TaskSupport {
				f.Log.Debug().Str("op", "decide").Str("tool", name).Str("task_support", string(d.TaskSupport)).Msg(d.Reason)
			}
			return d.TaskSupport
		})
		if err != nil {
			return nil, err
		}
		f.Decider.LearnTools(ctx, declared)
	} else {
		f.Decider.LearnToolsList(ctx, upstream)
	}
	if withFallback {
		base := result
		if base == nil {
			base = upstream
		}
		if with, err := f.Fallback.AppendTools(base); err == nil {
			result = with
		} else {
			f.Log.Warn().Str("op", "tools/list").Err(err).Msg("cannot add the fallback.Tools tools to the upstream's tools/list result")
		}
	}
	return result, nil
}
