package decide

// The tool catalogue: what the upstream declared per tool in tools/list
// (execution.taskSupport, annotations), which the policy reads on every
// tools/call. A tools/list seen by any replica teaches every replica: the
// declarations go to the store, and each replica keeps a copy it re-reads
// after catalogFresh.

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

const (
	// catalogFresh is how long a replica trusts its own copy of a tool's
	// declaration before reading the store again.
	catalogFresh = 5 * time.Minute
	// CatalogMissFresh is how long a replica trusts "the store has no
	// declaration for this tool": short, so a tools/list seen by another
	// replica is picked up soon.
	CatalogMissFresh = 30 * time.Second
	// catalogMaxTools bounds the in-process catalogue.
	catalogMaxTools = 10000
)

// LearnToolsList records what a tools/list result (of either era) declares
// in the tool catalogue.
func (d *Decider) LearnToolsList(ctx context.Context, result json.RawMessage) {
	if d.store == nil || len(result) == 0 {
		return
	}
	_, declared, err := RewriteTools(result, nil)
	if err != nil {
		d.log.Debug().Str("op", "tools/list").Err(err).Msg("cannot read the upstream's tools/list result")
		return
	}
	d.LearnTools(ctx, declared)
}

// ToolDecl is what the upstream declared for one tool in tools/list.
type ToolDecl struct {
	TaskSupport policy.TaskSupport
	ann         json.RawMessage // the annotations object verbatim, nil when absent
	Output      bool            // it declares an outputSchema
}

// Tool is the policy's view of the tool called name.
func (d ToolDecl) Tool(name string) policy.Tool {
	t := policy.Tool{Name: name}
	if len(d.ann) > 0 {
		_ = json.Unmarshal(d.ann, &t.Annotations) // bad hints count as absent
	}
	return t
}

// RewriteTools reads a tools/list result and, with want (nil: read only),
// sets each tool's execution.taskSupport to want's answer. It returns the
// new result (nil when nothing changed) and what the upstream declared
// per tool.
func RewriteTools(result json.RawMessage, want func(name string, decl ToolDecl) policy.TaskSupport) (json.RawMessage, map[string]ToolDecl, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, nil, err
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		return nil, nil, err
	}
	declared := make(map[string]ToolDecl, len(tools))
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
		var decl ToolDecl
		_ = json.Unmarshal(exec["taskSupport"], &decl.TaskSupport)
		if ann := bytes.TrimSpace(tool["annotations"]); len(ann) > 0 && ann[0] == '{' {
			decl.ann = ann
		}
		decl.Output = len(tool["outputSchema"]) > 0 && string(tool["outputSchema"]) != "null"
		declared[name] = decl
		if want == nil {
			continue
		}
		ts := want(name, decl)
		if ts == decl.TaskSupport {
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
// Tool; the store holds the shared one.
type toolCatalog struct {
	mu sync.RWMutex
	m  map[string]catalogEntry
}

type catalogEntry struct {
	decl   ToolDecl
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

// LearnTools records what a tools/list said, writing to the store only the
// tools whose declaration this replica did not already know.
func (d *Decider) LearnTools(ctx context.Context, declared map[string]ToolDecl) {
	c := d.tools
	now := time.Now()
	changed := make(map[string]taskstore.ToolInfo)
	c.mu.RLock()
	for tool, decl := range declared {
		if e, ok := c.m[tool]; !ok || !e.listed || e.decl.TaskSupport != decl.TaskSupport || !bytes.Equal(e.decl.ann, decl.ann) || e.decl.Output != decl.Output || now.Sub(e.at) > catalogFresh {
			changed[tool] = taskstore.ToolInfo{TaskSupport: string(decl.TaskSupport), Annotations: decl.ann, OutputSchema: decl.Output}
		}
	}
	c.mu.RUnlock()
	if len(changed) > 0 {
		if err := d.store.SetTools(ctx, changed); err != nil {
			// Not fatal: this answer is right; other replicas learn later.
			d.log.Warn().Str("op", "tools/list").Err(err).Msg("cannot record the tool catalogue")
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tool, decl := range declared {
		c.setLocked(tool, catalogEntry{decl: decl, listed: true, at: now})
	}
}

// ToolInfo is what the upstream declared for tool (the zero ToolDecl when
// nothing or unknown), and whether it listed the tool at all: only listed
// tools have their latency learned. This replica's copy is trusted for
// catalogFresh, else the store is read.
func (d *Decider) ToolInfo(ctx context.Context, tool string) (ToolDecl, bool) {
	now := time.Now()
	local, _, fresh := d.tools.get(tool, now)
	if fresh || d.store == nil {
		return local.decl, local.listed
	}
	info, ok, err := d.store.Tool(ctx, tool)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Str("op", "decide").Str("tool", tool).Err(err).Msg("cannot read the tool catalogue")
		}
		return local.decl, local.listed // stale or absent, the best there is
	}
	if !ok {
		// Remember "not in the store" too, briefly: without it every call
		// of a tool nobody listed yet (or whose entry the store lost)
		// costs a Redis read. What this replica knew of it stands.
		d.tools.set(tool, catalogEntry{decl: local.decl, listed: local.listed, at: now.Add(CatalogMissFresh - catalogFresh)})
		return local.decl, local.listed
	}
	decl := ToolDecl{TaskSupport: policy.TaskSupport(info.TaskSupport), ann: info.Annotations, Output: info.OutputSchema}
	d.tools.set(tool, catalogEntry{decl: decl, listed: true, at: now})
	return decl, true
}

// UpstreamSupport is the execution.taskSupport the upstream itself
// declared (decl, "" when absent or unknown), as far as it holds: a tool
// of an upstream that does not declare task-augmented tools/call (its
// capabilities.tasks, when an initialize told) has none, whatever its
// tools/list says (MCP 2025-11-25, Tasks, "Capabilities").
func (d *Decider) UpstreamSupport(ctx context.Context, decl ToolDecl) policy.TaskSupport {
	if decl.TaskSupport == "" {
		return "" // none to check against the server's capability (no store read)
	}
	if declared, known := d.serverTasks.get(ctx, d.store); known && !declared {
		return ""
	}
	return decl.TaskSupport
}

// serverTasks is whether the upstream declares task-augmented tools/call,
// as the last initialize result a replica saw said, shared through the
// Store.
type serverTasks struct {
	mu       sync.Mutex
	declared bool
	known    bool
	at       time.Time
}

func (s *serverTasks) get(ctx context.Context, store catalogStore) (declared, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known && time.Since(s.at) < catalogFresh || store == nil {
		return s.declared, s.known
	}
	if d, k, err := store.UpstreamTasks(ctx); err == nil {
		s.declared, s.known, s.at = d, k, time.Now()
	}
	return s.declared, s.known
}

// LearnServerCaps records what an upstream initialize result's
// capabilities say of task-augmented tools/call.
func (d *Decider) LearnServerCaps(ctx context.Context, caps json.RawMessage) {
	var c struct {
		Tasks *struct {
			Requests struct {
				Tools struct {
					Call json.RawMessage `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return
	}
	declared := c.Tasks != nil && len(c.Tasks.Requests.Tools.Call) > 0 && string(c.Tasks.Requests.Tools.Call) != "null"
	s := &d.serverTasks
	s.mu.Lock()
	changed := !s.known || s.declared != declared
	s.declared, s.known, s.at = declared, true, time.Now()
	s.mu.Unlock()
	if changed && d.store != nil {
		if err := d.store.SetUpstreamTasks(ctx, declared); err != nil {
			d.log.Debug().Str("op", "initialize").Err(err).Msg("cannot record the upstream's tasks capability")
		}
	}
}
