package bridgesession

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// Shares counts a bridge's sessions per principal (upstream.Principal, as
// the gateway sets it on the request's context), so that one principal
// cannot take every session of a local server (--max-sessions-per-
// principal): with --max-sessions 5, five sessions of one principal left
// every other client refused for up to --session-idle. Guarded by its
// bridge's mutex; memory is bounded by the sessions open (a principal's
// entry goes with its last session).
type Shares struct {
	n map[string]int
}

// DefaultShare is the per-principal cap a bridge of maxSessions sessions
// uses when none is given: half of them (at least 1), so that no one
// principal alone takes them all.
func DefaultShare(maxSessions int) int { return max(maxSessions/2, 1) }

// TakeLocked counts a session for key; an unknown principal ("") is
// not counted.
func (s *Shares) TakeLocked(key string) {
	if key == "" {
		return
	}
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[key]++
}

// FullLocked reports whether key holds max sessions already (max 0 or
// less: no cap; an unknown principal is never full).
func (s *Shares) FullLocked(key string, max int) bool {
	return key != "" && max > 0 && s.n[key] >= max
}

// GiveLocked gives back a session TakeLocked counted for key.
func (s *Shares) GiveLocked(key string) {
	if key == "" {
		return
	}
	if s.n[key]--; s.n[key] <= 0 {
		delete(s.n, key)
	}
}

// Refusal reasons, as the gateway counts them (upstream.Principal.Refused).
const (
	ReasonPerPrincipal = "max_sessions_per_principal"
	ReasonMaxSessions  = "max_sessions"
)

// Refuse answers an initialize refused for reason with msg: a JSON-RPC
// -32603 whose data carries the reason and retryAfterMs (when a session
// may free: the earliest idle expiry the caller found), as the gateway's
// own refusals do; the gateway hears of it through p.Refused.
func Refuse(w http.ResponseWriter, id json.RawMessage, p upstream.Principal, reason, msg string, after time.Duration) {
	if p.Refused != nil {
		p.Refused(reason, msg)
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": mcpwire.CodeInternalError, "message": msg,
		"data": map[string]any{"reason": reason, "retryAfterMs": max(after.Milliseconds(), 1)},
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// Limits are a bridge's session limits, as its refusals name them.
type Limits struct {
	MaxSessions  int    // --max-sessions
	PerPrincipal int    // --max-sessions-per-principal
	What         string // its sessions, in a refusal's message: "sessions of the stdio server"
	Op           string // the op of its log lines: "stdio"
}

// RefuseSession refuses an initialize for reason (ReasonPerPrincipal or
// ReasonMaxSessions): a debug line on log naming the limit, then Refuse
// with SessionMessage.
func RefuseSession(w http.ResponseWriter, log zerolog.Logger, l Limits, id json.RawMessage, p upstream.Principal, reason string, after time.Duration) {
	limit := l.MaxSessions
	if reason == ReasonPerPrincipal {
		limit = l.PerPrincipal
	}
	log.Debug().Str("op", l.Op).Str("reason", reason).Int("limit", limit).Msg("initialize refused")
	Refuse(w, id, p, reason, SessionMessage(reason, l.What, limit), after)
}

// IdleAfter is how long until the first of sessions last used at lastUsed
// idles out (idle after its last use), at least a second: the retry hint of
// a refusal that waits for one to end.
func IdleAfter(now time.Time, idle time.Duration, lastUsed []time.Time) time.Duration {
	after := idle
	for _, t := range lastUsed {
		after = min(after, t.Add(idle).Sub(now))
	}
	return max(after, time.Second)
}

// SessionMessage is the refusal's message for reason: the limit, the flag,
// and how a session frees up.
func SessionMessage(reason, what string, limit int) string {
	if reason == ReasonPerPrincipal {
		return fmt.Sprintf("taskgate refused the session: this client already holds its limit of %d %s on this replica "+
			"(--max-sessions-per-principal); one frees up when it ends a session (DELETE) or leaves one idle for --session-idle", limit, what)
	}
	return fmt.Sprintf("taskgate refused the session: this replica already runs its limit of %d %s "+
		"(--max-sessions); one frees up when a client ends its session (DELETE) or leaves it idle for --session-idle", limit, what)
}
