package stdio

// A session whose own child dies under a call the gateway runs again (a
// durable task's, marked on the call's context: upstream.Rerunnable) is
// not ended: it gets a fresh child, initialized with the session's own
// recorded initialize params, and the rerun runs there (docs/durable.md,
// "When a task runs again"). The calls in flight still fail naming the
// exit (exitedMessage), so a call that is not run again fails as before;
// requests that arrive while the fresh child starts wait for it. A
// session whose child dies with no such call in flight ends as before
// (its client gets 404 and initializes again), and so does one whose
// fresh child fails to start.
//
// A principal's child (principal.go) that dies while any session on it
// has such a call in flight is replaced the same way, for all of the
// principal's sessions on it: they are one user's, so the ones with no
// call run again keep working on the fresh child too, which is started
// with the initialize the dead one was started with (pc.params, its first
// session's), so it speaks the version every session on it negotiated.
// Sessions that join while it starts wait for it. With no such call in
// flight, every session on it ends as before.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/taskgate/taskgate/upstream"
)

// keepAlive is what a session keeps to outlive its child.
type keepAlive struct {
	params  json.RawMessage // the client's initialize params, for a fresh child
	reruns  int             // calls in flight the gateway runs again (under Bridge.mu)
	respawn chan struct{}   // closed once a fresh child is ready or failed; nil: none starting
}

// markRerunnable counts r, a request of session s, among the calls the
// gateway runs again while it is in flight, when its context says so; the
// returned func ends the count.
func (f *fleet) markRerunnable(r *http.Request, s *session, env envelope) func() {
	b := f.b
	if b.opts.Shared || env.Method != "tools/call" || !upstream.Rerunnable(r.Context()) {
		return func() {}
	}
	b.mu.Lock()
	s.reruns++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		s.reruns--
		b.mu.Unlock()
	}
}

// awaitChild waits for the fresh child of session s, while one starts
// (or ctx ends).
func (f *fleet) awaitChild(ctx context.Context, s *session) {
	b := f.b
	b.mu.Lock()
	ch := s.respawn
	b.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// respawnLocked starts a fresh child for session s, whose child p exited
// by itself (a crash, or its budget) under a call the gateway runs again;
// false when s ends instead: no such call was in flight, the bridge is
// closing, or s has no recorded initialize.
func (f *fleet) respawnLocked(s *session, p *proc) bool {
	b := f.b
	if s.proc != p || s.reruns == 0 || b.closed || len(s.params) == 0 || s.respawn != nil {
		return false
	}
	s.respawn = make(chan struct{})
	b.wg.Add(1)
	go f.respawn(s)
	b.log.Warn().Str("op", "stdio").Str("session", s.id).Err(p.exitErr).Int("rerunnable_calls", s.reruns).
		Msg("the session's upstream process exited under a call the gateway runs again; the session lives on with a fresh process")
	return true
}

// respawn gives session s a fresh child (a warm one if there is one),
// initialized with its client's initialize params, and wakes the requests
// waiting for it; a child that cannot start ends the session.
func (f *fleet) respawn(s *session) {
	b := f.b
	defer b.wg.Done()
	p, err := f.sessionChild(s.params, s)
	var stale *proc
	b.mu.Lock()
	live := !s.Ended && !b.closed && b.sessions[s.id] == s
	switch {
	case err == nil && live:
		s.proc = p
	case err == nil:
		stale = p // the session ended meanwhile
	case live:
		b.endSessionLocked(s)
		b.log.Warn().Str("op", "stdio").Str("session", s.id).Err(err).
			Msg("cannot start a fresh upstream process for the session; the session ended (its client gets 404 and initializes again)")
	}
	close(s.respawn)
	s.respawn = nil
	b.mu.Unlock()
	if stale != nil {
		stopProc(stale, "its session ended")
	}
}

// rerunHeader carries upstream.Rerunnable over the hop to the replica
// running the session's child. The hop's MAC covers it (hopMACID) and it
// is read only on a hop that verified (serveHop), so only a replica can
// set it, and nobody can add or strip it on the way.
const rerunHeader = "Taskgate-Rerunnable"

// hopMACID is the id a hop's MAC binds: its session (or principal
// record), with the rerun mark when the hop carries one. An unmarked
// hop's MAC is the one replicas signed before the mark existed.
func hopMACID(id string, rerun bool) string {
	if rerun {
		return id + "\x00rerun"
	}
	return id
}

// rerunHop marks out, r sent on over the hop, when r's context says the
// gateway runs its call again.
func rerunHop(r, out *http.Request) {
	out.Header.Del(rerunHeader)
	if upstream.Rerunnable(r.Context()) {
		out.Header.Set(rerunHeader, "1")
	}
}

// rerunLanded is ctx, the context of r that arrived over the hop, marked
// as a call the gateway runs again when r says so.
func rerunLanded(r *http.Request, ctx context.Context) context.Context {
	if r.Header.Get(rerunHeader) != "1" {
		return ctx
	}
	return upstream.WithRerunnable(ctx)
}

// respawnPrincipalLocked starts a fresh child for the sessions of pc,
// whose child p exited by itself (a crash, or its budget) while a session
// on it had a call the gateway runs again in flight; false when they end
// instead: no such call, the bridge is closing, or one starts already.
func (f *fleet) respawnPrincipalLocked(pc *principalChild, p *proc) bool {
	b := f.b
	if pc.proc != p || b.closed || len(pc.params) == 0 || pc.respawn != nil {
		return false
	}
	var on []*session
	reruns := 0
	for _, s := range b.sessions {
		if s.pc == pc {
			on = append(on, s)
			reruns += s.reruns
		}
	}
	if reruns == 0 {
		return false
	}
	pc.respawn = make(chan struct{})
	for _, s := range on {
		s.respawn = pc.respawn // its requests wait for the fresh child (awaitChild)
	}
	b.wg.Add(1)
	go f.respawnPrincipal(pc)
	b.log.Warn().Str("op", "stdio").Int("sessions", len(on)).Err(p.exitErr).Int("rerunnable_calls", reruns).
		Msg("a principal's upstream process exited under a call the gateway runs again; its sessions live on with a fresh process")
	return true
}

// respawnPrincipal gives the sessions of pc a fresh child (a warm one if
// there is one), initialized with pc's initialize, and wakes the requests
// waiting for it; a child that cannot start ends them all.
func (f *fleet) respawnPrincipal(pc *principalChild) {
	b := f.b
	defer b.wg.Done()
	p, err := f.sessionChild(pc.params, nil)
	var stale *proc
	b.mu.Lock()
	if err == nil && !p.alive() {
		err = errors.New("the upstream process exited after its initialize")
	}
	live := !b.closed && f.principals[pc.key] == pc && pc.sessions > 0
	switch {
	case err == nil && live:
		p.sess, p.principal = nil, pc.key
		pc.proc = p
		for _, s := range b.sessions {
			if s.pc == pc {
				s.proc = p
			}
		}
	case err == nil:
		stale = p // its principal's sessions ended meanwhile
	case live:
		delete(f.principals, pc.key) // the principal's next session starts another
		for _, s := range b.sessions {
			if s.pc == pc {
				b.endSessionLocked(s)
			}
		}
		b.log.Warn().Str("op", "stdio").Err(err).
			Msg("cannot start a fresh upstream process for a principal; its sessions ended (their clients get 404 and initialize again)")
	}
	for _, s := range b.sessions {
		if s.respawn == pc.respawn {
			s.respawn = nil
		}
	}
	close(pc.respawn)
	pc.respawn = nil
	b.mu.Unlock()
	if stale != nil {
		stopProc(stale, "its principal's sessions ended")
	}
}
