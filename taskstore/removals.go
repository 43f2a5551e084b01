package taskstore

import "context"

// Removal notices, for caches of terminal tasks.
//
// A terminal task's record never changes (terminal states are sticky, and
// nothing writes a rendered field of a terminal task) until it goes away:
// at its expiry, which every replica can tell from the record itself
// (ExpiresAt), or when a script removes it. Every script that removes a
// task record PUBLISHes the task id on one store-wide channel
// (keys.removals) in the same atomic step, so a replica that keeps
// terminal tasks in process can learn of a removal without asking Redis.
//
// Pub/sub is at-most-once: notices published while the shared pub/sub
// connection is down are lost. So the listener is also told whenever the
// subscription stops or starts being live, and must not trust what it
// cached before a loss (a Redis restart or failover may also have lost the
// records themselves).

// Removals is what WatchRemovals reports to.
type Removals struct {
	// Removed is called with the id of each removed task record.
	Removed func(id string)
	// Live is called with false when the subscription may have missed
	// notices (the connection was lost) and with true once Redis confirmed
	// it again (the first confirmation included). Until the first true,
	// the subscription is not live.
	Live func(live bool)
}

// WatchRemovals subscribes r to the removal notices of every task of the
// store, on the Store's shared pub/sub connection. The callbacks run on the
// connection's receive loop: they must be quick and must not call the
// Store. It returns at once: Live(true) reports the subscription confirmed.
// stop ends the subscription; it may be called more than once.
func (s *Store) WatchRemovals(ctx context.Context, r Removals) (stop func(), err error) {
	return s.hub.listen(ctx, s.k.removals(), r)
}
