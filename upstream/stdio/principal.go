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
//	                          clients initialize again)
//
// Across replicas, the replica running P's child records it in the
// Directory under principalRecord(P) (beside the sessions' records, with
// an id no session can have); an initialize of P on another replica hops
// there (hop.go carries the principal), so that the new session, and with
// it every later request of that session, lives beside P's child.
//
// A session without a principal (no sign-in: taskgate refuses the scope
// at start) gets a child of its own.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// principalChild is a principal's child on this replica; guarded by
// Bridge.mu but for proc and err, set before ready closes.
type principalChild struct {
	key   string
	ready chan struct{} // closed once proc (or err) is set
	proc  *proc
	err   error
	// sessions are the sessions on it, and those being opened.
	sessions int
}

// principalRecord is the Directory id of key's child. A session id is
// visible ASCII only (validSessionID), so no client's can be this.
func principalRecord(key string) string { return "\x00principal\x00" + key }

// perPrincipal reports whether the session of principal key is served by
// the principal's child.
func (f *fleet) perPrincipal(key string) bool {
	b := f.b
	return b.opts.PerPrincipal && !b.opts.Shared && key != ""
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
		pc.proc, pc.err = p, err
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
	p := pc.proc
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
// recorded as running its child, when that is another replica, and
// reports whether it did (then the answer is written). Otherwise the
// session is opened here.
func (b *Bridge) forwardPrincipal(w http.ResponseWriter, r *http.Request, key string, body []byte) bool {
	rp := b.rep.Load()
	if rp == nil || !b.fleet.perPrincipal(key) || hopped(r.Context()) {
		return false
	}
	b.mu.Lock()
	_, here := b.fleet.principals[key]
	b.mu.Unlock()
	if here {
		return false
	}
	return b.hopTo(w, r, rp, principalRecord(key), key, body)
}
