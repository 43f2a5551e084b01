package front2025

// What each client session negotiated, known to every replica.
//
// A session the gateway serves tasks for is recorded at initialize
// (initialize.go) in the store, before the client learns its id, so any
// replica can look it up: the in-process cache first, then Redis. Other
// sessions (older clients) are pure pass-through and never touch Redis
// beyond one lookup per replica, which is cached as "not ours".
//
// Entries are immutable after initialize. Each replica re-checks an entry
// with Redis at most every sessionRecheck: that renews the record's TTL
// (so a session in use never expires) and notices a session another
// replica saw deleted.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/taskstore"
)

const (
	// sessionTTL is how long an idle session's record lives in Redis.
	// Every use renews it (at most every sessionRecheck per replica).
	sessionTTL = 24 * time.Hour
	// sessionRecheck is how often a replica re-checks a cached session with
	// Redis: renewing its TTL, or re-reading an unknown one.
	sessionRecheck = 10 * time.Minute
	// emulatedRecheck is sessionRecheck for a session the gateway holds
	// in front of a stateless upstream (stateless.go).
	emulatedRecheck = 2 * time.Second
	// sessionCacheSize bounds the in-process cache: it holds at most twice
	// this many sessions (two generations), a few MB.
	sessionCacheSize = 1 << 14
)

// sessionInfo is what the gateway remembers of one client session. It is
// immutable once built.
type sessionInfo struct {
	ID              string          // Mcp-Session-Id (the upstream's, passed through)
	ClientVersion   string          // the version presented to the client
	UpstreamVersion string          // the version the upstream chose
	ClientCaps      json.RawMessage // the client's initialize capabilities
	// ClientInfo is the client's clientInfo, and Principal the digest of
	// the Authorization that opened the session ("" for none), for a
	// session the gateway holds in front of a stateless upstream
	// (stateless.go): only that principal may use it.
	ClientInfo json.RawMessage
	Principal  string
	// Addr is the address that opened such a session without
	// Authorization: its place in the anonymous caps is counted there.
	Addr string

	upstreamVersionHeader []string // {UpstreamVersion}, shared by every rewritten header
	// noTasks: the client declared no capabilities.tasks, so with the
	// fallback task tools on it may get them (fallback.go).
	noTasks bool
}

func newSessionInfo(id, clientVersion, upstreamVersion string, caps json.RawMessage) *sessionInfo {
	var c map[string]json.RawMessage
	_ = json.Unmarshal(caps, &c)
	_, tasks := c["tasks"]
	return &sessionInfo{ID: id, ClientVersion: clientVersion, UpstreamVersion: upstreamVersion,
		ClientCaps: caps, upstreamVersionHeader: []string{upstreamVersion}, noTasks: !tasks}
}

// tasks2025 reports whether the session speaks 2025-11-25 tasks, which
// the gateway then serves itself. Safe on nil.
func (s *sessionInfo) tasks2025() bool { return s != nil && s.ClientVersion == core.Version2025 }

// sessionEntry is one cached lookup. A nil info caches "Redis has no such
// session": a session is recorded before its id reaches the client, so an
// id Redis does not know is not one the gateway serves.
type sessionEntry struct {
	info    *sessionInfo
	checked atomic.Int64 // unix nanoseconds of the last look at Redis
}

func newSessionEntry(info *sessionInfo, now time.Time) *sessionEntry {
	e := &sessionEntry{info: info}
	e.checked.Store(now.UnixNano())
	return e
}

// claimRecheck reports whether the caller should re-check the entry with
// Redis now; of concurrent callers, one gets true.
func (e *sessionEntry) claimRecheck(now time.Time) bool {
	last := e.checked.Load()
	every := sessionRecheck
	if e.info.emulated() {
		// The gateway holds the session itself: no upstream refuses it
		// once it ends, so another replica's DELETE must be seen soon.
		every = emulatedRecheck
	}
	if now.UnixNano()-last < int64(every) {
		return false
	}
	return e.checked.CompareAndSwap(last, now.UnixNano())
}

// sessionCache is a bounded map of session id to entry: two generations,
// the older dropped whole when the newer fills up, and an entry found in
// the older moved to the newer. So recently used sessions stay, and memory
// stays under 2×size entries without per-entry bookkeeping.
type sessionCache struct {
	mu       sync.RWMutex
	cur, old map[string]*sessionEntry
	size     int
}

func newSessionCache() *sessionCache { return newSessionCacheSize(sessionCacheSize) }

func newSessionCacheSize(size int) *sessionCache {
	return &sessionCache{cur: make(map[string]*sessionEntry), size: size}
}

func (c *sessionCache) get(id string) *sessionEntry {
	c.mu.RLock()
	e := c.cur[id]
	if e == nil && c.old != nil {
		e = c.old[id]
		c.mu.RUnlock()
		if e != nil {
			c.mu.Lock()
			if _, ok := c.old[id]; ok { // still there: promote it
				delete(c.old, id)
				c.putLocked(id, e)
			}
			c.mu.Unlock()
		}
		return e
	}
	c.mu.RUnlock()
	return e
}

func (c *sessionCache) put(id string, e *sessionEntry) {
	c.mu.Lock()
	if c.old != nil {
		delete(c.old, id)
	}
	c.putLocked(id, e)
	c.mu.Unlock()
}

func (c *sessionCache) putLocked(id string, e *sessionEntry) {
	if _, ok := c.cur[id]; !ok && len(c.cur) >= c.size {
		c.old, c.cur = c.cur, make(map[string]*sessionEntry, c.size)
	}
	c.cur[id] = e
}

func (c *sessionCache) delete(id string) {
	c.mu.Lock()
	delete(c.cur, id)
	if c.old != nil {
		delete(c.old, id)
	}
	c.mu.Unlock()
}

// count is the number of cached entries (for tests).
func (c *sessionCache) count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur) + len(c.old)
}

// sessionTable is what each session negotiated, for the whole front: the
// in-process cache (sessionCache) in front of the store's session records,
// each entry re-checked with the store at most every sessionRecheck. It
// needs only the session records of the store and the anonymous caps' renewal.
type sessionTable struct {
	cache *sessionCache
	store sessionStore
	log   zerolog.Logger
}

// sessionStore is what sessionTable needs of the task store.
type sessionStore interface {
	PutSession(ctx context.Context, sess taskstore.Session, ttl time.Duration) error
	GetSession(ctx context.Context, id string) (*taskstore.Session, error)
	TouchSession(ctx context.Context, id string, ttl time.Duration) (bool, error)
	DeleteSession(ctx context.Context, id string) error
	RenewAnonymous(ctx context.Context, id, addr string, expiry time.Time) error
	Options() taskstore.Options
}

func newSessionTable(store sessionStore, log zerolog.Logger) *sessionTable {
	return &sessionTable{cache: newSessionCache(), store: store, log: log}
}

// session returns what the request's Mcp-Session-Id negotiated, or nil when
// the gateway serves nothing for the session (or cannot tell now: Redis
// unreachable on a cache miss, logged; see sessionErr).
func (t *sessionTable) session(r *http.Request) *sessionInfo {
	s, _ := t.sessionErr(r)
	return s
}

// sessionErr is session, and says when it cannot tell: the session is not
// in this replica's cache and the store cannot be read (an error wrapping
// taskstore.ErrUnavailable). The session's plain traffic then passes
// through as if it were not the gateway's (degraded, not failed); what
// needs its tasks (tasks/*, a task-augmented tools/call) fails with err.
func (t *sessionTable) sessionErr(r *http.Request) (*sessionInfo, error) {
	v := r.Header["Mcp-Session-Id"]
	if len(v) == 0 || v[0] == "" {
		return nil, nil
	}
	return t.lookup(r.Context(), v[0])
}

// lookup is session by id: the cache, else the store. err is set
// only when neither can tell.
func (t *sessionTable) lookup(ctx context.Context, id string) (*sessionInfo, error) {
	now := time.Now()
	e := t.cache.get(id)
	if e != nil && !e.claimRecheck(now) {
		return e.info, nil
	}
	if e != nil && e.info != nil {
		// Renew the record's TTL; a record gone means the session was
		// deleted through another replica (or expired).
		ok, err := t.store.TouchSession(ctx, id, sessionIdle(e.info))
		switch {
		case err != nil:
			if ctx.Err() == nil {
				t.log.Warn().Str("op", "session").Err(err).Msg("cannot renew the session record; will retry")
			}
			return e.info, nil
		case !ok:
			t.cache.put(id, newSessionEntry(nil, now))
			return nil, nil
		}
		t.renewAnonymous(ctx, e.info)
		return e.info, nil
	}
	rec, err := t.store.GetSession(ctx, id)
	switch {
	case errors.Is(err, taskstore.ErrNoSession):
		t.cache.put(id, newSessionEntry(nil, now))
		return nil, nil
	case err != nil:
		if e != nil {
			return e.info, nil // known "not ours"
		}
		if ctx.Err() == nil {
			t.log.Warn().Str("op", "session").Err(err).Msg("cannot look up the session; serving its plain requests as pass-through")
		}
		return nil, err
	}
	info := newSessionInfo(rec.ID, rec.ClientVersion, rec.UpstreamVersion, rec.ClientCapabilities)
	info.ClientInfo, info.Principal, info.Addr = rec.ClientInfo, rec.Principal, rec.Address
	t.cache.put(id, newSessionEntry(info, now))
	return info, nil
}

// record stores s in Redis, then in the cache. Until it returns nil
// the client must not learn the session id.
func (t *sessionTable) record(ctx context.Context, s *sessionInfo) error {
	err := t.store.PutSession(ctx, taskstore.Session{ID: s.ID, ClientVersion: s.ClientVersion,
		UpstreamVersion: s.UpstreamVersion, ClientCapabilities: s.ClientCaps, ClientInfo: s.ClientInfo, Principal: s.Principal, Address: s.Addr}, sessionIdle(s))
	if err != nil {
		return err
	}
	t.cache.put(s.ID, newSessionEntry(s, time.Now()))
	return nil
}

// forget drops the record of r's session after the upstream ended
// it (a successful DELETE, or 404: already gone).
func (t *sessionTable) forget(r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return
	}
	e := t.cache.get(id)
	t.cache.delete(id)
	if e != nil && e.info == nil {
		return // known not to be recorded
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), core.StoreTimeout)
	defer cancel()
	if err := t.store.DeleteSession(ctx, id); err != nil {
		// The record expires on its own after sessionTTL.
		t.log.Warn().Str("op", "session").Err(err).Msg("cannot delete the session record")
	}
}

// upstreamHeader is the header (Front.UpstreamHeader) to forward r with: MCP-Protocol-Version
// rewritten to the upstream's version for a session presented as
// 2025-11-25 in front of an older upstream. On the hot path: without a
// 2025-11-25 header it returns r.Header at once, and a cached session that
// needs nothing costs one map lookup, no allocation.
func (t *sessionTable) upstreamHeader(r *http.Request) http.Header {
	v := r.Header["Mcp-Protocol-Version"]
	if len(v) != 1 || v[0] != core.Version2025 {
		return r.Header
	}
	s := t.session(r)
	if s == nil || s.UpstreamVersion == s.ClientVersion {
		return r.Header
	}
	out := make(http.Header, len(r.Header))
	for k, vv := range r.Header {
		out[k] = vv
	}
	out["Mcp-Protocol-Version"] = s.upstreamVersionHeader
	return out
}

// cached reports whether this replica's cache holds what session
// id negotiated (a session the gateway knows, not one it knows is absent).
func (t *sessionTable) cached(id string) bool {
	e := t.cache.get(id)
	return e != nil && e.info != nil
}

// recheck looks session id up as its next re-check would (the
// cached entry taken as stale), and reports whether the session is still
// known: a session deleted through another replica is forgotten then.
func (t *sessionTable) recheck(ctx context.Context, id string) bool {
	if e := t.cache.get(id); e != nil {
		e.checked.Store(time.Now().Add(-sessionRecheck - time.Second).UnixNano())
	}
	s, _ := t.lookup(ctx, id)
	return s != nil
}

// renewAnonymous keeps the place of held session s, opened without
// Authorization and still in use, in the anonymous caps for another idle
// lifetime (lookup, each time it renews the record).
func (t *sessionTable) renewAnonymous(ctx context.Context, s *sessionInfo) {
	if !s.emulated() || s.Principal != "" || s.Addr == "" {
		return
	}
	if err := t.store.RenewAnonymous(ctx, anonSessionSlot(s.ID), s.Addr, t.store.Options().Clock().Add(anonymousSessionTTL)); err != nil && ctx.Err() == nil {
		t.log.Warn().Str("op", "session").Err(err).Msg("cannot renew the session's place in the anonymous caps; will retry")
	}
}
