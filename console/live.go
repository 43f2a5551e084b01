package console

// Live updates: the tasks list and a task's page open a stream of
// server-sent events (static/live.js) that says "change" when what the
// page shows changed; the page then fetches itself again and swaps its
// <main>. The events carry no data of their own, so nothing reaches the
// browser except through the escaped page.
//
// A task's stream is fed by the store's events for that task (the same
// pub/sub its waiters use), with a slow re-read besides, since pub/sub may
// drop a message. The list has no fleet-wide event to hear (the scripts
// publish on each task's channel only), so its stream re-reads the page's
// rows every LivePoll and compares: one OpsList per open stream and
// period, bounded by MaxLive.
//
// Bounded: at most MaxLive streams at once (one more is answered 503), a
// comment every Heartbeat keeps proxies from closing a quiet one, and a
// stream ends when its client goes (the request's context).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// sse is an open event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s sse) send(event string) error {
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, event); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s sse) ping() error {
	if _, err := fmt.Fprint(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// open takes a stream slot and starts the event stream, or answers 503
// and returns false; release gives the slot back.
func (c *Console) open(w http.ResponseWriter) (s sse, release func(), ok bool) {
	select {
	case c.live <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "30")
		http.Error(w, "too many live streams open on this console; reload the page later", http.StatusServiceUnavailable)
		return sse{}, nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s = sse{w: w, rc: http.NewResponseController(w)}
	if s.ping() != nil {
		<-c.live
		return sse{}, nil, false
	}
	return s, func() { <-c.live }, true
}

// pageMark digests what the list shows of its rows, to tell a change.
func pageMark(p taskstore.OpsPage) string {
	h := sha256.New()
	for _, t := range p.Tasks {
		fmt.Fprintf(h, "%s|%s|%d|%s|%s|%d\n", t.ID, t.Status, t.LastUpdatedAt.UnixMilli(), t.StatusMessage, t.Lease.Holder, p.Attempts[t.ID])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// liveTasks streams "change" when the tasks page of the same query would
// show other rows.
func (c *Console) liveTasks(w http.ResponseWriter, r *http.Request, _ string) {
	if !c.cfg.Store.OpsEnabled() {
		c.storeError(w, taskstore.ErrOpsDisabled)
		return
	}
	q := r.URL.Query()
	query := taskstore.OpsQuery{Status: taskstore.Status(q.Get("status")), Tool: q.Get("tool"), Cursor: q.Get("cursor")}
	first, err := c.cfg.Store.OpsList(r.Context(), query)
	if err != nil {
		c.storeError(w, err)
		return
	}
	s, release, ok := c.open(w)
	if !ok {
		return
	}
	defer release()
	mark := pageMark(first)
	c.loop(r.Context(), s, c.cfg.LivePoll, nil, func(ctx context.Context) (bool, error) {
		p, err := c.cfg.Store.OpsList(ctx, query)
		if err != nil {
			return false, nil // the store is away: try again next period
		}
		if m := pageMark(p); m != mark {
			mark = m
			return false, s.send("change")
		}
		return false, nil
	})
}

// liveTask streams "change" when the task changes, and "end" once it is
// terminal (nothing changes after that but its expiry).
func (c *Console) liveTask(w http.ResponseWriter, r *http.Request, _ string) {
	t, err := c.cfg.Store.OpsFind(r.Context(), r.PathValue("id"))
	if err != nil {
		c.storeError(w, err)
		return
	}
	watch, err := c.cfg.Store.Watch(r.Context(), t.Owner, t.ID)
	if err != nil {
		c.storeError(w, err)
		return
	}
	defer watch.Close()
	s, release, ok := c.open(w)
	if !ok {
		return
	}
	defer release()
	mark := fmt.Sprint(t.Status, t.LastUpdatedAt.UnixMilli())
	check := func(ctx context.Context) (bool, error) {
		t, err := c.cfg.Store.OpsFind(ctx, t.ID)
		if err != nil {
			return false, nil
		}
		if m := fmt.Sprint(t.Status, t.LastUpdatedAt.UnixMilli()); m != mark {
			mark = m
			if err := s.send("change"); err != nil {
				return true, err
			}
		}
		if t.Status.Terminal() {
			return true, s.send("end")
		}
		return false, nil
	}
	if done, _ := check(r.Context()); done {
		return
	}
	// A resync as slow as the store's own waiters': events are hints.
	c.loop(r.Context(), s, 5*time.Second, watch.C, check)
}

// loop runs check every period and on every event until the client goes,
// check says done or a write fails, and pings every Heartbeat.
func (c *Console) loop(ctx context.Context, s sse, period time.Duration, events <-chan taskstore.Event, check func(context.Context) (bool, error)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	beat := time.NewTicker(c.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if s.ping() != nil {
				return
			}
			continue
		case _, ok := <-events:
			if !ok {
				events = nil // the watch ended: the slow re-read goes on
			}
		case <-tick.C:
		}
		if done, err := check(ctx); done || err != nil {
			return
		}
	}
}
