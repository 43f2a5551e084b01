package decide

// How a tools/call is decided (docs/ARCHITECTURE.md, "How a tools/call is
// decided"): policy.Decide, with the rules in force (Config.Policy, read
// per call so a reload applies to the next call), the tool as the upstream
// declared it (the catalogue, catalog.go), what the client declared, and
// the tool's learned latency (latency.go). Every decision is logged at
// debug with its reason, for audit.

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// DefaultHybridWait is how long an "auto" tools/call may run before it
// becomes a task when the policy sets no wait (--hybrid-wait).
const DefaultHybridWait = time.Second

// Decider applies the policy: it owns the rules in force, the tool
// catalogue and the learned latencies, and shares the latter two with the
// other replicas through the store.
type Decider struct {
	Policy *policy.Current
	lat    *policy.Latencies // the learned latencies (latency.go); Latency reads them
	tools  *toolCatalog
	// serverTasks: whether the upstream declares task-augmented tools/call.
	serverTasks serverTasks
	store       catalogStore // nil: nothing shared, nothing learned across replicas
	sync        *latencySync // nil until startSync, and without a store
	log         zerolog.Logger
}

// catalogStore is what the decider needs of the task store.
type catalogStore interface {
	SetTools(ctx context.Context, tools map[string]taskstore.ToolInfo) error
	Tool(ctx context.Context, tool string) (taskstore.ToolInfo, bool, error)
	PublishLatencies(ctx context.Context, replica string, hists map[string][]byte, keep time.Duration) error
	LoadLatencies(ctx context.Context, except string, keep time.Duration) (map[string]map[string][]byte, error)
	SetUpstreamTasks(ctx context.Context, declared bool) error
	UpstreamTasks(ctx context.Context) (declared, known bool, err error)
}

func NewDecider(p *policy.Current, store *taskstore.Store, log zerolog.Logger) *Decider {
	d := &Decider{Policy: p, lat: policy.NewLatencies(0), tools: newToolCatalog(), log: log}
	if store != nil {
		d.store = store
	}
	return d
}

// Call is the decider's one answer for a tools/call: the policy's
// Decision and everything else a front asks of the tool, from one read
// of the catalogue and of the rules in force.
type Call struct {
	policy.Decision
	// Learn is the name the call's latency is recorded under: the tool
	// when the upstream listed it, else "" (not learned).
	Learn string
	// Upstream is the execution.taskSupport the upstream itself declared
	// for the tool, as far as it holds (UpstreamSupport).
	Upstream policy.TaskSupport
	// Native: the upstream listed the tool with an execution.taskSupport
	// that holds, so that it runs the tool's tasks itself (a native tool;
	// policy.Native). Ruled: a task, task-required or sync rule names the
	// tool (policy.Ruled): then the gateway decides, and owns any task,
	// holding the upstream's underneath (internal/runner/native.go). An
	// auto rule leaves a native tool native.
	Native, Ruled bool
}

// DecideCall decides a call of tool by a client of the given kind, from
// what the catalogue holds of it now. A front that makes sure the tool is
// known first (upstreamside.Side.ToolDeclared) decides with
// DecideDeclared, on what that read.
func (d *Decider) DecideCall(ctx context.Context, tool string, client policy.ClientKind) Call {
	decl, listed := d.ToolInfo(ctx, tool)
	return d.DecideDeclared(ctx, tool, decl, listed, client)
}

// DecideDeclared decides a call of tool by a client of the given kind,
// the upstream's declaration of the tool being decl (listed: it listed
// the tool at all). It reads the rules in force once and writes the debug
// audit line.
func (d *Decider) DecideDeclared(ctx context.Context, tool string, decl ToolDecl, listed bool, client policy.ClientKind) Call {
	rules, t := d.Policy.Load(), decl.Tool(tool)
	c := Call{Decision: policy.Decide(rules, t, client, decl.TaskSupport, d.lat.Stats(tool))}
	c.Ruled = policy.Ruled(rules, t)
	if listed {
		c.Learn = tool
		c.Upstream = d.UpstreamSupport(ctx, decl)
		c.Native = c.Upstream.AllowsTask()
	}
	if ev := d.log.Debug(); ev.Enabled() {
		ev.Str("op", "decide").Str("tool", tool).Str("client", client.String()).Str("mode", c.Mode.String()).
			Str("task_support", string(c.TaskSupport)).Int("rule", c.Rule)
		if c.Mode == policy.Auto {
			ev.Float64("hybrid_wait_seconds", c.HybridWait.Seconds())
		}
		ev.Msg(c.Reason)
	}
	return c
}

// TaskTTL is the ttl of a task the policy decided on: the rule's, else
// what the client asked for (0: the store's default). A task of an
// anonymous owner lives at most core.AnonymousTTL: its id is its only bearer.
func TaskTTL(d policy.Decision, asked time.Duration, owner string) time.Duration {
	ttl := asked
	if d.TTL > 0 {
		ttl = d.TTL
	}
	if core.IsAnonymous(owner) && ttl > core.AnonymousTTL {
		ttl = core.AnonymousTTL
	}
	return ttl
}

// Rules are the policy rules in force (--policy, reloaded on change).
func (d *Decider) Rules() *policy.Config { return d.Policy.Load() }

// Latency is what this replica learned of tool's latency, merged with the
// other replicas' (latency.go).
func (d *Decider) Latency(tool string) policy.Stats { return d.lat.Stats(tool) }

// Learns reports whether the catalogue learns the upstream's tools (it
// does with a store, where replicas share it).
func (d *Decider) Learns() bool { return d.store != nil }
