package core

import (
	"context"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// Every runs fn every period until ctx ends: the loop of the background
// components (the recoverer's sweeps, the latency sync).
func Every(ctx context.Context, period time.Duration, fn func(context.Context)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn(ctx)
		}
	}
}

// ResyncInterval is how often a waiting reader re-reads a task whose
// events may have been lost (pub/sub drops messages): the store's
// Options.ResyncInterval, else taskstore's own default.
func ResyncInterval(s interface{ Options() taskstore.Options }) time.Duration {
	if d := s.Options().ResyncInterval; d > 0 {
		return d
	}
	return taskstore.DefaultResyncInterval
}

// StoreTimeout bounds store calls made outside a client's request.
const StoreTimeout = 2 * time.Second
