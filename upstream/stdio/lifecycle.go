package stdio

// What ends with a child, a session or a call, and idle reaping; the
// children themselves are the fleet's (fleet.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// childFor gives session s its child, started and initialized with the
// client's initialize params (the shared one, when Shared; its
// principal's, pc, when PerPrincipal, started by this session when
// first), and returns the initialize result for the client.
func (b *Bridge) childFor(s *session, body []byte, shared *proc, down error, pc *principalChild, first bool) (json.RawMessage, error) {
	var asked struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &asked)
	var v struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(asked.Params, &v)
	if b.opts.Shared {
		if shared == nil {
			return nil, &refusal{http.StatusServiceUnavailable, -32603, "the upstream process is not running: " + down.Error()}
		}
		result := shared.init
		if frontable[v.ProtocolVersion] && v.ProtocolVersion < shared.version {
			// The child speaks a newer version; the client gets the one it
			// asked for, which the child's messages also satisfy.
			result, _ = mcpwire.WithMember(result, "protocolVersion", json.RawMessage(strconv.Quote(v.ProtocolVersion)))
		}
		return result, nil
	}
	if len(asked.Params) == 0 || asked.Params[0] != '{' {
		return nil, &refusal{http.StatusOK, -32602, "Invalid params: initialize takes an object (MCP 2025-11-25, Lifecycle, \"Initialization\")"}
	}
	s.Caps, s.params = v.Capabilities, asked.Params
	if s.Caps == nil {
		s.Caps = map[string]json.RawMessage{}
	}
	start := time.Now()
	var p *proc
	var result json.RawMessage
	var err error
	if pc != nil {
		result, err = b.fleet.principalChildFor(s, pc, first, asked.Params, v.ProtocolVersion)
	} else {
		p, err = b.fleet.sessionChild(asked.Params, s) // a warm one if there is one (warm.go)
	}
	if err != nil {
		b.mu.Lock()
		s.Ended = true
		s.Streams.DropHeldLocked()
		b.mu.Unlock()
		return nil, fmt.Errorf("taskgate could not start the stdio server for this session: %v", err)
	}
	if pc != nil {
		b.log.Debug().Str("op", "stdio").Str("session", s.id).Bool("first", first).Float64("initialize_seconds", time.Since(start).Seconds()).Msg("session's principal's upstream process ready")
		return result, nil
	}
	s.proc = p
	b.log.Debug().Str("op", "stdio").Str("session", s.id).Float64("initialize_seconds", time.Since(start).Seconds()).Msg("session's upstream process ready")
	return p.init, nil
}

// childGoneLocked reports whether the child session s was given, before
// s is added to the sessions, exited meanwhile and its exit was processed
// (forget): forget ended the sessions on it, but not s, which it could not
// see yet. Added, s would be a session on a dead child, each of its
// requests an error until it idled out, rather than the 404 that tells
// its client to initialize again. A principal's child is gone when its
// principal's entry no longer names pc (forget dropped it, or its fresh
// child failed: respawn.go); while a fresh one starts, pc stays, and s
// joins that one.
func (f *fleet) childGoneLocked(s *session) bool {
	if s.pc != nil {
		return f.principals[s.pc.key] != s.pc
	}
	return s.proc != nil && s.proc.forgotten
}

// refusal is an initialize refused with an HTTP status and a JSON-RPC code.
type refusal struct {
	status, code int
	msg          string
}

func (r *refusal) Error() string { return r.msg }

// forget fails the calls of a child that exited, ends its session (a
// session's own child) and drops it.
func (b *Bridge) forget(p *proc) {
	// Whether taskgate stopped it, read before its sessions end: ending
	// the last one stops the child (already gone) and names that reason.
	byItself := p.killReason() == ""
	b.mu.Lock()
	p.forgotten = true // a session being opened on it is refused (initialize)
	failed := b.calls.FailPeerLocked(p, func(c *call) []byte { return exitedMessage(c.OrigID, p.exitErr.Error()) })
	if key := p.principal; key != "" { // a principal's child: every session on it ends, unless a fresh child replaces it (respawn.go)
		if pc := b.fleet.principals[key]; pc == nil || !b.fleet.respawnPrincipalLocked(pc, p) {
			if pc != nil && pc.proc == p {
				delete(b.fleet.principals, key) // the principal's next session starts another
			}
			n := 0
			for _, s := range b.sessions {
				if s.proc == p {
					b.endSessionLocked(s)
					n++
				}
			}
			if n > 0 && byItself {
				b.log.Warn().Str("op", "stdio").Int("sessions", n).Err(p.exitErr).
					Msg("a principal's upstream process exited; its sessions ended (their clients get 404 and initialize again)")
			}
		}
	} else if s := p.sess; s != nil && !s.Ended && b.sessions[s.id] == s && !b.fleet.respawnLocked(s, p) { // respawn.go
		b.endSessionLocked(s)
		if byItself { // it ended by itself, not because its session did
			b.log.Warn().Str("op", "stdio").Str("session", s.id).Err(p.exitErr).
				Msg("the session's upstream process exited; the session ended (its client gets 404 and initializes again)")
		}
	}
	for i, q := range b.fleet.procs {
		if q == p {
			b.fleet.procs = append(b.fleet.procs[:i], b.fleet.procs[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	if failed > 0 {
		b.log.Warn().Str("op", "stdio").Int("failed_calls", failed).Err(p.exitErr).Msg("calls in flight on the upstream process failed")
	}
}

// reap ends sessions idle for SessionIdle.
func (b *Bridge) reap() {
	defer b.wg.Done()
	bridgesession.Reap(b.stop, b.opts.SessionIdle, func(now time.Time) {
		var stops []*proc
		b.mu.Lock()
		for _, s := range b.sessions {
			if s.Inflight == 0 && now.Sub(s.LastUsed) > b.opts.SessionIdle {
				if s.proc != nil && s.pc == nil { // a principal's child stops with its last session (endSessionLocked)
					stops = append(stops, s.proc)
				}
				b.endSessionLocked(s)
			}
		}
		b.mu.Unlock()
		for _, p := range stops {
			go stopProc(p, "its session was idle")
		}
	})
}

func stopProc(p *proc, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.stop(ctx, why)
}

// endSessionLocked drops session s, closing its GET streams and
// refusing the child's requests only it could answer.
func (b *Bridge) endSessionLocked(s *session) {
	if b.sessions[s.id] != s {
		return
	}
	delete(b.sessions, s.id)
	b.sessionEnded(s) // its record goes (replicas.go)
	s.Ended = true
	s.Streams.CloseLocked()
	switch {
	case s.adopted:
		b.adopted--
	case s.pc != nil:
		if p := b.fleet.leavePrincipalLocked(s.pc); p != nil {
			go stopProc(p, "the last session of its principal ended")
		}
	default:
		b.owned--
		b.shares.GiveLocked(s.principal)
		b.fleet.wakeWarm() // room for a warm child again (warm.go)
	}
	b.calls.EndSessionLocked(s, "the client session ended before it answered")
}
