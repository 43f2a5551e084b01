package native

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Why a recorded upstream task can no longer finish.
const (
	SessionLost = "the upstream session behind this task was lost (the upstream answered 404 for it: it restarted, or ended the session); the task cannot finish"
	TaskLost    = "the upstream no longer knows this task (it restarted, or dropped the task before its ttl); the task cannot finish"
)

// Store is what both fronts need of the store for upstream
// tasks (taskstore/upstream_tasks.go).
type Store interface {
	PutUpstreamTask(ctx context.Context, u taskstore.UpstreamTask, ttl time.Duration) error
	UpstreamTaskOwner(ctx context.Context, owner, id string) (mine *taskstore.UpstreamTask, anyone bool, err error)
	MarkUpstreamTaskLost(ctx context.Context, owner, id, why string) error
	UpstreamTaskTTL(ttl time.Duration) time.Duration
}

// KeepFor is how long the gateway keeps the record of an upstream task
// whose CreateTaskResult (answer a) named ttl ms (nil: unlimited): the
// store's bound (UpstreamTaskTTL), at most core.AnonymousTTL for an anonymous
// owner. When that is less than the upstream said, out is a's response
// message with the ttl member (under the result's "task" object when
// under is set, else the result's "ttlMs") set to what the gateway keeps:
// past it the task cannot be reached through the gateway, and the client
// must not be told otherwise.
func KeepFor(store interface {
	UpstreamTaskTTL(time.Duration) time.Duration
}, owner string, ttl *float64, a *upstreamside.Answer, under string) (time.Duration, json.RawMessage) {
	var asked time.Duration
	if ttl != nil && *ttl > 0 {
		asked = core.MSDuration(*ttl)
	}
	kept := store.UpstreamTaskTTL(asked)
	if core.IsAnonymous(owner) {
		kept = min(kept, core.AnonymousTTL)
	}
	if asked > 0 && asked <= kept {
		return asked, nil
	}
	ms := mcpwire.MustMarshal(kept.Milliseconds())
	result := a.Result
	var err error
	if under != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(result, &obj) != nil {
			return kept, nil
		}
		inner, err := mcpwire.WithMember(obj[under], "ttl", ms)
		if err != nil {
			return kept, nil
		}
		result, err = mcpwire.WithMember(result, under, inner)
	} else {
		result, err = mcpwire.WithMember(result, "ttlMs", ms)
	}
	if err != nil {
		return kept, nil
	}
	out, err := mcpwire.WithMember(a.Msg, "result", result)
	if err != nil {
		return kept, nil
	}
	return kept, out
}

// MarkLost is lost, for either front.
func MarkLost(ctx context.Context, store Store, log zerolog.Logger, rec *taskstore.UpstreamTask, why string) {
	rec.Lost = why
	log.Warn().Str("op", "native").Str("task_id", rec.ID).Str("owner", core.LogOwner(rec.Owner)).Msg(why)
	if err := store.MarkUpstreamTaskLost(ctx, rec.Owner, rec.ID, why); err != nil {
		log.Warn().Str("op", "native").Str("task_id", rec.ID).Err(err).Msg("cannot record that the upstream lost the task")
	}
}

// FailedRecord is the task object of rec as the upstream last gave it,
// failed with rec.Lost; ttlKey names its ttl (null when it gave none).
func FailedRecord(rec *taskstore.UpstreamTask, ttlKey string) map[string]any {
	t := map[string]any{}
	_ = json.Unmarshal(rec.Task, &t)
	t["taskId"] = rec.ID
	t["status"] = string(taskstore.StatusFailed)
	t["statusMessage"] = rec.Lost
	t["lastUpdatedAt"] = core.WireTime(time.Now())
	if _, ok := t["createdAt"]; !ok {
		t["createdAt"] = core.WireTime(rec.Recorded)
	}
	if _, ok := t[ttlKey]; !ok {
		t[ttlKey] = nil
	}
	return t
}

// NotFoundError reports whether a JSON-RPC error response is -32602, what
// a receiver answers for a task id it does not know ("Error Handling").
func NotFoundError(msg json.RawMessage) bool {
	var env struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(msg, &env) == nil && env.Error != nil && env.Error.Code == mcpwire.CodeInvalidParams
}

// Record records rec, the upstream's own task that a client's call just
// created, for ttl, so that any replica routes its tasks/* to the
// upstream; it logs the pass-through. When the store cannot record it,
// no replica could route them: the upstream's task is cancelled, best
// effort and in the background, and the error returned for the front to
// answer the call with.
func Record(ctx context.Context, store Store, up *upstreamside.Side, log zerolog.Logger, rec taskstore.UpstreamTask, ttl time.Duration, header http.Header) error {
	if err := store.PutUpstreamTask(ctx, rec, ttl); err != nil {
		log.Warn().Str("op", "native").Str("tool", rec.Tool).Err(err).Msg("cannot record the upstream's task id; cancelling it")
		go Cancel(context.WithoutCancel(ctx), up, rec.ID, rec.Protocol, header)
		return err
	}
	log.Info().Str("op", "native").Str("task_id", rec.ID).Str("tool", rec.Tool).Str("owner", core.LogOwner(rec.Owner)).
		Msg("upstream task passed through")
	return nil
}

// Cancel sends tasks/cancel of the upstream's task id, of protocol proto,
// best effort: posted on the task's session with header (MCP 2025-11-25,
// Tasks, "Cancelling Tasks"), or for a 2026-07-28 task a stateless
// request with header's credentials and the tasks extension declared
// (SEP-2663).
func Cancel(ctx context.Context, up *upstreamside.Side, id string, proto taskstore.Protocol, header http.Header) {
	ctx, stop := context.WithTimeout(ctx, core.StoreTimeout)
	defer stop()
	if proto != taskstore.Protocol2026 {
		msg := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-native-cancel",
			"method": "tasks/cancel", "params": map[string]any{"taskId": id}})
		if resp, err := up.Post(ctx, header, bytes.NewReader(msg)); err == nil {
			resp.Body.Close()
		}
		return
	}
	params := mcpwire.MustMarshal(map[string]any{"taskId": id, "_meta": map[string]any{
		core.MetaProtocolVersion: core.Version2026,
		core.MetaClientInfo:      upstreamside.GatewayInfo,
		core.MetaClientCaps:      map[string]any{"extensions": map[string]any{core.TasksExtension: map[string]any{}}},
	}})
	sess := &upstream.Session{ProtocolVersion: core.Version2026, Header: header}
	_, _ = up.Call(ctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/cancel", Params: params}, upstream.CallOptions{})
}
