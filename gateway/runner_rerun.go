package gateway

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
//     its own worker runs it again (rerunOnFailure);
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
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/durable"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Defaults of Config.MaxAttempts and Config.RerunBackoff.
const (
	DefaultMaxAttempts  = 3
	DefaultRerunBackoff = time.Second
)

// durableParams are the runner's settings for durable tasks.
type durableParams struct {
	maxAttempts int           // attempts a task may have in all; 1: never rerun
	backoff     time.Duration // before the first rerun, doubled for each next
	// rerunnable says whether tool is safe to repeat, and why; nil: none is.
	rerunnable func(ctx context.Context, tool string) (bool, string)
	reruns     *prometheus.CounterVec // taskgate_task_reruns_total{tool,cause}
	// reopen replaces an owner session the upstream forgot
	// (upstreamSide.reopenTarget); nil: a rerun stays on the session.
	reopen func(ctx context.Context, owner string, auth http.Header, stale *upstreamTarget) (*upstreamTarget, error)
}

// durableStore is what durable tasks need of the task store.
type durableStore interface {
	BeginAttempt(ctx context.Context, owner, id string, r taskstore.AttemptRequest) (taskstore.Attempt, error)
	SetUpstreamTask(ctx context.Context, owner, id, holder, upstreamTask string) error
	SetRerun(ctx context.Context, owner, id string, spec []byte) error
	SharedSecret(ctx context.Context, name string) ([]byte, error)
}

// rerunnable is the decider's verdict on tool with the rules in force and
// the annotations the catalogue holds.
func (d *decider) rerunnable(ctx context.Context, tool string) (bool, string) {
	decl, _ := d.toolInfo(ctx, tool)
	return policy.Rerunnable(d.policy.Load(), decl.tool(tool))
}

// newRerunsMetric is taskgate_task_reruns_total.
func newRerunsMetric(m *metrics) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_task_reruns_total", Help: "Attempts this replica began again of rerunnable tasks, per tool and cause (replica_stopped, connection_refused, connection_reset, http_502/503/504, session_gone, process_exited).",
	}, []string{"tool", "cause"})
	m.register(c)
	return c
}

// rerunSecret is the key sealing a task's credentials in its spec, shared
// by the replicas through the store, read once.
type rerunSecret struct {
	mu     sync.Mutex
	secret []byte
}

func (rn *runner) secret(ctx context.Context) ([]byte, error) {
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

func (rn *runner) durableStore() durableStore { return rn.store.(durableStore) }

// rerunSpec is the spec j's task records at creation (runner.create), nil
// when the task is never run again nor re-attached: the tool is not
// rerunnable and holds no upstream task, or the task is a plain call's
// (hidden: its client waits on a connection that dies with the replica).
// It mints the task's id (the seal's associated data) when the front did
// not.
func (rn *runner) rerunSpec(ctx context.Context, j *job, tool string) []byte {
	if j.hidden || rn.durable.maxAttempts < 1 {
		return nil
	}
	native := viaUpstreamTask(j.req)
	var rerun bool
	var why string
	if rn.durable.rerunnable != nil && rn.durable.maxAttempts > 1 {
		rerun, why = rn.durable.rerunnable(ctx, tool)
	}
	if !rerun && !native {
		return nil
	}
	if j.id == "" {
		j.id = uuid.NewString()
	}
	s := &durable.Spec{Rerun: rerun, Why: why, Params: j.req.Params, Session: j.sess.ID, Version: j.sess.ProtocolVersion,
		Native: native, ClientCaps: j.clientCaps, CallerCaps: j.callerCaps, Fallback: j.fallback,
		ClientSession: j.clientSession, Learn: j.learn}
	if j.client2026 != nil {
		s.Modern, s.Stateless, s.Params = true, j.client2026.target.Stateless, j.client2026.params
	}
	if auth := j.sess.Header.Get("Authorization"); auth != "" {
		secret, err := rn.secret(ctx)
		if err == nil {
			s.Auth, err = durable.Seal(secret, j.id, []byte(auth))
		}
		if err != nil {
			// Without its credentials a rerun would run as nobody: the
			// task is not durable.
			rn.log.Warn().Str("op", "rerun").Str("tool", tool).Err(err).Msg("cannot seal the call's credentials; the task will not run again")
			return nil
		}
		s.CredKey = rn.creds.keyOf(auth)
	}
	j.spec = s
	return s.Encode()
}

// makeDurable records spec with j's task, now that its creation is sure:
// a create whose reply was lost is removed again (taskstore abandon.go)
// and must not run meanwhile. Unrecorded, the task runs at most once.
func (rn *runner) makeDurable(ctx context.Context, j *job, spec []byte) {
	if spec == nil {
		return
	}
	if err := rn.durableStore().SetRerun(ctx, j.owner, j.task.ID, spec); err != nil {
		j.spec = nil
		rn.log.Warn().Str("op", "rerun").Str("task_id", j.task.ID).Str("tool", j.task.Tool).Err(err).Msg("cannot record the task's call: it will not run again")
		return
	}
	j.task.Rerun, j.task.Attempts = spec, 1
}

// keyOf is the principal's client whose token auth is, when this replica
// saw it with a validated principal ("" otherwise).
func (c *credentials) keyOf(auth string) string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byToken[sha256Sum(auth)].key
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// jobFromSpec rebuilds the job of task t from its spec, on any replica:
// the same call, on the same upstream session, with the same credentials
// (the principal's freshest token when the gateway keeps them).
func (rn *runner) jobFromSpec(ctx context.Context, t *taskstore.Task, s *durable.Spec) (*job, error) {
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
	if s.CredKey != "" && rn.creds != nil {
		key := s.CredKey
		sess.Authorization = func(ctx context.Context) string { return rn.creds.freshest(ctx, key) }
	}
	j := &job{task: t, owner: t.Owner, id: t.ID, sess: sess, spec: s,
		req:        &jsonrpc.Request{ID: newUpstreamID(), Method: "tools/call", Params: s.Params},
		clientCaps: s.ClientCaps, callerCaps: s.CallerCaps, fallback: s.Fallback, clientSession: s.ClientSession, learn: s.Learn}
	if s.Modern {
		j.client2026 = &job2026{target: &upstreamTarget{Session: sess, Stateless: s.Stateless}, params: s.Params}
	}
	return j, nil
}

// resume takes over the expired lease l of a durable task (the
// recoverer's hook): re-attached to the upstream's own task, or run
// again, or failed for want of attempts. It reports whether it dealt with
// l; false leaves it to the recoverer, which fails it as before.
func (rn *runner) resume(ctx context.Context, l taskstore.ExpiredLease) bool {
	if !l.Durable {
		return false
	}
	if rn.draining.Load() {
		return true // a replica shutting down takes no task over; another one will
	}
	t, err := rn.store.Get(ctx, l.Owner, l.ID)
	if err != nil {
		return !errors.Is(err, taskstore.ErrNotFound) && !errors.Is(err, taskstore.ErrExpired) // a later sweep
	}
	s, err := durable.Decode(t.Rerun)
	if err != nil {
		rn.log.Warn().Str("op", "rerun").Str("task_id", t.ID).Err(err).Msg("the task cannot run again")
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
		Holder: rn.replica, Lease: rn.lease, Takeover: true, Max: rn.durable.maxAttempts,
		Backoff: rn.backoff(t.Attempts + 1), Cause: durable.CauseReplicaStopped,
		Message: durable.RerunMessage(durable.CauseReplicaStopped, t.Attempts+1, rn.durable.maxAttempts)})
	switch {
	case errors.Is(err, taskstore.ErrAttemptsExhausted):
		rn.failExhausted(ctx, t, durable.ExhaustedMessage(t.Attempts, durable.CauseReplicaStopped, stopped))
		return true
	case err != nil:
		return !errors.Is(err, taskstore.ErrNotFound) && !errors.Is(err, taskstore.ErrExpired)
	}
	if t, err = rn.store.Get(ctx, t.Owner, t.ID); err != nil {
		return true // the lease runs out; a later sweep takes it again
	}
	j, err := rn.jobFromSpec(ctx, t, s)
	if err != nil {
		rn.failExhausted(ctx, t, "cannot run the task again: "+err.Error())
		return true
	}
	j.keys, j.notBefore = a.Keys, a.NextAt
	rn.rerunStarted(ctx, j, durable.CauseReplicaStopped, a.N, dead)
	rn.notify.statusChanged(ctx, t)
	rn.count() // the rerun's first call takes this slot (job.slot)
	j.slot = true
	rn.start(j)
	return true
}

// reattach follows the upstream's own task of t from this replica: the
// lease is claimed (one replica wins), and the worker's call asks the
// upstream for that task's result on the recorded session instead of
// sending the tools/call again (callNative).
func (rn *runner) reattach(ctx context.Context, t *taskstore.Task, s *durable.Spec, dead string) bool {
	if err := rn.store.Claim(ctx, t.Owner, t.ID, rn.replica, rn.lease); err != nil {
		return true // another replica, or a later sweep
	}
	j, err := rn.jobFromSpec(ctx, t, s)
	if err != nil {
		rn.failExhausted(ctx, t, "cannot follow the upstream's task from another replica: "+err.Error())
		return true
	}
	j.attach = t.UpstreamTask
	_ = rn.store.SetProgress(ctx, t.Owner, t.ID, nil, durable.ReattachMessage)
	rn.log.Warn().Str("op", "reattached").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", logOwner(t.Owner)).
		Str("dead_replica", dead).Str("upstream_task_id", t.UpstreamTask).Msg("task re-attached to the upstream's own task")
	rn.count()
	j.slot = true
	rn.start(j)
	return true
}

// failExhausted fails t, whose lease this replica holds, with msg.
func (rn *runner) failExhausted(ctx context.Context, t *taskstore.Task, msg string) {
	o := taskstore.Outcome{Error: internalError(msg), Message: msg, WriteID: uuid.NewString()}
	err := rn.retry.do(ctx, func() error { return rn.store.Fail(ctx, t.Owner, t.ID, o) })
	if errors.Is(err, taskstore.ErrUnavailable) {
		return // the lease is kept, runs out, and a later sweep tries again
	}
	_ = rn.store.Release(context.WithoutCancel(ctx), t.Owner, t.ID, rn.replica)
	if err != nil {
		return
	}
	ended := *t
	ended.StatusMessage = msg
	rn.metrics.taskFinished(&ended, taskstore.StatusFailed, 0)
	rn.log.Warn().Str("op", "failed").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", logOwner(t.Owner)).
		Int("attempts", t.Attempts).Msg(msg)
	if got, err := rn.store.Get(ctx, t.Owner, t.ID); err == nil {
		rn.notify.statusChanged(ctx, got)
	}
}

// backoff is the wait before attempt n, at most half a lease: the lease
// the attempt's claim took is not renewed before the worker starts.
func (rn *runner) backoff(n int) time.Duration {
	return durable.Backoff(n, rn.durable.backoff, max(rn.lease/2, rn.durable.backoff))
}

// rerunStarted counts and logs attempt n of j's task.
func (rn *runner) rerunStarted(ctx context.Context, j *job, cause string, n int, dead string) {
	if rn.durable.reruns != nil {
		rn.durable.reruns.WithLabelValues(rn.metrics.tools.label(j.task.Tool), cause).Inc()
	}
	ev := rn.log.Warn().Str("op", "rerun").Str("task_id", j.task.ID).Str("tool", j.task.Tool).Str("owner", logOwner(j.owner)).
		Str("cause", cause).Int("attempt", n).Int("max_attempts", rn.durable.maxAttempts)
	if dead != "" {
		ev = ev.Str("dead_replica", dead)
	}
	ev.Msg("running the task again")
}

// waitNotBefore holds a rerun's worker until its attempt may start; false
// when the runner stops first (the lease runs out, another replica takes
// the task).
func (rn *runner) waitNotBefore(j *job) bool {
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
func (run *taskRun) rerunOnFailure(res callResult) (done, handled bool) {
	rn, j := run.rn, run.j
	if j.spec == nil || !j.spec.Rerun || run.ctx.Err() != nil {
		return false, false
	}
	cause, ok := upstream.TransientAnswer(res.resp, res.err)
	if !ok {
		return false, false
	}
	detail := ""
	if res.err != nil {
		detail = failureMessage(res.err)
	} else if res.resp != nil && res.resp.Error != nil {
		detail = res.resp.Error.Error()
	}
	n := max(j.task.Attempts, 1) + 1
	wait := rn.backoff(n)
	if time.Now().Add(wait).After(j.task.ExpiresAt()) {
		return false, false // no time left: the failure stands
	}
	a, err := rn.durableStore().BeginAttempt(run.writeCtx, j.owner, j.task.ID, taskstore.AttemptRequest{
		Holder: rn.replica, Lease: rn.lease, Max: rn.durable.maxAttempts, Backoff: wait, Cause: cause,
		Message: durable.RerunMessage(cause, n, rn.durable.maxAttempts)})
	switch {
	case errors.Is(err, taskstore.ErrAttemptsExhausted):
		run.fail(durable.ExhaustedMessage(max(j.task.Attempts, 1), cause, detail))
		return true, true
	case err != nil:
		return false, false // the outcome stands (a cancel, a lost lease, the store down)
	}
	// Only the fields the worker alone reads change: the lease renewal
	// reads j.task's id meanwhile.
	j.task.Attempts = a.N
	if t, err := rn.store.Get(run.writeCtx, j.owner, j.task.ID); err == nil {
		j.task.Answered = t.Answered // what the client answered so far, to replay
		rn.notify.statusChanged(run.writeCtx, t)
	}
	if cause == upstream.CauseSessionGone {
		run.reopenSession()
	}
	rn.rerunStarted(run.ctx, j, cause, a.N, "")
	// The worker's goroutine waits out the backoff: a cancel meanwhile is
	// seen when it next looks (the watch keeps it).
	t := time.NewTimer(time.Until(a.NextAt))
	select {
	case <-t.C:
	case <-run.ctx.Done():
		t.Stop()
		return false, true // the loop sees the context's end
	}
	run.restart(a.Keys)
	return false, true
}

// reopenSession moves a 2026-07-28 client's task whose owner session the
// upstream forgot (it restarted) to the owner's new session, as a plain
// call would (upstream_owner.go). A 2025-11-25 client's session is its
// own: the client initializes again, the rerun stays on it.
func (run *taskRun) reopenSession() {
	rn, j := run.rn, run.j
	if rn.durable.reopen == nil || j.client2026 == nil || j.client2026.target.Stateless {
		return
	}
	owner := j.owner
	if isAnonymous(owner) {
		owner = anonymousOwner // the owner sessions' owner (sessionOwner)
	}
	target, err := rn.durable.reopen(run.ctx, owner, j.sess.Header, j.client2026.target)
	if err != nil {
		run.log().Warn().Str("op", "rerun").Err(err).Msg("cannot open a new owner session; the rerun tries the old one")
		return
	}
	sess := *target.Session
	sess.Authorization = j.sess.Authorization // the principal's freshest token, as before
	j.sess = &sess
	j.client2026 = &job2026{target: &upstreamTarget{Session: j.sess, Stateless: target.Stateless}, params: j.client2026.params}
}

// restart sends the task's call again, as its first attempt did, after
// forgetting the dead attempt's questions (the store dropped them).
func (run *taskRun) restart(keys int) {
	j := run.j
	run.stopWaiting()
	run.pending, run.mrtr, run.mrtrAnswers, run.requestState = map[string]jsonrpc.ID{}, map[string]string{}, map[string]json.RawMessage{}, ""
	run.keys = max(run.keys, keys)
	run.reqID = newUpstreamID()
	params := j.req.Params
	if j.client2026 != nil {
		params = j.client2026.params
	}
	j.req = &jsonrpc.Request{ID: run.reqID, Method: "tools/call", Params: params}
	run.adopt(run.rn.startCall(run.ctx, j.sess, j.req, false))
}

// questionDigest is the digest an input request of j's task is recorded
// under, so that its answer is kept for a rerun; "" when the task never
// runs again.
func (j *job) questionDigest(method string, params json.RawMessage) string {
	if j.spec == nil || !j.spec.Rerun {
		return ""
	}
	return durable.Digest(method, params)
}

// replayAnswer gives a rerun the client's recorded answer to a question it
// already answered: nil when there is none (the question goes to the
// client).
func (run *taskRun) replayAnswer(method string, params json.RawMessage) *inputAnswer {
	j := run.j
	if j.spec == nil || !j.spec.Rerun || j.task.Attempts < 2 {
		return nil
	}
	raw, ok := durable.Replay(j.task.Answered, method, params)
	if !ok {
		return nil
	}
	var a inputAnswer
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	run.log().Info().Str("op", "replayed").Str("method", method).Msg("the client answered this question before the rerun; its answer is given again")
	return &a
}

// nativeHooks link a worker's native call (runner_native.go) to durable
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
func (rn *runner) nativeContext(ctx context.Context, j *job) context.Context {
	if j.spec == nil || !j.spec.Native {
		return ctx
	}
	owner, id := j.owner, j.task.ID
	return withNativeHooks(ctx, &nativeHooks{attach: j.attach, note: func(up string) {
		wctx := context.WithoutCancel(ctx)
		err := rn.retry.do(wctx, func() error { return rn.durableStore().SetUpstreamTask(wctx, owner, id, rn.replica, up) })
		if err != nil {
			rn.log.Warn().Str("op", "native").Str("task_id", id).Err(err).Msg("cannot record the upstream's task; another replica could not re-attach to it")
		}
	}})
}

// leaveForRerun keeps a rerunnable task this replica is stopping under
// (its call cut off, no answer) working, with its lease: the lease runs
// out and another replica runs the task again, as if this one had died,
// instead of failing it "replica stopped".
func (rn *runner) leaveForRerun(j *job, res callResult, log zerolog.Logger) bool {
	if j.spec == nil || !j.spec.Rerun || res.err == nil || rn.ctx.Err() == nil {
		return false
	}
	log.Warn().Str("op", "rerun").Msg("this replica stops before the upstream answered; another replica runs the task again once its lease runs out")
	return true
}

// reopenOwnerTarget is upstreamSide.reopenTarget for a 2026-07-28
// client's rerun, bound once the handler has its upstream side.
func (h *Handler) reopenOwnerTarget(ctx context.Context, owner string, auth http.Header, stale *upstreamTarget) (*upstreamTarget, error) {
	if h.up == nil {
		return nil, errors.New("no upstream side")
	}
	return h.up.reopenTarget(ctx, owner, auth, "", stale)
}
