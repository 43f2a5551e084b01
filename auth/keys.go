package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// The key set's timing.
const (
	// keyMaxAge: keys older than this are fetched again on the next use,
	// so keys the issuer retired stop verifying tokens.
	keyMaxAge = time.Hour
	// After a failed fetch, no other attempt for this long: a down issuer
	// is not hammered by every request (they get 503 with Retry-After).
	keyFailBackoff = 2 * time.Second
	// An unknown kid fetches the keys again (a rotation), at most
	// keyRefreshBurst times in a row and then once per keyRefreshEvery
	// for each client address, and at most once per keyRefreshGap in all
	// (a refresh asked for sooner waits for it): tokens with made-up kids
	// from any number of addresses cannot make the gateway flood the
	// issuer, and one client's made-up kids do not use up the refreshes
	// another client's token signed with a newly rotated key needs.
	keyRefreshBurst = 5
	keyRefreshEvery = 30 * time.Second
	keyRefreshGap   = 250 * time.Millisecond
	// staleFetchTimeout bounds the refresh of keys past keyMaxAge.
	staleFetchTimeout = 2 * time.Second
)

// keySet is the issuer's JSON Web Key Set, found by discovery and cached.
// It holds no goroutine: keys are fetched by the verification that needs
// them, one fetch at a time. Safe for concurrent use.
type keySet struct {
	client *http.Client
	issuer string
	jwks   string // the key set's URL; "" until discovered
	now    func() time.Time

	fetchMu sync.Mutex // one fetch at a time; held across it

	mu          sync.Mutex // guards what follows
	keys        []jose.JSONWebKey
	gen         uint64    // counts successful fetches
	fetched     time.Time // of the last successful fetch
	failedUntil time.Time // no fetch before this after a failure

	refreshes *addrLimiter // unknown-kid refreshes per client address (keyRefreshBurst)
}

func newKeySet(c *http.Client, issuer, jwksURL string, now func() time.Time) *keySet {
	return &keySet{client: c, issuer: issuer, jwks: jwksURL, now: now,
		refreshes: &addrLimiter{rate: 1 / keyRefreshEvery.Seconds(), burst: keyRefreshBurst, buckets: map[string]*bucket{}}}
}

// lookup returns the keys that may have signed a token with kid and alg
// (every key of the set for alg when kid is empty). An unknown kid
// fetches the set again, rate-limited; the error wraps ErrInvalidToken
// when no key fits, ErrUnavailable when the keys could not be fetched.
func (s *keySet) lookup(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	gen, fetched := s.gen, s.fetched
	s.mu.Unlock()
	if gen == 0 {
		if err := s.fetch(ctx, gen); err != nil {
			return nil, err
		}
	} else if s.now().Sub(fetched) > keyMaxAge {
		s.refreshStale(ctx, gen)
	}
	keys, gen := s.current()
	if kid == "" || hasKID(keys, kid) {
		// A known kid (or none): no fetch would change the answer.
		if match := matching(keys, kid, alg); len(match) > 0 {
			return match, nil
		}
		return nil, fmt.Errorf("%w: no key of the issuer with kid %q is for alg %s", ErrInvalidToken, kid, alg)
	}
	if !s.takeRefresh(ctx) {
		return nil, fmt.Errorf("%w: unknown kid %q (the issuer's keys were fetched again too often just now)", ErrInvalidToken, kid)
	}
	if err := s.fetch(ctx, gen); err != nil {
		return nil, err
	}
	keys, _ = s.current()
	if match := matching(keys, kid, alg); len(match) > 0 {
		return match, nil
	}
	return nil, fmt.Errorf("%w: unknown kid %q for alg %s", ErrInvalidToken, kid, alg)
}

// current is the key set and its generation.
func (s *keySet) current() ([]jose.JSONWebKey, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys, s.gen
}

func hasKID(keys []jose.JSONWebKey, kid string) bool {
	for _, k := range keys {
		if k.KeyID == kid {
			return true
		}
	}
	return false
}

// matching are the keys with kid (any kid when it is empty) that may
// verify alg: a key naming another alg does not (RFC 7517 §4.4).
func matching(keys []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) {
			out = append(out, k)
		}
	}
	return out
}

// takeRefresh reports whether an unknown kid may fetch the keys again:
// the client's address has a refresh left. Within keyRefreshGap of the
// last fetch it first waits for the gap to pass (or ctx to end).
func (s *keySet) takeRefresh(ctx context.Context) bool {
	now := s.now()
	key := limitKey(ctx)
	if key == "" {
		key = "?" // callers that give no address share one bucket
	}
	if _, ok := s.refreshes.take(key, now); !ok {
		return false
	}
	s.mu.Lock()
	wait := keyRefreshGap - now.Sub(s.fetched)
	s.mu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refreshStale fetches keys past keyMaxAge again, for at most
// staleFetchTimeout and only when no other fetch is under way: the old
// keys go on serving meanwhile, and if the issuer is down now, so a slow
// issuer delays one request by that much at most, not every one.
func (s *keySet) refreshStale(ctx context.Context, seen uint64) {
	if !s.fetchMu.TryLock() {
		return
	}
	defer s.fetchMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), staleFetchTimeout)
	defer cancel()
	_ = s.fetchLocked(ctx, seen)
}

// fetch fetches the key set (discovering its URL first if need be),
// unless another fetch ended since the caller saw generation seen.
func (s *keySet) fetch(ctx context.Context, seen uint64) error {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	// Other requests wait for this fetch: the client that started it
	// leaving must not end it (the HTTP client's timeout bounds it).
	return s.fetchLocked(context.WithoutCancel(ctx), seen)
}

// fetchLocked is fetch with fetchMu held.
func (s *keySet) fetchLocked(ctx context.Context, seen uint64) error {
	s.mu.Lock()
	gen, failedUntil := s.gen, s.failedUntil
	s.mu.Unlock()
	if gen != seen {
		return nil // fetched while this one waited
	}
	now := s.now()
	if now.Before(failedUntil) {
		return &UnavailableError{RetryAfter: failedUntil.Sub(now), Err: fmt.Errorf("the keys of %s could not be fetched just now", s.issuer)}
	}
	keys, err := s.get(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failedUntil = s.now().Add(keyFailBackoff)
		return &UnavailableError{RetryAfter: keyFailBackoff, Err: err}
	}
	s.keys, s.fetched = keys, s.now()
	s.gen++
	return nil
}

// get discovers the key set's URL if need be, then fetches the set. Only
// public asymmetric signing keys are kept: a symmetric ("oct") key could
// let a token be signed with what is public, and an unknown key type is
// skipped rather than failing the whole set.
func (s *keySet) get(ctx context.Context) ([]jose.JSONWebKey, error) {
	if s.jwks == "" { // under fetchMu
		m, err := discover(ctx, s.client, s.issuer)
		if err != nil {
			return nil, err
		}
		if m.JWKSURI == "" {
			return nil, fmt.Errorf("auth: the metadata of %s names no jwks_uri", s.issuer)
		}
		s.jwks = m.JWKSURI
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, s.client, s.jwks, &set); err != nil {
		return nil, fmt.Errorf("auth: the key set of %s: %w", s.issuer, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() || !k.IsPublic() || k.Use == "enc" {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("auth: the key set at %s has no public signing key", s.jwks)
	}
	return keys, nil
}
