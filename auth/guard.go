package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Token is what a valid access token says.
type Token struct {
	Principal Principal
	// Scopes are the scopes granted (scope, or scp).
	Scopes []string
	// Expiry is the token's exp; zero when an introspection answer gave none.
	Expiry time.Time
}

// Config configures a Guard. Issuer or IntrospectionURL is required, and
// Audience with Issuer.
type Config struct {
	// Issuer is the authorization server whose JWT access tokens are
	// accepted (RFC 9068), verified against the key set its metadata
	// names (RFC 8414, or OpenID Connect Discovery). With
	// IntrospectionURL it only names the server in the gateway's
	// metadata and is checked against an answer's iss.
	Issuer string
	// Audience: a token's aud must hold one of these (RFC 8707: the
	// gateway's public URL). Required for JWTs; with introspection it is
	// checked when the answer names an aud.
	Audience []string
	// IntrospectionURL, when set, checks every token with this RFC 7662
	// endpoint instead of as a JWT, authenticated as ClientID with
	// ClientSecret (HTTP Basic).
	IntrospectionURL, ClientID, ClientSecret string
	// IntrospectionRate bounds the introspection calls one client
	// address (WithClientAddr; an IPv6 /64) may cause per second, with
	// a burst of 4 s' worth: tokens not cached cost a call each, and a
	// client over it gets ErrRateLimited. Zero: DefaultIntrospectionRate;
	// negative: no limit.
	IntrospectionRate float64
	// RequiredScopes must all be granted; else ErrInsufficientScope.
	RequiredScopes []string
	// Leeway is the clock skew allowed on exp/nbf/iat. Zero: DefaultLeeway.
	Leeway time.Duration
	// JWKSURL skips discovery (tests, or an issuer without metadata).
	JWKSURL string
	// HTTPClient calls the authorization server. Nil: a client with
	// DefaultHTTPTimeout.
	HTTPClient *http.Client
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// verifier checks one token without the cache.
type verifier interface {
	verify(ctx context.Context, token string) (Token, error)
}

// Guard checks the bearer tokens of requests: the gateway as an OAuth 2.1
// resource server (MCP 2025-06-18, Authorization, "Token Handling").
// Valid tokens are cached (cache.go). Safe for concurrent
// use; it holds no goroutine.
type Guard struct {
	v      verifier
	scopes []string
	issuer string
	cache  *tokenCache
	now    func() time.Time
}

// New returns the Guard of cfg. It contacts no server: the issuer's keys
// are fetched by the first token that needs them.
func New(cfg Config) (*Guard, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	g := &Guard{scopes: cfg.RequiredScopes, issuer: cfg.Issuer, cache: newTokenCache(), now: cfg.Now}
	if cfg.Issuer != "" {
		if _, err := metadataURLs(cfg.Issuer); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.IntrospectionURL != "":
		if _, err := metadataURLs(cfg.IntrospectionURL); err != nil {
			return nil, fmt.Errorf("auth: introspection URL %q is not an http(s) URL", cfg.IntrospectionURL)
		}
		if cfg.IntrospectionRate == 0 {
			cfg.IntrospectionRate = DefaultIntrospectionRate
		}
		g.v = &introspector{client: cfg.HTTPClient, url: cfg.IntrospectionURL, clientID: cfg.ClientID,
			clientSecret: cfg.ClientSecret, issuer: cfg.Issuer, audience: cfg.Audience, now: cfg.Now,
			limit: newAddrLimiter(cfg.IntrospectionRate), inactive: newInactiveCache(), inflight: map[digest]*flight{}}
	case cfg.Issuer != "":
		if len(cfg.Audience) == 0 || slices.Contains(cfg.Audience, "") {
			return nil, errors.New("auth: an audience is required to accept JWTs: tokens for another resource must not pass (RFC 8707)")
		}
		g.v = &jwtVerifier{issuer: cfg.Issuer, audience: cfg.Audience, leeway: cfg.Leeway, now: cfg.Now,
			keys: newKeySet(cfg.HTTPClient, cfg.Issuer, cfg.JWKSURL, cfg.Now)}
	default:
		return nil, errors.New("auth: an issuer or an introspection URL is required")
	}
	return g, nil
}

// Authenticate checks the bearer token of a request's headers: its
// principal, or an error wrapping one of the package's sentinels (a
// *ScopeError for missing scopes).
func (g *Guard) Authenticate(ctx context.Context, h http.Header) (Principal, error) {
	token, err := BearerToken(h)
	if err != nil {
		return Principal{}, err
	}
	t, err := g.Check(ctx, token)
	if err != nil {
		return Principal{}, err
	}
	return t.Principal, nil
}

// Check verifies token (from the cache when it was verified lately) and
// that it grants the required scopes.
func (g *Guard) Check(ctx context.Context, token string) (Token, error) {
	now := g.now()
	t, ok := g.cache.get(token, now)
	if !ok {
		var err error
		if t, err = g.v.verify(ctx, token); err != nil {
			return Token{}, err
		}
		g.cache.put(token, t, now)
	}
	if missing := missingScopes(t.Scopes, g.scopes); len(missing) > 0 {
		return t, &ScopeError{Missing: missing}
	}
	return t, nil
}

// RequiredScopes are the scopes every token must grant (Config.RequiredScopes).
func (g *Guard) RequiredScopes() []string { return slices.Clone(g.scopes) }

// Metadata is what the gateway's protected resource metadata says about
// its authorization (RFC 9728 §2).
type Metadata struct {
	AuthorizationServers []string // the issuer, when one is configured
	ScopesSupported      []string // the required scopes
}

// Metadata is this Guard's part of the gateway's protected resource metadata.
func (g *Guard) Metadata() Metadata {
	var m Metadata
	if g.issuer != "" {
		m.AuthorizationServers = []string{g.issuer}
	}
	m.ScopesSupported = slices.Clone(g.scopes)
	return m
}

// ScopeError is an ErrInsufficientScope naming the scopes missing.
type ScopeError struct{ Missing []string }

func (e *ScopeError) Error() string {
	return "auth: insufficient scope: the token lacks " + strings.Join(e.Missing, " ")
}

func (e *ScopeError) Unwrap() error { return ErrInsufficientScope }

func missingScopes(granted, required []string) []string {
	var missing []string
	for _, s := range required {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	return missing
}
