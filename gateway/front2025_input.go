package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Input requests reach a 2025-11-25 client as server→client requests on its
// tasks/result stream, with a request id the gateway mints:
//
//	"taskgate-input:<taskId>:<key>"
//
// The client answers with a POSTed JSON-RPC response carrying that id, to
// any replica. The id names the task and the input key, so the answer is
// recorded in the store (owner-checked) and reaches the worker, wherever it
// runs, as an "inputs" event (docs/ARCHITECTURE.md invariant 6).
const inputIDPrefix = "taskgate-input:"

func inputID(taskID, key string) json.RawMessage {
	b, _ := json.Marshal(inputIDPrefix + taskID + ":" + key)
	return b
}

// isInputID reports whether a response id is one the gateway minted.
func isInputID(id json.RawMessage) bool {
	return len(id) > len(inputIDPrefix)+1 && id[0] == '"' && strings.HasPrefix(string(id[1:]), inputIDPrefix)
}

func parseInputID(id json.RawMessage) (taskID, key string, ok bool) {
	var s string
	if json.Unmarshal(id, &s) != nil {
		return "", "", false
	}
	rest, found := strings.CutPrefix(s, inputIDPrefix)
	if !found {
		return "", "", false
	}
	taskID, key, ok = strings.Cut(rest, ":")
	return taskID, key, ok && taskID != "" && key != ""
}

// inputAnswer is what is stored for an input request: the client's
// JSON-RPC result or error, which the worker hands back upstream.
type inputAnswer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// serveInputResponse records a client's answer to an input request. It is
// acknowledged with 202 once durably recorded. Answers to unknown or
// already answered keys are ignored, as are duplicates.
func (f *front2025) inputResponse(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	taskID, key, ok := parseInputID(msg.ID)
	if !ok {
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeInvalidRequest, "response id is not one the gateway issued"))
		return
	}
	answer, _ := json.Marshal(inputAnswer{Result: msg.Result, Error: msg.Error})
	owner := ownerOf(r)
	n, err := f.store.AnswerInputs(r.Context(), owner, taskID, map[string]json.RawMessage{key: answer})
	if err != nil {
		e := *taskError(f.log, err, "answer", taskID, era2025)
		if e.Code != mcpwire.CodeInternalError {
			e.Status = http.StatusNotFound // a response has no id to answer with an error
		} else {
			e.Status = http.StatusServiceUnavailable
		}
		mcpwire.WriteError(w, nil, &e)
		return
	}
	f.log.Debug().Str("op", "answer").Str("task_id", taskID).Str("key", key).Int("accepted", n).Msg("input response recorded")
	w.WriteHeader(http.StatusAccepted)
}
