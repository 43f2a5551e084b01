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

// capC is what phase C measured, per task over all masters and per
// master.
type capC struct {
	n                                               int
	addrs                                           []string
	slots                                           []int
	create, pollWork, finish, pollFirst, pollRepeat capCount
	working                                         int // polled tasks that were still working
	memWork, memDone                                capMem
}

// phaseCRun is what phase C's steps share.
type phaseCRun struct {
	ctx    context.Context
	o      options
	e      *capEnv
	c      *capC
	ids    []string // the tasks, created on replica i%reps
	before memSnap  // the cluster before them
	t0     time.Time
}

// phaseC runs phase C on a cluster and replicas of its own, stopped at its
// end.
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
		"--task", "slow", "--max-inflight", strconv.Itoa(capClusterTasks+1000), "--max-inflight-per-principal", "0", "--max-task-rate", "0",
		"--lease", capClusterLease.String(), "--lease-renew", capClusterRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	c := &capC{n: capClusterTasks, addrs: addrs, slots: slotsOf(ctx, e.rcs[0].rdb, addrs)}
	p := &phaseCRun{ctx: ctx, o: o, e: e, c: c, ids: make([]string, c.n)}
	for _, step := range []func() error{p.warmUp, p.createAndPoll, p.finishAndPoll} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// replica is the URL of replica i, round robin.
func (p *phaseCRun) replica(i int) string { return p.e.urls[i%len(p.e.urls)] }

// auth is the owner of task i.
func (p *phaseCRun) auth(i int) string { return capAuth("cluster", i/capTasksPerOwner) }

// warmUp warms every replica at the check's concurrency (pools, scripts on
// every master), each task polled on another replica, then takes the
// memory snapshot the tasks are measured against.
func (p *phaseCRun) warmUp() error {
	ctx, e := p.ctx, p.e
	if _, err := parallel(ctx, p.o.concurrency, 4*p.o.concurrency, 0, func(ctx context.Context, i int) error {
		id, err := e.create2026(ctx, p.replica(i), "slow", capAuth("warm", i), map[string]any{"seconds": 0.01, "text": "x"})
		if err == nil {
			_, err = e.get2026(ctx, p.replica(i+1), id, capAuth("warm", i))
		}
		return err
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return err
	}
	var err error
	p.before, err = e.snapshot(ctx)
	return err
}

// createAndPoll counts the creates and one poll of each task while it
// works, on the next replica; then the memory of the working tasks.
func (p *phaseCRun) createAndPoll() error {
	ctx, e, c := p.ctx, p.e, p.c
	fmt.Fprintf(os.Stderr, "bench: capacity C: %d tasks over %d replicas and a %d-master cluster\n", c.n, len(e.urls), len(e.nodes))
	p.t0 = time.Now()
	var err error
	if c.create, err = e.counted(ctx, func() (int, error) {
		n, err := parallel(ctx, p.o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
			id, err := e.create2026(ctx, p.replica(i), "slow", p.auth(i), map[string]any{"seconds": capClusterHold, "text": "x"})
			p.ids[i] = id
			return err
		})
		if err != nil {
			return n, err
		}
		return n, e.waitMetric(ctx, mHeld, 30*time.Second, func(v float64) bool { return v >= float64(c.n) })
	}); err != nil {
		return fmt.Errorf("cluster create: %w", err)
	}
	var working atomic.Int64
	if c.pollWork, err = e.counted(ctx, func() (int, error) {
		return parallel(ctx, p.o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
			t, err := e.get2026(ctx, p.replica(i+1), p.ids[i], p.auth(i))
			if t.Status == "working" {
				working.Add(1)
			}
			return err
		})
	}); err != nil {
		return fmt.Errorf("cluster poll: %w", err)
	}
	c.working = int(working.Load())
	after, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	c.memWork = memDelta(c.n, p.before, after)
	return nil
}

// finishAndPoll counts the tasks finishing, then two polls of each on the
// third replica; then the memory they left.
func (p *phaseCRun) finishAndPoll() error {
	ctx, e, c := p.ctx, p.e, p.c
	if el := time.Since(p.t0); el > capClusterHold*time.Second {
		return fmt.Errorf("cluster check: creating, polling and counting took %s, longer than the tasks run (%ds): the machine is too slow for this check", el.Round(time.Second), capClusterHold)
	}
	fmt.Fprintf(os.Stderr, "bench: capacity C: waiting for the tasks to finish\n")
	var err error
	if c.finish, err = e.counted(ctx, func() (int, error) {
		return c.n, e.waitMetric(ctx, mLive, 2*time.Minute, func(v float64) bool { return v == 0 })
	}); err != nil {
		return fmt.Errorf("cluster finish: %w", err)
	}
	for k, cnt := range []*capCount{&c.pollFirst, &c.pollRepeat} {
		if *cnt, err = e.counted(ctx, func() (int, error) {
			return parallel(ctx, p.o.concurrency, c.n, 0, func(ctx context.Context, i int) error {
				t, err := e.get2026(ctx, p.replica(i+2), p.ids[i], p.auth(i))
				if err == nil && t.Status != "completed" {
					err = fmt.Errorf("task %s is %s after it finished", p.ids[i], t.Status)
				}
				return err
			})
		}); err != nil {
			return fmt.Errorf("cluster poll %d: %w", k+1, err)
		}
	}
	after, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	c.memDone = memDelta(c.n, p.before, after)
	return nil
}
