package auth

import (
	"strings"
	"testing"
	"time"
)

// TestTokenCacheBounds: the cache keeps within cacheBytes, its byte count
// stays true, expired entries go first, and nothing is served past its
// until.
func TestTokenCacheBounds(t *testing.T) {
	c := newTokenCache()
	now := time.Now()
	pad := strings.Repeat("x", 4000)
	c.put("short-lived"+pad, Token{Expiry: now.Add(time.Second)}, now)
	for i := range 2 * cacheBytes / 4000 {
		c.put(pad+string(rune('a'+i%26))+strings.Repeat("y", i/26), Token{}, now.Add(2*time.Second))
		if c.bytes > cacheBytes {
			t.Fatalf("after %d puts: %d bytes", i, c.bytes)
		}
	}
	sum := 0
	for k := range c.entries {
		sum += len(k)
	}
	if sum != c.bytes {
		t.Fatalf("bytes %d, entries hold %d", c.bytes, sum)
	}
	if _, ok := c.entries["short-lived"+pad]; ok {
		t.Fatal("an expired entry outlived live ones")
	}
	c.put("again", Token{}, now)
	c.put("again", Token{}, now)
	if _, ok := c.get("again", now.Add(cacheTTL)); ok {
		t.Fatal("served at its until")
	}
}
