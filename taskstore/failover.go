package taskstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Following a Redis Cluster failover.
//
// go-redis keeps the cluster's slot map (which master serves which slots)
// and reloads it on a MOVED or ASK reply, or when it is older than
// ClusterOptions.ClusterStateReloadInterval (60 s). A master that dies
// sends neither: its connections are refused or reset, so go-redis retries
// the same dead address until the minute is up, long after the cluster
// promoted its replica (cluster-node-timeout plus about a second). The
// slot refresher closes that gap: every command and pipeline error that
// says a node is gone or the cluster is reconfiguring asks go-redis for a
// reload, so the map catches up with the cluster within one reload of the
// promotion.
//
// Bounds: a reload is one CLUSTER SLOTS to one node, asked for at most once
// per reloadGap by this replica however many commands fail at once, and
// go-redis runs at most one at a time (ClusterClient.ReloadState coalesces
// into its own loop). While the cluster has not promoted yet, each reload
// returns the same map: they cost one small command per reloadGap for the
// cluster-node-timeout window and stop with the errors.

// reloadGap is the least time between two reloads this store asks for.
// Short beside the 5 s a client may wait out a failover, long beside the
// 1 ms a reload takes on a loaded cluster.
const reloadGap = 250 * time.Millisecond

// slotRefresher asks a Cluster client to reload its slot map when a
// command fails the way a dead or demoted node makes it fail. It holds no
// goroutine: go-redis' LazyReload runs the reload.
type slotRefresher struct {
	reload func()       // ClusterClient.ReloadState
	now    func() int64 // monotonic-enough nanoseconds (time.Now)
	gap    int64
	last   atomic.Int64 // when the last reload was asked for, ns
	asked  atomic.Int64 // reloads asked for (ClusterReloads)
}

func newSlotRefresher(cc *redis.ClusterClient) *slotRefresher {
	return &slotRefresher{
		reload: func() { cc.ReloadState(context.Background()) },
		now:    func() int64 { return time.Now().UnixNano() },
		gap:    int64(reloadGap),
	}
}

// trouble asks for a reload when err says a node is gone or the cluster
// is changing, unless one was asked for within the gap.
func (r *slotRefresher) trouble(err error) {
	if r == nil || !nodeTrouble(err) {
		return
	}
	now := r.now()
	last := r.last.Load()
	if last != 0 && now-last < r.gap {
		return
	}
	if !r.last.CompareAndSwap(last, now) {
		return // another failing command asked just now
	}
	r.asked.Add(1)
	r.reload()
}

// nodeTrouble reports whether err means the node a command went to is
// gone, unreachable or no longer serves the slot: a refused, reset or
// timed-out connection, EOF, or a reply saying the cluster is down or
// changing (CLUSTERDOWN while it decides, LOADING on a restarted node,
// MASTERDOWN or READONLY from a node that is a replica now, TRYAGAIN
// during a resharding). A script error, a wrong type, a missing key or the
// caller's own cancellation are the command's, not the node's, and say
// nothing about the map.
func nodeTrouble(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	msg := err.Error()
	for _, p := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY", "TRYAGAIN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "i/o timeout")
}

// refreshHook is the go-redis hook that feeds the refresher every failed
// command's error. It sits on the ClusterClient, so it sees what is left
// after go-redis' own retries (MaxRedirects attempts, a few tens of
// milliseconds of backoff).
type refreshHook struct{ r *slotRefresher }

func (refreshHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h refreshHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.r.trouble(err)
		return err
	}
}

func (h refreshHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil {
			// The pipeline's error is its first failed command's; a
			// pipeline over several nodes can fail on another one.
			h.r.trouble(err)
			for _, c := range cmds {
				if c.Err() != nil && c.Err() != err {
					h.r.trouble(c.Err())
				}
			}
		}
		return err
	}
}

// ClusterReloads is how many slot map reloads the store has asked for
// since it was made (0 when Redis is not a Cluster): a reload follows a
// failover, see failover.go.
func (s *Store) ClusterReloads() int64 {
	if s.slots == nil {
		return 0
	}
	return s.slots.asked.Load()
}
