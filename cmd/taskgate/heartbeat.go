package main

// The replica's heartbeat (taskstore.PublishReplica): every replica
// publishes its figures to the store, so that any replica's console lists
// the whole fleet (docs/console.md, "Replicas").

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/taskstore"
)

const (
	// heartbeatEvery bounds how often a replica publishes: every
	// --latency-sync (it publishes its latencies as often), at most every
	// 10 s; heartbeatKeep is how long a record lasts (the console shows
	// the last minute's).
	heartbeatEvery = 10 * time.Second
	heartbeatKeep  = 2 * time.Minute
	// consoleKeep is how long a console's announcement lasts: replicas
	// with --console-records auto keep the records that long after the
	// last console went.
	consoleKeep = 10 * time.Minute
)

// storeKind names the store for the replicas page: embedded, redis,
// sentinel or cluster, from --redis-url's scheme.
func storeKind(redisURL string) string {
	switch {
	case redisURL == "":
		return "embedded"
	case strings.HasPrefix(redisURL, "redis+cluster://"), strings.HasPrefix(redisURL, "rediss+cluster://"):
		return "cluster"
	case strings.HasPrefix(redisURL, "redis+sentinel://"), strings.HasPrefix(redisURL, "rediss+sentinel://"):
		return "sentinel"
	}
	return "redis"
}

// startHeartbeat publishes the replica's figures every heartbeatEvery
// until the returned stop. A failed publish is logged at debug: the store
// being away is told elsewhere, loudly. A replica serving the console
// announces it at each beat; with --console-records auto (mode.auto) a
// replica keeps the console's records while a console is announced.
func startHeartbeat(store *taskstore.Store, h *gateway.Handler, replica, version, kind string, every time.Duration, serving bool, mode recordsMode, log zerolog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(min(every, heartbeatEvery))
		defer t.Stop()
		for {
			st := h.Status()
			pool := store.PoolStats()
			rec := taskstore.ReplicaStatus{ID: replica, Version: version, Held: st.Held, MaxInflight: st.MaxInflight,
				Leases: st.Leases, LastSweep: st.LastSweep, UpstreamUp: st.UpstreamUp, Draining: st.Draining,
				Store: fmt.Sprintf("%s, connections: %d open, %d idle", kind, pool.TotalConns, pool.IdleConns)}
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			if err := store.PublishReplica(pctx, rec, heartbeatKeep); err != nil && ctx.Err() == nil {
				log.Debug().Str("op", "heartbeat").Err(err).Msg("cannot publish the replica's heartbeat")
			}
			if serving {
				_ = store.AnnounceConsole(pctx, consoleKeep)
			}
			if mode.auto {
				if on, err := store.ConsoleAnnounced(pctx); err == nil && on != store.RecordsEnabled() && store.OpsEnabled() {
					store.SetOpsRecords(on || serving)
					log.Info().Str("op", "heartbeat").Bool("records", on || serving).Msg("the console's records follow the fleet's consoles (--console-records auto)")
				}
			}
			pcancel()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
