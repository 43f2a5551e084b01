package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// subscriptionIDKey is the _meta key that ties a message to its
// subscriptions/listen stream (schema-2026-07-28.ts).
const subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

// maxListenTasks bounds the task ids one subscription may watch.
const maxListenTasks = 1000

// serveListen answers a subscriptions/listen that asks for task
// notifications (SEP-2663 "Task Status Notifications"): it acknowledges
// with the granted ids, only the caller's own tasks, then sends
// notifications/tasks with the full DetailedTask on every change, made by
// whichever replica. A listen without taskIds is the upstream's business.
//
// The gateway serves task notifications only; other filters on the same
// request are not granted (the acknowledgement says so by omitting them).
func (h *Handler) serveListen(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq) {
	var p struct {
		Notifications struct {
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "subscriptions/listen params must be an object with notifications"))
		return
	}
	if p.Notifications.TaskIDs == nil {
		h.forwardModern(w, r, msg, mr)
		return
	}
	if !mr.Tasks {
		writeModernError(w, msg.ID, missingTasksCapability("task notifications need the tasks extension declared"))
		return
	}
	ids := *p.Notifications.TaskIDs
	if len(ids) > maxListenTasks {
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "too many taskIds on one subscription"))
		return
	}
	ctx := r.Context()
	owner := ownerOf(r)
	meta := map[string]any{subscriptionIDKey: msg.ID}

	// Watch before reading, so no change between the read and the watch is
	// missed; grant only the tasks this owner can see.
	changes := make(chan string, 64)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	granted := []string{}
	last := map[string]string{}
	for _, id := range ids {
		if _, dup := last[id]; dup {
			continue
		}
		t, err := h.store.Get(ctx, owner, id)
		if errors.Is(err, taskstore.ErrUnavailable) {
			// Not "not granted": the client must not conclude the task is gone.
			writeModernError(w, msg.ID, h.taskError(err, "listen", id))
			return
		}
		if err != nil {
			continue // not theirs, gone, or unknown: simply not granted
		}
		watch, err := h.store.Watch(ctx, owner, id)
		if err != nil {
			writeModernError(w, msg.ID, h.taskError(err, "listen", id))
			return
		}
		granted = append(granted, id)
		last[id] = t.LastUpdatedAt.String() + string(t.Status)
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			defer watch.Close()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-watch.C:
					if !ok {
						return
					}
					if ev.Kind == taskstore.EventMessage {
						continue
					}
					select {
					case changes <- id:
					default: // a re-read is pending anyway
					}
				}
			}
		}(id)
	}
	sse := newSSEWriter(w)
	ack := rpcRequest{JSONRPC: "2.0", Method: "notifications/subscriptions/acknowledged",
		Params: mustJSON(map[string]any{"notifications": map[string]any{"taskIds": granted}, "_meta": meta})}
	if sse.send(ack) != nil {
		return
	}
	resync := time.NewTicker(h.resyncInterval())
	defer resync.Stop()
	send := func(id string) error {
		t, err := h.store.Get(ctx, owner, id)
		if err != nil {
			return nil
		}
		v := t.LastUpdatedAt.String() + string(t.Status)
		if last[id] == v {
			return nil // nothing new since the last notification
		}
		last[id] = v
		mt := toModernTask(t, "", true)
		mt.Meta = meta
		return sse.send(rpcRequest{JSONRPC: "2.0", Method: "notifications/tasks", Params: mustJSON(mt)})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.workers.ctx.Done():
			// Shutting down: close the subscription gracefully.
			_ = sse.send(rpcResponse{JSONRPC: "2.0", ID: msg.ID, Result: mustJSON(map[string]any{"_meta": meta})})
			return
		case id := <-changes:
			if send(id) != nil {
				return
			}
		case <-resync.C:
			for _, id := range granted {
				if send(id) != nil {
					return
				}
			}
		}
	}
}
