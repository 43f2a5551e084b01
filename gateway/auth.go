package gateway

// The gateway as an OAuth 2.1 resource server (MCP 2025-06-18 and later,
// Authorization), when Config.Auth is set: every request to the MCP
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

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Authenticator checks the credentials of a request (Config.Auth;
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

// authenticate checks r's token when Config.Auth is set: it answers a
// refused request and reports false, else returns r with the principal
// in its context (and without Authorization when Config.AuthStrip).
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if h.cfg.Auth == nil {
		return r, true
	}
	// The connection's peer address: introspection calls are limited
	// per client (auth.Config.IntrospectionRate).
	p, err := h.cfg.Auth.Authenticate(auth.WithClientAddr(r.Context(), core.ClientAddr(r)), r.Header)
	if err != nil {
		h.refuseAuth(w, r, err)
		return r, false
	}
	if h.cfg.AuthStrip {
		r.Header.Del("Authorization") // the upstream trusts the gateway (--auth-forward=false)
	}
	return r.WithContext(auth.WithPrincipal(r.Context(), p)), true
}

// refuseAuth answers a request whose credentials failed with err: the
// status and WWW-Authenticate challenge of RFC 6750 §3, pointing at the
// gateway's protected resource metadata (RFC 9728 §5.1), and one log line
// that says why, without the token.
func (h *Handler) refuseAuth(w http.ResponseWriter, r *http.Request, err error) {
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
	h.metrics.AuthRefusals.WithLabelValues(reason).Inc()
	hdr := w.Header()
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		secs := int(math.Ceil(auth.RetryAfter(err, authRetryAfter).Seconds()))
		hdr.Set("Retry-After", strconv.Itoa(max(secs, 1)))
	} else {
		hdr.Set("WWW-Authenticate", h.challenge(r, code))
	}
	ev := h.log.Warn()
	if status == http.StatusServiceUnavailable {
		ev = h.log.Error()
	}
	ev.Str("op", "auth").Int("status", status).Str("remote", r.RemoteAddr).Str("reason", err.Error()).Msg("request refused: its credentials did not pass")
	mcpwire.WriteError(w, nil, mcpwire.NewError(status, mcpwire.CodeInvalidRequest, msg))
}

// challenge is the WWW-Authenticate of a refusal with RFC 6750 error code
// ("" when no token was sent): the metadata's URL (RFC 9728 §5.1) and the
// scopes a token needs (MCP 2025-11-25, Authorization, "Scope Selection").
func (h *Handler) challenge(r *http.Request, code string) string {
	parts := []string{fmt.Sprintf("resource_metadata=%q", h.pub.metadataURL(r))}
	if code != "" {
		parts = append(parts, fmt.Sprintf("error=%q", code))
	}
	if scopes := h.cfg.Auth.Metadata().ScopesSupported; len(scopes) > 0 {
		parts = append(parts, fmt.Sprintf("scope=%q", strings.Join(scopes, " ")))
	}
	return "Bearer " + strings.Join(parts, ", ")
}
