package runner

// Durable tasks (docs/durable.md): a task whose tool is safe to repeat
// (policy.Rerunnable: a rule, else readOnlyHint or idempotentHint) records
// its call at creation (durable.Spec, sealed credentials and all), so that
//
//   - when its replica dies, the recoverer of another one begins the next
//     attempt (taskstore.BeginAttempt: one replica wins) and runs the call
//     again, with the same arguments, owner, owner session and
//     credentials, after a backoff (resume);
//   - when the upstream call fails on the way (refused, reset, 502/503/504,
//     the session gone, a stdio child exited: upstream.TransientAnswer),
//     its own worker runs it again (rerunOnFailure); its calls are marked
//     (rerunContext), so that a stdio session whose own child died under
//     one is kept with a fresh child for the rerun;
//
// within --max-attempts and the task's ttl; the task stays working, its
// statusMessage says what happened. An answer of the server (a result,
// even isError, or a JSON-RPC error) is final. A rerun that asks a
// question the client already answered gets the recorded answer
// (replayAnswer); a new question goes to the client.
//
// A task that holds an upstream's own task (a native tool) records that
// task's id (noteUpstreamTask): another replica re-attaches to it
// (tasks/result on the recorded session) instead of failing or rerunning
// it, whatever the tool's hints.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/durable"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Defaults of Config.MaxAttempts and Config.RerunBackoff.
const (
	DefaultMaxAttempts  = 3
	DefaultRerunBackoff = time.Second
)

// Durable are the runner's settings for durable tasks.
type Durable struct {
	MaxAttempts int           // attempts a task may have in all; 1: never rerun
	Backoff     time.Duration // before the first rerun, doubled for each next
	// Rerunnable says whether tool is safe to repeat, and why; nil: none is.
	Rerunnable func(ctx context.Context, tool string) (bool, string)
	Reruns     *prometheus.CounterVec // taskgate_task_reruns_total{tool,cause}
	// Reopen replaces an owner session the upstream forgot
	// (upstreamside.Side.ReopenTarget); nil: a rerun stays on the session.
	Reopen func(ctx context.Context, owner string, auth http.Header, stale *upstreamside.Target) (*upstreamside.Target, error)
	// CredKey names the principal's client whose token auth is ("":
	// none kept); Freshest is that client's freshest token (the
	// gateway's credentials, docs/identity.md). Nil: tokens not kept.
	CredKey  func(auth string) string
	Freshest func(ctx context.Context, key string) string
}

// durableStore is what durable tasks need of the task store.
type durableStore interface {
	BeginAttempt(ctx context.Context, owner, id string, r taskstore.AttemptRequest) (taskstore.Attempt, error)
	SetUpstreamTask(ctx context.Context, owner, id, holder, upstreamTask string) error
	SetRerun(ctx context.Context, owner, id string, spec []byte) error
	SharedSecret(ctx context.Context, name string) ([]byte, error)
}

// rerunSecret is the key sealing a task's credentials in its spec, shared
// by the replicas through the store, read once.
type rerunSecret struct {
	mu     sync.Mutex
	secret []byte
}

func (rn *Runner) secret(ctx context.Context) ([]byte, error) {
	rn.sealKey.mu.Lock()
	defer rn.sealKey.mu.Unlock()
	if rn.sealKey.secret != nil {
		return rn.sealKey.secret, nil
	}
	s, err := rn.durableStore().SharedSecret(ctx, "rerun")
	if err == nil {
		rn.sealKey.secret = s
	}
	return s, err
}

func (rn *Runner) durableStore() durableStore { return rn.Store.(durableStore) }

// rerunSpec is the spec j's task records at creation (Runner.Create), nil
// when the task is never run again nor re-attached: the tool is not
// rerunnable and holds no upstream task, or the task is a plain call's
// (hidden: its client waits on a connection that dies with the replica).
// It mints the task's id (the seal's associated data) when the front did
// not.
func (rn *Runner) rerunSpec(ctx context.Context, j *Job, tool string) []byte {
	if j.Hidden || rn.Durable.MaxAttempts < 1 {
		return nil
	}
	native := viaUpstreamTask(j.Req)
	var rerun bool
	var why string
	if rn.Durable.Rerunnable != nil && rn.Durable.MaxAttempts > 1 {
		rerun, why = rn.Durable.Rerunnable(ctx, tool)
	}
	if !rerun && !native {
		return nil
	}
	if j.Id == "" {
		j.Id = uuid.NewString()
	}
	s := &durable.Spec{Rerun: rerun, Why: why, Params: j.Req.Params, Session: j.Sess.ID, Version: j.Sess.ProtocolVersion,
		Native: native, ClientCaps: j.ClientCaps, CallerCaps: j.CallerCaps, Fallback: j.Fallback,
		ClientSession: j.ClientSession, Learn: j.Learn}
	if j.Client2026 != nil {
		s.Modern, s.Stateless, s.Params = true, j.Client2026.Target.Stateless, j.Client2026.Params
	}
	if auth := j.Sess.Header.Get("Authorization"); auth != "" {
		secret, err := rn.secret(ctx)
		if err == nil {
			s.Auth, err = durable.Seal(secret, j.Id, []byte(auth))
		}
		if err != nil {
			// Without its credentials a rerun would run as nobody: the
			// task is not durable.
			rn.Log.Warn().Str("op", "rerun").Str("tool", tool).Err(err).Msg("cannot seal the call's credentials; the task will not run again")
			return nil
		}
		if rn.Durable.CredKey != nil {
			s.CredKey = rn.Durable.CredKey(auth)
		}
	}
	j.spec = s
	return s.Encode()
}

// makeDurable records spec with j's task, now that its creation is sure:
// a create whose reply was lost is removed again (taskstore abandon.go)
// and must not run meanwhile. Unrecorded, the task runs at most once.
func (rn *Runner) makeDurable(ctx context.Context, j *Job, spec []byte) {
	if spec == nil {
		return
	}
	if err := rn.durableStore().SetRerun(ctx, j.Owner, j.Task.ID, spec); err != nil {
		j.spec = nil
		rn.Log.Warn().Str("op", "rerun").Str("task_id", j.Task.ID).Str("tool", j.Task.Tool).Err(err).Msg("cannot record the task's call: it will not run again")
		return
	}
	j.Task.Rerun, j.Task.Attempts = spec, 1
}

// jobFromSpec rebuilds the job of task t from its spec, on any replica:
// the same call, on the same upstream session, with the same credentials
// (the principal's freshest token when the gateway keeps them).
func (rn *Runner) jobFromSpec(ctx context.Context, t *taskstore.Task, s *durable.Spec) (*Job, error) {
	header := http.Header{}
	if len(s.Auth) > 0 {
		secret, err := rn.secret(ctx)
		var auth []byte
		if err == nil {
			auth, err = durable.Open(secret, t.ID, s.Auth)
		}
		if err != nil {
			return nil, err
		}
		header.Set("Authorization", string(auth))
	}
	sess := &upstream.Session{ID: s.Session, ProtocolVersion: s.Version, Header: header}
	if s.CredKey != "" && rn.Durable.Freshest != nil {
		key, freshest := s.CredKey, rn.Durable.Freshest
		sess.Authorization = func(ctx context.Context) string { return freshest(ctx, key) }
	}
	j := &Job{Task: t, Owner: t.Owner, Id: t.ID, Sess: sess, spec: s,
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: s.Params},
		ClientCaps: s.ClientCaps, CallerCaps: s.CallerCaps, Fallback: s.Fallback, ClientSession: s.ClientSession, Learn: s.Learn}
	if s.Modern {
		j.Client2026 = &Job2026{Target: &upstreamside.Target{Session: sess, Stateless: s.Stateless}, Params: s.Params}
	}
	return j, nil
}

// resume takes over the expired lease l of a durable task (the
// recoverer's hook): re-attached to the upstream's own task, or run
// again, or failed for want of attempts. It reports whether it dealt with
// l; false leaves it to the recoverer, which fails it as before.
func (rn *Runner) resume(ctx context.Context, l taskstore.ExpiredLease) bool {
	if !l.Durable {
		return false
	}
	if rn.Draining.Load() {
		return true // a replica shutting down takes no task over; another one will
	}
	t, err := rn.Store.Get(ctx, l.Owner, l.ID)
	if err != nil {
		return !errors.Is(err, taskstore.ErrNotFound) && !errors.Is(err, taskstore.ErrExpired) // a later sweep
	}
	s, err := durable.Decode(t.Rerun)
	if err != nil {
		rn.Log.Warn().Str("op", "rerun").Str("task_id", t.ID).Err(err).Msg("the task cannot run again")
		return false
	}
	dead := l.Holder
	if l.From != "" {
		dead = l.From
	}
	if s.Native && t.UpstreamTask != "" {
		return rn.reattach(ctx, t, s, dead)
	}
	if !s.Rerun {
		return false
	}
	stopped := "the gateway replica running the task (" + dead + ") stopped before the upstream answered"
	a, err := rn.durableStore().BeginAttempt(ctx, t.Owner, t.ID, taskstore.AttemptRequest{
		Holder: rn.Replica, Lease: rn.Lease, Takeover: true, Max: rn.Durable.MaxAttempts,
		Backoff: rn.backoff(t.Attempts + 1), Cause: durable.CauseReplicaStopped,
		Message: durable.RerunMessage(durable.CauseReplicaStopped, t.Attempts+1, rn.Durable.MaxAttempts)})
	switch {
	case errors.Is(err, taskstore.ErrAttemptsExhausted):
		rn.failExhausted(ctx, t, durable.ExhaustedMessage(t.Attempts, durable.CauseReplicaStopped, stopped))
		return true
	case err != nil:
		return !errors.Is(err, taskstore.ErrNotFound) && !errors.Is(err, taskstore.ErrExpired)
	}
	if t, err = rn.Store.Get(ctx, t.Owner, t.ID); err != nil {
		return true // the lease runs out; a later sweep takes it again
	}
	j, err := rn.jobFromSpec(ctx, t, s)
	if err != nil {
		rn.failExhausted(ctx, t, "cannot run the task again: "+err.Error())
		return true
	}
	j.keys, j.notBefore = a.Keys, a.NextAt
	rn.rerunStarted(ctx, j, durable.CauseReplicaStopped, a.N, dead)
	rn.StatusChanged(ctx, t)
	j.Slot = rn.Count(j.principal()) // the rerun's first call takes this slot
	rn.start(j)
	return true
}

// reattach follows the upstream's own task of t from this replica: the
// lease is claimed (one replica wins), and the worker's call asks the
// upstream for that task's result on the recorded session instead of
// sending the tools/call again (callNative).
func (rn *Runner) reattach(ctx context.Context, t *taskstore.Task, s *durable.Spec, dead string) bool {
	if err := rn.Store.Claim(ctx, t.Owner, t.ID, rn.Replica, rn.Lease); err != nil {
		return true // another replica, or a later sweep
	}
	j, err := rn.jobFromSpec(ctx, t, s)
	if err != nil {
		rn.failExhausted(ctx, t, "cannot follow the upstream's task from another replica: "+err.Error())
		return true
	}
	j.attach = t.UpstreamTask
	_ = rn.Store.SetProgress(ctx, t.Owner, t.ID, nil, durable.ReattachMessage)
	rn.Log.Warn().Str("op", "reattached").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(t.Owner)).
		Str("dead_replica", dead).Str("upstream_task_id", t.UpstreamTask).Msg("task re-attached to the upstream's own task")
	j.Slot = rn.Count(j.principal())
	rn.start(j)
	return true
}

// failExhausted fails t, whose lease this replica holds, with msg.
func (rn *Runner) failExhausted(ctx context.Context, t *taskstore.Task, msg string) {
	o := taskstore.Outcome{Error: core.InternalError(msg), Message: msg, WriteID: uuid.NewString()}
	err := rn.retry.do(ctx, func() error { return rn.Store.Fail(ctx, t.Owner, t.ID, o) })
	if errors.Is(err, taskstore.ErrUnavailable) {
		return // the lease is kept, runs out, and a later sweep tries again
	}
	_ = rn.Store.Release(context.WithoutCancel(ctx), t.Owner, t.ID, rn.Replica)
	if err != nil {
		return
	}
	ended := *t
	ended.StatusMessage = msg
	rn.Metrics.TaskFinished(&ended, taskstore.StatusFailed, 0)
	rn.Log.Warn().Str("op", "failed").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(t.Owner)).
		Int("attempts", t.Attempts).Msg(msg)
	if !notified(t) {
		return
	}
	if got, err := rn.Store.Get(ctx, t.Owner, t.ID); err == nil {
		rn.StatusChanged(ctx, got)
	}
}

// backoff is the wait before attempt n, at most half a lease: the lease
// the attempt's claim took is not renewed before the worker starts.
func (rn *Runner) backoff(n int) time.Duration {
	return durable.Backoff(n, rn.Durable.Backoff, max(rn.Lease/2, rn.Durable.Backoff))
}

// rerunStarted counts and logs attempt n of j's task.
func (rn *Runner) rerunStarted(ctx context.Context, j *Job, cause string, n int, dead string) {
	if rn.Durable.Reruns != nil {
		rn.Durable.Reruns.WithLabelValues(rn.Metrics.Tools.Label(j.Task.Tool), cause).Inc()
	}
	rn.Metrics.TrendRerun(j.Task.Tool) // the console's trends (obs/trends.go)
	ev := rn.Log.Warn().Str("op", "rerun").Str("task_id", j.Task.ID).Str("tool", j.Task.Tool).Str("owner", core.LogOwner(j.Owner)).
		Str("cause", cause).Int("attempt", n).Int("max_attempts", rn.Durable.MaxAttempts)
	if dead != "" {
		ev = ev.Str("dead_replica", dead)
	}
	ev.Msg("running the task again")
}

// waitNotBefore holds a rerun's worker until its attempt may start; false
// when the runner stops first (the lease runs out, another replica takes
// the task).
func (rn *Runner) waitNotBefore(j *Job) bool {
	d := time.Until(j.notBefore)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-rn.ctx.Done():
		return false
	}
}

// rerunOnFailure runs the call of a rerunnable task again when it failed
// on the way (upstream.TransientAnswer), within the attempts and the
// task's ttl. handled: it dealt with res (done: the worker is done, the
// task failed for want of attempts).
func (run *taskRun) rerunOnFailure(res CallResult) (done, handled bool) {
	rn, j := run.rn, run.j
	if j.spec == nil || !j.spec.Rerun || run.Ctx.Err() != nil {
		return false, false
	}
	cause, ok := upstream.TransientAnswer(res.Resp, res.Err)
	if !ok {
		return false, false
	}
	detail := ""
	if res.Err != nil {
		detail = failureMessage(res.Err)
	} else if res.Resp != nil && res.Resp.Error != nil {
		detail = res.Resp.Error.Error()
	}
	n := max(j.Task.Attempts, 1) + 1
	wait := rn.backoff(n)
	if time.Now().Add(wait).After(j.Task.ExpiresAt()) {
		return false, false // no time left: the failure stands
	}
	a, err := rn.durableStore().BeginAttempt(run.writeCtx, j.Owner, j.Task.ID, taskstore.AttemptRequest{
		Holder: rn.Replica, Lease: rn.Lease, Max: rn.Durable.MaxAttempts, Backoff: wait, Cause: cause,
		Message: durable.RerunMessage(cause, n, rn.Durable.MaxAttempts)})
	switch {
	case errors.Is(err, taskstore.ErrAttemptsExhausted):
		run.fail(durable.ExhaustedMessage(max(j.Task.Attempts, 1), cause, detail))
		return true, true
	case err != nil:
		return false, false // the outcome stands (a cancel, a lost lease, the store down)
	}
	// Only the fields the worker alone reads change: the lease renewal
	// reads j.Task's id meanwhile.
	j.Task.Attempts = a.N
	if t, err := rn.Store.Get(run.writeCtx, j.Owner, j.Task.ID); err == nil {
		j.Task.Answered = t.Answered // what the client answered so far, to replay
		rn.StatusChanged(run.writeCtx, t)
	}
	if cause == upstream.CauseSessionGone {
		run.reopenSession()
	}
	rn.rerunStarted(run.Ctx, j, cause, a.N, "")
	// The worker's goroutine waits out the backoff: a cancel meanwhile is
	// seen when it next looks (the watch keeps it).
	t := time.NewTimer(time.Until(a.NextAt))
	select {
	case <-t.C:
	case <-run.Ctx.Done():
		t.Stop()
		return false, true // the loop sees the context's end
	}
	run.restart(a.Keys)
	return false, true
}

// reopenSession moves a 2026-07-28 client's task whose owner session the
// upstream forgot (it restarted) to the owner's new session, as a plain
// call would (upstreamside, owner.go). A 2025-11-25 client's session is its
// own: the client initializes again, the rerun stays on it.
func (run *taskRun) reopenSession() {
	rn, j := run.rn, run.j
	if rn.Durable.Reopen == nil || j.Client2026 == nil || j.Client2026.Target.Stateless {
		return
	}
	owner := j.Owner
	if core.IsAnonymous(owner) {
		owner = core.AnonymousOwner // the owner sessions' owner (sessionOwner)
	}
	target, err := rn.Durable.Reopen(run.Ctx, owner, j.Sess.Header, j.Client2026.Target)
	if err != nil {
		run.log().Warn().Str("op", "rerun").Err(err).Msg("cannot open a new owner session; the rerun tries the old one")
		return
	}
	sess := *target.Session
	sess.Authorization = j.Sess.Authorization // the principal's freshest token, as before
	j.Sess = &sess
	j.Client2026 = &Job2026{Target: &upstreamside.Target{Session: j.Sess, Stateless: target.Stateless}, Params: j.Client2026.Params}
}

// restart sends the task's call again, as its first attempt did, after
// forgetting the dead attempt's questions (the store dropped them).
func (run *taskRun) restart(keys int) {
	j := run.j
	run.stopWaiting()
	run.pending, run.mrtr, run.mrtrAnswers, run.requestState = map[string]jsonrpc.ID{}, map[string]string{}, map[string]json.RawMessage{}, ""
	run.keys = max(run.keys, keys)
	run.reqID = core.NewUpstreamID()
	params := j.Req.Params
	if j.Client2026 != nil {
		params = j.Client2026.Params
	}
	j.Req = &jsonrpc.Request{ID: run.reqID, Method: "tools/call", Params: params}
	run.adopt(run.rn.StartCall(rerunContext(run.Ctx, j), j.Sess, j.Req, run.rn.Count(j.principal())))
}

// rerunContext marks ctx, the context of a call of j's task, as a call the
// gateway runs again when the task is rerunnable (upstream.WithRerunnable):
// a stdio bridge then keeps the task's session alive with a fresh child
// when the session's child dies under the call, and the rerun runs there
// (docs/durable.md).
func rerunContext(ctx context.Context, j *Job) context.Context {
	if j.spec == nil || !j.spec.Rerun {
		return ctx
	}
	return upstream.WithRerunnable(ctx)
}

// questionDigest is the digest an input request of j's task is recorded
// under, so that its answer is kept for a rerun; "" when the task never
// runs again.
func (j *Job) questionDigest(method string, params json.RawMessage) string {
	if j.spec == nil || !j.spec.Rerun {
		return ""
	}
	return durable.Digest(method, params)
}

// replayAnswer gives a rerun the client's recorded answer to a question it
// already answered: nil when there is none (the question goes to the
// client).
func (run *taskRun) replayAnswer(method string, params json.RawMessage) *core.InputAnswer {
	j := run.j
	if j.spec == nil || !j.spec.Rerun || j.Task.Attempts < 2 {
		return nil
	}
	raw, ok := durable.Replay(j.Task.Answered, method, params)
	if !ok {
		return nil
	}
	var a core.InputAnswer
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	run.log().Info().Str("op", "replayed").Str("method", method).Msg("the client answered this question before the rerun; its answer is given again")
	return &a
}

// nativeHooks link a worker's native call (native.go) to durable
// tasks: attach is the upstream task to follow instead of sending the
// tools/call (a re-attached task), note records the upstream task a new
// call holds.
type nativeHooks struct {
	attach string
	note   func(upstreamTask string)
}

type nativeHooksKey struct{}

func withNativeHooks(ctx context.Context, h *nativeHooks) context.Context {
	return context.WithValue(ctx, nativeHooksKey{}, h)
}

func nativeHooksOf(ctx context.Context) *nativeHooks {
	h, _ := ctx.Value(nativeHooksKey{}).(*nativeHooks)
	return h
}

// nativeContext is ctx with the hooks of j's native call, when j's task is
// durable and its call holds an upstream task.
func (rn *Runner) nativeContext(ctx context.Context, j *Job) context.Context {
	if j.spec == nil || !j.spec.Native {
		return ctx
	}
	owner, id := j.Owner, j.Task.ID
	return withNativeHooks(ctx, &nativeHooks{attach: j.attach, note: func(up string) {
		wctx := context.WithoutCancel(ctx)
		err := rn.retry.do(wctx, func() error { return rn.durableStore().SetUpstreamTask(wctx, owner, id, rn.Replica, up) })
		if err != nil {
			rn.Log.Warn().Str("op", "native").Str("task_id", id).Err(err).Msg("cannot record the upstream's task; another replica could not re-attach to it")
		}
	}})
}

// leaveForRerun keeps a rerunnable task this replica is stopping under
// (its call cut off, no answer) working, with its lease: the lease runs
// out and another replica runs the task again, as if this one had died,
// instead of failing it "replica stopped". Alone, no replica would: the
// task fails now, saying it is lost (LostMessage).
func (rn *Runner) leaveForRerun(j *Job, res CallResult, log zerolog.Logger) bool {
	if rn.Alone || j.spec == nil || !j.spec.Rerun || res.Err == nil || rn.ctx.Err() == nil {
		return false
	}
	log.Warn().Str("op", "rerun").Msg("this replica stops before the upstream answered; another replica runs the task again once its lease runs out")
	return true
}
