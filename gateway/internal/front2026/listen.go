package front2026

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
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
// (internal/upstreamside/listen.go).
//
// The acknowledgement grants only what is served (SubscriptionsAcknowledged
// NotificationParams: unsupported types are omitted).
func (f *Front) listen(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	var p struct {
		Notifications *struct {
			upstreamside.ListenFilter
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "subscriptions/listen params must be an object with notifications"))
		return
	}
	era, err := f.Up.Era(r.Context(), core.ForwardedAuth(r))
	if p.Notifications.TaskIDs == nil {
		switch {
		case err != nil:
			f.Up.StatelessFailure(w, r, msg, err)
			return
		case era.Stateless:
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
	ls := &listenStream{f: f, r: r, msg: msg, meta: map[string]any{subscriptionIDKey: msg.ID},
		changes: make(chan string, 64), granted: []string{}, last: map[string]string{}, done: map[string]bool{}}
	if err == nil && !era.Stateless && !p.Notifications.ListenFilter.Empty() {
		defer ls.subscribeUpstream(p.Notifications.ListenFilter)()
	}
	defer ls.wg.Wait()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ls.ctx = ctx
	if !ls.watchTasks(w, ids) {
		return
	}
	ls.sse = mcpwire.NewWriter(w)
	if ls.awaitFeed() && ls.acknowledge(p.Notifications.TaskIDs != nil) {
		ls.relay()
	}
}

// listenStream is one subscriptions/listen stream between its steps.
type listenStream struct {
	f    *Front
	r    *http.Request
	msg  *mcpwire.Message
	ctx  context.Context // ends with the request, or when listen returns
	meta map[string]any  // the subscription's _meta on every message
	sse  *mcpwire.Writer

	// The upstream's notifications (listenUpstream), when subscribed.
	upGranted upstreamside.ListenFilter
	notes     <-chan upstreamside.FeedNote
	feedReady <-chan struct{}

	// The tasks watched: ids whose events came (changes), those granted,
	// what the client was last told of each, and the terminal ones (never
	// changing again, never re-read).
	changes chan string
	wg      sync.WaitGroup
	granted []string
	last    map[string]string
	done    map[string]bool
}

// subscribeUpstream subscribes to the upstream's notifications that filter
// asks for, and returns what ends the subscription.
func (ls *listenStream) subscribeUpstream(filter upstreamside.ListenFilter) (release func()) {
	r := ls.r
	granted, notes, ready, release, err := ls.f.Up.ListenUpstream(r.Context(), core.SessionOwner(r), core.ForwardedAuth(r), filter)
	if err != nil {
		// The upstream cannot be reached now: the stream goes on with the
		// gateway's notifications alone, granting none of its.
		ls.f.Log.Warn().Str("op", "listen").Err(err).Msg("cannot subscribe to the upstream's notifications; the listen stream carries the gateway's alone")
		ls.feedReady = ready
		return func() {}
	}
	ls.upGranted, ls.notes, ls.feedReady = granted, notes, ready
	return release
}

// watchTasks watches each of ids the client's owner can see, before
// reading it, so no change between the read and the watch is missed; it
// grants those. false: it answered an error instead.
func (ls *listenStream) watchTasks(w http.ResponseWriter, ids []string) bool {
	for _, id := range ids {
		if _, dup := ls.last[id]; dup {
			continue
		}
		owner := core.Owner2026(ls.r, id)
		t, err := ls.f.store.Get(ls.ctx, owner, id)
		if errors.Is(err, taskstore.ErrUnavailable) {
			// Not "not granted": the client must not conclude the task is gone.
			mcpwire.WriteError(w, ls.msg.ID, core.TaskError(ls.f.Log, err, "listen", id, core.Era2026))
			return false
		}
		if err != nil {
			continue // not theirs, gone, or unknown: simply not granted
		}
		watch, err := ls.f.store.Watch(ls.ctx, owner, id)
		if err != nil {
			mcpwire.WriteError(w, ls.msg.ID, core.TaskError(ls.f.Log, err, "listen", id, core.Era2026))
			return false
		}
		ls.granted = append(ls.granted, id)
		ls.last[id] = t.LastUpdatedAt.String() + string(t.Status)
		if t.Status.Terminal() {
			ls.done[id] = true
			watch.Close()
			continue
		}
		ls.wg.Add(1)
		go ls.follow(id, watch)
	}
	return true
}

// follow turns the events of task id's watch into a pending re-read.
func (ls *listenStream) follow(id string, watch *taskstore.Watch) {
	defer ls.wg.Done()
	defer watch.Close()
	for {
		select {
		case <-ls.ctx.Done():
			return
		case ev, ok := <-watch.C:
			if !ok {
				return
			}
			if ev.Kind == taskstore.EventMessage {
				continue
			}
			select {
			case ls.changes <- id:
			default: // a re-read is pending anyway
			}
		}
	}
}

// awaitFeed holds the acknowledgement until the owner session's GET stream
// is open, so that what changes after it reaches the client; the headers
// go at once, and the acknowledgement never later than feedReadyWait (the
// stream then opens after it). false: the stream broke.
func (ls *listenStream) awaitFeed() bool {
	if ls.feedReady == nil {
		return true
	}
	select {
	case <-ls.feedReady:
	default:
		if ls.sse.Comment("subscribing upstream") != nil {
			return false
		}
		t := time.NewTimer(upstreamside.FeedReadyWait)
		select {
		case <-ls.feedReady:
		case <-t.C:
		case <-ls.ctx.Done():
		}
		t.Stop()
	}
	return true
}

// acknowledge sends notifications/subscriptions/acknowledged: what the
// upstream granted, and the tasks granted when any were asked for.
func (ls *listenStream) acknowledge(tasksAsked bool) bool {
	acked := map[string]any{}
	_ = json.Unmarshal(mcpwire.MustMarshal(ls.upGranted), &acked)
	if tasksAsked {
		acked["taskIds"] = ls.granted
	}
	ack := mcpwire.Request{JSONRPC: "2.0", Method: "notifications/subscriptions/acknowledged",
		Params: mcpwire.MustMarshal(map[string]any{"notifications": acked, "_meta": ls.meta})}
	return ls.sse.Send(ack) == nil
}

// relay sends what comes until the client goes away or the gateway stops:
// the granted tasks' changes, the upstream's notifications, keep-alives.
func (ls *listenStream) relay() {
	resync := time.NewTicker(core.ResyncInterval(ls.f.store))
	defer resync.Stop()
	// An SSE comment now and then keeps a quiet stream from being closed by
	// intermediaries (Streamable HTTP 2026-07-28: encouraged for listen
	// streams); Config.KeepAlive sets how often, as for plain calls.
	var beat <-chan time.Time
	if ls.f.Up.KeepAlive > 0 {
		t := time.NewTicker(ls.f.Up.KeepAlive)
		defer t.Stop()
		beat = t.C
	}
	for {
		select {
		case <-ls.ctx.Done():
			return
		case <-ls.f.life.Done():
			// Shutting down: close the subscription gracefully.
			_ = ls.sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: ls.msg.ID, Result: mcpwire.MustMarshal(map[string]any{"_meta": ls.meta})})
			return
		case id := <-ls.changes:
			if ls.send(id) != nil {
				return
			}
		case <-beat:
			if ls.sse.Comment("") != nil {
				return
			}
		case n := <-ls.notes:
			if !ls.upGranted.Wants(n.Method, n.Params) {
				continue
			}
			if ls.sse.SendRaw(mcpwire.Notification(n.Method, mcpwire.WithMeta(n.Params, subscriptionIDKey, ls.msg.ID))) != nil {
				return
			}
		case <-resync.C:
			for _, id := range ls.granted {
				if ls.send(id) != nil {
					return
				}
			}
		}
	}
}

// send notifies the client of task id's state if it changed since it was
// last told.
func (ls *listenStream) send(id string) error {
	if ls.done[id] {
		return nil
	}
	t, err := ls.f.store.Get(ls.ctx, core.Owner2026(ls.r, id), id)
	if err != nil {
		return nil
	}
	ls.done[id] = t.Status.Terminal()
	v := t.LastUpdatedAt.String() + string(t.Status)
	if ls.last[id] == v {
		return nil // nothing new since the last notification
	}
	ls.last[id] = v
	mt := core.ToTask2026(t, "", true)
	mt.Meta = ls.meta
	return ls.sse.Send(mcpwire.Request{JSONRPC: "2.0", Method: "notifications/tasks", Params: mcpwire.MustMarshal(mt)})
}
