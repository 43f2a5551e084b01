package runner

import (
	"math"
	"sync"
	"time"
)

// The task creations per minute of each principal on this replica
// (--max-task-rate): a token bucket of perMinute tokens, refilled at
// perMinute a minute, so a principal may create a minute's worth at once,
// then perMinute a minute. Per replica, in memory, like --max-inflight: no
// Redis round trip is added to a creation.

// maxRateBuckets bounds the buckets' memory: past it, the buckets that are
// full again (idle for long enough to have refilled) are dropped, which
// changes nothing; if none is, all are, which costs some accuracy under a
// flood of distinct principals, never memory.
const maxRateBuckets = 1 << 16

type taskRates struct {
	perMinute float64 // 0: no limit
	now       func() time.Time

	mu      sync.Mutex
	buckets map[string]*rateBucket
}

type rateBucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newTaskRates(perMinute float64) *taskRates {
	return &taskRates{perMinute: max(perMinute, 0), now: time.Now, buckets: map[string]*rateBucket{}}
}

// take takes a token of principal's, or says how long until there is one.
func (tr *taskRates) take(principal string) (ok bool, wait time.Duration) {
	if tr.perMinute == 0 {
		return true, 0
	}
	now := tr.now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	b := tr.bucket(principal, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / tr.perMinute * float64(time.Minute))
}

// refund gives back a token take took, for a creation refused later.
func (tr *taskRates) refund(principal string) {
	if tr.perMinute == 0 {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if b := tr.buckets[principal]; b != nil {
		b.tokens = math.Min(tr.perMinute, b.tokens+1)
	}
}

// bucket is principal's bucket, brought up to now.
func (tr *taskRates) bucket(principal string, now time.Time) *rateBucket {
	b := tr.buckets[principal]
	if b == nil {
		if len(tr.buckets) >= maxRateBuckets {
			tr.prune(now)
		}
		b = &rateBucket{tokens: tr.perMinute, at: now}
		tr.buckets[principal] = b
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(tr.perMinute, b.tokens+d.Minutes()*tr.perMinute)
		b.at = now
	}
	return b
}

func (tr *taskRates) prune(now time.Time) {
	for k, b := range tr.buckets {
		if b.tokens+now.Sub(b.at).Minutes()*tr.perMinute >= tr.perMinute {
			delete(tr.buckets, k)
		}
	}
	if len(tr.buckets) >= maxRateBuckets {
		clear(tr.buckets)
	}
}
