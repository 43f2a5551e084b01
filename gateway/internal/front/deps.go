package front

import (
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
)

// Deps are what both fronts hold: the components they call, and the
// poll limit and render cache of tasks/get.
type Deps struct {
	Runner   *runner.Runner     // admission, Launch, the held calls, the notifications of 2025-11-25 tasks
	Up       *upstreamside.Side // the upstream side: all of it, the fronts' whole view of the upstream
	Decider  *decide.Decider    // policy, tool catalogue, learned latency
	Metrics  *obs.Metrics
	Log      zerolog.Logger
	Polls    *PollLimiter // nil: no limit
	Renders  *renderCache
	Fallback *fallback.Tools // the fallback task tools; nil: off (Config.Fallback)
	Trace    *obs.Tracing    // nil: off
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

// WriteCallResult answers msg, a tools/call the runner held, with res, the
// call's end, for a client of era: the gateway's failure as a JSON-RPC
// error (logged), the upstream's error as it came, else its result. A
// 2026-07-28 client's result carries resultType "complete"
// (core.StatelessResult), and its error goes with the HTTP status the code
// calls for (mcpwire.StatelessStatus).
func (d *Deps) WriteCallResult(w http.ResponseWriter, msg *mcpwire.Message, res runner.CallResult, era core.ClientEra) {
	switch {
	case res.Err != nil:
		e := core.RPCError(res.Err, era)
		d.Log.Warn().Str("op", "call").Msg(e.Message)
		mcpwire.WriteError(w, msg.ID, e)
	case res.Resp.Error != nil:
		status := http.StatusOK
		var we *jsonrpc.Error
		if era == core.Era2026 && errors.As(res.Resp.Error, &we) {
			status = mcpwire.StatelessStatus(int(we.Code))
		}
		mcpwire.WriteJSON(w, status, mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Error: mcpwire.MustMarshal(res.Resp.Error)})
	case era == core.Era2026:
		mcpwire.WriteResult(w, msg.ID, core.StatelessResult("tools/call", res.Resp.Result))
	default:
		mcpwire.WriteResult(w, msg.ID, res.Resp.Result)
	}
}
