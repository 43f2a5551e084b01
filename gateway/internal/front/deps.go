package front

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Deps are what both fronts hold: the components they call, and the
// poll limit and render cache of tasks/get.
type Deps struct {
	Runner   Runner
	Up       *upstreamside.Side // the upstream side: all of it, the fronts' whole view of the upstream
	Decider  Decider
	Metrics  *obs.Metrics
	Log      zerolog.Logger
	Polls    *PollLimiter // nil: no limit
	Renders  *renderCache
	Fallback *fallback.Tools // the fallback task tools; nil: off (Config.Fallback)
	Trace    *obs.Tracing    // nil: off
}

// Runner is what the fronts need of the task runner (runner.Runner):
// admission, the one sequence that makes a job a task, and the in-flight
// calls of hybrid and bridged calls.
type Runner interface {
	Admit(ctx context.Context, principal string, kind runner.AdmitKind) (*runner.Slot, *mcpwire.Error)
	Count(principal string) *runner.Slot
	Launch(ctx context.Context, j *runner.Job, l runner.LaunchSpec) error
	Hold(parent trace.SpanContext, sess *upstream.Session, req *jsonrpc.Request, slot *runner.Slot) *runner.InflightCall
	StartCall(parent context.Context, sess *upstream.Session, req *jsonrpc.Request, slot *runner.Slot) *runner.InflightCall
	WaitPlain(r *http.Request, j *runner.Job) runner.CallResult
	Life() context.Context
}

// Decider is what the fronts need of the policy decider (decide.Decider):
// decisions, the tool catalogue it learns from the upstream's answers, and
// the latencies it learns from calls.
type Decider interface {
	Decide(ctx context.Context, tool string, client policy.ClientKind) (dec policy.Decision, learn string)
	Native(ctx context.Context, tool string) (native, ruled bool)
	ToolInfo(ctx context.Context, tool string) (decide.ToolDecl, bool)
	UpstreamTaskSupport(ctx context.Context, tool string) policy.TaskSupport
	LearnToolsList(ctx context.Context, result json.RawMessage)
	LearnTools(ctx context.Context, declared map[string]decide.ToolDecl)
	LearnServerCaps(ctx context.Context, caps json.RawMessage)
	Observe(tool string, took time.Duration)
	Rules() *policy.Config
	Learns() bool
	Latency(tool string) policy.Stats
}

// GetTask answers a poll (tasks/get) of the owner's task id for a client of
// era, rendered as f: the poll limit first, then the render cache or the
// store (rendercache.go).
// missing, when set, may serve an id the store does not have (an
// upstream's own task) and reports whether it did.
func (d *Deps) GetTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, store RenderStore,
	f flavour, era core.ClientEra, owner, id string, missing func() bool) {
	if !d.Polls.Admit(w, msg, d.Metrics, owner, id) { // ratelimit.go
		return
	}
	raw, tr, err := d.Renders.get(r.Context(), store, f, owner, id)
	if errors.Is(err, taskstore.ErrNotFound) && missing != nil && missing() {
		return
	}
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(d.Log, err, "get", id, era))
		return
	}
	d.Trace.LinkTrace(r.Context(), id, tr)
	mcpwire.WriteMarshalled(w, msg.ID, raw)
}

// HoldHybrid starts j's upstream call in the slot admit reserved
// (j.Slot, which the call then holds: j.Slot is cleared), as j.Call, and waits up to d's hybrid wait (decide.DefaultHybridWait when unset).
// It returns the call's result if it ended in time; nil if the call is
// still running or its session upstream asked for input (then j.first);
// ok false if the client went away (the call is aborted).
func (d *Deps) HoldHybrid(r *http.Request, j *runner.Job, dec policy.Decision) (res *runner.CallResult, ok bool) {
	wait := dec.HybridWait
	if wait <= 0 {
		wait = decide.DefaultHybridWait
	}
	c := d.Runner.Hold(trace.SpanContextFromContext(r.Context()), j.Sess, j.Req, j.Slot)
	j.Call, j.Slot = c, nil
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case done := <-c.Done:
		return &done, true
	case j.First = <-c.Requests:
		return nil, true
	case <-timer.C:
		return nil, true
	case <-r.Context().Done():
		c.Abort(errors.New("the client went away"))
		<-c.Done
		return nil, false
	}
}
