package main

// -mode console: what the console's records (the operator's index and the
// tasks' timelines, kept by the task store's scripts) cost through the
// gateway. The same taskgate build runs twice, with --console-records on
// and off (what auto, the default, does without a console in the fleet), each on its own redis-server, behind one test
// upstream; CreateTaskResult latency at c=1 and tasks/get latency and
// throughput are measured interleaved in rounds, and each is judged as
// a ratio of on to off. BENCH_CONSOLE_BASELINE_BIN adds a third target, a
// taskgate binary built elsewhere (say, of the commit before a change),
// run with its defaults.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

type consoleTarget struct {
	name    string
	url     string
	tgPID   int
	redis   *redisServer
	create  request
	get     request
	lat     map[string]*result // by op: create, get
	thr     *result            // tasks/get at -concurrency
	cpuRds  map[string]time.Duration
	cpuTG   map[string]time.Duration
	created int
}

func consoleBench(o options) error {
	shortDefaults(&o)
	unlessGiven(&o, "create-requests", &o.createReqs, 500)
	if o.tasks < 1 || o.createReqs < 1 || o.concurrency < 1 || o.rounds < 1 {
		return errors.New("-tasks, -create-requests, -concurrency and -rounds must be positive")
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx, dir, tg, tu := run.ctx, run.dir, run.tg, run.tu
	var ps procs
	defer ps.stopAll()
	upAddr, _ := freeAddr()
	if err := ps.start(tu, "--listen", upAddr); err != nil {
		return err
	}
	upURL := "http://" + upAddr + "/mcp"
	type spec struct {
		name, bin string
		args      []string
	}
	specs := []spec{{"records on", tg, []string{"--console-records=on"}}, {"records off", tg, []string{"--console-records=off"}}}
	if alt := os.Getenv("BENCH_CONSOLE_BASELINE_BIN"); alt != "" {
		specs = append(specs, spec{"baseline build", alt, nil})
	}
	var targets []*consoleTarget
	for _, s := range specs {
		rs, err := startRedis(dir)
		if err != nil {
			return err
		}
		defer rs.stop()
		addr, _ := freeAddr()
		args := append([]string{"serve", "--listen", addr, "--upstream", upURL, "--redis-url", "redis://" + rs.addr,
			"--task", "echo", "--max-tasks-per-owner", "-1", "--log-level", "warn"}, pollArgs(s.bin)...)
		if err := ps.start(s.bin, append(args, s.args...)...); err != nil {
			return err
		}
		targets = append(targets, &consoleTarget{name: s.name, url: "http://" + addr + "/mcp", tgPID: ps[len(ps)-1].Process.Pid, redis: rs,
			lat: map[string]*result{"create": {}, "get": {}}, thr: &result{}, cpuRds: map[string]time.Duration{}, cpuTG: map[string]time.Duration{}})
	}
	for _, a := range append([]string{upAddr}, func() (out []string) {
		for _, t := range targets {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(t.url, "http://"), "/mcp"))
		}
		return
	}()...) {
		if err := waitTCP(a); err != nil {
			return err
		}
	}
	c := newClient(o.concurrency)
	for _, t := range targets {
		if t.create, t.get, err = warmTaskRequests(ctx, c, t.name, t.url, o.tasks, o.concurrency); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: console: %d targets, %d rounds\n", len(targets), o.rounds)
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		xs := roundOrder(targets, round)
		for _, t := range xs {
			r0, g0 := cpuTime(t.redis.cmd.Process.Pid), cpuTime(t.tgPID)
			r := load(ctx, c, t.url, t.create, 1, o.duration, o.createReqs)
			drain(ctx, c, op{opCreate, t.name, t.url, t.create})
			t.cpuRds["create"] += cpuTime(t.redis.cmd.Process.Pid) - r0
			t.cpuTG["create"] += cpuTime(t.tgPID) - g0
			t.created += r.requests
			t.lat["create"].merge(r)
		}
		for _, t := range xs {
			t.lat["get"].merge(load(ctx, c, t.url, t.get, 1, o.duration, o.latencyReqs))
		}
		for _, t := range xs {
			r0 := cpuTime(t.redis.cmd.Process.Pid)
			g := load(ctx, c, t.url, t.get, o.concurrency, o.duration, 0)
			t.cpuRds["get"] += cpuTime(t.redis.cmd.Process.Pid) - r0
			t.thr.merge(g)
		}
		fmt.Fprintf(os.Stderr, "bench: console: round %d/%d done\n", round+1, o.rounds)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, t := range targets {
		if e := t.lat["create"].errors + t.lat["get"].errors + t.thr.errors; e > 0 {
			return fmt.Errorf("%s: %d errors under load", t.name, e)
		}
	}
	return emit(consoleReport(o, targets, run.load0))
}

func consoleReport(o options, ts []*consoleTarget, load0 string) string {
	var b strings.Builder
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }
	fmt.Fprintf(&b, "## The console's records through the gateway\n\n")
	fmt.Fprintf(&b, "taskgate with `--console-records on` (the operator's index and the tasks' timelines in the task scripts) and `off` (what the default, `auto`, does while no replica serves a console), each on its own redis-server, one test upstream, a 2025-11-25 session; %d rounds, interleaved, order alternating. Load average %s at start, %s at end.\n\n",
		o.rounds, load0, loadAvg())
	fmt.Fprintf(&b, "| target | create p50 (c=1) | create p99 | redis-server CPU per create | taskgate CPU per create | tasks/get p50 (c=1) | tasks/get req/s (c=%d) |\n|---|---|---|---|---|---|---|\n", o.concurrency)
	for _, t := range ts {
		per := func(d time.Duration) string {
			if t.created == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1000/float64(t.created))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.0f |\n", t.name, ms(t.lat["create"].pct(.5)), ms(t.lat["create"].pct(.99)),
			per(t.cpuRds["create"]), per(t.cpuTG["create"]), ms(t.lat["get"].pct(.5)), t.thr.rps())
	}
	on, off := ts[0], ts[1]
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.3f×", float64(a)/float64(b)) }
	fmt.Fprintf(&b, "\nOn / off: create p50 **%s**, tasks/get p50 **%s**, tasks/get throughput **%.3f×**, redis-server CPU per create **%.2f×**.\n",
		ratio(on.lat["create"].pct(.5), off.lat["create"].pct(.5)), ratio(on.lat["get"].pct(.5), off.lat["get"].pct(.5)),
		on.thr.rps()/off.thr.rps(), (float64(on.cpuRds["create"])/float64(max(on.created, 1)))/(float64(off.cpuRds["create"])/float64(max(off.created, 1))))
	if len(ts) > 2 {
		base := ts[2]
		fmt.Fprintf(&b, "On / baseline build: create p50 **%s**, tasks/get p50 **%s**, tasks/get throughput **%.3f×**.\n",
			ratio(on.lat["create"].pct(.5), base.lat["create"].pct(.5)), ratio(on.lat["get"].pct(.5), base.lat["get"].pct(.5)), on.thr.rps()/base.thr.rps())
	}
	fmt.Fprintf(&b, "\nRerun: `%s`\n", reproduce(o, "console", "rounds", "duration", "concurrency", "create-requests", "latency-requests"))
	return b.String()
}
