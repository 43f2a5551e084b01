package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// introspectFailBackoff: after the introspection endpoint failed, tokens
// not in the cache get 503 for this long without another call, so a down
// endpoint is not hammered by every request.
const introspectFailBackoff = 2 * time.Second

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

	mu        sync.Mutex
	downUntil time.Time
}

// introspection is the part of an RFC 7662 §2.2 answer the gateway reads.
type introspection struct {
	Active   bool             `json:"active"`
	Scope    string           `json:"scope"`
	ClientID string           `json:"client_id"`
	Sub      string           `json:"sub"`
	Iss      string           `json:"iss"`
	Aud      jwt.Audience     `json:"aud"`
	Exp      *jwt.NumericDate `json:"exp"`
	Nbf      *jwt.NumericDate `json:"nbf"`
}

func (in *introspector) verify(ctx context.Context, token string) (Token, error) {
	in.mu.Lock()
	down := in.downUntil
	in.mu.Unlock()
	if now := in.now(); now.Before(down) {
		return Token{}, &UnavailableError{RetryAfter: down.Sub(now), Err: fmt.Errorf("the introspection endpoint %s failed just now", in.url)}
	}
	a, err := in.ask(ctx, token)
	if err != nil {
		if ctx.Err() == nil { // a client that left is no failure of the endpoint
			in.mu.Lock()
			in.downUntil = in.now().Add(introspectFailBackoff)
			in.mu.Unlock()
		}
		return Token{}, &UnavailableError{RetryAfter: introspectFailBackoff, Err: err}
	}
	now := in.now()
	switch {
	case !a.Active:
		return Token{}, fmt.Errorf("%w: the introspection endpoint says it is not active", ErrInvalidToken)
	case a.Exp != nil && !now.Before(a.Exp.Time()):
		return Token{}, fmt.Errorf("%w: expired at %s", ErrInvalidToken, a.Exp.Time().UTC().Format(time.RFC3339))
	case a.Nbf != nil && now.Add(DefaultLeeway).Before(a.Nbf.Time()):
		return Token{}, fmt.Errorf("%w: not valid before %s", ErrInvalidToken, a.Nbf.Time().UTC().Format(time.RFC3339))
	case in.issuer != "" && a.Iss != "" && a.Iss != in.issuer:
		return Token{}, fmt.Errorf("%w: issuer %q, want %q", ErrInvalidToken, a.Iss, in.issuer)
	case len(a.Aud) > 0 && len(in.audience) > 0 && !anyOf(a.Aud, in.audience):
		return Token{}, fmt.Errorf("%w: audience %q, want one of %q", ErrInvalidToken, []string(a.Aud), []string(in.audience))
	case a.Sub == "" && a.ClientID == "":
		// RFC 7662 §2.2 makes both optional, but a principal needs one:
		// a bare {"active":true} would make every user one owner.
		return Token{}, fmt.Errorf("%w: the introspection answer names neither sub nor client_id", ErrInvalidToken)
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
	return t, nil
}

// ask POSTs the token to the endpoint, authenticated as the gateway's
// client with HTTP Basic (RFC 7662 §2.1; RFC 6749 §2.3.1, which has the
// id and secret form-encoded first).
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
	var a introspection
	if err := doJSON(in.client, req, &a); err != nil {
		return a, fmt.Errorf("auth: introspection: %w", err)
	}
	return a, nil
}

func anyOf(have, want jwt.Audience) bool {
	for _, w := range want {
		if have.Contains(w) {
			return true
		}
	}
	return false
}
