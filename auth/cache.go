package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Cache bounds: an answer is reused for cacheTTL at most, never past the
// token's exp (RFC 7662 §4: a cached introspection answer must not
// outlive the token), and cacheEntries tokens are remembered at most.
const (
	cacheTTL     = 60 * time.Second
	cacheEntries = 10000
)

// tokenCache remembers valid tokens by their SHA-256 (the token itself is
// not kept), so a client's polls cost a hash and a map lookup rather than
// a signature check or an introspection call. Safe for concurrent use.
type tokenCache struct {
	mu      sync.RWMutex
	entries map[[32]byte]cached
}

type cached struct {
	tok   Token
	until time.Time
}

func newTokenCache() *tokenCache { return &tokenCache{entries: map[[32]byte]cached{}} }

func (c *tokenCache) get(key [32]byte, now time.Time) (Token, bool) {
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return Token{}, false
	}
	return e.tok, true
}

// put remembers t until min(now+cacheTTL, its expiry). When full it drops
// the expired entries, then, if still full, about a tenth of the others
// (map order is random enough to spread the loss).
func (c *tokenCache) put(key [32]byte, t Token, now time.Time) {
	until := now.Add(cacheTTL)
	if !t.Expiry.IsZero() && t.Expiry.Before(until) {
		until = t.Expiry
	}
	if !now.Before(until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= cacheEntries {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < cacheEntries*9/10 {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = cached{tok: t, until: until}
}

func tokenKey(token string) [32]byte { return sha256.Sum256([]byte(token)) }
