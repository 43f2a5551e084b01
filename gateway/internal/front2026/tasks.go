package front2026

// tasks/get, tasks/update and tasks/cancel of the tasks extension
// (SEP-2663): a tasks/get is a DetailedTask with the result, error or
// inputRequests inlined; tasks/update records answers and acknowledges;
// tasks/cancel acknowledges, eventually consistent.

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// tasks answers tasks/get, tasks/update and tasks/cancel, and
// refuses the 2025-11-25 methods the extension dropped.
func (f *Front) tasks(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	method := msg.MethodName()
	if method == "tasks/result" || method == "tasks/list" {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound,
			"Method not found: "+method+" is not part of the tasks extension; poll tasks/get"))
		return
	}
	if !mr.Tasks {
		core.WriteStatelessError(w, msg.ID, missingTasksCapability(method+" needs the tasks extension declared"))
		return
	}
	var p struct {
		TaskID         string          `json:"taskId"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if mp, err := msg.RoutingParams(); err == nil && mp.TaskID != nil && len(mp.InputResponses) == 0 {
		p.TaskID = *mp.TaskID // what decoding params again would give
	} else if err := json.Unmarshal(msg.Params, &p); err != nil {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			method+" params must be an object with a string taskId"))
		return
	}
	if p.TaskID == "" {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, method+" needs params.taskId"))
		return
	}
	owner := core.Owner2026(r, p.TaskID)
	ack := map[string]string{"resultType": "complete"}
	// An id the store does not have may be the upstream's own task,
	// created through this owner's pass-through call (native.go).
	missing := func() bool { return f.upstreamTask2026(w, r, msg, owner, p.TaskID) }
	switch method {
	case "tasks/get":
		f.GetTask(w, r, msg, f.store, front.Render2026Get, core.Era2026, owner, p.TaskID, missing)
	case "tasks/update":
		answers, e := updateAnswers(p.InputResponses)
		if e != nil {
			core.WriteStatelessError(w, msg.ID, e)
			return
		}
		// One round trip: recorded durably, then acknowledged. Keys that
		// are not outstanding are ignored (SEP-2663, "Task Update
		// Requests": a server SHOULD ignore them); a terminal task needs
		// nothing.
		_, err := f.store.AnswerInputs(r.Context(), owner, p.TaskID, answers)
		if errors.Is(err, taskstore.ErrNotFound) && missing() {
			return
		}
		if err != nil && !errors.Is(err, taskstore.ErrTerminal) {
			mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "update", p.TaskID, core.Era2026))
			return
		}
		mcpwire.WriteResult(w, msg.ID, ack)
	case "tasks/cancel":
		t, err := f.store.RequestCancel(r.Context(), owner, p.TaskID, "The task was cancelled by request.")
		switch {
		case errors.Is(err, taskstore.ErrNotFound) && missing():
			return
		case errors.Is(err, taskstore.ErrTerminal):
		case err != nil:
			mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "cancel", p.TaskID, core.Era2026))
			return
		default:
			f.Metrics.TaskFinished(t, taskstore.StatusCancelled, 0)
			f.Trace.LinkTask(r.Context(), t)
			f.Log.Info().Str("op", "cancelled").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(owner)).
				Float64("duration_seconds", time.Since(t.CreatedAt).Seconds()).Msg("task cancelled")
		}
		mcpwire.WriteResult(w, msg.ID, ack)
	default:
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound, "Method not found: "+method))
	}
}

// updateAnswers reads a tasks/update's inputResponses into the answers to
// record, bounded before they reach Redis: at most core.MaxInputRequests (no
// task has more outstanding), keys longer than any key the gateway mints
// left out (they are never outstanding).
func updateAnswers(raw json.RawMessage) (map[string]json.RawMessage, *mcpwire.Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tasks/update needs params.inputResponses")
	}
	var responses map[string]json.RawMessage
	if !mcpwire.IsObject(raw) || json.Unmarshal(raw, &responses) != nil {
		return nil, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			"tasks/update params.inputResponses must be an object mapping input request keys to responses")
	}
	if e := core.CheckInputResponses(len(responses), "tasks/update"); e != nil {
		return nil, e
	}
	answers := make(map[string]json.RawMessage, len(responses))
	for k, v := range responses {
		if len(k) <= core.MaxInputKeyLen {
			answers[k] = mcpwire.MustMarshal(core.InputAnswer{Result: v})
		}
	}
	return answers, nil
}
