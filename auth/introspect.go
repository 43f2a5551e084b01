package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// introspectFailBackoff: after the introspection endpoint failed, tokens
// not in the cache get 503 for this long without another call, so a down
// endpoint is not hammered by every request. Only the endpoint's own
// failures start it (a transport error, a timeout, a 5xx): nothing a
// client sends as a token can, so no client makes the gateway refuse
// another's.
const introspectFailBackoff = 2 * time.Second

// introspectTimeout bounds one call: it outlives the request that
// started it (others may wait for it), so the request's end cannot.
const introspectTimeout = DefaultHTTPTimeout

// introspector checks opaque tokens with the authorization server's
// introspection endpoint (RFC 7662).
type introspector struct {
	client       *http.Client
	url          string
	clientID     string
	clientSecret string
	issuer       string       // when set, an answer's iss must be it
	audience     jwt.Audience // when an answer names aud, it must hold one of these
	now          func() time.Time
	limit        *addrLimiter   // calls per client address (limit.go)
	inactive     *inactiveCache // recent refusals by digest (inactive.go)

	mu        sync.Mutex
	downUntil time.Time
	inflight  map[digest]*flight // one call per token at a time
}

// flight is one introspection call that the requests for the same token
// share.
type flight struct {
	done chan struct{}
	tok  Token
	err  error
}

// introspection is the part of an RFC 7662 §2.2 answer the gateway reads.
// Active is a pointer: an answer without it is no introspection answer.
type introspection struct {
	Active   *bool            `json:"active"`
	Scope    string           `json:"scope"`
	ClientID string           `json:"client_id"`
	Sub      string           `json:"sub"`
	Iss      string           `json:"iss"`
	Aud      jwt.Audience     `json:"aud"`
	Exp      *jwt.NumericDate `json:"exp"`
	Nbf      *jwt.NumericDate `json:"nbf"`
}

// verify checks token: a refusal remembered for its digest, else (unless
// the endpoint is down, or the client's address is over its limit) one
// call to the endpoint, shared with every request for the same token
// meanwhile.
func (in *introspector) verify(ctx context.Context, token string) (Token, error) {
	d, now := digestOf(token), in.now()
	if err, ok := in.inactive.get(d, now); ok {
		return Token{}, err
	}
	in.mu.Lock()
	down := in.downUntil
	in.mu.Unlock()
	if now.Before(down) {
		return Token{}, &UnavailableError{RetryAfter: down.Sub(now), Err: fmt.Errorf("the introspection endpoint %s failed just now", in.url)}
	}
	key := limitKey(ctx)
	if wait, ok := in.limit.take(key, now); !ok {
		return Token{}, &RateLimitError{Addr: key, RetryAfter: wait}
	}
	in.mu.Lock()
	f, joined := in.inflight[d]
	if !joined {
		f = &flight{done: make(chan struct{})}
		in.inflight[d] = f
	}
	in.mu.Unlock()
	if !joined {
		f.tok, f.err = in.call(ctx, token, d)
		in.mu.Lock()
		delete(in.inflight, d)
		in.mu.Unlock()
		close(f.done)
	}
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return Token{}, ctx.Err()
	}
}

// call asks the endpoint about token and judges its answer: only the
// endpoint's failures mark it down; an answer it refused with is the
// gateway's problem for this request alone.
func (in *introspector) call(ctx context.Context, token string, d digest) (Token, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), introspectTimeout)
	defer cancel()
	a, err := in.ask(ctx, token)
	var down *endpointDown
	switch {
	case errors.As(err, &down):
		in.mu.Lock()
		in.downUntil = in.now().Add(introspectFailBackoff)
		in.mu.Unlock()
		return Token{}, &UnavailableError{RetryAfter: introspectFailBackoff, Err: err}
	case err != nil:
		return Token{}, &UnavailableError{RetryAfter: introspectFailBackoff, Err: err}
	}
	t, err, lasting := in.judge(a)
	if err != nil && lasting {
		in.inactive.put(d, err, in.now())
	}
	return t, err
}

// judge reads an answer with active set. lasting says whether a refusal
// holds for as long as the inactive cache keeps it (all but a token not
// valid yet).
func (in *introspector) judge(a introspection) (Token, error, bool) {
	now := in.now()
	switch {
	case !*a.Active:
		return Token{}, fmt.Errorf("%w: the introspection endpoint says it is not active", ErrInvalidToken), true
	case a.Exp != nil && !now.Before(a.Exp.Time()):
		return Token{}, fmt.Errorf("%w: expired at %s", ErrInvalidToken, a.Exp.Time().UTC().Format(time.RFC3339)), true
	case a.Nbf != nil && now.Add(DefaultLeeway).Before(a.Nbf.Time()):
		return Token{}, fmt.Errorf("%w: not valid before %s", ErrInvalidToken, a.Nbf.Time().UTC().Format(time.RFC3339)), false
	case in.issuer != "" && a.Iss != "" && a.Iss != in.issuer:
		return Token{}, fmt.Errorf("%w: issuer %q, want %q", ErrInvalidToken, a.Iss, in.issuer), true
	case len(a.Aud) > 0 && len(in.audience) > 0 && !anyOf(a.Aud, in.audience):
		return Token{}, fmt.Errorf("%w: audience %q, want one of %q", ErrInvalidToken, []string(a.Aud), []string(in.audience)), true
	case a.Sub == "" && a.ClientID == "":
		// RFC 7662 §2.2 makes both optional, but a principal needs one:
		// a bare {"active":true} would make every user one owner.
		return Token{}, fmt.Errorf("%w: the introspection answer names neither sub nor client_id", ErrInvalidToken), true
	}
	iss := a.Iss
	if iss == "" {
		iss = in.issuer
	}
	if iss == "" {
		iss = in.url
	}
	t := Token{Principal: Principal{Issuer: iss, Subject: a.Sub, ClientID: a.ClientID}, Scopes: strings.Fields(a.Scope)}
	if a.Exp != nil {
		t.Expiry = a.Exp.Time()
	}
	return t, nil, false
}

// endpointDown is a failure of the endpoint itself: it could not be
// reached, did not answer in time, or answered 5xx (RFC 9110 §15.6: the
// server's fault).
type endpointDown struct{ err error }

func (e *endpointDown) Error() string { return e.err.Error() }
func (e *endpointDown) Unwrap() error { return e.err }

// ask POSTs the token to the endpoint, authenticated as the gateway's
// client with HTTP Basic (RFC 7662 §2.1; RFC 6749 §2.3.1, which has the
// id and secret form-encoded first). It returns an answer with active
// set, whatever its HTTP status: some servers answer an unknown token
// with 401 and {"active":false} (the TypeScript SDK's demo server does),
// and it is still an inactive token. Any other answer is an error: an
// *endpointDown for a failure of the endpoint, else a refusal of the
// gateway's request (its client credentials, its URL).
func (in *introspector) ask(ctx context.Context, token string) (introspection, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.url, strings.NewReader(form.Encode()))
	if err != nil {
		return introspection{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.clientID != "" {
		req.SetBasicAuth(url.QueryEscape(in.clientID), url.QueryEscape(in.clientSecret))
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return introspection{}, &endpointDown{fmt.Errorf("auth: introspection: %w", err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return introspection{}, &endpointDown{fmt.Errorf("auth: introspection: read %s: %w", in.url, err)}
	}
	var a introspection
	parsed := len(body) <= maxDocument && json.Unmarshal(body, &a) == nil && a.Active != nil
	switch {
	case parsed && (!*a.Active || resp.StatusCode == http.StatusOK):
		return a, nil
	case resp.StatusCode >= 500:
		return a, &endpointDown{fmt.Errorf("auth: introspection: %s answered HTTP %d", in.url, resp.StatusCode)}
	case resp.StatusCode == http.StatusOK:
		return a, fmt.Errorf("auth: introspection: %s answered 200 without a boolean \"active\" (RFC 7662 §2.2): it is no introspection endpoint; check the gateway's introspection URL", in.url)
	}
	return a, fmt.Errorf("auth: introspection: %s refused the gateway's request with HTTP %d and no \"active\": check the gateway's introspection URL and client credentials", in.url, resp.StatusCode)
}

func anyOf(have, want jwt.Audience) bool {
	for _, w := range want {
		if have.Contains(w) {
			return true
		}
	}
	return false
}
