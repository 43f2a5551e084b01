package runner

// The input a task's upstream asks for, in either upstream era, and the
// client's answers: a session upstream sends server→client requests on
// the call's stream and waits for a POSTed response; a stateless upstream
// ends the call with an MRTR input_required result (SEP-2322) and expects
// the call again with inputResponses. Both become the task's outstanding
// input requests (keys the gateway mints, unique for the task's life),
// answered from whichever client protocol holds the task.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

func (run *taskRun) mintKey() string {
	run.keys++
	return strconv.Itoa(run.keys)
}

func (run *taskRun) stopWaiting() {
	if !run.waitingSince.IsZero() {
		waited := time.Since(run.waitingSince)
		run.inputWait += waited
		run.rn.Metrics.TrendInputWait(run.j.Task.Tool, waited) // the console's trends (obs/trends.go)
		run.waitingSince = time.Time{}
		run.live.Set(taskstore.StatusWorking)
	}
}

// startWaiting marks the task waiting for its client's answers.
func (run *taskRun) startWaiting() {
	if run.waitingSince.IsZero() {
		run.waitingSince = time.Now()
		run.live.Set(taskstore.StatusInputRequired)
	}
}

// observeInputWait records, once the task ends, how long it waited for
// input in all (tasks that never asked are not observed).
func (run *taskRun) observeInputWait() {
	run.stopWaiting()
	run.j.inputWait = run.inputWait
	if run.inputWait > 0 {
		run.rn.Metrics.InputWait.WithLabelValues(run.rn.Metrics.Tools.Label(run.j.Task.Tool)).Observe(run.inputWait.Seconds())
	}
}

// inputRequest turns a session upstream's server→client request into an
// input request of the task (input_required), or refuses it upstream when
// the client did not declare the capability to answer it.
func (run *taskRun) inputRequest(m *jsonrpc.Request) {
	rn, j := run.rn, run.j
	if !ClientCan(j.ClientCaps, m.Method) {
		_ = rn.Up.Respond(run.writeCtx, j.Sess, Refusal(m))
		run.log().Info().Str("op", "refused").Str("method", m.Method).Msg("the client did not declare the capability; refused upstream")
		return
	}
	if len(run.pending) >= core.MaxInputRequests {
		_ = rn.Up.Respond(run.writeCtx, j.Sess, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: mcpwire.CodeInternalError,
			Message: fmt.Sprintf("taskgate relays at most %d input requests of a task at once", core.MaxInputRequests)}})
		run.log().Warn().Str("op", "refused").Str("method", m.Method).Msg("too many input requests outstanding; refused upstream")
		return
	}
	// A question of the upstream's own task (native.go) names that
	// Task in related-task _meta; the client's task is the gateway's.
	params := WithoutRelatedTask(m.Params)
	if a := run.replayAnswer(m.Method, params); a != nil { // answered before a rerun (rerun.go)
		_ = rn.Up.Respond(run.writeCtx, j.Sess, answerResponse(a, m.ID))
		return
	}
	key := run.mintKey()
	in := map[string]taskstore.InputRequest{key: {Method: m.Method, Params: params, Digest: j.questionDigest(m.Method, params)}}
	// Redis briefly down is waited out (as for the outcome, finish): the
	// upstream's question must not turn into an error result because
	// Redis blinked. One write id for every attempt: an attempt Redis ran
	// but whose reply was lost makes the next one a no-op, not a reused
	// key (invariant 8).
	write := uuid.NewString()
	if err := rn.retry.do(run.Ctx, func() error {
		return rn.Store.AddInputRequests(run.writeCtx, j.Owner, j.Task.ID, in, "waiting for the client to answer "+m.Method, write)
	}); err != nil {
		// Terminal meanwhile (cancelled) or the store stayed down: the
		// upstream must not wait for an answer that cannot come.
		_ = rn.Up.Respond(run.writeCtx, j.Sess, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
			Code: mcpwire.CodeInternalError, Message: "taskgate could not relay " + m.Method + " to the client"}})
		run.log().Warn().Str("op", "input_required").Err(err).Msg("input request not relayed")
		return
	}
	run.pending[key] = m.ID
	run.startWaiting()
	run.log().Info().Str("op", "input_required").Str("method", m.Method).Str("key", key).Msg("task needs input")
	rn.notifyStatusByID(run.writeCtx, j)
}

// Refusal answers an input request the client cannot serve: a declined
// elicitation, else a method-not-found error.
func Refusal(m *jsonrpc.Request) *jsonrpc.Response {
	if m.Method == "elicitation/create" {
		return &jsonrpc.Response{ID: m.ID, Result: json.RawMessage(`{"action":"decline"}`)}
	}
	return &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: mcpwire.CodeMethodNotFound,
		Message: "the client did not declare the capability for " + m.Method}}
}

// ClientCan reports whether capabilities caps let the client answer method.
// Unknown capabilities (nil) allow everything: the client then sees the
// request and may refuse it itself.
func ClientCan(caps json.RawMessage, method string) bool {
	if len(caps) == 0 {
		return true
	}
	var c map[string]json.RawMessage
	if json.Unmarshal(caps, &c) != nil {
		return true
	}
	switch method {
	case "elicitation/create":
		return c["elicitation"] != nil
	case "sampling/createMessage":
		return c["sampling"] != nil
	case "roots/list":
		return c["roots"] != nil
	}
	return true
}

// mrtrRound handles a stateless upstream's input_required result (SEP-2322
// multi round-trip requests): its inputRequests become the task's, under
// keys the gateway mints, and once all are answered the call is retried
// with inputResponses and the same requestState. It reports whether res
// was such a round (and the task goes on).
func (run *taskRun) mrtrRound(res CallResult) bool {
	j := run.j
	if j.Client2026 == nil || !j.Client2026.Target.Stateless || res.Err != nil || res.Resp == nil || res.Resp.Error != nil {
		return false
	}
	var ir struct {
		ResultType    string                            `json:"resultType"`
		InputRequests map[string]taskstore.InputRequest `json:"inputRequests"`
		RequestState  *string                           `json:"requestState"`
	}
	if json.Unmarshal(res.Resp.Result, &ir) != nil || ir.ResultType != "input_required" {
		return false
	}
	run.requestState = ""
	if ir.RequestState != nil {
		run.requestState = *ir.RequestState
	}
	if len(ir.InputRequests) > core.MaxInputRequests {
		run.fail(fmt.Sprintf("the upstream asked for %d inputs at once; taskgate relays at most %d", len(ir.InputRequests), core.MaxInputRequests))
		return true
	}
	toStore := map[string]taskstore.InputRequest{}
	for _, uk := range core.SortedInputKeys(ir.InputRequests) {
		in := ir.InputRequests[uk]
		if !ClientCan(j.ClientCaps, in.Method) {
			if in.Method == "elicitation/create" {
				run.mrtrAnswers[uk] = json.RawMessage(`{"action":"decline"}`)
				continue
			}
			run.fail("the upstream asked for " + in.Method + ", which the client did not declare it can answer")
			return true
		}
		if a := run.replayAnswer(in.Method, in.Params); a != nil { // answered before a rerun
			run.mrtrAnswers[uk] = a.Result
			continue
		}
		in.Digest = j.questionDigest(in.Method, in.Params)
		key := run.mintKey()
		toStore[key] = in
		run.mrtr[key] = uk
	}
	if len(toStore) > 0 {
		msg := "waiting for the client to answer " + strconv.Itoa(len(toStore)) + " input request(s)"
		write := uuid.NewString() // as in inputRequest
		if err := run.rn.retry.do(run.Ctx, func() error {
			return run.rn.Store.AddInputRequests(run.writeCtx, j.Owner, j.Task.ID, toStore, msg, write)
		}); err != nil {
			run.fail("could not record the upstream's input requests: " + err.Error())
			return true
		}
		run.startWaiting()
		run.log().Info().Str("op", "input_required").Int("requests", len(toStore)).Msg("task needs input")
	}
	if len(run.mrtr) == 0 {
		run.Retry()
	}
	return true
}

// Retry sends the tools/call again with the answers collected so far and
// the requestState of the last round.
func (run *taskRun) Retry() {
	j := run.j
	var p map[string]json.RawMessage
	_ = json.Unmarshal(j.Client2026.Params, &p)
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	p["inputResponses"] = mcpwire.MustMarshal(run.mrtrAnswers)
	if run.requestState != "" {
		p["requestState"] = mcpwire.MustMarshal(run.requestState)
	} else {
		delete(p, "requestState")
	}
	run.mrtrAnswers = map[string]json.RawMessage{}
	run.reqID, _ = jsonrpc.MakeID("taskgate-" + uuid.NewString())
	run.stopWaiting()
	run.adopt(run.rn.StartCall(rerunContext(run.Ctx, j), j.Sess, &jsonrpc.Request{ID: run.reqID, Method: "tools/call", Params: mcpwire.MustMarshal(p)}, run.rn.Count(j.principal())))
}

// deliverAnswers takes the client's recorded answers and hands them to the
// upstream: a POSTed response with the upstream's own request id (session
// upstream), or, once a round is fully answered, a retried call (stateless
// upstream). It reports whether the worker is done (the task was
// cancelled).
func (run *taskRun) deliverAnswers() (done bool) {
	rn, j := run.rn, run.j
	// One take id until a take succeeds: a take Redis ran but whose reply
	// was lost (it died before answering) took the answers out of the
	// record, and only a take with the same id gets them back; with a new
	// Id the task would wait forever for answers already taken
	// (invariant 8).
	if run.takeID == "" {
		run.takeID = "take-" + uuid.NewString()
	}
	answers, status, err := rn.Store.TakeInputResponses(run.writeCtx, j.Owner, j.Task.ID, run.takeID)
	switch {
	case errors.Is(err, taskstore.ErrNotFound), errors.Is(err, taskstore.ErrExpired):
		return run.gone(err)
	case err != nil:
		return false // store briefly down: the resync timer tries again
	}
	run.takeID = ""
	if status == taskstore.StatusCancelled {
		return run.cancelled()
	}
	delivered := false
	for key, raw := range answers {
		var a core.InputAnswer
		_ = json.Unmarshal(raw, &a)
		if uk, ok := run.mrtr[key]; ok {
			delete(run.mrtr, key)
			run.mrtrAnswers[uk] = a.Result
			delivered = true
			continue
		}
		upID, ok := run.pending[key]
		if !ok {
			continue
		}
		delete(run.pending, key)
		if err := rn.Up.Respond(run.writeCtx, j.Sess, answerResponse(&a, upID)); err != nil {
			run.log().Warn().Str("op", "answer").Str("key", key).Err(err).Msg("could not deliver the client's answer upstream")
			continue
		}
		delivered = true
	}
	if len(run.pending) == 0 && len(run.mrtr) == 0 {
		run.stopWaiting()
	}
	if delivered && run.Call == nil && len(run.mrtr) == 0 && j.Client2026 != nil {
		run.Retry()
	}
	if delivered {
		rn.notifyStatusByID(run.writeCtx, j)
	}
	return false
}

// answerResponse is the answer a as the upstream's request id expects it.
func answerResponse(a *core.InputAnswer, id jsonrpc.ID) *jsonrpc.Response {
	if len(a.Error) > 0 {
		var we jsonrpc.Error
		if json.Unmarshal(a.Error, &we) != nil {
			we = jsonrpc.Error{Code: mcpwire.CodeInternalError, Message: "the client answered with a malformed error"}
		}
		return &jsonrpc.Response{ID: id, Error: &we}
	}
	return &jsonrpc.Response{ID: id, Result: a.Result}
}
