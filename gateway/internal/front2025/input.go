package front2025

import (
	"encoding/json"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// serveInputResponse records a client's answer to an input request. It is
// acknowledged with 202 once durably recorded. Answers to unknown or
// already answered keys are ignored, as are duplicates.
func (f *Front) inputResponse(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	taskID, key, ok := core.ParseInputID(msg.ID)
	if !ok {
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeInvalidRequest, "response id is not one the gateway issued"))
		return
	}
	answer, _ := json.Marshal(core.InputAnswer{Result: msg.Result, Error: msg.Error})
	owner := core.OwnerOf(r)
	n, err := f.store.AnswerInputs(r.Context(), owner, taskID, map[string]json.RawMessage{key: answer})
	if err != nil {
		e := *core.TaskError(f.Log, err, "answer", taskID, core.Era2025)
		if e.Code != mcpwire.CodeInternalError {
			e.Status = http.StatusNotFound // a response has no id to answer with an error
		} else {
			e.Status = http.StatusServiceUnavailable
		}
		mcpwire.WriteError(w, nil, &e)
		return
	}
	f.Log.Debug().Str("op", "answer").Str("task_id", taskID).Str("key", key).Int("accepted", n).Msg("input response recorded")
	w.WriteHeader(http.StatusAccepted)
}
