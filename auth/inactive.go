package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Bounds of the cache of refused tokens: an answer that a token is not
// active is reused for inactiveTTL, so a client repeating one bad token
// costs the authorization server one call per inactiveTTL, not one per
// request. It is short: a token just issued by a server whose replicas
// have not all heard of it yet is refused for that long at most.
const (
	inactiveTTL     = 10 * time.Second
	inactiveEntries = 10_000
)

// digest is a token's SHA-256: the inactive cache keeps no token, so
// memory filled by a flood of made-up tokens holds 32 bytes each, and
// nothing a client sent in clear.
type digest [sha256.Size]byte

func digestOf(token string) digest { return sha256.Sum256([]byte(token)) }

// inactiveCache remembers the refusals of recently checked tokens, by
// digest, at most inactiveEntries of them. Safe for concurrent use.
type inactiveCache struct {
	mu      sync.Mutex
	entries map[digest]refusal
}

type refusal struct {
	err   error // what the token got, wrapping ErrInvalidToken
	until time.Time
}

func newInactiveCache() *inactiveCache { return &inactiveCache{entries: map[digest]refusal{}} }

func (c *inactiveCache) get(d digest, now time.Time) (error, bool) {
	c.mu.Lock()
	e, ok := c.entries[d]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	return e.err, true
}

// put remembers err for d until now+inactiveTTL. When full it drops the
// expired entries, then, if still full, about a tenth of the others.
func (c *inactiveCache) put(d digest, err error, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[d]; !ok && len(c.entries) >= inactiveEntries {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < inactiveEntries*9/10 {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[d] = refusal{err: err, until: now.Add(inactiveTTL)}
}
