package main

// Capacity phase A: 2026-07-28 operations (stateless upstream, one
// replica, one redis-server, no renewal, sweep or latency sync): the
// commands and CPU of create alone, create+finish, polls of a working and
// of a completed task and an input round; Redis bytes per completed task.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

type capA struct {
	life, lifeFirst, pollWork, pollDone, round, create capCount // counted batches
	lifeCPU, pollWorkCPU, pollDoneCPU, roundCPU        capCPU
	createCPU, firstCPU                                capCPU
	mem                                                capMem // completed tasks, capTasksPerOwner per owner
	oneOwner                                           census // every key, one owner with thousands of tasks
	resultBytes                                        int    // the echo result as tasks/get inlines it
	big                                                capMem // completed tasks with a capBigText-byte echo
	bigResultBytes                                     int
}

func phaseA(ctx context.Context, o options, tg, tu, dir string) (*capA, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	// No lease renewal, sweep or latency sync during this phase: each is a
	// background cost of its own, measured in phase H.
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, true, 1,
		"--task", "echo", "--task", "slow", "--task", "elicit", "--max-inflight", "20000",
		"--lease", capClusterLease.String(), "--lease-renew", capClusterRenew.String(), "--latency-sync", capClusterRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	a := &capA{}
	url := e.urls[0]
	auth := modernAuth
	echo := map[string]any{"text": "hello"}
	held := map[string]any{"seconds": capHoldSecs, "text": "x"}
	createEcho := func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, url, "echo", auth, echo)
		return err
	}
	createHeld := func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, url, "slow", auth, held)
		return err
	}
	// live is how many held tasks this phase has made so far: the others
	// are done once the live gauge is back to it.
	var live float64
	settle := func() error {
		return e.waitMetric(ctx, mLive, time.Minute, func(v float64) bool { return v <= live })
	}
	heldNow := func(n int) error {
		live += float64(n)
		return e.waitMetric(ctx, mHeld, time.Minute, func(v float64) bool { return v >= live })
	}
	// Warm up: scripts loaded, connections open at -concurrency, the
	// catalogue and the latency histograms seen once.
	if _, err := parallel(ctx, o.concurrency, 4*o.concurrency, 0, createEcho); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	for i := 0; i < 3; i++ {
		if err := e.inputRound(ctx, url, auth, fmt.Sprint("warm", i)); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := settle(); err != nil {
		return nil, err
	}

	// Counted batches, one operation at a time.
	fmt.Fprintf(os.Stderr, "bench: capacity A: counting commands: create+finish, polls, create alone, input rounds\n")
	var ids []string
	if a.life, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < o.countReqs; i++ {
			id, err := e.create2026(ctx, url, "echo", auth, echo)
			if err != nil {
				return i, err
			}
			ids = append(ids, id)
		}
		return len(ids), settle()
	}); err != nil {
		return nil, fmt.Errorf("create+finish: %w", err)
	}
	t, err := e.get2026(ctx, url, ids[0], auth)
	if err != nil {
		return nil, err
	}
	a.resultBytes = len(t.Result)
	// The first tasks/get of each completed task (nothing rendered yet).
	if a.lifeFirst, err = e.counted(ctx, func() (int, error) {
		for i, id := range ids[1:] {
			if _, err := e.get2026(ctx, url, id, auth); err != nil {
				return i, err
			}
		}
		return len(ids) - 1, nil
	}); err != nil {
		return nil, fmt.Errorf("first poll: %w", err)
	}
	nCreate := max(100, o.countReqs/2)
	if a.create, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < nCreate; i++ {
			if err := createHeld(ctx, i); err != nil {
				return i, err
			}
		}
		return nCreate, heldNow(nCreate)
	}); err != nil {
		return nil, fmt.Errorf("create alone: %w", err)
	}
	heldID, err := e.create2026(ctx, url, "slow", auth, held)
	if err != nil {
		return nil, err
	}
	if err := heldNow(1); err != nil {
		return nil, err
	}
	done := pollLoad(ids[:min(o.tasks, len(ids))], auth, `"status":"completed"`)
	work := pollLoad([]string{heldID}, auth, `"status":"working"`)
	polls := []struct {
		req  request
		cnt  *capCount
		cpu  *capCPU
		what string
	}{{done, &a.pollDone, &a.pollDoneCPU, "poll of a completed task"}, {work, &a.pollWork, &a.pollWorkCPU, "poll of a working task"}}
	for _, p := range polls {
		if r := load(ctx, e.c, url, p.req, o.concurrency, 500*time.Millisecond, 0); r.requests == 0 || r.errors > 0 {
			return nil, fmt.Errorf("%s: warm-up: %d answers, %d errors: %s", p.what, r.requests, r.errors, firstErrText())
		}
		if *p.cnt, err = e.counted(ctx, func() (int, error) {
			r := load(ctx, e.c, url, p.req, 1, time.Minute, o.countReqs)
			return r.requests, errIf(r)
		}); err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, err)
		}
	}
	rounds := max(20, o.countReqs/10)
	if a.round, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < rounds; i++ {
			if err := e.inputRound(ctx, url, auth, fmt.Sprint("c", i)); err != nil {
				return i, err
			}
		}
		return rounds, settle()
	}); err != nil {
		return nil, fmt.Errorf("input round: %w", err)
	}
	// One owner with thousands of tasks: its indexes as they look after a
	// while (a large sorted set leaves the compact encoding).
	cs, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	a.oneOwner = cs[0]

	// Redis bytes per completed task: many owners, at -concurrency.
	fmt.Fprintf(os.Stderr, "bench: capacity A: Redis memory: %d echo tasks at c=%d, %d per owner\n", capClusterTasks, o.concurrency, capTasksPerOwner)
	a.mem.n = capClusterTasks
	if a.mem.before, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	before, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	memIDs := make([]string, capClusterTasks)
	memAuth := func(i int) string { return capAuth("mem", i/capTasksPerOwner) }
	if _, err := parallel(ctx, o.concurrency, capClusterTasks, 0, func(ctx context.Context, i int) error {
		var err error
		memIDs[i], err = e.create2026(ctx, url, "echo", memAuth(i), echo)
		return err
	}); err != nil {
		return nil, fmt.Errorf("memory batch: %w", err)
	}
	if err := settle(); err != nil {
		return nil, err
	}
	if a.mem.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	after, err := e.takeCensus(ctx)
	if err != nil {
		return nil, err
	}
	a.mem.delta = after[0].minus(before[0])

	// The same with a larger result: what each result byte costs.
	bigText := map[string]any{"text": strings.Repeat("x", capBigText)}
	a.big.n = capBigTasks
	if a.big.before, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	bigID := make([]string, capBigTasks)
	if _, err := parallel(ctx, o.concurrency, capBigTasks, 0, func(ctx context.Context, i int) error {
		var err error
		bigID[i], err = e.create2026(ctx, url, "echo", capAuth("big", i/capTasksPerOwner), bigText)
		return err
	}); err != nil {
		return nil, fmt.Errorf("large results: %w", err)
	}
	if err := settle(); err != nil {
		return nil, err
	}
	if a.big.after, err = e.usedMemory(ctx); err != nil {
		return nil, err
	}
	if t, err = e.get2026(ctx, url, bigID[0], capAuth("big", 0)); err != nil {
		return nil, err
	}
	a.bigResultBytes = len(t.Result)

	// CPU, slow log off: every operation once per round, the rounds
	// interleaved so that what else the machine runs hits them alike.
	fmt.Fprintf(os.Stderr, "bench: capacity A: CPU, %d rounds at c=%d\n", capCPURounds, o.concurrency)
	nLife := capClusterTasks / capCPURounds
	for r := 0; r < capCPURounds; r++ {
		c, err := e.cpuBatch(func() (int, error) {
			n, err := parallel(ctx, o.concurrency, nLife, 0, func(ctx context.Context, i int) error {
				_, err := e.create2026(ctx, url, "echo", capAuth(fmt.Sprint("cpu", r), i/capTasksPerOwner), echo)
				return err
			})
			if err != nil {
				return n, err
			}
			return n, settle()
		})
		if err != nil {
			return nil, fmt.Errorf("create+finish at c=%d: %w", o.concurrency, err)
		}
		a.lifeCPU.add(c)
		if c, err = e.cpuBatch(func() (int, error) {
			if n, err := parallel(ctx, o.concurrency, nCreate, 0, createHeld); err != nil {
				return n, err
			}
			return nCreate, heldNow(nCreate)
		}); err != nil {
			return nil, fmt.Errorf("create alone at c=%d: %w", o.concurrency, err)
		}
		a.createCPU.add(c)
		for _, p := range polls {
			if c, err = e.cpuBatch(func() (int, error) {
				r := load(ctx, e.c, url, p.req, o.concurrency, capCPUBatch, 0)
				return r.requests, errIf(r)
			}); err != nil {
				return nil, fmt.Errorf("%s: %w", p.what, err)
			}
			p.cpu.add(c)
		}
		if c, err = e.cpuBatch(func() (int, error) {
			n, err := parallel(ctx, capPollConc, 0, capCPUBatch, func(ctx context.Context, i int) error {
				return e.inputRound(ctx, url, auth, fmt.Sprint("p", r, "-", i))
			})
			if err != nil {
				return n, err
			}
			return n, settle()
		}); err != nil {
			return nil, fmt.Errorf("input round: %w", err)
		}
		a.roundCPU.add(c)
		// The first tasks/get of completed tasks: a third of the memory
		// batch's each round.
		part := memIDs[r*nLife : (r+1)*nLife]
		if c, err = e.cpuBatch(func() (int, error) {
			return parallel(ctx, o.concurrency, len(part), 0, func(ctx context.Context, i int) error {
				t, err := e.get2026(ctx, url, part[i], memAuth(r*nLife+i))
				if err == nil && t.Status != "completed" {
					err = fmt.Errorf("task %s is %s", part[i], t.Status)
				}
				return err
			})
		}); err != nil {
			return nil, fmt.Errorf("first poll at c=%d: %w", o.concurrency, err)
		}
		a.firstCPU.add(c)
	}
	return a, nil
}

// inputRound is one elicit task: create, wait (reading Redis directly)
// until it asks, read the request with one tasks/get, answer it with
// tasks/update, wait until the worker finished.
func (e *capEnv) inputRound(ctx context.Context, url, auth, name string) error {
	id, err := e.create2026(ctx, url, "elicit", auth, map[string]any{})
	if err != nil {
		return err
	}
	if err := e.waitStatus(ctx, auth, id, "input_required"); err != nil {
		return err
	}
	t, err := e.get2026(ctx, url, id, auth)
	if err != nil {
		return err
	}
	if t.Status != "input_required" || len(t.InputRequests) != 1 {
		return fmt.Errorf("elicit task %s: %s with %d input requests", id, t.Status, len(t.InputRequests))
	}
	for key := range t.InputRequests {
		res, err := e.call2026(ctx, url, "tasks/update", id, auth, map[string]any{
			"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}},
		})
		if err != nil {
			return err
		}
		if !strings.Contains(string(res), `"resultType":"complete"`) {
			return fmt.Errorf("tasks/update: %.300s", res)
		}
	}
	return e.waitStatus(ctx, auth, id, "completed")
}
