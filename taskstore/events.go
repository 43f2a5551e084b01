package taskstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Signals. Every script that changes a task PUBLISHes "<kind>:<status>" on
// the task's channel in the same atomic step, so a waiter on any replica
// (a blocking tasks/result, the worker holding the upstream call, a
// subscriptions/listen stream) wakes without polling.
//
// Pub/sub is at-most-once: messages published while a subscriber reconnects
// are lost. So an event only says "look again", and nothing depends on one
// arriving: a waiter subscribes first and then reads the task; it reads again
// after every (re)subscription (EventResync) and on a slow timer
// (Options.ResyncInterval). WaitFor packages that loop.
//
// One Store holds one pub/sub connection, shared by all its watches (10k
// waiters are 10k map entries, not 10k connections). Channels are
// subscribed while at least one watch wants them. In Cluster, classic
// PUBLISH reaches every node, so the connection may sit on any node.

// EventKind says what changed.
type EventKind string

const (
	EventStatus   EventKind = "status"   // the status changed
	EventInputs   EventKind = "inputs"   // input responses were recorded
	EventCancel   EventKind = "cancel"   // cancellation was requested
	EventProgress EventKind = "progress" // progress was recorded
	// EventResync is not published by anyone: the watch (re)subscribed after
	// a connection loss, so messages may have been missed. Re-read the task.
	EventResync EventKind = "resync"
	// EventMessage carries a message for a client session in Data
	// (PublishSession); it is not about a task's state.
	EventMessage EventKind = "msg"
	// EventSession says a session the gateway holds changed or ended
	// (AnnounceSession): Status is SessionChanged or SessionEnded.
	EventSession EventKind = "session"
)

// Event is one change notice. Status is the status after the change (empty
// for EventResync). Treat it as a hint; the task is the truth.
type Event struct {
	Kind   EventKind
	Status Status
	// Data is the message of an EventMessage.
	Data string
}

// ErrClosed is returned by Watch and WaitFor once the Store is closed.
var ErrClosed = errors.New("taskstore: store closed")

// subscribeWait bounds how long Watch waits for Redis to confirm a new
// subscription. Past it Watch returns anyway: the watch is registered and
// gets an EventResync once the subscription is live.
const subscribeWait = time.Second

// Watch is a subscription to one task's events. C is closed by Close and by
// Store.Close. Events are coalesced when the reader is slow (C holds a few);
// a dropped event is harmless since the reader re-reads the task anyway.
type Watch struct {
	C <-chan Event

	c       chan Event
	hub     *hub
	channel string
	once    sync.Once
	// wake, when set (SetWake), is called after every event sent to C and
	// after C is closed; ended records the close; dropped records an event
	// C had no room for.
	wake    atomic.Pointer[func()]
	ended   atomic.Bool
	dropped atomic.Bool
}

// Dropped reports whether an event was dropped (C was full) since the
// last call that cleared it (clear true): the reader must re-read what
// the events are about.
func (w *Watch) Dropped(clear bool) bool {
	if clear {
		return w.dropped.Swap(false)
	}
	return w.dropped.Load()
}

// SetWake makes the watch call f after it sends an event on C (or drops
// one because C is full) and after it closes C, so that a reader need not
// block on C to learn of either: it may check len(C) and Ended. f runs on
// the store's pub/sub loop: it must be quick and must not call the Store.
func (w *Watch) SetWake(f func()) { w.wake.Store(&f) }

// Ended reports whether C has been closed (or is about to be: Ended is
// true before the wake that follows the close).
func (w *Watch) Ended() bool { return w.ended.Load() }

// shut closes C and wakes the reader; the hub's mu is held.
func (w *Watch) shut() {
	w.ended.Store(true)
	close(w.c)
	if f := w.wake.Load(); f != nil {
		(*f)()
	}
}

// Close ends the watch. It may be called more than once.
func (w *Watch) Close() {
	w.once.Do(func() { w.hub.remove(w) })
}

// Watch subscribes to the owner's task id. It returns once the subscription
// is live (or after a short bound when Redis is slow or down), so a read of
// the task made after Watch returns cannot miss a later change. It does not
// check that the task exists.
func (s *Store) Watch(ctx context.Context, owner, id string) (*Watch, error) {
	w, err := s.hub.add(ctx, s.k.channel(owner, id), taskWatchBuffer)
	if err != nil {
		return nil, fmt.Errorf("taskstore: watch %s: %w", id, err)
	}
	return w, nil
}

// WaitFor blocks until cond holds for the owner's task and returns the task.
// It watches first and then reads, and reads again on every event, every
// resubscription and every Options.ResyncInterval, so it wakes within
// milliseconds of a change and still wakes when a message was lost. While
// Redis is unavailable it keeps waiting; ErrNotFound, ErrExpired and the
// context end it.
func (s *Store) WaitFor(ctx context.Context, owner, id string, cond func(*Task) bool) (*Task, error) {
	w, err := s.Watch(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	tick := time.NewTicker(s.opt.ResyncInterval)
	defer tick.Stop()
	for {
		t, err := s.get(ctx, owner, id)
		switch {
		case err == nil:
			if cond(t) {
				return t, nil
			}
		case errors.Is(err, ErrUnavailable):
			// Wait for the resubscription (EventResync) or the timer.
		default:
			return nil, fmt.Errorf("taskstore: wait %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("taskstore: wait %s: %w", id, ctx.Err())
		case _, ok := <-w.C:
			if !ok {
				return nil, fmt.Errorf("taskstore: wait %s: %w", id, ErrClosed)
			}
		case <-tick.C:
		}
	}
}

// IsTerminal is a WaitFor condition: the task has its outcome.
func IsTerminal(t *Task) bool { return t.Status.Terminal() }

// hub multiplexes the watches of one Store over one redis.PubSub.
type hub struct {
	rdb redis.UniversalClient
	log zerolog.Logger

	// subMu serialises SUBSCRIBE/UNSUBSCRIBE writes and replacing ps, so
	// that the per-channel bookkeeping and Redis agree.
	subMu sync.Mutex

	mu     sync.Mutex
	ps     *redis.PubSub // nil until the first watch
	chans  map[string]*hubChan
	closed bool
	stop   chan struct{}
	done   chan struct{}

	// trouble hears every receive error of the pub/sub connection (on a
	// Cluster, the slot refresher: failover.go); nil: nobody.
	trouble func(error)

	// dropMessages makes the hub ignore published messages; tests use it
	// to simulate pub/sub loss.
	dropMessages atomic.Bool
}

type hubChan struct {
	watches map[*Watch]struct{}
	// listeners are the WatchRemovals subscribers of the channel: told of
	// every message and every change of live, never dropped.
	listeners map[*Removals]struct{}
	ready     chan struct{} // closed when Redis first confirms the subscription
	created   time.Time
	live      bool // subscription confirmed and not lost since
	wasLive   bool // confirmed at least once
}

func newHub(rdb redis.UniversalClient, log zerolog.Logger) *hub {
	return &hub{rdb: rdb, log: log, chans: map[string]*hubChan{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// Watch buffers: a task's events are hints (its readers re-read the task,
// and Dropped tells them one was lost), and one is held per running task;
// a session's carry messages for its client's stream, and there are few.
const (
	taskWatchBuffer    = 4
	sessionWatchBuffer = 32
)

func (h *hub) add(ctx context.Context, channel string, buffer int) (*Watch, error) {
	c := make(chan Event, buffer)
	w := &Watch{C: c, c: c, hub: h, channel: channel}
	ready, err := h.join(ctx, channel, func(hc *hubChan) { hc.watches[w] = struct{}{} })
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(subscribeWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
		w.Close()
		return nil, ctx.Err()
	}
	return w, nil
}

// join registers a subscriber of channel (enter, called with h.mu held)
// and subscribes the channel when it is new. It returns the channel's
// ready, closed once Redis first confirms the subscription.
func (h *hub) join(ctx context.Context, channel string, enter func(*hubChan)) (ready chan struct{}, err error) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	opened := h.ps == nil
	if opened {
		h.ps = h.rdb.Subscribe(context.Background())
		go h.loop(h.ps)
	}
	hc := h.chans[channel]
	fresh := hc == nil
	if fresh {
		hc = &hubChan{watches: map[*Watch]struct{}{}, ready: make(chan struct{}), created: time.Now()}
		h.chans[channel] = hc
	}
	enter(hc)
	ps := h.ps
	h.mu.Unlock()
	if _, cluster := h.rdb.(*redis.ClusterClient); opened && cluster {
		// In Cluster the connection goes to the master of its first
		// channel's slot, and every replica's first channel is the same
		// (the removals): a PING first opens it on a random node, so the
		// replicas' connections spread.
		_ = ps.Ping(ctx)
	}
	if fresh {
		// An error here (Redis down) is not the caller's: go-redis keeps
		// the channel and subscribes it on reconnect, and its subscribers
		// then hear of it (EventResync, Live).
		_ = ps.Subscribe(ctx, channel)
	}
	return hc.ready, nil
}

// listen subscribes r to channel (WatchRemovals). It does not wait for
// Redis to confirm the subscription: r.Live reports that when it comes.
func (h *hub) listen(ctx context.Context, channel string, r Removals) (stop func(), err error) {
	rp := &r
	_, err = h.join(ctx, channel, func(hc *hubChan) {
		if hc.listeners == nil { // only the removals channel has any
			hc.listeners = map[*Removals]struct{}{}
		}
		hc.listeners[rp] = struct{}{}
		if hc.live {
			r.Live(true)
		}
	})
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { h.unlisten(channel, rp) }) }, nil
}

func (h *hub) unlisten(channel string, r *Removals) {
	h.leave(channel, func(hc *hubChan) { delete(hc.listeners, r) })
}

func (h *hub) remove(w *Watch) {
	h.leave(w.channel, func(hc *hubChan) {
		delete(hc.watches, w)
		w.shut()
	})
}

// leave unregisters a subscriber of channel (exit, called with h.mu held)
// and unsubscribes the channel when it was the last. Nothing happens once
// the hub is closed (close ended every subscriber).
func (h *hub) leave(channel string, exit func(*hubChan)) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	hc := h.chans[channel]
	if hc == nil { // hub closed
		h.mu.Unlock()
		return
	}
	exit(hc)
	last := len(hc.watches) == 0 && len(hc.listeners) == 0
	if last {
		delete(h.chans, channel)
	}
	ps := h.ps
	h.mu.Unlock()
	if last && ps != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = ps.Unsubscribe(ctx, channel)
		cancel()
	}
}

// close ends the receive loop and every watch.
func (h *hub) close() {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.stop)
	ps := h.ps
	for _, hc := range h.chans {
		for w := range hc.watches {
			w.shut()
		}
		for r := range hc.listeners {
			r.Live(false)
		}
	}
	h.chans = map[string]*hubChan{}
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-h.done
	}
}

const (
	receiveTimeout = 15 * time.Second // ping the pub/sub connection when idle this long
	maxBackoff     = time.Second
)

// loop receives on the shared connection until close. On a receive error it
// tells every watch to re-read (messages may be lost while go-redis
// reconnects and resubscribes) and backs off; a connection that stays
// silent after a PING is replaced.
func (h *hub) loop(ps *redis.PubSub) {
	defer close(h.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 10 * time.Millisecond
	pinged, down := false, false
	for {
		msg, err := ps.ReceiveTimeout(ctx, receiveTimeout)
		if h.isClosed() {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				_ = ps.Ping(ctx)
				continue
			}
			if pinged { // no answer to our PING: the connection is dead
				ps = h.replace()
				if ps == nil {
					return
				}
			}
			pinged = false
			if h.trouble != nil {
				h.trouble(err)
			}
			if !down {
				down = true
				h.log.Warn().Err(err).Msg("taskstore: pub/sub connection lost; waiters fall back to re-reading until it is back")
				h.lost()
			}
			select {
			case <-h.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		pinged, backoff = false, 10*time.Millisecond
		if down {
			down = false
			h.log.Info().Msg("taskstore: pub/sub connection restored")
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.confirm(m.Channel)
			}
		case *redis.Message:
			if !h.dropMessages.Load() {
				h.dispatch(m.Channel, m.Payload, parseEvent(m.Payload))
			}
		}
	}
}

func (h *hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// replace closes a dead PubSub and opens a new one on the same channels.
func (h *hub) replace() *redis.PubSub {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	old := h.ps
	channels := make([]string, 0, len(h.chans))
	for ch := range h.chans {
		channels = append(channels, ch)
	}
	h.ps = h.rdb.Subscribe(context.Background())
	ps := h.ps
	h.mu.Unlock()
	_ = old.Close()
	if len(channels) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = ps.Subscribe(ctx, channels...)
		cancel()
	}
	return ps
}

// lost marks every subscription as possibly broken and pokes every watch.
func (h *hub) lost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hc := range h.chans {
		wasLive := hc.live
		hc.live = false
		for w := range hc.watches {
			send(w, Event{Kind: EventResync})
		}
		if wasLive {
			for r := range hc.listeners {
				r.Live(false)
			}
		}
	}
}

// confirm records Redis' confirmation of a subscription. A re-confirmation
// after a loss pokes the channel's watches: they re-read what they missed.
func (h *hub) confirm(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc := h.chans[channel]
	if hc == nil || hc.live {
		return
	}
	hc.live = true
	for r := range hc.listeners {
		r.Live(true)
	}
	if !hc.wasLive {
		hc.wasLive = true
		close(hc.ready)
		if time.Since(hc.created) < subscribeWait {
			return // Watch was still waiting; its caller reads next
		}
	}
	for w := range hc.watches {
		send(w, Event{Kind: EventResync})
	}
}

func (h *hub) dispatch(channel, payload string, ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc := h.chans[channel]
	if hc == nil {
		return
	}
	for w := range hc.watches {
		send(w, ev)
	}
	for r := range hc.listeners {
		r.Removed(payload)
	}
}

// send never blocks: a full buffer means the reader has events pending and
// will re-read the task anyway.
func send(w *Watch, ev Event) {
	select {
	case w.c <- ev:
	default:
		w.dropped.Store(true)
	}
	if f := w.wake.Load(); f != nil {
		(*f)()
	}
}

func parseEvent(payload string) Event {
	kind, status, _ := strings.Cut(payload, ":")
	if kind == string(EventMessage) {
		return Event{Kind: EventMessage, Data: status}
	}
	return Event{Kind: EventKind(kind), Status: Status(status)}
}
