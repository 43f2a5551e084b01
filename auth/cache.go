package auth

import (
	"sync"
	"time"
)

// Cache bounds: an answer is reused for cacheTTL at most, never past the
// token's exp (RFC 7662 §4: a cached introspection answer must not
// outlive the token), and cacheBytes of tokens are remembered at most
// (about 16,000 tokens of a typical KiB).
const (
	cacheTTL   = 60 * time.Second
	cacheBytes = 16 << 20
)

// tokenCache remembers valid tokens, so a client's polls cost a map
// lookup rather than a signature check or an introspection call. It is
// keyed by the token itself, not a digest: the map compares the whole
// token, so no other string can ever hit an entry, and a lookup hashes
// with the runtime's fast hash rather than SHA-256. The tokens stay in
// this process's memory only. Safe for concurrent use.
type tokenCache struct {
	mu      sync.RWMutex
	entries map[string]cached
	bytes   int // the tokens' length, summed
}

type cached struct {
	tok   Token
	until time.Time
}

func newTokenCache() *tokenCache { return &tokenCache{entries: map[string]cached{}} }

func (c *tokenCache) get(token string, now time.Time) (Token, bool) {
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return Token{}, false
	}
	return e.tok, true
}

// put remembers t until min(now+cacheTTL, its expiry). When full it drops
// the expired entries, then, if still full, about a tenth of the others
// (map order is random enough to spread the loss).
func (c *tokenCache) put(token string, t Token, now time.Time) {
	until := now.Add(cacheTTL)
	if !t.Expiry.IsZero() && t.Expiry.Before(until) {
		until = t.Expiry
	}
	if !now.Before(until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[token]; ok {
		c.drop(token)
	}
	if c.bytes+len(token) > cacheBytes {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				c.drop(k)
			}
		}
		for k := range c.entries {
			if c.bytes+len(token) <= cacheBytes*9/10 {
				break
			}
			c.drop(k)
		}
	}
	c.entries[token] = cached{tok: t, until: until}
	c.bytes += len(token)
}

func (c *tokenCache) drop(token string) {
	delete(c.entries, token)
	c.bytes -= len(token)
}
