package gateway

// The MRTR bridge. A 2026-07-28 client asks for input only through
// multi round-trip requests (SEP-2322): a result with resultType
// "input_required", inputRequests and a requestState, answered by retrying
// the call with inputResponses and the same requestState. A legacy upstream
// instead sends a server→client request on the call's stream and waits.
//
// When that happens during a plain tools/call (no task: the client did not
// declare the tasks extension, or a --sync rule), the gateway keeps the
// upstream call running in a worker, under a task that is never shown as
// one, and answers the client with an input_required round whose
// requestState names that task. The retry, on any replica, records the
// answers (the worker hands them upstream) and waits for the next round or
// the result. So elicitation is not lost between eras; it costs the client
// nothing it does not already do for a modern server.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// bridgePrefix starts the requestState of a bridged call.
const bridgePrefix = "taskgate-bridge:"

// forwardLegacyToolCall runs a modern client's plain tools/call on the
// owner's held legacy session; input the upstream asks for turns the call
// into a bridged one.
func (h *Handler) forwardLegacyToolCall(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq,
	target *modernTarget, req *jsonrpc.Request) {
	ctx := r.Context()
	owner := ownerOf(r)
	if e := h.admit(); e != nil {
		writeModernError(w, msg.ID, e)
		return
	}
	c := h.startCall(h.workers.ctx, target.Session, req, true) // the slot admit reserved
	sse := newSSEWriter(w)
	relay := func(n *jsonrpc.Request) {
		if n.Method == "notifications/progress" { // request-scoped: may go on the response stream
			_ = sse.send(rpcRequest{JSONRPC: "2.0", Method: n.Method, Params: n.Params})
		}
	}
	for {
		select {
		case n := <-c.notes:
			relay(n)
		case m := <-c.requests:
			if !clientCan(mr.ClientCaps, m.Method) {
				_ = h.up.Respond(context.WithoutCancel(ctx), target.Session, refusal(m))
				continue
			}
			h.bridge(w, r, msg, mr, &job{
				owner:      owner,
				sess:       target.Session,
				req:        req,
				call:       c,
				first:      m,
				clientCaps: mr.ClientCaps,
				modern:     &modernJob{target: target, params: req.Params},
				learn:      msg.learn,
			}, sse)
			return
		case res := <-c.done:
			for drained := false; !drained; { // what the upstream sent before its answer comes first
				select {
				case n := <-c.notes:
					relay(n)
				default:
					drained = true
				}
			}
			if errors.Is(res.err, upstream.ErrSessionNotFound) {
				// The held session is gone: reopen it and run the call there.
				t2, err := h.reopenModern(ctx, owner, forwardedAuth(r), mr, target)
				if err != nil {
					h.modernFailure(w, r, msg, err)
					return
				}
				target = t2
				c = h.startCall(h.workers.ctx, target.Session, req, false) // the first call ended
				continue
			}
			if res.err == nil {
				h.observe(msg.learn, time.Since(c.started))
			}
			if res.err != nil {
				e := modernRPCError(res.err)
				if sse.started {
					_ = sse.send(rpcResponse{JSONRPC: "2.0", ID: msg.ID, Error: mustJSON(e)})
					return
				}
				h.modernFailure(w, r, msg, res.err)
				return
			}
			out, status := modernResponse(msg.ID, "tools/call", res.resp)
			if sse.started {
				_ = sse.sendRaw(string(out))
				return
			}
			writeRaw(w, status, out)
			return
		case <-ctx.Done():
			// The client went away: on a session a dropped stream is not a
			// cancellation, so say it.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			_ = h.up.Cancel(cctx, target.Session, req.ID, "the client closed the request")
			cancel()
			c.abort(errors.New("the client went away"))
			return
		}
	}
}

// bridge turns the running call j into a hidden task and answers the first
// input_required round.
func (h *Handler) bridge(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq, j *job, sse *sseWriter) {
	ctx := r.Context()
	var p toolsCallParams
	_ = json.Unmarshal(msg.Params, &p)
	if err := h.createTask(context.WithoutCancel(ctx), j, taskstore.FlavourModern, p.Name, anonymousTTL, 0); err != nil {
		j.call.abort(err)
		h.modernFailure(w, r, msg, err)
		return
	}
	h.workers.start(h, j)
	h.answerRound(w, r, msg, j.owner, j.task.ID, nil, sse)
}

// continueBridge is the client's retry of a bridged call: it records the
// inputResponses for the hidden task and answers the next round.
func (h *Handler) continueBridge(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq, taskID string, responses map[string]json.RawMessage) {
	owner := ownerOf(r)
	answers := make(map[string]json.RawMessage, len(responses))
	answered := make(map[string]bool, len(responses))
	for k, v := range responses {
		answers[k] = mustJSON(inputAnswer{Result: v})
		answered[k] = true
	}
	if len(answers) > 0 {
		if _, err := h.store.AnswerInputs(r.Context(), owner, taskID, answers); err != nil && !errors.Is(err, taskstore.ErrTerminal) {
			e := rpcError(err)
			if e.Code == codeInvalidParams {
				e = newRPCErr(http.StatusOK, codeInvalidParams, "requestState is unknown or expired: call the tool again without it")
			}
			writeModernError(w, msg.ID, e)
			return
		}
	}
	h.answerRound(w, r, msg, owner, taskID, answered, newSSEWriter(w))
}

// answerRound waits until the hidden task has input requests the client
// has not just answered, or has ended, and answers accordingly: another
// input_required round with the same requestState, or the call's outcome.
func (h *Handler) answerRound(w http.ResponseWriter, r *http.Request, msg *message, owner, taskID string,
	answered map[string]bool, sse *sseWriter) {
	t, err := h.store.WaitFor(r.Context(), owner, taskID, func(t *taskstore.Task) bool {
		if t.Status.Terminal() {
			return true
		}
		for k := range t.InputRequests {
			if !answered[k] {
				return true
			}
		}
		return false
	})
	if err != nil {
		if r.Context().Err() == nil {
			h.modernFailure(w, r, msg, err)
		}
		return
	}
	var out rpcResponse
	switch t.Status {
	case taskstore.StatusCompleted:
		out = rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: modernResult("tools/call", t.Result)}
	case taskstore.StatusFailed, taskstore.StatusCancelled:
		e := t.Error
		if len(e) == 0 {
			e = mustJSON(map[string]any{"code": codeInternalError, "message": t.StatusMessage})
		}
		out = rpcResponse{JSONRPC: "2.0", ID: msg.ID, Error: e}
	default:
		pending := make(map[string]taskstore.InputRequest, len(t.InputRequests))
		for k, in := range t.InputRequests {
			if !answered[k] {
				pending[k] = in
			}
		}
		out = rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: mustJSON(map[string]any{
			"resultType":    "input_required",
			"inputRequests": pending,
			"requestState":  bridgePrefix + t.ID,
		})}
	}
	if sse.started {
		_ = sse.send(out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// bridgeState returns the hidden task id a retried tools/call continues,
// if its requestState is one the gateway issued.
func bridgeState(params json.RawMessage) (taskID string, responses map[string]json.RawMessage, ok bool) {
	var p struct {
		RequestState   string                     `json:"requestState"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", nil, false
	}
	id, found := strings.CutPrefix(p.RequestState, bridgePrefix)
	return id, p.InputResponses, found && id != ""
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(int64(len(body))))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
