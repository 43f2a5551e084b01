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

// capA is what phase A measured.
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

// capEcho and capHeld are the arguments of an echo task (finishes at
// once) and of a held task (the slow tool, outliving the phase).
var (
	capEcho = map[string]any{"text": "hello"}
	capHeld = map[string]any{"seconds": capHoldSecs, "text": "x"}
)

// phaseARun is what phase A's steps share.
type phaseARun struct {
	ctx       context.Context
	o         options
	e         *capEnv
	a         *capA
	url, auth string
	nCreate   int       // held tasks per create-alone batch
	live      float64   // held tasks made so far: the others are done once the live gauge is back to it
	ids       []string  // the counted create+finish batch's tasks, completed
	memIDs    []string  // the memory batch's tasks, completed, not yet polled
	polls     []capPoll // the two polls, counted and timed alike
}

// capPoll is one kind of poll: its load, where its figures go.
type capPoll struct {
	req  request
	cnt  *capCount
	cpu  *capCPU
	what string
}

// phaseA runs phase A on processes of its own, stopped at its end.
func phaseA(ctx context.Context, o options, tg, tu, dir string) (*capA, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	// No lease renewal, sweep or latency sync during this phase: each is a
	// background cost of its own, measured in phase H.
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, true, 1,
		"--task", "echo", "--task", "slow", "--task", "elicit", "--max-inflight", "20000", "--max-inflight-per-principal", "0", "--max-task-rate", "0",
		"--lease", capClusterLease.String(), "--lease-renew", capClusterRenew.String(), "--latency-sync", capClusterRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	p := &phaseARun{ctx: ctx, o: o, e: e, a: &capA{}, url: e.urls[0], auth: modernAuth, nCreate: max(100, o.countReqs/2)}
	steps := []func() error{p.warmUp, p.countLife, p.countPolls, p.countRounds, p.memCompleted, p.memLarge, p.cpuRounds}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return p.a, nil
}

func (p *phaseARun) createEcho(ctx context.Context, i int) error {
	_, err := p.e.create2026(ctx, p.url, "echo", p.auth, capEcho)
	return err
}

func (p *phaseARun) createHeld(ctx context.Context, i int) error {
	_, err := p.e.create2026(ctx, p.url, "slow", p.auth, capHeld)
	return err
}

// settle waits until every task but the held ones is done.
func (p *phaseARun) settle() error {
	return p.e.waitMetric(p.ctx, mLive, time.Minute, func(v float64) bool { return v <= p.live })
}

// heldNow counts n more held tasks and waits until the workers hold them.
func (p *phaseARun) heldNow(n int) error {
	p.live += float64(n)
	return p.e.waitMetric(p.ctx, mHeld, time.Minute, func(v float64) bool { return v >= p.live })
}

// warmUp: scripts loaded, connections open at -concurrency, the catalogue
// and the latency histograms seen once.
func (p *phaseARun) warmUp() error {
	if _, err := parallel(p.ctx, p.o.concurrency, 4*p.o.concurrency, 0, p.createEcho); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for i := 0; i < 3; i++ {
		if err := p.e.inputRound(p.ctx, p.url, p.auth, fmt.Sprint("warm", i)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return p.settle()
}

// countLife counts, one operation at a time, create+finish, the first
// tasks/get of each completed task (nothing rendered yet) and create alone.
func (p *phaseARun) countLife() error {
	ctx, e, a := p.ctx, p.e, p.a
	fmt.Fprintf(os.Stderr, "bench: capacity A: counting commands: create+finish, polls, create alone, input rounds\n")
	var err error
	if a.life, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < p.o.countReqs; i++ {
			id, err := e.create2026(ctx, p.url, "echo", p.auth, capEcho)
			if err != nil {
				return i, err
			}
			p.ids = append(p.ids, id)
		}
		return len(p.ids), p.settle()
	}); err != nil {
		return fmt.Errorf("create+finish: %w", err)
	}
	t, err := e.get2026(ctx, p.url, p.ids[0], p.auth)
	if err != nil {
		return err
	}
	a.resultBytes = len(t.Result)
	if a.lifeFirst, err = e.counted(ctx, func() (int, error) {
		for i, id := range p.ids[1:] {
			if _, err := e.get2026(ctx, p.url, id, p.auth); err != nil {
				return i, err
			}
		}
		return len(p.ids) - 1, nil
	}); err != nil {
		return fmt.Errorf("first poll: %w", err)
	}
	if a.create, err = e.counted(ctx, func() (int, error) {
		for i := 0; i < p.nCreate; i++ {
			if err := p.createHeld(ctx, i); err != nil {
				return i, err
			}
		}
		return p.nCreate, p.heldNow(p.nCreate)
	}); err != nil {
		return fmt.Errorf("create alone: %w", err)
	}
	return nil
}

// countPolls counts the polls of completed tasks and of one held task,
// each warmed up at -concurrency first.
func (p *phaseARun) countPolls() error {
	ctx, e, a := p.ctx, p.e, p.a
	heldID, err := e.create2026(ctx, p.url, "slow", p.auth, capHeld)
	if err != nil {
		return err
	}
	if err := p.heldNow(1); err != nil {
		return err
	}
	done := pollLoad(p.ids[:min(p.o.tasks, len(p.ids))], p.auth, `"status":"completed"`)
	work := pollLoad([]string{heldID}, p.auth, `"status":"working"`)
	p.polls = []capPoll{{done, &a.pollDone, &a.pollDoneCPU, "poll of a completed task"}, {work, &a.pollWork, &a.pollWorkCPU, "poll of a working task"}}
	for _, q := range p.polls {
		if r := load(ctx, e.c, p.url, q.req, p.o.concurrency, 500*time.Millisecond, 0); r.requests == 0 || r.errors > 0 {
			return fmt.Errorf("%s: warm-up: %d answers, %d errors: %s", q.what, r.requests, r.errors, firstErrText())
		}
		if *q.cnt, err = e.counted(ctx, func() (int, error) {
			r := load(ctx, e.c, p.url, q.req, 1, time.Minute, p.o.countReqs)
			return r.requests, errIf(r)
		}); err != nil {
			return fmt.Errorf("%s: %w", q.what, err)
		}
	}
	return nil
}

// countRounds counts input rounds, then takes the census of the one owner
// that has made thousands of tasks by now: its indexes as they look after
// a while (a large sorted set leaves the compact encoding).
func (p *phaseARun) countRounds() error {
	rounds := max(20, p.o.countReqs/10)
	var err error
	if p.a.round, err = p.e.counted(p.ctx, func() (int, error) {
		for i := 0; i < rounds; i++ {
			if err := p.e.inputRound(p.ctx, p.url, p.auth, fmt.Sprint("c", i)); err != nil {
				return i, err
			}
		}
		return rounds, p.settle()
	}); err != nil {
		return fmt.Errorf("input round: %w", err)
	}
	cs, err := p.e.takeCensus(p.ctx)
	if err != nil {
		return err
	}
	p.a.oneOwner = cs[0]
	return nil
}

// memAuth is the owner of the memory batch's task i.
func memAuth(i int) string { return capAuth("mem", i/capTasksPerOwner) }

// memCompleted: Redis bytes per completed task, many owners, at
// -concurrency.
func (p *phaseARun) memCompleted() error {
	ctx, e := p.ctx, p.e
	fmt.Fprintf(os.Stderr, "bench: capacity A: Redis memory: %d echo tasks at c=%d, %d per owner\n", capClusterTasks, p.o.concurrency, capTasksPerOwner)
	before, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	p.memIDs = make([]string, capClusterTasks)
	if _, err := parallel(ctx, p.o.concurrency, capClusterTasks, 0, func(ctx context.Context, i int) error {
		var err error
		p.memIDs[i], err = e.create2026(ctx, p.url, "echo", memAuth(i), capEcho)
		return err
	}); err != nil {
		return fmt.Errorf("memory batch: %w", err)
	}
	if err := p.settle(); err != nil {
		return err
	}
	after, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	p.a.mem = memDelta(capClusterTasks, before, after)
	return nil
}

// memLarge is memCompleted with a larger result: what each result byte
// costs.
func (p *phaseARun) memLarge() error {
	ctx, e, a := p.ctx, p.e, p.a
	bigText := map[string]any{"text": strings.Repeat("x", capBigText)}
	a.big.n = capBigTasks
	var err error
	if a.big.before, err = e.usedMemory(ctx); err != nil {
		return err
	}
	bigID := make([]string, capBigTasks)
	if _, err := parallel(ctx, p.o.concurrency, capBigTasks, 0, func(ctx context.Context, i int) error {
		var err error
		bigID[i], err = e.create2026(ctx, p.url, "echo", capAuth("big", i/capTasksPerOwner), bigText)
		return err
	}); err != nil {
		return fmt.Errorf("large results: %w", err)
	}
	if err := p.settle(); err != nil {
		return err
	}
	if a.big.after, err = e.usedMemory(ctx); err != nil {
		return err
	}
	t, err := e.get2026(ctx, p.url, bigID[0], capAuth("big", 0))
	if err != nil {
		return err
	}
	a.bigResultBytes = len(t.Result)
	return nil
}

// cpuRounds: CPU, slow log off: every operation once per round, the rounds
// interleaved so that what else the machine runs hits them alike.
func (p *phaseARun) cpuRounds() error {
	fmt.Fprintf(os.Stderr, "bench: capacity A: CPU, %d rounds at c=%d\n", capCPURounds, p.o.concurrency)
	for r := 0; r < capCPURounds; r++ {
		if err := p.cpuCreates(r); err != nil {
			return err
		}
		if err := p.cpuPolls(r); err != nil {
			return err
		}
	}
	return nil
}

// cpuNLife is how many echo tasks one CPU round creates: a third of the
// memory batch, whose tasks the same round polls for the first time.
const cpuNLife = capClusterTasks / capCPURounds

// cpuCreates times round r's create+finish and create alone.
func (p *phaseARun) cpuCreates(r int) error {
	ctx, e, c := p.ctx, p.e, p.o.concurrency
	b, err := e.cpuBatch(func() (int, error) {
		n, err := parallel(ctx, c, cpuNLife, 0, func(ctx context.Context, i int) error {
			_, err := e.create2026(ctx, p.url, "echo", capAuth(fmt.Sprint("cpu", r), i/capTasksPerOwner), capEcho)
			return err
		})
		if err != nil {
			return n, err
		}
		return n, p.settle()
	})
	if err != nil {
		return fmt.Errorf("create+finish at c=%d: %w", c, err)
	}
	p.a.lifeCPU.add(b)
	if b, err = e.cpuBatch(func() (int, error) {
		if n, err := parallel(ctx, c, p.nCreate, 0, p.createHeld); err != nil {
			return n, err
		}
		return p.nCreate, p.heldNow(p.nCreate)
	}); err != nil {
		return fmt.Errorf("create alone at c=%d: %w", c, err)
	}
	p.a.createCPU.add(b)
	return nil
}

// cpuPolls times round r's two polls, input rounds, and first polls of a
// third of the memory batch's completed tasks.
func (p *phaseARun) cpuPolls(r int) error {
	ctx, e, c := p.ctx, p.e, p.o.concurrency
	for _, q := range p.polls {
		b, err := e.cpuBatch(func() (int, error) {
			r := load(ctx, e.c, p.url, q.req, c, capCPUBatch, 0)
			return r.requests, errIf(r)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", q.what, err)
		}
		q.cpu.add(b)
	}
	b, err := e.cpuBatch(func() (int, error) {
		n, err := parallel(ctx, capPollConc, 0, capCPUBatch, func(ctx context.Context, i int) error {
			return e.inputRound(ctx, p.url, p.auth, fmt.Sprint("p", r, "-", i))
		})
		if err != nil {
			return n, err
		}
		return n, p.settle()
	})
	if err != nil {
		return fmt.Errorf("input round: %w", err)
	}
	p.a.roundCPU.add(b)
	part := p.memIDs[r*cpuNLife : (r+1)*cpuNLife]
	if b, err = e.cpuBatch(func() (int, error) {
		return parallel(ctx, c, len(part), 0, func(ctx context.Context, i int) error {
			t, err := e.get2026(ctx, p.url, part[i], memAuth(r*cpuNLife+i))
			if err == nil && t.Status != "completed" {
				err = fmt.Errorf("task %s is %s", part[i], t.Status)
			}
			return err
		})
	}); err != nil {
		return fmt.Errorf("first poll at c=%d: %w", c, err)
	}
	p.a.firstCPU.add(b)
	return nil
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
