package front

import (
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// The poll rate limit. Both task specs let a server refuse polls that come
// faster than the pollInterval it suggested (MCP 2025-11-25, Tasks, "Security
// Considerations": receivers SHOULD rate-limit task operations;
// SEP-2663: servers MAY rate-limit clients polling more
// frequently than pollIntervalMs). taskgate counts polls — tasks/get of
// either flavour and 2025-11-25 tasks/list — per owner and task on each
// replica, in a token bucket of Config.PollLimit polls a second with bursts
// of twice that. A poll past it is answered:
//
//	HTTP 429 Too Many Requests
//	Retry-After: <whole seconds, at least 1>
//	{"jsonrpc":"2.0","id":…,"error":{"code":-32000,"message":"polling too fast: …",
//	  "data":{"retryAfterMs":<ms until a poll is accepted>}}}
//
// so both an HTTP-aware client (status and header) and one that only reads
// the JSON-RPC error (retryAfterMs) learn when to come back
// (mcpwire.CodeRateLimited).
//
// The buckets live in this replica's memory: no Redis round trip is added
// to a poll, and a client spreading its polls over N replicas gets up to N
// times the limit, which the default (10× the default pollInterval) leaves
// far from any client that honours pollInterval.

// pollShards spreads the buckets over independently locked maps.
const pollShards = 64

// maxBucketsPerShard bounds memory: past it, a shard drops the buckets
// that are full again (idle long enough to have refilled).
const maxBucketsPerShard = 4096

type PollLimiter struct {
	rate, burst float64 // tokens per second, bucket size
	seed        maphash.Seed
	shards      [pollShards]pollShard
	now         func() time.Time
}

type pollShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func NewPollLimiter(rate, burst float64) *PollLimiter {
	l := &PollLimiter{rate: rate, burst: max(burst, 1), seed: maphash.MakeSeed(), now: time.Now}
	for i := range l.shards {
		l.shards[i].buckets = map[string]*bucket{}
	}
	return l
}

// allow takes one token from owner's bucket for task, or says how long
// until one is there.
func (l *PollLimiter) allow(owner, task string) (ok bool, wait time.Duration) {
	key := owner + "\x00" + task
	sh := &l.shards[maphash.String(l.seed, key)%pollShards]
	now := l.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[key]
	if b == nil {
		if len(sh.buckets) >= maxBucketsPerShard {
			l.prune(sh, now)
		}
		b = &bucket{tokens: l.burst, at: now}
		sh.buckets[key] = b
	}
	if d := now.Sub(b.at).Seconds(); d > 0 {
		b.tokens = math.Min(l.burst, b.tokens+d*l.rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// prune drops the buckets of sh that have refilled: forgetting them
// changes nothing. If none has, the shard is cleared; under a flood of
// distinct keys that costs some accuracy, never memory.
func (l *PollLimiter) prune(sh *pollShard, now time.Time) {
	for k, b := range sh.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(sh.buckets, k)
		}
	}
	if len(sh.buckets) >= maxBucketsPerShard {
		clear(sh.buckets)
	}
}

// Admit applies the limit (nil l: none) to a poll of task by owner; when
// refused it counts it, writes the 429 answer and reports false.
func (l *PollLimiter) Admit(w http.ResponseWriter, msg *mcpwire.Message, m *obs.Metrics, owner, task string) bool {
	if l == nil {
		return true
	}
	ok, wait := l.allow(owner, task)
	if ok {
		return true
	}
	m.PollLimited.WithLabelValues(msg.MethodName()).Inc()
	ms := max(wait.Milliseconds(), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(max((ms+999)/1000, 1), 10))
	e := mcpwire.NewError(http.StatusTooManyRequests, mcpwire.CodeRateLimited,
		"polling too fast: "+msg.MethodName()+" for this task is limited to "+
			strconv.FormatFloat(l.rate, 'f', -1, 64)+" per second; honour the task's pollInterval")
	e.Data = mcpwire.MustMarshal(map[string]int64{"retryAfterMs": ms})
	mcpwire.WriteError(w, msg.ID, e)
	return false
}
