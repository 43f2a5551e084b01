package upstream

import "context"

// A call the gateway may run again (a durable task's, docs/durable.md)
// is marked on its context, so that a local server's bridge reached in
// process (upstream/stdio) can keep its session alive when the session's
// child dies under it: the rerun then finds a fresh child on the same
// session instead of a 404. Like Principal, this package only carries it.

type rerunnableKey struct{}

// WithRerunnable returns ctx marking its calls as ones the gateway runs
// again when they fail on the way (TransientAnswer).
func WithRerunnable(ctx context.Context) context.Context {
	return context.WithValue(ctx, rerunnableKey{}, true)
}

// Rerunnable reports whether ctx marks a call the gateway runs again.
func Rerunnable(ctx context.Context) bool {
	v, _ := ctx.Value(rerunnableKey{}).(bool)
	return v
}
