package main

// Capacity phase C: a 3-master Redis Cluster behind 3 replicas. Create,
// poll and finish of held tasks round robin over the replicas: commands
// and bytes per task summed over the masters and per master, for the
// report to set against phases A and H.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

type capC struct {
	n                                               int
	addrs                                           []string
	slots                                           []int
	create, pollWork, finish, pollFirst, pollRepeat capCount
	working                                         int // polled tasks that were still working
	memWork, memDone                                capMem
}

func phaseC(ctx context.Context, o options, tg, tu, dir string) (*capC, error) {
	nodes, err := startCluster(ctx, dir, capClusterNodes)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, nd := range nodes {
		addrs = append(addrs, nd.addr)
	}
	e, err := startCapEnv(tg, tu, nodes, "redis+cluster://"+strings.Join(addrs, ","), true, capClusterNodes,
		"--task", "slow", "--max-inflight", strconv.Itoa(capClusterTasks+1000),
		"--lease", capClusterLease.String(), "--lease-renew", capClusterRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	c := &capC{n: capClusterTasks, addrs: addrs, slots: slotsOf(ctx, e.rcs[0].rdb, addrs)}
	reps := len(e.urls)
	// Warm up every replica at the check's concurrency (pools, scripts on
	// every master), each task polled on another replica.
	if _, err := parallel(ctx, o.concurrency, 4*o.concurrency, 0, func(ctx context.Context, i int) error {
		id, err := e.create2026(ctx, e.urls[i%reps], "slow", capAuth("warm", i), map[string]any{"seconds": 0.01, "text": "x"})
		if err == nil {
			_, err = e.get2026(ctx, e.urls[(i+1)%reps], id, capAuth("warm", i))
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return nil, err
	}
	memBefore, err := e.usedMemory(ctx)
	if err != nil {
		return nil, err
	}
	censusBefore, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: capacity C: %d tasks over %d replicas and a %d-master cluster\n", c.n, reps, len(nodes))
	ids := make([]string, c.n)
	auth := func(i int) string { return capAuth("cluster", i/capTasksPerOwner) }
	t0 := time.Now()
	if c.create, err = e.counted(ctx, func() (int, error) {
		n, err := parallel(ctx, o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
			id, err := e.create2026(ctx, e.urls[i%reps], "slow", auth(i), map[string]any{"seconds": capClusterHold, "text": "x"})
			ids[i] = id
			return err
		})
		if err != nil {
			return n, err
		}
		return n, e.waitMetric(ctx, mHeld, 30*time.Second, func(v float64) bool { return v >= float64(c.n) })
	}); err != nil {
		return nil, fmt.Errorf("cluster create: %w", err)
	}
	var working atomic.Int64
	if c.pollWork, err = e.counted(ctx, func() (int, error) {
		return parallel(ctx, o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
			t, err := e.get2026(ctx, e.urls[(i+1)%reps], ids[i], auth(i))
			if t.Status == "working" {
				working.Add(1)
			}
			return err
		})
	}); err != nil {
		return nil, fmt.Errorf("cluster poll: %w", err)
	}
	c.working = int(working.Load())
	c.memWork = capMem{n: c.n, before: memBefore}
	if c.memWork.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	cw, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	for i := range cw {
		c.memWork.nodes = append(c.memWork.nodes, cw[i].minus(censusBefore[i]))
	}
	c.memWork.delta = merged(c.memWork.nodes)
	if el := time.Since(t0); el > capClusterHold*time.Second {
		return nil, fmt.Errorf("cluster check: creating, polling and counting took %s, longer than the tasks run (%ds): the machine is too slow for this check", el.Round(time.Second), capClusterHold)
	}
	fmt.Fprintf(os.Stderr, "bench: capacity C: waiting for the tasks to finish\n")
	if c.finish, err = e.counted(ctx, func() (int, error) {
		return c.n, e.waitMetric(ctx, mLive, 2*time.Minute, func(v float64) bool { return v == 0 })
	}); err != nil {
		return nil, fmt.Errorf("cluster finish: %w", err)
	}
	for k, cnt := range []*capCount{&c.pollFirst, &c.pollRepeat} {
		if *cnt, err = e.counted(ctx, func() (int, error) {
			return parallel(ctx, o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
				t, err := e.get2026(ctx, e.urls[(i+2)%reps], ids[i], auth(i))
				if err == nil && t.Status != "completed" {
					err = fmt.Errorf("task %s is %s after it finished", ids[i], t.Status)
				}
				return err
			})
		}); err != nil {
			return nil, fmt.Errorf("cluster poll %d: %w", k+1, err)
		}
	}
	c.memDone = capMem{n: c.n, before: memBefore}
	if c.memDone.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	cd, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	for i := range cd {
		c.memDone.nodes = append(c.memDone.nodes, cd[i].minus(censusBefore[i]))
	}
	c.memDone.delta = merged(c.memDone.nodes)
	return c, nil
}
