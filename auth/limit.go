package auth

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// The per-address limit on introspection calls. A token the gateway has
// not cached costs a call to the authorization server; without a bound a
// single client could send fresh made-up tokens as fast as it likes and
// spend the server's capacity (RFC 7662 §4 asks the resource server to
// guard the endpoint against such scanning). Each client address has a
// token bucket: DefaultIntrospectionRate calls per second, a burst of
// introspectBurstSeconds' worth.
const (
	// DefaultIntrospectionRate is Config.IntrospectionRate when zero.
	DefaultIntrospectionRate = 5.0
	// introspectBurstSeconds: the burst is this many seconds of the rate,
	// so a client that signs in several users at once is not refused.
	introspectBurstSeconds = 4
	// limitAddrs bounds the addresses remembered; past it the idle ones
	// (full buckets, which lose nothing by being forgotten) go first.
	limitAddrs = 8192
)

type clientAddrKey struct{}

// WithClientAddr returns ctx carrying addr, the IP address of the client
// whose token is checked: introspection calls are limited per address
// (Config.IntrospectionRate). Without it a check is not limited.
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// limitKey is the key of addr's bucket: the address itself, or for IPv6
// its /64, which one host usually holds whole (RFC 4291 §2.5.1 interface
// identifiers), so a client cannot get a fresh bucket per address.
func limitKey(ctx context.Context) string {
	addr, _ := ctx.Value(clientAddrKey{}).(string)
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// addrLimiter is a token bucket per client address. Safe for concurrent
// use; it holds no goroutine (buckets are topped up when used).
type addrLimiter struct {
	rate, burst float64 // per second; rate <= 0: no limit

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last topped up
}

func newAddrLimiter(rate float64) *addrLimiter {
	return &addrLimiter{rate: rate, burst: max(1, rate*introspectBurstSeconds), buckets: map[string]*bucket{}}
}

// take takes one call from key's bucket at now; when it is empty, it
// returns false and how long until one is back. An empty key (no address
// known) is not limited.
func (l *addrLimiter) take(key string, now time.Time) (time.Duration, bool) {
	if l.rate <= 0 || key == "" {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= limitAddrs {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / l.rate * float64(time.Second)), false
	}
	b.tokens--
	return 0, true
}

func (l *addrLimiter) refill(b *bucket, now time.Time) {
	if now.After(b.at) {
		b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
		b.at = now
	}
}

// evict makes room: the full buckets first, then, if none was, about a
// tenth of the others (map order spreads the loss).
func (l *addrLimiter) evict(now time.Time) {
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < limitAddrs*9/10 {
			break
		}
		delete(l.buckets, k)
	}
}
