package core

import (
	"context"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// anonymousStore is what counting against the anonymous caps needs.
type anonymousStore interface {
	Options() taskstore.Options
	ReserveAnonymous(ctx context.Context, id, addr string, expiry time.Time, max, perAddr int) error
	ReleaseAnonymous(ctx context.Context, id, addr string) error
}

// Anonymous counts the tasks of clients without Authorization against
// Caps, in Store.
type Anonymous struct {
	Store anonymousStore
	Caps  AnonymousTasks
}

// Reserve counts the task id (ReserveAnonymous).
func (a Anonymous) Reserve(ctx context.Context, id, addr string, ttl time.Duration) error {
	return ReserveAnonymous(ctx, a.Store, a.Caps, id, addr, ttl)
}

// Release gives back what Reserve counted, for a task that was not made.
func (a Anonymous) Release(ctx context.Context, id, addr string) {
	_ = a.Store.ReleaseAnonymous(ctx, id, addr)
}

// ReserveAnonymous counts id, made by a client without Authorization at
// addr and living ttl (zero: the store's default task ttl), against the
// caps (taskstore/anonymous.go).
func ReserveAnonymous(ctx context.Context, store anonymousStore, caps AnonymousTasks, id, addr string, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = store.Options().DefaultTTL
	}
	return store.ReserveAnonymous(ctx, id, addr, store.Options().Clock().Add(ttl), caps.Max, caps.PerAddress)
}

// AnonymousTasks bounds the tasks of 2026-07-28 clients without
// Authorization. Each such task is its own owner: its id is the only
// credential, so no other anonymous client shares a per-owner limit or a
// task list with it; these caps bound them all together instead.
type AnonymousTasks struct {
	// Disabled: such clients get no tasks (an "auto" call is forwarded as
	// a plain call; a task or task-required tool gets -32603).
	Disabled bool
	// Max bounds the anonymous tasks not yet expired, over all replicas.
	// Zero means gateway.DefaultAnonymousMax; negative: no limit.
	Max int
	// PerAddress bounds them per client address (the connection's remote
	// IP). Zero means gateway.DefaultAnonymousPerAddress; negative: no limit.
	PerAddress int
}

// AnonymousTTL caps the ttl of a task whose owner has no Authorization and
// no session: its id is then the only bearer, so it should not live long
// (SEP-2663, "Security Considerations").
const AnonymousTTL = 10 * time.Minute
