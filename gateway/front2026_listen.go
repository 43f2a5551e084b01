package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// subscriptionIDKey is the _meta key that ties a message to its
// subscriptions/listen stream (schema-2026-07-28.ts).
const subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

// maxListenTasks bounds the task ids one subscription may watch, and
// maxListensPerSubscriber the subscriptions one client holds open on one
// replica.
const (
	maxListenTasks          = 1000
	maxListensPerSubscriber = 16
)

// streamCounter counts the open streams per subscriber, up to a limit.
type streamCounter struct {
	mu   sync.Mutex
	open map[string]int
	max  int
}

func newStreamCounter(max int) *streamCounter {
	return &streamCounter{open: map[string]int{}, max: max}
}

// acquire counts one more stream of who, unless who has max open.
func (c *streamCounter) acquire(who string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[who] >= c.max {
		return false
	}
	c.open[who]++
	return true
}

// release counts one stream of who fewer.
func (c *streamCounter) release(who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[who]--; c.open[who] <= 0 {
		delete(c.open, who)
	}
}

// listen answers a subscriptions/listen. In front of a stateless upstream,
// a listen without taskIds is the upstream's business. Otherwise the
// gateway acknowledges at once and serves the stream itself: task
// notifications (SEP-2663 "Task Status Notifications") for the granted
// taskIds, only the caller's own tasks, with the full DetailedTask on
// every change, made by whichever replica; and, in front of a session
// upstream, the list changes and resource updates of the owner session
// (upstream_listen.go).
//
// The acknowledgement grants only what is served (SubscriptionsAcknowledged
// NotificationParams: unsupported types are omitted).
func (f *front2026) listen(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	var p struct {
		Notifications *struct {
			listenFilter
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "subscriptions/listen params must be an object with notifications"))
		return
	}
	era, err := f.up.era(r.Context(), core.ForwardedAuth(r))
	if p.Notifications.TaskIDs == nil {
		switch {
		case err != nil:
			f.up.statelessFailure(w, r, msg, err)
			return
		case era.stateless:
			f.forward(w, r, msg, mr, "")
			return
		}
	} else if !mr.Tasks {
		core.WriteStatelessError(w, msg.ID, missingTasksCapability("task notifications need the tasks extension declared"))
		return
	}
	var ids []string
	if p.Notifications.TaskIDs != nil {
		ids = *p.Notifications.TaskIDs
	}
	if len(ids) > maxListenTasks {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "too many taskIds on one subscription"))
		return
	}
	// Each stream watches up to maxListenTasks tasks: their number per
	// subscriber (its credentials, else its address) is bounded too.
	subscriber := core.AuthOwner(r)
	if subscriber == "" {
		subscriber = "addr:" + core.ClientAddr(r)
	}
	if !f.listens.acquire(subscriber) {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusTooManyRequests, mcpwire.CodeInvalidRequest,
			fmt.Sprintf("too many subscriptions/listen streams open (at most %d per client on this replica); close one first", maxListensPerSubscriber)))
		return
	}
	defer f.listens.release(subscriber)
	var upGranted listenFilter
	var notes <-chan feedNote
	var feedReady <-chan struct{}
	if err == nil && !era.stateless && !p.Notifications.listenFilter.empty() {
		var release func()
		upGranted, notes, feedReady, release, err = f.up.listenUpstream(r.Context(), core.SessionOwner(r), core.ForwardedAuth(r), p.Notifications.listenFilter)
		if err != nil {
			// The upstream cannot be reached now: the stream goes on with
			// the gateway's notifications alone, granting none of its.
			f.log.Warn().Str("op", "listen").Err(err).Msg("cannot subscribe to the upstream's notifications; the listen stream carries the gateway's alone")
			upGranted, notes = listenFilter{}, nil
		} else {
			defer release()
		}
	}
	ctx := r.Context()
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
	done := map[string]bool{} // terminal: never changes again, never re-read
	for _, id := range ids {
		if _, dup := last[id]; dup {
			continue
		}
		owner := core.Owner2026(r, id)
		t, err := f.store.Get(ctx, owner, id)
		if errors.Is(err, taskstore.ErrUnavailable) {
			// Not "not granted": the client must not conclude the task is gone.
			mcpwire.WriteError(w, msg.ID, core.TaskError(f.log, err, "listen", id, core.Era2026))
			return
		}
		if err != nil {
			continue // not theirs, gone, or unknown: simply not granted
		}
		watch, err := f.store.Watch(ctx, owner, id)
		if err != nil {
			mcpwire.WriteError(w, msg.ID, core.TaskError(f.log, err, "listen", id, core.Era2026))
			return
		}
		granted = append(granted, id)
		last[id] = t.LastUpdatedAt.String() + string(t.Status)
		if t.Status.Terminal() {
			done[id] = true
			watch.Close()
			continue
		}
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
	if feedReady != nil {
		// Acknowledged once the owner session's GET stream is open, so that
		// what changes after the acknowledgement reaches the client; the
		// headers go at once, and the acknowledgement never later than
		// feedReadyWait (the stream then opens after it).
		select {
		case <-feedReady:
		default:
			if sse.Comment("subscribing upstream") != nil {
				return
			}
			t := time.NewTimer(feedReadyWait)
			select {
			case <-feedReady:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	acked := map[string]any{}
	_ = json.Unmarshal(mcpwire.MustMarshal(upGranted), &acked)
	if p.Notifications.TaskIDs != nil {
		acked["taskIds"] = granted
	}
	ack := mcpwire.Request{JSONRPC: "2.0", Method: "notifications/subscriptions/acknowledged",
		Params: mcpwire.MustMarshal(map[string]any{"notifications": acked, "_meta": meta})}
	if sse.Send(ack) != nil {
		return
	}
	resync := time.NewTicker(core.ResyncInterval(f.store))
	defer resync.Stop()
	// An SSE comment now and then keeps a quiet stream from being closed by
	// intermediaries (Streamable HTTP 2026-07-28: encouraged for listen
	// streams); Config.KeepAlive sets how often, as for plain calls.
	var beat <-chan time.Time
	if f.up.keepAlive > 0 {
		t := time.NewTicker(f.up.keepAlive)
		defer t.Stop()
		beat = t.C
	}
	send := func(id string) error {
		if done[id] {
			return nil
		}
		t, err := f.store.Get(ctx, core.Owner2026(r, id), id)
		if err != nil {
			return nil
		}
		done[id] = t.Status.Terminal()
		v := t.LastUpdatedAt.String() + string(t.Status)
		if last[id] == v {
			return nil // nothing new since the last notification
		}
		last[id] = v
		mt := core.ToTask2026(t, "", true)
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
		case <-beat:
			if sse.Comment("") != nil {
				return
			}
		case n := <-notes:
			if !upGranted.wants(n.Method, n.Params) {
				continue
			}
			if sse.SendRaw(mcpwire.Notification(n.Method, mcpwire.WithMeta(n.Params, subscriptionIDKey, msg.ID))) != nil {
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
