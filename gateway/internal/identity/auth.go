package identity

// The gateway as an OAuth 2.1 resource server (MCP 2025-06-18 and later,
// Authorization), when gateway.Config.Auth is set: every request to the MCP
// endpoint carries a valid bearer token, checked before it is routed, and
// its principal rides in the request's context (auth.FromContext) for the
// owners of tasks, sessions and limits. A token that cannot be checked
// (the authorization server is down and nothing is cached) is refused
// with 503, never let through; a client address over its limit of
// introspection calls with 429.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Authenticator checks the credentials of a request (gateway.Config.Auth;
// *auth.Guard is one). It must be safe for concurrent use.
type Authenticator interface {
	// Authenticate returns the principal of h's bearer token, or an
	// error wrapping one of auth's sentinels (ErrNoToken, ErrBadRequest,
	// ErrInvalidToken, ErrInsufficientScope, ErrUnavailable).
	Authenticate(ctx context.Context, h http.Header) (auth.Principal, error)
	// Metadata is what the gateway's protected resource metadata says
	// of its authorization server and scopes (RFC 9728 §2).
	Metadata() auth.Metadata
}

// authRetryAfter is the Retry-After of a 503 whose error names no delay.
const authRetryAfter = 2 * time.Second

// AuthGuard is the auth guard of the MCP endpoint: it checks every
// request's token with its Authenticator (gateway.Config.Auth), and
// answers the requests it refuses. Safe for concurrent use.
type AuthGuard struct {
	auth    Authenticator // nil: no validation, every request passes
	strip   bool          // gateway.Config.AuthStrip
	pub     *PublicURLs
	metrics *obs.Metrics
	log     zerolog.Logger
}

// NewAuthGuard returns the guard of a (nil: none), which drops the
// client's Authorization once a accepted it when strip is set.
func NewAuthGuard(a Authenticator, strip bool, pub *PublicURLs, m *obs.Metrics, log zerolog.Logger) *AuthGuard {
	return &AuthGuard{auth: a, strip: strip, pub: pub, metrics: m, log: log}
}

// Authenticate checks r's token when the guard has an Authenticator: it
// answers a refused request and reports false, else returns r with the
// principal in its context (and without Authorization when strip is set).
func (g *AuthGuard) Authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if g.auth == nil {
		return r, true
	}
	// The connection's peer address: introspection calls are limited
	// per client (auth.Config.IntrospectionRate).
	p, err := g.auth.Authenticate(auth.WithClientAddr(r.Context(), core.ClientAddr(r)), r.Header)
	if err != nil {
		g.refuseAuth(w, r, err)
		return r, false
	}
	if g.strip {
		r.Header.Del("Authorization") // the upstream trusts the gateway (--auth-forward=false)
	}
	return r.WithContext(auth.WithPrincipal(r.Context(), p)), true
}

// refuseAuth answers a request whose credentials failed with err: the
// status and WWW-Authenticate challenge of RFC 6750 §3, pointing at the
// gateway's protected resource metadata (RFC 9728 §5.1), and one log line
// that says why, without the token.
func (g *AuthGuard) refuseAuth(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := http.StatusUnauthorized, "", "Unauthorized: send a bearer token (Authorization: Bearer ...) for this server"
	var scopeErr *auth.ScopeError
	switch {
	case errors.Is(err, auth.ErrUnavailable):
		status, code, msg = http.StatusServiceUnavailable, "unavailable", "Service Unavailable: the authorization server cannot be reached to check the token; retry later"
	case errors.Is(err, auth.ErrRateLimited):
		// 429, not 503 (RFC 6585 §4): this client sent too many tokens
		// the gateway had not seen, and only it must slow down; the
		// service is up for everyone else.
		status, code, msg = http.StatusTooManyRequests, "rate_limited", "Too Many Requests: too many new tokens to check from this address; retry after the Retry-After delay"
	case errors.As(err, &scopeErr):
		status, code, msg = http.StatusForbidden, "insufficient_scope", "Forbidden: the token lacks the scopes "+strings.Join(scopeErr.Missing, " ")
	case errors.Is(err, auth.ErrBadRequest):
		status, code, msg = http.StatusBadRequest, "invalid_request", "Bad Request: "+strings.TrimPrefix(err.Error(), auth.ErrBadRequest.Error()+": ")
	case errors.Is(err, auth.ErrInvalidToken):
		code, msg = "invalid_token", "Unauthorized: the access token is invalid or expired"
	}
	reason := code
	if reason == "" {
		reason = "no_token"
	}
	g.metrics.AuthRefusals.WithLabelValues(reason).Inc()
	hdr := w.Header()
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		secs := int(math.Ceil(auth.RetryAfter(err, authRetryAfter).Seconds()))
		hdr.Set("Retry-After", strconv.Itoa(max(secs, 1)))
	} else {
		hdr.Set("WWW-Authenticate", g.challenge(r, code))
	}
	ev := g.log.Warn()
	if status == http.StatusServiceUnavailable {
		ev = g.log.Error()
	}
	ev.Str("op", "auth").Int("status", status).Str("remote", r.RemoteAddr).Str("reason", err.Error()).Msg("request refused: its credentials did not pass")
	mcpwire.WriteError(w, nil, mcpwire.NewError(status, mcpwire.CodeInvalidRequest, msg))
}

// challenge is the WWW-Authenticate of a refusal with RFC 6750 error code
// ("" when no token was sent): the metadata's URL (RFC 9728 §5.1) and the
// scopes a token needs (MCP 2025-11-25, Authorization, "Scope Selection").
func (g *AuthGuard) challenge(r *http.Request, code string) string {
	parts := []string{fmt.Sprintf("resource_metadata=%q", g.pub.MetadataURL(r))}
	if code != "" {
		parts = append(parts, fmt.Sprintf("error=%q", code))
	}
	if scopes := g.auth.Metadata().ScopesSupported; len(scopes) > 0 {
		parts = append(parts, fmt.Sprintf("scope=%q", strings.Join(scopes, " ")))
	}
	return "Bearer " + strings.Join(parts, ", ")
}
