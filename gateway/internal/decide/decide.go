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
	// Exported for the tests of gateway and cmd/taskgate, which read the learned latencies.
	Lat   *policy.Latencies
	tools *toolCatalog
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
	d := &Decider{Policy: p, Lat: policy.NewLatencies(0), tools: newToolCatalog(), log: log}
	if store != nil {
		d.store = store
	}
	return d
}

// Decide applies the policy in force to a call of tool by a client of the
// given kind. learn is the name to record the call's latency under: the
// Tool when the upstream listed it, else "" (not learned).
func (d *Decider) Decide(ctx context.Context, tool string, client policy.ClientKind) (dec policy.Decision, learn string) {
	decl, listed := d.ToolInfo(ctx, tool)
	dec = policy.Decide(d.Policy.Load(), decl.Tool(tool), client, decl.TaskSupport, d.Lat.Stats(tool))
	if ev := d.log.Debug(); ev.Enabled() {
		ev.Str("op", "decide").Str("tool", tool).Str("client", client.String()).Str("mode", dec.Mode.String()).
			Str("task_support", string(dec.TaskSupport)).Int("rule", dec.Rule)
		if dec.Mode == policy.Auto {
			ev.Float64("hybrid_wait_seconds", dec.HybridWait.Seconds())
		}
		ev.Msg(dec.Reason)
	}
	if listed {
		learn = tool
	}
	return dec, learn
}

// Native reports whether the upstream declared execution.taskSupport for
// Tool, so that it runs the tool's tasks itself (a native tool), and
// whether a task, task-required or sync rule takes the tool over: then the
// gateway decides, and owns any task, holding the upstream's underneath
// (internal/runner/native.go). An auto rule leaves a native tool native.
func (d *Decider) Native(ctx context.Context, tool string) (native, ruled bool) {
	decl, listed := d.ToolInfo(ctx, tool)
	if !listed {
		return false, false
	}
	return policy.Native(d.Policy.Load(), decl.Tool(tool), d.UpstreamTaskSupport(ctx, tool))
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
func (d *Decider) Latency(tool string) policy.Stats { return d.Lat.Stats(tool) }

// Learns reports whether the catalogue learns the upstream's tools (it
// does with a store, where replicas share it).
func (d *Decider) Learns() bool { return d.store != nil }
