package gateway

// tools/list for 2025-11-25 sessions: each tool's execution.taskSupport is
// what the policy makes of it ("Tool-Level Negotiation",
// ../shared/spec/tasks-2025-11-25.mdx; policy.Decide for FlavourLegacy):
//
//	task rule             "optional"
//	task-required rule    "required"
//	sync rule             absent (execution dropped when nothing else is in it)
//	no rule, auto rule    as the upstream declared, "optional" once the
//	                      tool's learned p95 exceeds --auto-after
//
// Only tools whose value changes are re-encoded; every other byte of the
// answer (nextCursor, unknown fields of the result and of each tool) is
// kept. What the upstream itself declared (taskSupport and annotations)
// goes into the tool catalogue, which a tools/call on any replica reads
// (toolInfo), so annotation rules match there too. A 2026-07-28 client's
// tools/list teaches the catalogue the same way (learnToolsList).

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
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
	cfg := h.policy.Load()
	result, declared, err := rewriteTools(a.result, func(name string, decl toolDecl) policy.TaskSupport {
		d := policy.Decide(cfg, decl.tool(name), policy.FlavourLegacy, decl.ts, h.lat.Stats(name))
		if d.TaskSupport != decl.ts {
			h.log.Debug().Str("op", "decide").Str("tool", name).Str("task_support", string(d.TaskSupport)).Msg(d.Reason)
		}
		return d.TaskSupport
	})
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

// learnToolsList records what a tools/list result (of either era) declares
// in the tool catalogue.
func (h *Handler) learnToolsList(ctx context.Context, result json.RawMessage) {
	if h.store == nil || len(result) == 0 {
		return
	}
	_, declared, err := rewriteTools(result, nil)
	if err != nil {
		h.log.Debug().Str("op", "tools/list").Err(err).Msg("cannot read the upstream's tools/list result")
		return
	}
	h.tools.learn(ctx, h, declared)
}

// toolDecl is what the upstream declared for one tool in tools/list.
type toolDecl struct {
	ts  policy.TaskSupport
	ann json.RawMessage // the annotations object verbatim, nil when absent
}

// tool is the policy's view of the tool called name.
func (d toolDecl) tool(name string) policy.Tool {
	t := policy.Tool{Name: name}
	if len(d.ann) > 0 {
		_ = json.Unmarshal(d.ann, &t.Annotations) // bad hints count as absent
	}
	return t
}

// rewriteTools reads a tools/list result and, with want (nil: read only),
// sets each tool's execution.taskSupport to want's answer. It returns the
// new result (nil when nothing changed) and what the upstream declared
// per tool.
func rewriteTools(result json.RawMessage, want func(name string, decl toolDecl) policy.TaskSupport) (json.RawMessage, map[string]toolDecl, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, nil, err
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		return nil, nil, err
	}
	declared := make(map[string]toolDecl, len(tools))
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
		var decl toolDecl
		_ = json.Unmarshal(exec["taskSupport"], &decl.ts)
		if ann := bytes.TrimSpace(tool["annotations"]); len(ann) > 0 && ann[0] == '{' {
			decl.ann = ann
		}
		declared[name] = decl
		if want == nil {
			continue
		}
		ts := want(name, decl)
		if ts == decl.ts {
			continue
		}
		if ts == policy.TaskSupportAbsent {
			delete(exec, "taskSupport")
		} else {
			if exec == nil {
				exec = make(map[string]json.RawMessage, 1)
			}
			exec["taskSupport"], _ = json.Marshal(ts)
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
	decl   toolDecl
	listed bool      // the upstream listed the tool (else: "not in the store", remembered briefly)
	at     time.Time // when this replica wrote or read it
}

func newToolCatalog() *toolCatalog { return &toolCatalog{m: make(map[string]catalogEntry)} }

// get returns the local entry for tool, and whether there is one and
// whether it is fresh.
func (c *toolCatalog) get(tool string, now time.Time) (e catalogEntry, ok, fresh bool) {
	c.mu.RLock()
	e, ok = c.m[tool]
	c.mu.RUnlock()
	return e, ok, ok && now.Sub(e.at) <= catalogFresh
}

func (c *toolCatalog) set(tool string, e catalogEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(tool, e)
}

func (c *toolCatalog) setLocked(tool string, e catalogEntry) {
	if _, ok := c.m[tool]; !ok && len(c.m) >= catalogMaxTools {
		c.m = make(map[string]catalogEntry) // start over rather than grow
	}
	c.m[tool] = e
}

// learn records what a tools/list said, writing to the store only the tools
// whose declaration this replica did not already know.
func (c *toolCatalog) learn(ctx context.Context, h *Handler, declared map[string]toolDecl) {
	now := time.Now()
	changed := make(map[string]taskstore.ToolInfo)
	c.mu.RLock()
	for tool, d := range declared {
		if e, ok := c.m[tool]; !ok || !e.listed || e.decl.ts != d.ts || !bytes.Equal(e.decl.ann, d.ann) || now.Sub(e.at) > catalogFresh {
			changed[tool] = taskstore.ToolInfo{TaskSupport: string(d.ts), Annotations: d.ann}
		}
	}
	c.mu.RUnlock()
	if len(changed) > 0 {
		if err := h.store.SetTools(ctx, changed); err != nil {
			// Not fatal: this answer is right; other replicas learn later.
			h.log.Warn().Str("op", "tools/list").Err(err).Msg("cannot record the tool catalogue")
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tool, d := range declared {
		c.setLocked(tool, catalogEntry{decl: d, listed: true, at: now})
	}
}

// toolInfo is what the upstream declared for tool (the zero toolDecl when
// nothing or unknown), and whether it listed the tool at all: only listed
// tools have their latency learned. This replica's copy is trusted for
// catalogFresh, else the store is read.
func (h *Handler) toolInfo(ctx context.Context, tool string) (toolDecl, bool) {
	now := time.Now()
	local, known, fresh := h.tools.get(tool, now)
	if fresh || h.store == nil {
		return local.decl, local.listed
	}
	info, ok, err := h.store.Tool(ctx, tool)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn().Str("op", "decide").Str("tool", tool).Err(err).Msg("cannot read the tool catalogue")
		}
		return local.decl, local.listed // stale or absent, the best there is
	}
	if !ok {
		if known {
			return local.decl, local.listed
		}
		// Remember "not listed" too, briefly: without it every call of a
		// tool nobody listed yet costs a Redis read.
		h.tools.set(tool, catalogEntry{at: now.Add(catalogMissFresh - catalogFresh)})
		return toolDecl{}, false
	}
	d := toolDecl{ts: policy.TaskSupport(info.TaskSupport), ann: info.Annotations}
	h.tools.set(tool, catalogEntry{decl: d, listed: true, at: now})
	return d, true
}

// upstreamTaskSupport is the execution.taskSupport the upstream itself
// declared for tool ("" when absent or unknown).
func (h *Handler) upstreamTaskSupport(ctx context.Context, tool string) policy.TaskSupport {
	d, _ := h.toolInfo(ctx, tool)
	return d.ts
}
