package taskstore

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A Create whose reply never came (Redis killed or cut off after it ran the
// script, and still unreachable when go-redis retried) has an unknown
// outcome: the task may exist, durably, though the caller was told the
// create failed and never learns its id. Left alone it would sit in the
// owner's indexes and cap, show in tasks/list, and, its lease never
// renewed, be failed by a recoverer as if the replica that created it had
// died. So the store removes it in the background once Redis answers again.
//
// One goroutine per Store works through the pending removals, gently (a
// first try after abandonFirst, then backing off): every dial it makes
// while Redis is down counts towards go-redis' dial circuit breaker, which,
// once open, fails every command of the client for up to a second after
// Redis is back.

const (
	// abandonFor bounds how long the store keeps trying to remove one.
	abandonFor = time.Minute
	// abandonFirst is the wait before the first try; abandonMaxBackoff
	// the longest between tries.
	abandonFirst      = 500 * time.Millisecond
	abandonMaxBackoff = 5 * time.Second
	// abandonTombstone is how long a late execution of the lost write is
	// refused (createCmd checks the tombstone).
	abandonTombstone = 10 * time.Minute
)

// abandoner holds the removals still to do.
type abandoner struct {
	mu      sync.Mutex
	pending map[string]abandonItem // by task key
	running bool
	closed  bool
	stopped chan struct{} // closed by stop
	wg      sync.WaitGroup
}

type abandonItem struct {
	keys   []string // createCmd's KEYS
	id     string
	member string // the task's member in the operator's index
	since  time.Time
}

// abandon queues the removal of the task a failed Create may have written
// under keys.
func (s *Store) abandon(keys []string, id, member string) {
	a := &s.ab
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if a.pending == nil {
		a.pending = map[string]abandonItem{}
		a.stopped = make(chan struct{})
	}
	a.pending[keys[0]] = abandonItem{keys: keys, id: id, member: member, since: time.Now()}
	if !a.running {
		a.running = true
		a.wg.Add(1)
		go s.abandonLoop()
	}
}

func (s *Store) abandonLoop() {
	a := &s.ab
	defer a.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := abandonFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		a.mu.Lock()
		items := make([]abandonItem, 0, len(a.pending))
		for _, it := range a.pending {
			items = append(items, it)
		}
		a.mu.Unlock()
		down := false
		for _, it := range items {
			_, err := s.run(ctx, abandonCmd, it.keys, it.id, ms(abandonTombstone), s.k.removals(), it.member)
			if errors.Is(err, ErrUnavailable) && ctx.Err() == nil && time.Since(it.since) < abandonFor {
				down = true // still down: try again later
				break
			}
			switch {
			case err == nil:
				s.opt.Logger.Debug().Str("op", "abandon").Str("task_id", it.id).Msg("removed what a failed create may have written")
			case ctx.Err() == nil:
				s.opt.Logger.Warn().Str("op", "abandon").Str("task_id", it.id).Err(err).
					Msg("cannot remove the task a failed create may have written; a recoverer will fail it once its lease runs out")
			}
			a.mu.Lock()
			delete(a.pending, it.keys[0])
			a.mu.Unlock()
		}
		a.mu.Lock()
		if len(a.pending) == 0 || ctx.Err() != nil {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if down {
			wait = min(2*wait, abandonMaxBackoff)
		} else {
			wait = abandonFirst
		}
	}
}

// stop ends the removals and waits for the goroutine.
func (a *abandoner) stop() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		if a.stopped != nil {
			close(a.stopped)
		}
	}
	a.mu.Unlock()
	a.wg.Wait()
}
