package gateway

// The tasks/get answer of a terminal task is polled many times and never
// changes, yet rendering it (2026-07-28: the stored result re-decoded and
// re-encoded with resultType by modernResult, then the DetailedTask
// marshalled) costs more than the rest of the request's own work. The
// render cache keeps the marshalled result per task and flavour, bounded
// (LRU, entries and bytes), and reuses it only when every field the
// rendering reads is equal to the one it was rendered from: the answer is
// the very bytes rendering afresh gives (rendercache_test.go), whether or
// not a terminal task's record could change.

import (
	"bytes"
	"container/list"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// renderFlavour says which rendering an entry holds.
type renderFlavour uint8

const (
	renderModernGet renderFlavour = iota + 1 // json.Marshal(toModernTask(t, "complete", true))
	renderLegacyGet                          // json.Marshal(toLegacyTask(t))
)

const (
	renderCacheEntries = 4096
	renderCacheBytes   = 16 << 20 // result, error and rendered bytes of all entries
	renderMaxEntry     = 256 << 10
)

// renderInputs are the fields of a Task the renderings read.
type renderInputs struct {
	id, status, message string
	created, updated    time.Time
	ttl, poll           time.Duration
	result, err         []byte
}

func inputsOf(t *taskstore.Task) renderInputs {
	return renderInputs{id: t.ID, status: string(t.Status), message: t.StatusMessage,
		created: t.CreatedAt, updated: t.LastUpdatedAt, ttl: t.TTL, poll: t.PollInterval,
		result: t.Result, err: t.Error}
}

// same reports whether t renders as in: equal instants are enough, as the
// renderings write times in UTC (wireTime).
func (in *renderInputs) same(t *taskstore.Task) bool {
	return in.id == t.ID && in.status == string(t.Status) && in.message == t.StatusMessage &&
		in.created.Equal(t.CreatedAt) && in.updated.Equal(t.LastUpdatedAt) &&
		in.ttl == t.TTL && in.poll == t.PollInterval &&
		bytes.Equal(in.result, t.Result) && bytes.Equal(in.err, t.Error) &&
		(in.result == nil) == (t.Result == nil) && (in.err == nil) == (t.Error == nil)
}

type renderKey struct {
	flavour renderFlavour
	id      string
}

type renderEntry struct {
	key  renderKey
	in   renderInputs
	out  []byte // read-only once stored
	size int
}

type renderCache struct {
	mu       sync.Mutex
	entries  map[renderKey]*list.Element
	lru      list.List // front: most recently used
	bytes    int
	maxItems int
	maxBytes int
}

func newRenderCache(maxItems, maxBytes int) *renderCache {
	return &renderCache{entries: map[renderKey]*list.Element{}, maxItems: maxItems, maxBytes: maxBytes}
}

// render returns the flavour's rendering of t: the cached bytes when t is
// terminal and renders exactly as the cached entry did, else render()'s,
// remembered for the next poll when t is terminal. The returned bytes must
// not be modified.
func (c *renderCache) render(f renderFlavour, t *taskstore.Task, render func() ([]byte, error)) ([]byte, error) {
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
	e := &renderEntry{key: k, in: inputsOf(t), out: out, size: size}
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

func (c *renderCache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*renderEntry)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// modernGetResult is the marshalled result of a 2026-07-28 tasks/get of t.
func (h *Handler) modernGetResult(t *taskstore.Task) ([]byte, error) {
	return h.renders.render(renderModernGet, t, func() ([]byte, error) {
		return json.Marshal(toModernTask(t, "complete", true))
	})
}

// legacyGetResult is the marshalled result of a 2025-11-25 tasks/get of t.
func (h *Handler) legacyGetResult(t *taskstore.Task) ([]byte, error) {
	return h.renders.render(renderLegacyGet, t, func() ([]byte, error) {
		return json.Marshal(toLegacyTask(t))
	})
}

// writeRendered is writeResult for a result marshalled by one of the
// above: the same bytes, from the cached rendering.
func writeRendered(w http.ResponseWriter, id json.RawMessage, raw []byte, err error) {
	if err != nil {
		writeRPCError(w, id, rpcError(err))
		return
	}
	writeMarshalled(w, id, raw)
}
