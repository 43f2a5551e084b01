package stdio

// The one restart-with-backoff loop of a child that serves every client:
// the shared child (--upstream-shared) and the 2026-07-28 child.

import (
	"math/rand/v2"
	"time"
)

const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 30 * time.Second
	// stableAfter: a child that lived this long restarts from backoffMin.
	stableAfter = 10 * time.Second
)

// backoff is the wait before a child starts again: jittered (half to all
// of the current step), the step doubling up to backoffMax and back to
// backoffMin after a child that lived stableAfter.
type backoff struct{ step time.Duration }

// next is the wait before the next start, given how long the last child
// ran (0: it did not start).
func (bo *backoff) next(ran time.Duration) time.Duration {
	if bo.step == 0 || ran > stableAfter {
		bo.step = backoffMin
	}
	wait := bo.step/2 + rand.N(bo.step/2+1)
	bo.step = min(2*bo.step, backoffMax)
	return wait
}

// child is what keepRunning keeps running: start starts and readies a
// new one (a child returned with an error has failed and exited), up
// makes a ready one serve (restarted: not the first), down says why none
// serves.
type child struct {
	start func() (*proc, error)
	up    func(p *proc, restarted bool)
	down  func(err error)
}

// keepRunning keeps c running from p (err: why p is not ready) until the
// bridge stops: when it exits, its calls fail (forget) and a new one is
// started after a backoff. It runs on the bridge's WaitGroup.
func (f *fleet) keepRunning(p *proc, err error, c child) {
	b := f.b
	defer b.wg.Done()
	var bo backoff
	for restarted := false; ; restarted = true {
		var ran time.Duration
		if err == nil {
			c.up(p, restarted)
			started := time.Now()
			select {
			case <-p.exited:
				err = p.exitErr
			case <-b.stop:
				return
			}
			ran = time.Since(started)
		}
		c.down(err)
		wait := bo.next(ran)
		b.log.Warn().Str("op", "stdio").Err(err).Float64("restart_in_seconds", wait.Seconds()).Msg("upstream process down; restarting it")
		select {
		case <-time.After(wait):
		case <-b.stop:
			return
		}
		p, err = c.start()
	}
}

// supervise keeps the shared child running (keepRunning): when it exits,
// its calls fail and it is started again after a jittered, capped backoff.
func (f *fleet) supervise(p *proc, err error) {
	b := f.b
	f.keepRunning(p, err, child{
		start: func() (*proc, error) { return f.spawn(initParams, nil) },
		up: func(p *proc, _ bool) {
			b.mu.Lock()
			b.shared, b.down = p, nil
			b.mu.Unlock()
		},
		down: func(err error) {
			b.mu.Lock()
			b.shared, b.down = nil, err
			b.mu.Unlock()
		},
	})
}
