package front2026

// MRTR before the task, for a 2026-07-28 client in front of a session
// upstream (the tasks extension, "MRTR → tasks composition": a server that
// needs input before it creates a task asks with input_required rounds on
// the original request, and creates the task only on the final round).
//
// A session upstream asks with a server→client request on the call's
// stream instead. When it does during an auto call's hybrid wait, the
// gateway keeps the upstream call running in a worker, under a task the
// client does not see yet, and answers the call with an input_required
// round: the questions as inputRequests, and a requestState that names the
// task, signed. The client's retry, on any replica, is checked (signature,
// owner, tool, expiry; every question of the round answered; not already
// used), its answers go to the held call, and the gateway waits up to the
// hybrid wait again: another question is another round, an answer is the
// call's result, and a call still running becomes the task (the flat
// CreateTaskResult). A round nobody retries is cancelled upstream after
// Config.MRTRHold.
//
//	client ── tools/call ─▶ gateway ── tools/call ─▶ session upstream
//	                              ◀── elicitation/create (within the wait)
//	      ◀── input_required {inputRequests, requestState: signed(task)}
//	client ── tools/call {inputResponses, requestState} (any replica)
//	                              ── the answer ─▶ (the held call goes on)
//	      ◀── result, another round, or {resultType: "task", taskId}

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// mrtrPrefix starts the requestState of an MRTR round before a task.
const mrtrPrefix = "taskgate-mrtr:"

// maxMRTRRounds bounds the input_required rounds of one call.
const maxMRTRRounds = 16

// mrtrState is what a round's requestState carries, signed with the
// deployment's secret and bound to the owner: the held call's task, the
// tool (the retry must call the same), the hybrid wait to apply again, the
// round's number and questions, and when the state expires (MRTR,
// "Server Requirements": the principal, an expiry and the originating
// request, under integrity protection).
type mrtrState struct {
	Task  string   `json:"t"`
	Tool  string   `json:"n"`
	Args  string   `json:"a"` // argsDigest of the call's arguments
	Wait  int64    `json:"w"` // ms
	Round int      `json:"r"`
	Keys  []string `json:"k"` // the round's inputRequests keys
	Exp   int64    `json:"e"` // unix ms
}

// errBadState answers a requestState the gateway cannot honour.
var errBadState = mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
	"requestState is invalid, expired, already used or not this client's: call the tool again without it")

// mrtrSecret is the deployment's signing key, read from the store once,
// and again (at most every secretRecheck) when a state fails to verify:
// the store may have lost it and another replica made a new one.
type mrtrSecret struct {
	mu   sync.Mutex
	key  []byte
	read time.Time
}

const secretRecheck = 10 * time.Second

func (s *mrtrSecret) get(ctx context.Context, store store) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	return s.load(ctx, store)
}

// reload reads the key again unless it was read recently, and reports
// whether it changed.
func (s *mrtrSecret) reload(ctx context.Context, store store) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.read) < secretRecheck {
		return s.key, false
	}
	old := s.key
	key, err := s.load(ctx, store)
	if err != nil {
		return old, false
	}
	return key, !hmac.Equal(old, key)
}

func (s *mrtrSecret) load(ctx context.Context, store store) ([]byte, error) {
	key, err := store.SharedSecret(ctx, "mrtr")
	if err != nil {
		return nil, err
	}
	s.key, s.read = key, time.Now()
	return key, nil
}

// argsDigest identifies a call's arguments (canonical JSON: keys sorted),
// so that a requestState works only for a retry of the same call.
func argsDigest(params json.RawMessage) string {
	var p struct {
		Arguments any `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	sum := sha256.Sum256(mcpwire.MustMarshal(p.Arguments))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

func signState(key []byte, owner string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(owner))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// encodeState is a signed requestState for owner.
func encodeState(key []byte, owner string, st mrtrState) string {
	payload := mcpwire.MustMarshal(st)
	enc := base64.RawURLEncoding
	return mrtrPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(signState(key, owner, payload))
}

// decodeState checks a requestState: the gateway's signature for the
// owner (auth's, else the task's own: core.AnonOwner), not expired at now. It
// returns the state and its owner.
func decodeState(key []byte, auth, s string, now time.Time) (mrtrState, string, bool) {
	rest, ok := strings.CutPrefix(s, mrtrPrefix)
	if !ok {
		return mrtrState{}, "", false
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return mrtrState{}, "", false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	var st mrtrState
	if err1 != nil || err2 != nil || json.Unmarshal(payload, &st) != nil || st.Task == "" {
		return mrtrState{}, "", false
	}
	owner := auth
	if owner == "" {
		owner = core.AnonOwner(st.Task)
	}
	if !hmac.Equal(mac, signState(key, owner, payload)) || st.Exp < now.UnixMilli() {
		return mrtrState{}, "", false
	}
	return st, owner, true
}

// mrtrHold is how long a round may wait for its retry before the held
// call is cancelled: Config.MRTRHold, else DefaultMRTRHoldFactor times the
// call's hybrid wait.
func (f *Front) mrtrHold(wait time.Duration) time.Duration {
	if f.mrtrHoldFor > 0 {
		return f.mrtrHoldFor
	}
	return defaultMRTRHoldFactor * wait
}

// defaultMRTRHoldFactor: with no --mrtr-hold, a round waits this many
// hybrid waits for its retry.
const defaultMRTRHoldFactor = 8

// mrtrFirstRound makes j, which asked for input during its hybrid wait, a
// task the client does not see yet, and answers the first round.
func (f *Front) mrtrFirstRound(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, j *runner.Job, tool string, d policy.Decision) {
	key, err := f.secret.get(r.Context(), f.store)
	if err != nil {
		// No signing key: the task is made at once, as before this
		// composition, its question in tasks/get.
		f.Log.Warn().Str("op", "mrtr").Err(err).Msg("cannot read the requestState key; the call becomes a task at once")
		f.startTask(w, r, msg, j, tool, d)
		return
	}
	ttl := decide.TaskTTL(d, f.defaultTTL(j.Owner), j.Owner)
	if err := f.launch(r, j, tool, ttl, d.PollInterval); err != nil {
		if errors.Is(err, taskstore.ErrTooManyAnonymous) || errors.Is(err, taskstore.ErrTooManyFromAddress) {
			// As startTask: a call already running is not killed for want
			// of a task; it answers when it ends, as a plain call.
			f.finishPlain(w, r, msg, j)
			return
		}
		j.Call.Abort(err)
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2026))
		return
	}
	wait := d.HybridWait
	if wait <= 0 {
		wait = decide.DefaultHybridWait
	}
	st := mrtrState{Task: j.Task.ID, Tool: tool, Args: argsDigest(msg.Params), Wait: wait.Milliseconds()}
	f.mrtrRound(w, r, msg, key, j.Owner, st, nil, mcpwire.NewWriter(w))
}

// continueMRTR is a retry of a round: checked, its answers recorded, and
// the next round, the result or the task answered.
func (f *Front) continueMRTR(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, tool, state string, responses map[string]json.RawMessage) {
	key, err := f.secret.get(r.Context(), f.store)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2026))
		return
	}
	st, owner, ok := decodeState(key, core.AuthOwner(r), state, time.Now())
	if !ok {
		if fresh, changed := f.secret.reload(r.Context(), f.store); changed {
			st, owner, ok = decodeState(fresh, core.AuthOwner(r), state, time.Now())
			key = fresh
		}
	}
	if !ok || st.Tool != tool || st.Args != argsDigest(msg.Params) {
		core.WriteStatelessError(w, msg.ID, errBadState)
		return
	}
	if e := core.CheckInputResponses(len(responses), "tools/call"); e != nil {
		core.WriteStatelessError(w, msg.ID, e)
		return
	}
	t, err := f.store.Get(r.Context(), owner, st.Task)
	if errors.Is(err, taskstore.ErrNotFound) || errors.Is(err, taskstore.ErrExpired) {
		core.WriteStatelessError(w, msg.ID, errBadState)
		return
	}
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "mrtr", st.Task, core.Era2026))
		return
	}
	// The round's questions still outstanding must all be answered; if
	// none is, the state was used already (a replay), or the call ended
	// (its round expired and it was cancelled, say).
	var outstanding, missing []string
	for _, k := range st.Keys {
		if _, ok := t.InputRequests[k]; ok {
			outstanding = append(outstanding, k)
			if _, ok := responses[k]; !ok {
				missing = append(missing, k)
			}
		}
	}
	if len(outstanding) == 0 {
		core.WriteStatelessError(w, msg.ID, errBadState)
		return
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			"inputResponses lacks the answers to "+strings.Join(missing, ", ")+" (asked in the previous round)"))
		return
	}
	answers := make(map[string]json.RawMessage, len(responses))
	answered := make(map[string]bool, len(responses))
	for _, k := range outstanding {
		answers[k] = mcpwire.MustMarshal(core.InputAnswer{Result: responses[k]})
		answered[k] = true
	}
	n, err := f.store.AnswerInputs(r.Context(), owner, st.Task, answers)
	if err != nil && !errors.Is(err, taskstore.ErrTerminal) {
		mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "mrtr", st.Task, core.Era2026))
		return
	}
	if n != len(answers) {
		// Another retry with this state answered first (the store takes
		// each answer once): this one is the replay.
		core.WriteStatelessError(w, msg.ID, errBadState)
		return
	}
	f.mrtrRound(w, r, msg, key, owner, st, answered, mcpwire.NewWriter(w))
}

// mrtrAbandoned is the status message of a held call whose round was never
// retried.
const mrtrAbandoned = "The client never retried the call with the answers (its input_required round expired)."

// mrtrRound waits, up to the hybrid wait, for the held call to ask what
// the client has not just answered, or to end, and answers: another round,
// the call's outcome, or, still running, the task.
func (f *Front) mrtrRound(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, key []byte, owner string,
	st mrtrState, answered map[string]bool, sse *mcpwire.Writer) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(st.Wait)*time.Millisecond)
	defer cancel()
	t, err := f.waitRound(ctx, owner, st.Task, answered)
	if err != nil && ctx.Err() != nil && r.Context().Err() == nil {
		// Still running past the hybrid wait: the round is the task.
		if t, err = f.store.Get(r.Context(), owner, st.Task); err == nil {
			mcpwire.WriteResult(w, msg.ID, core.ToTask2026(t, "task", false))
			return
		}
	}
	if err != nil {
		// Neither a round, the result nor the task reached the client (it
		// went away, or the store did): nobody holds the task's id, so
		// nobody can answer or cancel it. The call is cancelled.
		go f.abandonRound(owner, st.Task, "The client's call ended before the gateway could answer it (MRTR round not delivered).")
		f.fail(w, r, msg, sse, err)
		return
	}
	out, ended := outcomeResponse(msg.ID, t)
	switch {
	case ended:
	case st.Round >= maxMRTRRounds:
		f.abandonRound(owner, st.Task, fmt.Sprintf("The upstream asked for input in more than %d rounds before the task began.", maxMRTRRounds))
		out = mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Error: core.InternalError(fmt.Sprintf(
			"the upstream asked for input in more than %d rounds of one call; the call was cancelled", maxMRTRRounds))}
	default:
		pending := pendingInputs(t, answered)
		keys := make([]string, 0, len(pending))
		for k := range pending {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		hold := f.mrtrHold(time.Duration(st.Wait) * time.Millisecond)
		st.Round++
		st.Exp, st.Keys = time.Now().Add(hold).UnixMilli(), keys
		out = mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: mcpwire.MustMarshal(map[string]any{
			"resultType":    "input_required",
			"inputRequests": pending,
			"requestState":  encodeState(key, owner, st),
		})}
		f.expireRound(owner, st.Task, keys, hold)
	}
	writeRound(w, sse, out)
}

// expireRound cancels the held call if, after hold (plus roundGrace, so
// that a retry checked just before its state expired is not cut short),
// the round's questions are all still unanswered: its client never
// retried. The retry, on any replica, answers them; a round that replica
// answers next arms its own. A store error is retried a few times.
func (f *Front) expireRound(owner, id string, keys []string, hold time.Duration) {
	time.AfterFunc(hold+roundGrace, func() {
		for attempt := 0; attempt < 3; attempt++ {
			if attempt > 0 {
				select {
				case <-time.After(time.Second):
				case <-f.life.Done():
					return
				}
			}
			ctx, cancel := context.WithTimeout(f.life, core.StoreTimeout)
			t, err := f.store.Get(ctx, owner, id)
			cancel()
			if err != nil {
				continue
			}
			if t.Status.Terminal() {
				return
			}
			for _, k := range keys {
				if _, pending := t.InputRequests[k]; !pending {
					return // answered: the client came back
				}
			}
			if f.abandonRound(owner, id, mrtrAbandoned) {
				return
			}
		}
	})
}

// roundGrace is how long past its expiry a round's state is given before
// its held call is cancelled: a retry already checked, and clocks that
// differ between replicas.
const roundGrace = core.StoreTimeout + time.Second

// abandonRound cancels a held call's task (its worker cancels the call
// upstream).
func (f *Front) abandonRound(owner, id, why string) bool {
	ctx, cancel := context.WithTimeout(f.life, core.StoreTimeout)
	defer cancel()
	t, err := f.store.RequestCancel(ctx, owner, id, why)
	if errors.Is(err, taskstore.ErrTerminal) || errors.Is(err, taskstore.ErrNotFound) {
		return true
	}
	if err != nil {
		return false
	}
	f.Metrics.TaskFinished(t, taskstore.StatusCancelled, 0)
	f.Log.Info().Str("op", "mrtr").Str("task_id", id).Str("owner", core.LogOwner(owner)).Msg(why)
	return true
}
