package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// subscriptionIDKey is the _meta key that ties a message to its
// subscriptions/listen stream (schema-2026-07-28.ts).
const subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

// maxListenTasks bounds the task ids one subscription may watch.
const maxListenTasks = 1000

// listen answers a subscriptions/listen that asks for task
// notifications (SEP-2663 "Task Status Notifications"): it acknowledges
// with the granted ids, only the caller's own tasks, then sends
// notifications/tasks with the full DetailedTask on every change, made by
// whichever replica. A listen without taskIds is the upstream's business.
//
// The gateway serves task notifications only; other filters on the same
// request are not granted (the acknowledgement says so by omitting them).
func (f *front2026) listen(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	var p struct {
		Notifications struct {
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		writeStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "subscriptions/listen params must be an object with notifications"))
		return
	}
	if p.Notifications.TaskIDs == nil {
		f.forward(w, r, msg, mr, "")
		return
	}
	if !mr.Tasks {
		writeStatelessError(w, msg.ID, missingTasksCapability("task notifications need the tasks extension declared"))
		return
	}
	ids := *p.Notifications.TaskIDs
	if len(ids) > maxListenTasks {
		writeStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "too many taskIds on one subscription"))
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
		t, err := f.store.Get(ctx, owner, id)
		if errors.Is(err, taskstore.ErrUnavailable) {
			// Not "not granted": the client must not conclude the task is gone.
			mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "listen", id, era2026))
			return
		}
		if err != nil {
			continue // not theirs, gone, or unknown: simply not granted
		}
		watch, err := f.store.Watch(ctx, owner, id)
		if err != nil {
			mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "listen", id, era2026))
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
	sse := mcpwire.NewWriter(w)
	ack := mcpwire.Request{JSONRPC: "2.0", Method: "notifications/subscriptions/acknowledged",
		Params: mcpwire.MustMarshal(map[string]any{"notifications": map[string]any{"taskIds": granted}, "_meta": meta})}
	if sse.Send(ack) != nil {
		return
	}
	resync := time.NewTicker(resyncInterval(f.store))
	defer resync.Stop()
	send := func(id string) error {
		t, err := f.store.Get(ctx, owner, id)
		if err != nil {
			return nil
		}
		v := t.LastUpdatedAt.String() + string(t.Status)
		if last[id] == v {
			return nil // nothing new since the last notification
		}
		last[id] = v
		mt := toTask2026(t, "", true)
		mt.Meta = meta
		return sse.Send(mcpwire.Request{JSONRPC: "2.0", Method: "notifications/tasks", Params: mcpwire.MustMarshal(mt)})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.life.Done():
			// Shutting down: close the subscription gracefully.
			_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: mcpwire.MustMarshal(map[string]any{"_meta": meta})})
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
