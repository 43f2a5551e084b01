package runner

// The notifications the runner sends about its tasks. Only a 2025-11-25
// task has anyone to tell: its client's session gets them, from whichever
// replica changed the task to whichever holds the session's stream
// (through the store's pub/sub):
//   - notifications/tasks/status with the full Task on each status change
//     (MCP 2025-11-25, Tasks, "Task Status Notification"; best effort:
//     clients must not rely on it);
//   - notifications/progress, with related-task _meta, on the task's open
//     tasks/result streams, else the session's GET stream;
//   - notifications/message, the upstream's log messages during the call.
//
// A 2026-07-28 client sees its task's progress as the statusMessage of
// tasks/get and its status changes on subscriptions/listen (SEP-2663),
// and a fallback task's client through the fallback tools: the runner
// sends those nothing, and asks the task's protocol before it reads
// anything of the store.

import (
	"context"
	"encoding/json"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// notifyStore is what the runner's notifications need of the task store.
type notifyStore interface {
	ResultStreamOpen(ctx context.Context, owner, id string) (bool, error)
	PublishTask(ctx context.Context, owner, id string, msg []byte) error
	PublishSession(ctx context.Context, sessionID string, msg []byte) error
}

// notified reports whether task t has a client to notify: a 2025-11-25
// task (the protocol never changes, so the task as created says it).
func notified(t *taskstore.Task) bool { return t.Protocol == taskstore.Protocol2025 }

// notifyStatusByID tells the job's client of the task's new status, read
// afresh from the store, if it has a client to tell.
func (rn *Runner) notifyStatusByID(ctx context.Context, j *Job) {
	if !notified(j.Task) {
		return
	}
	t, err := rn.Store.Get(ctx, j.Owner, j.Task.ID)
	if err != nil {
		return
	}
	rn.StatusChanged(ctx, t)
}

// StatusChanged publishes notifications/tasks/status for t, as read, to
// its session.
func (rn *Runner) StatusChanged(ctx context.Context, t *taskstore.Task) {
	if msg := statusNote(t); msg != nil {
		_ = rn.Store.PublishSession(ctx, t.Upstream.SessionID, msg)
	}
}

// statusNote is the notifications/tasks/status of t for its session; nil
// when it has nobody to tell. A worker's outcome hands it to the store,
// which publishes it in the same script as the write (outcome.go).
func statusNote(t *taskstore.Task) []byte {
	if !notified(t) || t.Upstream.SessionID == "" {
		return nil
	}
	return mcpwire.Notification("notifications/tasks/status", mcpwire.MustMarshal(core.ToTask2025(t)))
}

// progress sends a progress notification of job j's task, with
// related-task _meta, to the task's open tasks/result streams (on
// whichever replica), or to the session's GET stream when none is open.
// Each notification is its own message, so none is merged away and the
// order is the upstream's.
func (rn *Runner) progress(ctx context.Context, j *Job, params json.RawMessage) {
	if !notified(j.Task) {
		return
	}
	msg := mcpwire.Notification("notifications/progress", mcpwire.WithMeta(params, core.RelatedTaskKey, core.RelatedTask(j.Task.ID)))
	sessionID := j.notifySession()
	if open, err := rn.Store.ResultStreamOpen(ctx, j.Owner, j.Task.ID); err == nil && open || sessionID == "" {
		_ = rn.Store.PublishTask(ctx, j.Owner, j.Task.ID, msg)
		return
	}
	_ = rn.Store.PublishSession(ctx, sessionID, msg)
}

// logMessage relays an upstream's notifications/message sent during job
// j's call to its client (MCP 2025-11-25, Utilities, "Logging"): the
// plain call's stream when the call has no session of its own (a held
// session's plain call), else the GET stream of the task's session.
func (rn *Runner) logMessage(ctx context.Context, j *Job, params json.RawMessage) {
	if !notified(j.Task) {
		return
	}
	sessionID := j.notifySession()
	if sessionID == "" {
		_ = rn.Store.PublishTask(ctx, j.Owner, j.Task.ID, mcpwire.Notification("notifications/message", params))
		return
	}
	msg := mcpwire.Notification("notifications/message", mcpwire.WithMeta(params, core.RelatedTaskKey, core.RelatedTask(j.Task.ID)))
	_ = rn.Store.PublishSession(ctx, sessionID, msg)
}
