package gateway

// tools/list for 2025-11-25 sessions: each tool's execution.taskSupport is
// what the rules make of it ("Tool-Level Negotiation",
// ../shared/spec/tasks-2025-11-25.mdx; policy.Legacy):
//
//	--task GLOB           "optional"
//	--task-required GLOB  "required"
//	--sync GLOB           absent (execution dropped when nothing else is in it)
//	no rule               as the upstream declared
//
// Only tools whose value changes are re-encoded; every other byte of the
// answer (nextCursor, unknown fields of the result and of each tool) is
// kept. What the upstream itself declared goes into the tool catalogue,
// which a tools/call on any replica reads (upstreamTaskSupport).

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/policy"
)

const (
	// catalogFresh is how long a replica trusts its own copy of a tool's
	// declaration before reading the store again.
	catalogFresh = 5 * time.Minute
	// catalogMissFresh is how long a replica trusts "the store has no
	// declaration for this tool": short, so a tools/list seen by another
	// replica is picked up soon.
	catalogMissFresh = 30 * time.Second
	// catalogMaxTools bounds the in-process catalogue.
	catalogMaxTools = 10000
)

func (h *Handler) serveToolsList(w http.ResponseWriter, r *http.Request, msg *message) {
	if !h.session(r).legacyTasks() {
		h.forward(w, r, msg)
		return
	}
	a := h.forwardForRewrite(w, r, msg, identityHeader(h.upstreamHeader(r)), msg.raw)
	if a == nil {
		return
	}
	defer a.close()
	if a.result == nil {
		a.write(w, r, h, nil)
		return
	}
	result, declared, err := rewriteTools(h.cfg.Rules, a.result)
	if err != nil {
		h.log.Warn().Str("op", "tools/list").Err(err).Msg("cannot read the upstream's tools/list result; relayed unchanged")
		a.write(w, r, h, nil)
		return
	}
	h.tools.learn(r.Context(), h, declared)
	out := json.RawMessage(nil)
	if result != nil {
		if out, err = withMember(a.msg, "result", result); err != nil {
			out = nil
		}
	}
	a.write(w, r, h, out)
}

// rewriteTools applies the rules to a tools/list result. It returns the new
// result (nil when nothing changed) and what the upstream declared per tool.
func rewriteTools(rules policy.Rules, result json.RawMessage) (json.RawMessage, map[string]policy.TaskSupport, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, nil, err
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		return nil, nil, err
	}
	declared := make(map[string]policy.TaskSupport, len(tools))
	changed := false
	for i, raw := range tools {
		var tool map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tool); err != nil || tool == nil {
			continue // not a tool; the client will say so
		}
		var name string
		if json.Unmarshal(tool["name"], &name) != nil || name == "" {
			continue
		}
		var exec map[string]json.RawMessage
		_ = json.Unmarshal(tool["execution"], &exec)
		var up policy.TaskSupport
		_ = json.Unmarshal(exec["taskSupport"], &up)
		declared[name] = up
		want, _ := policy.Legacy(rules, name, up)
		if want == up {
			continue
		}
		if want == policy.TaskSupportAbsent {
			delete(exec, "taskSupport")
		} else {
			if exec == nil {
				exec = make(map[string]json.RawMessage, 1)
			}
			exec["taskSupport"], _ = json.Marshal(want)
		}
		if len(exec) == 0 {
			delete(tool, "execution")
		} else {
			tool["execution"], _ = json.Marshal(exec)
		}
		b, err := json.Marshal(tool)
		if err != nil {
			return nil, nil, err
		}
		tools[i], changed = b, true
	}
	if !changed {
		return nil, declared, nil
	}
	var err error
	if res["tools"], err = json.Marshal(tools); err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(res)
	return out, declared, err
}

// toolCatalog is this replica's copy of what the upstream declared per
// tool; the store holds the shared one.
type toolCatalog struct {
	mu sync.RWMutex
	m  map[string]catalogEntry
}

type catalogEntry struct {
	ts policy.TaskSupport
	at time.Time // when this replica wrote or read it
}

func newToolCatalog() *toolCatalog { return &toolCatalog{m: make(map[string]catalogEntry)} }

// get returns the local value for tool, and whether there is one and
// whether it is fresh.
func (c *toolCatalog) get(tool string, now time.Time) (ts policy.TaskSupport, ok, fresh bool) {
	c.mu.RLock()
	e, ok := c.m[tool]
	c.mu.RUnlock()
	return e.ts, ok, ok && now.Sub(e.at) <= catalogFresh
}

// setUntil records ts for tool as read at `at` (so it stays fresh until
// at+catalogFresh).
func (c *toolCatalog) setUntil(tool string, ts policy.TaskSupport, at time.Time) {
	c.set(map[string]policy.TaskSupport{tool: ts}, at)
}

func (c *toolCatalog) set(entries map[string]policy.TaskSupport, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tool, ts := range entries {
		if _, ok := c.m[tool]; !ok && len(c.m) >= catalogMaxTools {
			c.m = make(map[string]catalogEntry) // start over rather than grow
		}
		c.m[tool] = catalogEntry{ts: ts, at: now}
	}
}

// learn records what a tools/list said, writing to the store only the tools
// whose declaration this replica did not already know.
func (c *toolCatalog) learn(ctx context.Context, h *Handler, declared map[string]policy.TaskSupport) {
	now := time.Now()
	changed := make(map[string]string)
	c.mu.RLock()
	for tool, ts := range declared {
		if e, ok := c.m[tool]; !ok || e.ts != ts || now.Sub(e.at) > catalogFresh {
			changed[tool] = string(ts)
		}
	}
	c.mu.RUnlock()
	if len(changed) > 0 {
		if err := h.store.SetToolTaskSupport(ctx, changed); err != nil {
			// Not fatal: this answer is right; other replicas learn later.
			h.log.Warn().Str("op", "tools/list").Err(err).Msg("cannot record the tool catalogue")
			return
		}
	}
	c.set(declared, now)
}

// upstreamTaskSupport is the execution.taskSupport the upstream itself
// declared for tool ("" when absent or unknown).
func (h *Handler) upstreamTaskSupport(ctx context.Context, tool string) policy.TaskSupport {
	now := time.Now()
	local, known, fresh := h.tools.get(tool, now)
	if fresh || h.store == nil {
		return local
	}
	v, ok, err := h.store.ToolTaskSupport(ctx, tool)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn().Str("op", "decide").Str("tool", tool).Err(err).Msg("cannot read the tool catalogue")
		}
		return local // stale or absent, the best there is
	}
	if !ok {
		if known {
			return local
		}
		// Remember "not declared" too, briefly: without it every call of a
		// tool nobody listed yet costs a Redis read.
		h.tools.setUntil(tool, policy.TaskSupportAbsent, now.Add(catalogMissFresh-catalogFresh))
		return policy.TaskSupportAbsent
	}
	ts := policy.TaskSupport(v)
	h.tools.set(map[string]policy.TaskSupport{tool: ts}, now)
	return ts
}
