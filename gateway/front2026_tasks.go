package gateway

// tasks/get, tasks/update and tasks/cancel of the tasks extension
// (SEP-2663): a tasks/get is a DetailedTask with the result, error or
// inputRequests inlined; tasks/update records answers and acknowledges;
// tasks/cancel acknowledges, eventually consistent.

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// tasks answers tasks/get, tasks/update and tasks/cancel, and
// refuses the 2025-11-25 methods the extension dropped.
func (f *front2026) tasks(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	method := msg.MethodName()
	if method == "tasks/result" || method == "tasks/list" {
		writeStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound,
			"Method not found: "+method+" is not part of the tasks extension; poll tasks/get"))
		return
	}
	if !mr.Tasks {
		writeStatelessError(w, msg.ID, missingTasksCapability(method+" needs the tasks extension declared"))
		return
	}
	var p struct {
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if mp, err := msg.RoutingParams(); err == nil && mp.TaskID != nil && len(mp.InputResponses) == 0 {
		p.TaskID = *mp.TaskID // what decoding params again would give
	} else if err := json.Unmarshal(msg.Params, &p); err != nil {
		p.TaskID = ""
	}
	if p.TaskID == "" {
		writeStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, method+" needs params.taskId"))
		return
	}
	owner := ownerOf(r)
	ack := map[string]string{"resultType": "complete"}
	switch method {
	case "tasks/get":
		f.get(w, r, msg, f.store, render2026Get, era2026, owner, p.TaskID)
	case "tasks/update":
		if p.InputResponses == nil {
			writeStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tasks/update needs params.inputResponses"))
			return
		}
		answers := make(map[string]json.RawMessage, len(p.InputResponses))
		for k, v := range p.InputResponses {
			answers[k] = mcpwire.MustMarshal(inputAnswer{Result: v})
		}
		// One round trip: recorded durably, then acknowledged. Unknown or
		// already answered keys are ignored; a terminal task needs nothing.
		_, err := f.store.AnswerInputs(r.Context(), owner, p.TaskID, answers)
		if err != nil && !errors.Is(err, taskstore.ErrTerminal) {
			mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "update", p.TaskID, era2026))
			return
		}
		mcpwire.WriteResult(w, msg.ID, ack)
	case "tasks/cancel":
		t, err := f.store.RequestCancel(r.Context(), owner, p.TaskID, "The task was cancelled by request.")
		switch {
		case errors.Is(err, taskstore.ErrTerminal):
		case err != nil:
			mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "cancel", p.TaskID, era2026))
			return
		default:
			f.metrics.taskFinished(t.Tool, taskstore.StatusCancelled, t.CreatedAt)
			f.log.Info().Str("op", "cancelled").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", shortOwner(owner)).
				Dur("duration", time.Since(t.CreatedAt)).Msg("task cancelled")
		}
		mcpwire.WriteResult(w, msg.ID, ack)
	default:
		writeStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound, "Method not found: "+method))
	}
}
