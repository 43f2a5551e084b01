package main

// Capacity phase H: held tasks on one replica with a short --lease-renew.
// The idle replica's background, then lease renewals and sweeps per held
// task, Redis bytes and taskgate RSS per held task, upstream connections.

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"strconv"
	"time"
)

// capH is what phase H measured, and the renewal window split into
// renewals and sweeps (splitRenewal).
type capH struct {
	held                int
	idle, renew         capCount
	idleWin, renewWin   time.Duration
	renewCPU            capCPU
	mem                 capMem
	createdIn           time.Duration
	rssBefore, rssAfter int64
	upConns             int // taskgate's established connections to the upstream, tasks held
	rssMax              int64
	leasesCard          int64   // leases index entries after the windows
	leasesDue           int64   // of which a sweep would read (score past now − grace)
	leasesLead          float64 // the lowest score − now, seconds
	lease, renewEvery   time.Duration
	// The renewal window split: the most frequent command is the renewal
	// script (one per held task per renewal), plus one ZADD XX per renewal
	// re-scoring the index; the sweeps are the ZRANGEBYSCORE calls and what
	// follows them.
	extendLabel string
	extendPer   float64 // renewal script calls per held task per renewal
	zaddPer     float64 // ZADD XX per renewal (one replica)
	rescoredPer float64 // entries they named, per held task per renewal
	usPerEntry  float64 // ZADD XX execution time (slow log) per entry named, µs
	sweeps      int     // ZRANGEBYSCORE calls in the window
	sweepPage   int     // their LIMIT count
	sweepReads  float64 // HMGET per sweep: candidates read
	sweepTidy   float64 // tidy script calls per sweep
	sweepCmds   float64 // every command per sweep, idle background taken out
	sweepLeases float64 // of which on the leases index
	sweepUS     float64 // their execution time (slow log), µs
}

// phaseHRun is what phase H's steps share.
type phaseHRun struct {
	ctx     context.Context
	e       *capEnv
	h       *capH
	defs    tgDefaults
	url     string
	pid     int       // the replica's
	created time.Time // when every held task was held
	after   memSnap   // with the tasks held
}

// capHeldConc is the concurrency phase H creates its held tasks at.
const capHeldConc = 32

// phaseH runs phase H on processes of its own; taskgate is killed at its
// end with the tasks still held.
func phaseH(ctx context.Context, o options, defs tgDefaults, tg, tu, dir string) (*capH, error) {
	h := &capH{held: capHeldDefault, lease: capHeldLease, renewEvery: capHeldRenew}
	if o.set["held"] {
		h.held = o.held
	}
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	e, err := startCapEnv(tg, tu, []*redisServer{rs}, "redis://"+rs.addr, true, 1,
		"--task", "slow", "--max-inflight", strconv.Itoa(h.held+1000), "--max-inflight-per-principal", "0", "--max-task-rate", "0",
		"--lease", capHeldLease.String(), "--lease-renew", capHeldRenew.String(), "--latency-sync", capHeldRenew.String())
	defer e.stop()
	if err != nil {
		return nil, err
	}
	p := &phaseHRun{ctx: ctx, e: e, h: h, defs: defs, url: e.urls[0], pid: e.tgPIDs[0]}
	for _, step := range []func() error{p.idleWindow, p.holdTasks, p.renewalWindows, p.readLeases} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	h.splitRenewal()
	return h, nil
}

// idleWindow warms up at the creation concurrency, so that connection
// pools and their buffers are in the baseline, then counts what an idle
// replica sends.
func (p *phaseHRun) idleWindow() error {
	ctx, e, h := p.ctx, p.e, p.h
	if _, err := parallel(ctx, capHeldConc, 4*capHeldConc, 0, func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, p.url, "slow", capAuth("warm", i/capTasksPerOwner), map[string]any{"seconds": 0.01, "text": "x"})
		return err
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := e.waitIdle(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: capacity H: idle window %s\n", capWindow)
	var err error
	if h.idle, err = e.counted(ctx, func() (int, error) {
		return 0, pause(ctx, capWindow)
	}); err != nil {
		return err
	}
	h.idleWin = h.idle.el
	return nil
}

// holdTasks creates the held tasks and measures what they hold: Redis
// memory, taskgate's RSS, its connections to the upstream.
func (p *phaseHRun) holdTasks() error {
	ctx, e, h := p.ctx, p.e, p.h
	var err error
	if h.rssBefore, err = stableRSS(ctx, p.pid, 5*time.Second); err != nil {
		return err
	}
	before, err := e.snapshot(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: capacity H: creating %d held tasks at c=%d\n", h.held, capHeldConc)
	t0 := time.Now()
	if _, err := parallel(ctx, capHeldConc, h.held, 0, func(ctx context.Context, i int) error {
		_, err := e.create2026(ctx, p.url, "slow", capAuth("held", i/capTasksPerOwner), capHeld)
		return err
	}); err != nil {
		return fmt.Errorf("held tasks: %w", err)
	}
	if err := e.waitMetric(ctx, mHeld, 30*time.Second, func(v float64) bool { return v >= float64(h.held) }); err != nil {
		return err
	}
	h.createdIn = time.Since(t0)
	p.created = time.Now()
	if u, err := neturl.Parse(e.up); err == nil {
		port, _ := strconv.Atoi(u.Port())
		h.upConns = connsTo(p.pid, port)
	}
	if h.rssAfter, err = stableRSS(ctx, p.pid, 10*time.Second); err != nil {
		return err
	}
	h.rssMax = h.rssAfter
	if p.after, err = e.snapshot(ctx); err != nil {
		return err
	}
	h.mem = memDelta(h.held, before, p.after)
	return nil
}

// watch keeps the largest RSS of taskgate seen over d.
func (p *phaseHRun) watch(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end) && p.ctx.Err() == nil; {
		time.Sleep(250 * time.Millisecond)
		if r, err := rssKiB(p.pid); err == nil {
			p.h.rssMax = max(p.h.rssMax, r)
		}
	}
}

// renewalWindows counts, then times, two windows of the steady state:
// every held task renewed at least twice (its index entry re-scored by
// the renewals), and past its first lease + grace.
func (p *phaseHRun) renewalWindows() error {
	h := p.h
	p.watch(time.Until(p.created.Add(capHeldLease + p.defs.grace + capHeldRenew)))
	fmt.Fprintf(os.Stderr, "bench: capacity H: renewal windows, 2 × %s\n", capWindow)
	var err error
	if h.renew, err = p.e.counted(p.ctx, func() (int, error) { p.watch(capWindow); return 0, p.ctx.Err() }); err != nil {
		return err
	}
	h.renewWin = h.renew.el
	if h.renewCPU, err = p.e.cpuBatch(func() (int, error) { p.watch(capWindow); return 0, p.ctx.Err() }); err != nil {
		return err
	}
	return nil
}

// readLeases reads the leases index after the windows, and checks that
// every task is still held.
func (p *phaseHRun) readLeases() error {
	ctx, h := p.ctx, p.h
	if name, _ := p.after.keys[0].role("leases"); name != "" {
		rdb, now := p.e.rcs[0].rdb, time.Now()
		h.leasesCard, _ = rdb.ZCard(ctx, name).Result()
		h.leasesDue, _ = rdb.ZCount(ctx, name, "-inf", strconv.FormatInt(now.Add(-p.defs.grace).UnixMilli(), 10)).Result()
		if z, err := rdb.ZRangeWithScores(ctx, name, 0, 0).Result(); err == nil && len(z) > 0 {
			h.leasesLead = (z[0].Score - float64(now.UnixMilli())) / 1e3
		}
	}
	if live, err := p.e.metricSum(ctx, mHeld); err != nil || live != float64(h.held) {
		return fmt.Errorf("held tasks: %g held at the end of the windows, want %d (%v)", live, h.held, err)
	}
	return nil
}

// splitRenewal splits the renewal window into the renewals (the most
// frequent command, the renewal script, and one ZADD XX per renewal) and
// the sweeps (the ZRANGEBYSCORE calls and what follows them), the idle
// background taken out.
func (h *capH) splitRenewal() {
	periods := h.renewWin.Seconds() / h.renewEvery.Seconds()
	top := h.renew.t.top
	for k, v := range top {
		if h.extendLabel == "" || v > top[h.extendLabel] {
			h.extendLabel = k
		}
	}
	h.extendPer = float64(top[h.extendLabel]) / (float64(h.held) * periods)
	zadd := h.renew.leases["ZADD XX"]
	h.zaddPer = float64(zadd) / periods
	h.rescoredPer = float64(h.renew.rescored) / (float64(h.held) * periods)
	h.usPerEntry = float64(h.renew.leasesUS["ZADD XX"]) / float64(max(h.renew.rescored, 1))
	h.sweeps = top["ZRANGEBYSCORE"]
	h.sweepPage = max(h.idle.limit, h.renew.limit)
	if h.sweeps == 0 {
		return
	}
	sw := float64(h.sweeps)
	idle := float64(h.idle.t.topTotal()) / h.idleWin.Seconds() * h.renewWin.Seconds()
	idleSweeps := float64(h.idle.t.top["ZRANGEBYSCORE"]) / h.idleWin.Seconds() * h.renewWin.Seconds()
	h.sweepReads = float64(top["HMGET"]) / sw
	h.sweepTidy = float64(h.renew.leases["EVALSHA"]) / sw
	// What is not renewal and not background, plus the sweep's own
	// ZRANGEBYSCORE (which the background also counts).
	h.sweepCmds = (float64(h.renew.t.topTotal()-top[h.extendLabel]-zadd) - idle + idleSweeps) / sw
	n, us := h.renew.leasesTotal()
	h.sweepLeases = float64(n-zadd) / sw
	h.sweepUS = float64(us-h.renew.leasesUS["ZADD XX"]) / sw
}
