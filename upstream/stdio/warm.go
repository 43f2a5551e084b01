package stdio

// Warm starts (--upstream-warm): children started ahead, their interpreter
// loaded, waiting on stdin for an initialize. A new session takes one and
// initializes it with its client's own params (MCP 2025-11-25, Lifecycle,
// "Initialization": the client's initialize is the first message a server
// reads), so its first answer does not wait for the process to load. A warm
// child serves one session only: it is taken out of the pool, under the
// bridge's mutex, before its initialize is sent.
//
// Warm children count against MaxSessions: the pool is refilled only while
// sessions, children being started and warm children together stay under
// it, so a replica runs at most MaxSessions children, warm ones included.

import (
	"encoding/json"
	"time"
)

// warmPool is the bridge's warm children; guarded by Bridge.mu.
type warmPool struct {
	ready    []*proc       // started, not initialized, not taken
	starting int           // being started by keepWarm
	kick     chan struct{} // wakes keepWarm: one was taken or exited
}

// startWarm starts the refiller when Options.Warm asks for children
// started ahead (never with Shared: its one child is started by Start).
func (f *fleet) startWarm() {
	b := f.b
	f.warm.kick = make(chan struct{}, 1)
	if b.opts.Warm <= 0 || b.opts.Shared {
		return
	}
	b.wg.Add(1)
	go f.keepWarm()
}

// wakeWarm tells keepWarm to look again; it never blocks.
func (f *fleet) wakeWarm() {
	select {
	case f.warm.kick <- struct{}{}:
	default:
	}
}

// warmWantedLocked is how many more warm children to start now.
func (f *fleet) warmWantedLocked() int {
	b := f.b
	if b.closed {
		return 0
	}
	have := len(f.warm.ready) + f.warm.starting
	room := b.opts.MaxSessions - b.owned - have
	return max(0, min(b.opts.Warm-have, room))
}

// keepWarm keeps the pool at Options.Warm children (fewer when sessions
// fill MaxSessions), one start at a time, backing off after a failed
// start as the shared child's restarts do (restart.go).
func (f *fleet) keepWarm() {
	b := f.b
	defer b.wg.Done()
	var bo backoff
	for {
		b.mu.Lock()
		want := f.warmWantedLocked()
		if want > 0 {
			f.warm.starting++
		}
		b.mu.Unlock()
		if want == 0 {
			select {
			case <-f.warm.kick:
				continue
			case <-b.stop:
				return
			}
		}
		p, err := f.startChild(nil)
		b.mu.Lock()
		f.warm.starting--
		if err == nil {
			f.warm.ready = append(f.warm.ready, p)
		}
		b.mu.Unlock()
		if err != nil {
			wait := bo.next(0)
			b.log.Warn().Str("op", "stdio").Err(err).Float64("retry_in_seconds", wait.Seconds()).Msg("cannot start a warm upstream process; trying again")
			select {
			case <-time.After(wait):
				continue
			case <-b.stop:
				return
			}
		}
		bo = backoff{}
		b.log.Debug().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Msg("warm upstream process started")
		go f.watchWarm(p)
	}
}

// watchWarm replaces warm child p if it exits while it waits.
func (f *fleet) watchWarm(p *proc) {
	b := f.b
	<-p.exited
	b.mu.Lock()
	waiting := f.dropWarmLocked(p)
	b.mu.Unlock()
	if waiting {
		if p.killReason() == "" {
			b.log.Warn().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Err(p.exitErr).
				Msg("a warm upstream process exited while it waited for a session; starting another")
		}
		f.wakeWarm()
	}
}

// dropWarmLocked takes p out of the pool; false if it was not in it.
func (f *fleet) dropWarmLocked(p *proc) bool {
	for i, q := range f.warm.ready {
		if q == p {
			f.warm.ready = append(f.warm.ready[:i], f.warm.ready[i+1:]...)
			return true
		}
	}
	return false
}

// takeWarmLocked gives session s a warm child, or nil if none is ready.
func (f *fleet) takeWarmLocked(s *session) *proc {
	for len(f.warm.ready) > 0 {
		p := f.warm.ready[0]
		f.warm.ready = f.warm.ready[1:]
		if p.alive() {
			p.sess = s // read under Bridge.mu (routeLocked, broadcast, forget)
			return p
		}
	}
	return nil
}

// sessionChild gives session s a child initialized with params: a warm
// one when the pool has one (the pool is then refilled in the
// background), else one started now. Either way the time from the
// initialize sent to its answer is observed (Metrics).
func (f *fleet) sessionChild(params json.RawMessage, s *session) (*proc, error) {
	b := f.b
	b.mu.Lock()
	p := f.takeWarmLocked(s)
	b.mu.Unlock()
	kind := startCold
	start := time.Now()
	var err error
	if p != nil {
		kind = startWarm
		f.wakeWarm()
		err = f.readyChild(p, params)
	} else {
		p, err = f.spawn(params, s)
	}
	b.metrics.observeStart(kind, time.Since(start), err)
	return p, err
}

// WarmReady is how many warm children wait for a session now.
func (b *Bridge) WarmReady() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.fleet.warm.ready)
}
