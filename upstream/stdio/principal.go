package stdio

// Children scoped to the principal (Options.PerPrincipal, taskgate's
// --upstream-scope principal): one child serves all the sessions of one
// principal (upstream.Principal on the initialize's context), across that
// principal's clients and replicas, and never a session of another.
//
//	first session of P here   starts (or takes a warm) child, initialized
//	                          with that session's own initialize
//	later sessions of P       multiplexed onto it as the shared child's
//	                          sessions are: their ids and progress tokens
//	                          rewritten (the call table), the child's
//	                          requests routed by the calls in flight
//	                          (routeLocked), its notifications to every GET
//	                          stream of P's sessions (broadcast)
//	P's last session ends     (DELETE, idle, or the child's exit) the child
//	                          is stopped
//	the child exits           every session of P on it ends (404: its
//	                          clients initialize again; one joining it
//	                          as its exit is processed has its
//	                          initialize refused: childGoneLocked),
//	                          unless a call the gateway runs again was
//	                          in flight on it: then they all live on, on
//	                          a fresh child (respawn.go)
//
// Across replicas, the replica running P's child claims it in the
// Directory under principalRecord(P) (beside the sessions' records, with
// an id no session can have) before it starts it; an initialize of P on
// another replica, whose claim loses, hops there (hop.go carries the
// principal), so that the new session, and with it every later request of
// that session, lives beside P's child. The claim is atomic
// (Directory.ClaimSessionReplica), so two replicas never both start one;
// it is renewed while the child runs or starts (renew), taken over from
// a holder that does not answer the hop (forwardPrincipal): the former
// holder, when it lives on, learns it at its next renewal and sends the
// principal's new sessions to the new holder from then on, keeping its
// child for the sessions it has (principalChild.elsewhere); it is released
// when the child stops (Directory.ReleaseSessionReplicas: only while it
// names this replica, so that a holder found gone that was only slow
// never removes the claim of the replica that took it over).
//
// A session without a principal (no sign-in: taskgate refuses the scope
// at start) gets a child of its own.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// principalChild is a principal's child on this replica; guarded by
// Bridge.mu but for err and params, set before ready closes.
type principalChild struct {
	key   string
	ready chan struct{} // closed once proc (or err) is set
	proc  *proc         // replaced by a respawn (respawn.go)
	err   error
	// params are the initialize it was started with, that a fresh child
	// is started with too (respawn.go).
	params json.RawMessage
	// respawn is closed once a fresh child is ready or failed; nil: none
	// starting.
	respawn chan struct{}
	// sessions are the sessions on it, and those being opened.
	sessions int
	// elsewhere: the claim on its record is another replica's (a renewal
	// found it taken over: this replica did not answer a hop in time), so
	// the principal's new sessions go to that replica's child
	// (forwardPrincipal); the sessions on this one stay until they end.
	elsewhere bool
}

// principalRecord is the Directory id of key's child. A session id is
// visible ASCII only (validSessionID), so no client's can be this.
func principalRecord(key string) string { return "\x00principal\x00" + key }

// perPrincipal reports whether the session of principal key is served by
// the principal's child.
func (f *fleet) perPrincipal(key string) bool {
	return f.principalsOnly() && key != ""
}

// principalsOnly reports whether the bridge serves principal scope: no
// child serves two principals. Then no child is served statelessly, even
// one that speaks 2026-07-28 (bridge.go, Start): the one stateless child
// would serve every principal's 2026-07-28 clients. The gateway serves
// those with a session it holds per owner (a 2026-07-28 client in front
// of a session upstream), and that session joins its principal's child.
func (f *fleet) principalsOnly() bool {
	b := f.b
	return b.opts.PerPrincipal && !b.opts.Shared
}

// joinPrincipalLocked counts a session of principal key being opened
// (reserveLocked checked the limits): on the principal's child here, or
// on one this session starts (first), which counts among the children
// under MaxSessions.
func (f *fleet) joinPrincipalLocked(key string) (pc *principalChild, first bool) {
	b := f.b
	pc = f.principals[key]
	if pc == nil {
		b.owned++
		pc = &principalChild{key: key, ready: make(chan struct{})}
		f.principals[key] = pc
		first = true
	}
	pc.sessions++
	b.shares.TakeLocked(key)
	return pc, first
}

// leavePrincipalLocked counts one session of pc gone (ended, or never
// opened) and, with its last, drops pc and returns its child to stop.
func (f *fleet) leavePrincipalLocked(pc *principalChild) *proc {
	b := f.b
	b.shares.GiveLocked(pc.key)
	pc.sessions--
	if pc.sessions > 0 {
		return nil
	}
	if f.principals[pc.key] == pc {
		delete(f.principals, pc.key)
	}
	b.owned--
	f.wakeWarm()
	select {
	case <-pc.ready:
	default:
		return nil // its first session gives up before the child is ready: it stops it
	}
	if pc.proc != nil {
		b.principalEnded(pc.key) // its record goes (replicas.go)
	}
	return pc.proc
}

// claimed records whether this replica holds the claim on principal key's
// child (held), when its child runs here: a child whose claim another
// replica holds takes none of the principal's new sessions.
func (f *fleet) claimed(key string, held bool) {
	b := f.b
	b.mu.Lock()
	if pc := f.principals[key]; pc != nil {
		pc.elsewhere = !held
	}
	b.mu.Unlock()
}

// principalChildFor gives session s the child of its principal: started
// with the session's initialize params when first, else the one started
// for an earlier session, whose initialize result it gets (its version
// lowered to the one s asked for, as from the shared child).
func (f *fleet) principalChildFor(s *session, pc *principalChild, first bool, params json.RawMessage, version string) (json.RawMessage, error) {
	b := f.b
	if first {
		p, err := f.sessionChild(params, s) // a warm one if there is one (warm.go)
		b.mu.Lock()
		if err == nil {
			p.sess, p.principal = nil, pc.key // serves every session of the principal from now on
			if !p.alive() {
				err = errors.New("the upstream process exited after its initialize")
			}
		}
		pc.proc, pc.err, pc.params = p, err, params
		if err != nil {
			pc.proc = nil
			if f.principals[pc.key] == pc {
				delete(f.principals, pc.key) // the next session starts another
			}
		}
		close(pc.ready)
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
		s.proc, s.pc = p, pc
		return p.init, nil
	}
	<-pc.ready // bounded by InitTimeout
	if pc.err != nil {
		return nil, pc.err
	}
	b.mu.Lock()
	respawn := pc.respawn
	b.mu.Unlock()
	if respawn != nil {
		<-respawn // its child died under a call run again: a fresh one starts (respawn.go)
	}
	b.mu.Lock()
	p := pc.proc
	b.mu.Unlock()
	if !p.alive() {
		return nil, errors.New("the principal's upstream process exited")
	}
	s.proc, s.pc = p, pc
	result := p.init
	if frontable[version] && version < p.version {
		result, _ = mcpwire.WithMember(result, "protocolVersion", json.RawMessage(strconv.Quote(version)))
	}
	return result, nil
}

// forwardPrincipal sends an initialize of principal key on to the replica
// holding the claim on its child, when that is another replica, and
// reports whether it did (then the answer is written). Otherwise this
// replica holds the claim, and the session is opened here: on the
// principal's child here, or on one it starts. The claim is atomic
// (Directory.ClaimSessionReplica), so two first sessions of one principal
// on two replicas at once start one child: the replica whose claim lost
// hops to the winner. A claim whose replica does not answer the hop (it
// died before its record expired) is taken over.
func (b *Bridge) forwardPrincipal(w http.ResponseWriter, r *http.Request, key string, body []byte) bool {
	rp := b.rep.Load()
	if rp == nil || !b.fleet.perPrincipal(key) || hopped(r.Context()) {
		return false
	}
	// Cheap: a child here is the principal's unless a renewal of its
	// claim found it taken over (recordPrincipal); then the claim is
	// tried again, which sends the session to the holder.
	b.mu.Lock()
	pc := b.fleet.principals[key]
	here := pc != nil && !pc.elsewhere
	b.mu.Unlock()
	if here {
		return false
	}
	id, gone := principalRecord(key), ""
	for range maxTakeovers + 1 {
		ctx, cancel := context.WithTimeout(r.Context(), directoryTimeout)
		owner, err := rp.Directory.ClaimSessionReplica(ctx, id, rp.URL, gone, rp.TTL)
		cancel()
		switch {
		case err != nil && r.Context().Err() != nil:
			return true // the client went away
		case err != nil:
			b.log.Warn().Str("op", "stdio").Err(err).Msg("cannot claim a principal's upstream process")
			jsonError(w, http.StatusServiceUnavailable, nil, -32603, "cannot find where this principal's upstream process runs: the store is unavailable")
			return true
		case owner == rp.URL:
			b.fleet.claimed(key, true)
			return false // claimed: its child runs here
		}
		if b.hopTo(w, r, rp, owner, id, key, body) == hopServed {
			return true
		}
		b.log.Warn().Str("op", "stdio").Str("owner", owner).Msg("the replica holding a principal's upstream process does not answer; taking its claim over")
		gone = owner
	}
	return false // holders keep vanishing: the session is opened here
}

// maxTakeovers bounds the claims one initialize takes over from replicas
// that do not answer.
const maxTakeovers = 2
