package auth

import (
	"errors"
	"fmt"
	"time"
)

// The errors a check of a request's credentials ends with. The gateway
// turns each into its HTTP answer in one place (RFC 6750 §3.1 names the
// error codes): ErrNoToken and ErrInvalidToken are 401 (with
// error="invalid_token" for the latter), ErrBadRequest is 400
// invalid_request, ErrInsufficientScope is 403 insufficient_scope,
// ErrUnavailable is 503 with Retry-After: a token that cannot be checked
// is never let through, and ErrRateLimited is 429 with Retry-After.
var (
	// ErrNoToken: the request carries no bearer token.
	ErrNoToken = errors.New("auth: no bearer token")
	// ErrBadRequest: the credentials are malformed as a request (two
	// Authorization headers, a token over MaxTokenSize).
	ErrBadRequest = errors.New("auth: malformed credentials")
	// ErrInvalidToken: the token is malformed, not signed by the issuer,
	// expired, for another audience, or not active.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrInsufficientScope: the token is valid but lacks a required scope.
	ErrInsufficientScope = errors.New("auth: insufficient scope")
	// ErrUnavailable: the issuer's keys or the introspection endpoint
	// could not be reached, and no cached answer covers the token.
	ErrUnavailable = errors.New("auth: authorization server unavailable")
	// ErrRateLimited: the client's address caused more introspection
	// calls than it may (tokens not cached); the token was not checked.
	ErrRateLimited = errors.New("auth: too many tokens to check from this address")
)

// UnavailableError is an ErrUnavailable that says when to try again.
type UnavailableError struct {
	RetryAfter time.Duration // when the next attempt to reach the server is allowed
	Err        error         // what failed
}

func (e *UnavailableError) Error() string {
	return "auth: authorization server unavailable: " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// RateLimitError is an ErrRateLimited that says when the address may
// have its next token checked.
type RateLimitError struct {
	Addr       string        // the client address (or IPv6 /64) limited
	RetryAfter time.Duration // when its next introspection call is allowed
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%s: %s checked too many uncached tokens just now; retry in %s", ErrRateLimited, e.Addr, e.RetryAfter.Round(time.Millisecond))
}

func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// RetryAfter is how long the client of a request refused with err should
// wait: the UnavailableError's or the RateLimitError's, or fallback.
func RetryAfter(err error, fallback time.Duration) time.Duration {
	var u *UnavailableError
	if errors.As(err, &u) && u.RetryAfter > 0 {
		return u.RetryAfter
	}
	var l *RateLimitError
	if errors.As(err, &l) && l.RetryAfter > 0 {
		return l.RetryAfter
	}
	return fallback
}
