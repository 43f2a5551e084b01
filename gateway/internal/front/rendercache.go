package front

// The tasks/get answer of a terminal task is polled many times and never
// changes, yet rendering it (2026-07-28: the stored result re-decoded and
// re-encoded with resultType by core.StatelessResult, then the DetailedTask
// marshalled) costs more than the rest of the request's own work. The
// render cache keeps the marshalled result per task and flavour, bounded
// (LRU, entries and bytes), and reuses it only when every field the
// rendering reads is equal to the one it was rendered from: the answer is
// the very bytes rendering afresh gives (TestRenderCacheBytes), whether or
// not a terminal task's record could change. cachedGet goes one step
// further for a poll of a terminal task already rendered: it reads only the
// record's stamp, not the whole record, and while the store's removal
// notices are live (taskstore.WatchRemovals) not even that: see zeroRTT.
// While the store is unavailable such a poll is answered from the cache
// (servableInOutage).

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/taskstore"
)

// flavour says which rendering an entry holds.
type flavour uint8

const (
	Render2026Get flavour = iota + 1 // json.Marshal(core.ToTask2026(t, "complete", true))
	Render2025Get                    // json.Marshal(core.ToTask2025(t))
)

const (
	CacheEntries   = 4096
	CacheBytes     = 16 << 20 // result, error and rendered bytes of all entries
	renderMaxEntry = 256 << 10
)

// renderInputs are the fields of a Task the renderings read, and its owner.
type renderInputs struct {
	owner               string
	id, status, message string
	created, updated    time.Time
	ttl, poll           time.Duration
	result, err         []byte
	trace               string // not rendered: what a poll's span links to
}

func inputsOf(t *taskstore.Task) renderInputs {
	return renderInputs{owner: t.Owner, id: t.ID, status: string(t.Status), message: t.StatusMessage,
		created: t.CreatedAt, updated: t.LastUpdatedAt, ttl: t.TTL, poll: t.PollInterval,
		result: t.Result, err: t.Error, trace: t.Trace}
}

// same reports whether t renders as in: equal instants are enough, as the
// renderings write times in UTC (core.WireTime).
func (in *renderInputs) same(t *taskstore.Task) bool {
	return in.owner == t.Owner && in.id == t.ID && in.status == string(t.Status) && in.message == t.StatusMessage &&
		in.created.Equal(t.CreatedAt) && in.updated.Equal(t.LastUpdatedAt) &&
		in.ttl == t.TTL && in.poll == t.PollInterval &&
		bytes.Equal(in.result, t.Result) && bytes.Equal(in.err, t.Error) &&
		(in.result == nil) == (t.Result == nil) && (in.err == nil) == (t.Error == nil)
}

type renderKey struct {
	flavour flavour
	id      string
}

type renderEntry struct {
	key  renderKey
	in   renderInputs
	out  []byte // read-only once stored
	size int
	// checked is the cache's epoch when the record was last seen in the
	// store as rendered, and at is when (zeroRTT); 0: never.
	checked uint64
	at      time.Time
}

// Zero round trips. A terminal task's record never changes; it only goes
// away: at its expiry, which the entry itself tells, or when a script
// removes it, which the store announces (taskstore.WatchRemovals). So a
// poll of a terminal task whose entry was checked against the store in the
// current epoch is answered from the entry alone while
//
//   - the removal notices are live (the pub/sub subscription confirmed and
//     not lost since): every notice and every change of liveness starts a
//     new epoch, so an entry checked before a removal, or before a gap in
//     which a notice could have been lost, is checked again (one stamp
//     read) before it is trusted;
//   - the task is more than zeroRTTSkew from its expiry by this replica's
//     clock (Redis expires the record by its own clock; replicas' clocks
//     are assumed to be within that of Redis's), after which every poll
//     reads the stamp and sees the expiry as Get would;
//   - the entry was checked less than zeroRTTMaxAge ago: what no notice
//     reports (an operator's FLUSHALL, an eviction under a maxmemory
//     policy other than noeviction, a failover that kept the connection)
//     is seen within that.
const (
	// Exported for gateway's tests (stamp_test.go), which poll at the skew's edge.
	ZeroRTTSkew   = 2 * time.Second
	zeroRTTMaxAge = 30 * time.Second
)

type renderCache struct {
	epoch atomic.Uint64 // starts at 1; entries with checked 0 never qualify
	live  atomic.Bool   // the store's removal notices are live

	mu       sync.Mutex
	entries  map[renderKey]*list.Element
	lru      list.List // front: most recently used
	bytes    int
	maxItems int
	maxBytes int
}

func NewRenderCache(maxItems, maxBytes int) *renderCache {
	c := &renderCache{entries: map[renderKey]*list.Element{}, maxItems: maxItems, maxBytes: maxBytes}
	c.epoch.Store(1)
	return c
}

// Removals is what the cache subscribes to the store's removal notices
// with: any removal, and any change of the notices' liveness, starts a new
// epoch (deletions are rare: a new epoch costs each cached terminal task
// one stamp read).
func (c *renderCache) Removals() taskstore.Removals {
	return taskstore.Removals{
		Removed: func(string) { c.epoch.Add(1) },
		Live: func(live bool) {
			c.live.Store(live)
			c.epoch.Add(1)
		},
	}
}

// render returns the flavour's rendering of t: the cached bytes when t is
// terminal and renders exactly as the cached entry did, else render()'s,
// remembered for the next poll when t is terminal. The returned bytes must
// not be modified.
// checked is the epoch read before t was read from the store (0: unknown).
func (c *renderCache) render(f flavour, t *taskstore.Task, checked uint64, render func() ([]byte, error)) ([]byte, error) {
	if c == nil || !t.Status.Terminal() {
		return render()
	}
	k := renderKey{f, t.ID}
	c.mu.Lock()
	if el, ok := c.entries[k]; ok {
		e := el.Value.(*renderEntry)
		if e.in.same(t) {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			return e.out, nil
		}
	}
	c.mu.Unlock()
	out, err := render()
	if err != nil {
		return nil, err
	}
	size := len(out) + len(t.Result) + len(t.Error) + len(t.StatusMessage) + len(t.ID) + 256
	if size > renderMaxEntry || size > c.maxBytes {
		return out, nil
	}
	e := &renderEntry{key: k, in: inputsOf(t), out: out, size: size, checked: checked, at: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.removeLocked(el)
	}
	c.entries[k] = c.lru.PushFront(e)
	c.bytes += size
	for len(c.entries) > c.maxItems || c.bytes > c.maxBytes {
		c.removeLocked(c.lru.Back())
	}
	return out, nil
}

// peek returns the cached rendering of the owner's task id, what it was
// rendered from, and when it was last checked (epoch and time), without
// judging whether it is still good.
func (c *renderCache) peek(f flavour, owner, id string) (in renderInputs, out []byte, checked uint64, at time.Time, ok bool) {
	if c == nil {
		return renderInputs{}, nil, 0, time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[renderKey{f, id}]
	if !ok {
		return renderInputs{}, nil, 0, time.Time{}, false
	}
	e := el.Value.(*renderEntry)
	if e.in.owner != owner {
		return renderInputs{}, nil, 0, time.Time{}, false
	}
	c.lru.MoveToFront(el)
	return e.in, e.out, e.checked, e.at, true
}

// markChecked records that the entry rendered as in was seen in the store
// in epoch (read before the store was).
func (c *renderCache) markChecked(f flavour, in *renderInputs, epoch uint64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[renderKey{f, in.id}]
	if !ok {
		return
	}
	e := el.Value.(*renderEntry)
	if e.in.owner == in.owner && e.in.updated.Equal(in.updated) && e.in.status == in.status && epoch > e.checked {
		e.checked, e.at = epoch, at
	}
}

// zeroRTT reports whether an entry checked in epoch checked at time at,
// of a task that expires at expires (both by the store's clock, now), may
// be answered without the store.
func (c *renderCache) zeroRTT(checked uint64, at, expires, now time.Time) bool {
	return checked != 0 && c.live.Load() && checked == c.epoch.Load() &&
		now.Before(expires.Add(-ZeroRTTSkew)) && time.Since(at) < zeroRTTMaxAge
}

func (c *renderCache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*renderEntry)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// RenderStore is what the render cache reads: a task's stamp or record.
type RenderStore interface {
	Get(ctx context.Context, owner, id string) (*taskstore.Task, error)
	Stamp(ctx context.Context, owner, id string) (taskstore.Stamp, bool, error)
	Options() taskstore.Options
}

// cachedGet answers a tasks/get of a terminal task from its cached
// rendering after one small read (Store.Stamp: owner, status and
// lastUpdatedAt, not the result) shows the record is still the one it was
// rendered from. Terminal states are sticky, so a terminal task with the
// same stamp is the same task: the answer is the bytes Get and render
// would give. ok is false when there is no such rendering, the task
// expired (by the store's clock, as Get judges) or its stamp differs: then
// the caller reads the whole record. err is the stamp read's failure (the
// store unavailable), for the caller to answer at once.
func (c *renderCache) cachedGet(ctx context.Context, store RenderStore, f flavour, owner, id string) (out []byte, trace string, ok bool, err error) {
	in, out, checked, at, ok := c.peek(f, owner, id)
	now := store.Options().Clock()
	expires := in.created.Add(in.ttl)
	if !ok || !expires.After(now) {
		return nil, "", false, nil
	}
	if c.zeroRTT(checked, at, expires, now) {
		return out, in.trace, true, nil
	}
	epoch := c.epoch.Load()
	st, found, err := store.Stamp(ctx, owner, id)
	if err != nil {
		if servableInOutage(err, expires, now) {
			return out, in.trace, true, nil
		}
		return nil, "", false, err
	}
	if !found || string(st.Status) != in.status || !st.LastUpdatedAt.Equal(in.updated) {
		return nil, "", false, nil
	}
	c.markChecked(f, &in, epoch, time.Now())
	return out, in.trace, true, nil
}

// servableInOutage reports whether a cached terminal rendering may answer
// a poll whose stamp read failed with err: yes when the store is
// unavailable and the task is more than zeroRTTSkew from its expiry. Its
// record cannot have changed (terminal states are sticky) and nothing can
// remove it while Redis is down; the first poll after the outage reads
// the stamp again (the outage started a new epoch), so a Redis that came
// back without its data is seen then. Without this a poll during an outage
// got the cached answer or -32603 depending on whether the pub/sub
// connection had yet noticed the loss (zeroRTT): now both ways give the
// cached answer. Polls of tasks not cached here still get -32603.
func servableInOutage(err error, expires, now time.Time) bool {
	return errors.Is(err, taskstore.ErrUnavailable) && now.Before(expires.Add(-ZeroRTTSkew))
}

// get is the marshalled result of a tasks/get (flavour f) of the owner's
// task id: cachedGet's, else the whole record's rendering.
// The task's Trace comes along, for the poll's span.
func (c *renderCache) get(ctx context.Context, store RenderStore, f flavour, owner, id string) ([]byte, string, error) {
	if raw, trace, ok, err := c.cachedGet(ctx, store, f, owner, id); ok || err != nil {
		return raw, trace, err
	}
	var epoch uint64
	if c != nil {
		epoch = c.epoch.Load()
	}
	t, err := store.Get(ctx, owner, id)
	if err != nil {
		return nil, "", err
	}
	var raw []byte
	if f == Render2026Get {
		raw, err = c.get2026(t, epoch)
	} else {
		raw, err = c.get2025(t, epoch)
	}
	return raw, t.Trace, err
}

// get2026 is the marshalled result of a 2026-07-28 tasks/get of t, read
// from the store in epoch (0: unknown).
func (c *renderCache) get2026(t *taskstore.Task, epoch uint64) ([]byte, error) {
	return c.render(Render2026Get, t, epoch, func() ([]byte, error) {
		return json.Marshal(core.ToTask2026(t, "complete", true))
	})
}

// get2025 is the marshalled result of a 2025-11-25 tasks/get of t, read
// from the store in epoch (0: unknown).
func (c *renderCache) get2025(t *taskstore.Task, epoch uint64) ([]byte, error) {
	return c.render(Render2025Get, t, epoch, func() ([]byte, error) {
		return json.Marshal(core.ToTask2025(t))
	})
}

// Live reports whether the store's removal notices are live (then a
// terminal task's poll may be answered with no read: zeroRTT).
func (c *renderCache) Live() bool { return c.live.Load() }

// Epoch is the cache's epoch: it moves on at each removal notice, and
// whenever the notices' liveness changes.
func (c *renderCache) Epoch() uint64 { return c.epoch.Load() }
