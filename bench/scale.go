package main

// -mode scale: the scale figures, on real processes over loopback:
//
//  1. memory per held task: one taskgate (--task slow, --max-inflight
//     20000) in front of a stateless (2026-07-28) upstream on its own
//     redis-server; VmRSS of taskgate (and of the upstream, for context)
//     before and after -held concurrent slow calls are created as tasks and
//     held (each is one upstream POST the gateway keeps open). Target ≤ 24
//     KiB of taskgate RSS per held task.
//  2. tasks/get throughput, 1 replica vs 3 replicas on one redis-server (a
//     fresh one): the same c=-concurrency load on completed tasks against
//     replica 1 only, then round-robin (client side) over the three.
//     Target ≥ 2.5× when the machine has the cores for it.
//
// The two phases use separate redis-servers and processes, so the held
// tasks of (1) (working, leases renewed) cannot touch the figures of (2).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	scaleHoldSecs   = 120 // the slow tool's sleep in the memory phase: longer than the phase
	scaleCreateConc = 64  // concurrent creators in the memory phase
)

// raiseNofile lifts this process's RLIMIT_NOFILE soft limit to the hard
// limit; processes started afterwards inherit it (an explicit Setrlimit
// also stops os/exec from restoring the original soft limit in children).
func raiseNofile() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	r.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return r.Cur, nil
}

// rssKiB is VmRSS of pid in KiB, from /proc/PID/status.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// stableRSS samples pid's RSS every 500 ms until two consecutive samples
// differ by under 1% (at most limit), and returns the last sample.
func stableRSS(ctx context.Context, pid int, limit time.Duration) (int64, error) {
	prev, err := rssKiB(pid)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return prev, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		cur, err := rssKiB(pid)
		if err != nil {
			return 0, err
		}
		d := cur - prev
		if d < 0 {
			d = -d
		}
		if float64(d) < 0.01*float64(cur) {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}

type scaleMem struct {
	env                     []string // taskgate's extra environment (a GC knob), nil for defaults
	profiles                []string // files written with -pprof
	goroutines              int      // taskgate's goroutines with the tasks held (-pprof only)
	held, created, failed   int
	createdIn               time.Duration
	tgBefore, tgAfter       int64
	tgMax, tgEnd            int64         // largest and last RSS sample during the hold window
	window                  time.Duration // how long RSS was watched after the tasks were held
	upBefore, upAfter       int64
	sampled, sampledWorking int
	nofile                  uint64
	createErr               string
}

type scaleThr struct {
	one, three result
	tasks      int
}

// scaleStart starts a stateless upstream and n taskgate replicas on one
// fresh redis-server; extra are taskgate flags. It returns the URLs
// (upstream first) and the PIDs in the same order.
func scaleStart(dir, tg, tu string, ps *procs, n int, extra ...string) (*redisServer, []string, []int, error) {
	return scaleStartEnv(dir, tg, tu, ps, n, nil, extra...)
}

// scaleStartEnv is scaleStart with env added to the replicas' environment.
func scaleStartEnv(dir, tg, tu string, ps *procs, n int, env []string, extra ...string) (*redisServer, []string, []int, error) {
	rs, err := startRedis(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	upAddr, _ := freeAddr()
	addrs := []string{upAddr}
	if err := ps.start(tu, "--listen", upAddr, "--stateless"); err != nil {
		return rs, nil, nil, err
	}
	pids := []int{(*ps)[len(*ps)-1].Process.Pid}
	for i := 0; i < n; i++ {
		a, _ := freeAddr()
		args := append([]string{"serve", "--listen", a, "--upstream", "http://" + upAddr + "/mcp",
			"--redis-url", "redis://" + rs.addr, "--task", "slow", "--max-tasks-per-owner", "-1",
			"--log-level", "warn", "--drain-timeout", "1s", "--shutdown-timeout", "1s",
			"--replica-id", fmt.Sprintf("bench-%d", i+1)}, extra...)
		la, _ := pollLimitArgs(tg)
		args = append(args, la...)
		if err := ps.startEnv("", env, tg, args...); err != nil {
			return rs, nil, nil, err
		}
		addrs = append(addrs, a)
		pids = append(pids, (*ps)[len(*ps)-1].Process.Pid)
	}
	var urls []string
	for _, a := range addrs {
		if err := waitTCP(a); err != nil {
			return rs, nil, nil, err
		}
		urls = append(urls, "http://"+a+"/mcp")
	}
	return rs, urls, pids, nil
}

func scaleMemory(ctx context.Context, o options, dir, tg, tu string, nofile uint64, env []string) (scaleMem, error) {
	m := scaleMem{held: o.held, nofile: nofile, env: env}
	var ps procs
	var rs *redisServer
	defer func() { stopScale(&ps, rs) }()
	penv, paddr := pprofEnv(o)
	rs, urls, pids, err := scaleStartEnv(dir, tg, tu, &ps, 1, append(slices.Clone(env), penv...), "--max-inflight", "20000", "--default-ttl", "10m", "--max-inflight-per-principal", "0", "--max-task-rate", "0")
	if err != nil {
		return m, err
	}
	fmt.Fprintf(os.Stderr, "bench: memory phase: redis-server %s, upstream PID %d, taskgate PID %d\n", rs.addr, pids[0], pids[1])
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: scaleCreateConc * 2, DisableCompression: true}}
	mr := &modernRun{o: o, c: c, tgURL: urls[1], upURL: urls[0]}
	// Warm up: one task end to end, so lazy set-up (Redis scripts, pools,
	// the upstream connection) is in the baseline.
	id, err := mr.toolTask(ctx, "slow", map[string]any{"seconds": 0.01, "text": "x"})
	if err != nil {
		return m, err
	}
	if _, err := mr.waitStatus(ctx, id, "completed"); err != nil {
		return m, err
	}
	if m.tgBefore, err = stableRSS(ctx, pids[1], 5*time.Second); err != nil {
		return m, err
	}
	if m.upBefore, err = rssKiB(pids[0]); err != nil {
		return m, err
	}

	// Create o.held held tasks with scaleCreateConc creators; the whole
	// creation is bounded by two minutes.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ids := make([]string, o.held)
	var failed atomic.Int64
	var errOnce sync.Once
	start := time.Now()
	// A failed create is counted, not fatal: fn never returns an error.
	_, _ = parallel(cctx, scaleCreateConc, o.held, 0, func(ctx context.Context, i int) error {
		id, err := mr.toolTask(ctx, "slow", map[string]any{"seconds": scaleHoldSecs, "text": "x"})
		if err != nil {
			failed.Add(1)
			errOnce.Do(func() { m.createErr = err.Error() })
			return nil
		}
		ids[i] = id
		return nil
	})
	m.createdIn = time.Since(start)
	m.failed = int(failed.Load())
	for _, id := range ids {
		if id != "" {
			m.created++
		}
	}
	fmt.Fprintf(os.Stderr, "bench: memory phase: %d tasks created in %s, %d failed\n", m.created, m.createdIn.Round(time.Millisecond), m.failed)
	if m.created == 0 {
		return m, fmt.Errorf("no held task created: %s", m.createErr)
	}
	if m.tgAfter, err = stableRSS(ctx, pids[1], 15*time.Second); err != nil {
		return m, err
	}
	if m.upAfter, err = rssKiB(pids[0]); err != nil {
		return m, err
	}
	// Held tasks keep renewing their leases (garbage), so the heap grows
	// toward the GC goal for a while: watch RSS for -hold-window and keep
	// the largest sample, which is what an operator would see.
	m.tgMax = m.tgAfter
	m.window = o.holdWindow
	for end := time.Now().Add(o.holdWindow); time.Now().Before(end) && ctx.Err() == nil; {
		time.Sleep(time.Second)
		if r, err := rssKiB(pids[1]); err == nil {
			m.tgMax = max(m.tgMax, r)
			m.tgEnd = r
		}
	}
	if paddr != "" {
		tag := "default"
		if len(env) > 0 {
			tag = strings.ReplaceAll(strings.Join(env, "_"), "=", "")
		}
		for _, p := range [][2]string{{"goroutine", "goroutine"}, {"goroutine?debug=1", "goroutine.txt"}, {"../bench/gc", "gc.txt"}, {"heap?gc=1", "heap"}} {
			file := fmt.Sprintf("scale-held-%s.%s", tag, p[1])
			if err := fetchProfile(ctx, paddr, p[0], o.pprofDir, file); err != nil {
				return m, err
			}
			m.profiles = append(m.profiles, filepath.Join(o.pprofDir, file))
		}
		if b, err := os.ReadFile(filepath.Join(o.pprofDir, fmt.Sprintf("scale-held-%s.goroutine.txt", tag))); err == nil {
			fmt.Sscanf(string(b), "goroutine profile: total %d", &m.goroutines)
		}
	}
	// A sample must still be working (held, not failed or finished).
	step := max(1, m.created/50)
	for i := 0; i < len(ids); i += step {
		if ids[i] == "" {
			continue
		}
		t, err := mr.getTask(ctx, ids[i])
		m.sampled++
		if err == nil && t.Status == "working" {
			m.sampledWorking++
		}
	}
	// The held calls end with the processes, well before the slow tool
	// would finish. taskgate goes first and by SIGKILL: a graceful stop
	// would fail (and log) every held task when the upstream goes away.
	_ = ps[1].Process.Kill()
	return m, nil
}

// stopScale stops a phase's processes, then its redis-server (which they
// use while they shut down).
func stopScale(ps *procs, rs *redisServer) {
	ps.stopAll()
	if rs != nil {
		rs.stop()
	}
}

func scaleThroughput(ctx context.Context, o options, dir, tg, tu string) (scaleThr, error) {
	t := scaleThr{tasks: o.tasks}
	var ps procs
	var rs *redisServer
	defer func() { stopScale(&ps, rs) }()
	rs, urls, pids, err := scaleStart(dir, tg, tu, &ps, 3)
	if err != nil {
		return t, err
	}
	fmt.Fprintf(os.Stderr, "bench: throughput phase: redis-server %s, upstream PID %d, taskgate PIDs %v\n", rs.addr, pids[0], pids[1:])
	c := newClient(o.concurrency)
	reps := urls[1:]
	get := request{want: []byte(`"status":"completed"`)}
	for i := 0; i < o.tasks; i++ {
		// Created on replica i%3; polled anywhere (the state is in Redis).
		mr := &modernRun{o: o, c: c, tgURL: reps[i%len(reps)], upURL: urls[0]}
		id, err := mr.toolTask(ctx, "slow", map[string]any{"seconds": slowToolSecs, "text": "x"})
		if err != nil {
			return t, err
		}
		if _, err := mr.waitStatus(ctx, id, "completed"); err != nil {
			return t, err
		}
		q, _ := json.Marshal(id)
		get.bodies = append(get.bodies, modernBody("tasks/get", `"taskId":`+string(q), true))
		get.headers = append(get.headers, modernHeader("tasks/get", id))
	}
	// Warm up every replica; each must answer cleanly.
	for i, u := range reps {
		if r := load(ctx, c, u, get, o.concurrency, time.Second, 0); r.requests == 0 || r.errors > 0 {
			return t, fmt.Errorf("replica %d: %d answers, %d errors during warm-up: %s", i+1, r.requests, r.errors, firstErrText())
		}
	}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		one := func() { t.one.merge(load(ctx, c, reps[0], get, o.concurrency, o.duration, 0)) }
		three := func() { t.three.merge(loadRR(ctx, c, reps, get, o.concurrency, o.duration, 0)) }
		if round%2 == 0 {
			one()
			three()
		} else {
			three()
			one()
		}
		fmt.Fprintf(os.Stderr, "bench: throughput round %d/%d done\n", round+1, o.rounds)
	}
	return t, ctx.Err()
}

func scaleBench(o options) error {
	unlessGiven(&o, "duration", &o.duration, 5*time.Second)
	if o.held < 1 || o.tasks < 1 || o.concurrency < 1 || o.rounds < 1 {
		return errors.New("-held, -tasks, -concurrency and -rounds must be positive")
	}
	nofile, err := raiseNofile()
	if err != nil {
		return fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
	}
	// Each process holds about one connection per held task (taskgate: the
	// client's are short-lived, the upstream's one per held call).
	if nofile < uint64(o.held)+1000 {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is too low for -held %d (need about %d)", nofile, o.held, o.held+1000)
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx, load0, t0, dir, tg, tu := run.ctx, run.load0, run.t0, run.dir, run.tg, run.tu
	var mems []scaleMem
	envs := [][]string{nil}
	if o.gcEnv != "" {
		envs = append(envs, strings.Fields(o.gcEnv))
	}
	for _, env := range envs {
		mem, err := scaleMemory(ctx, o, dir, tg, tu, nofile, env)
		if err != nil {
			return fmt.Errorf("memory phase %v: %w", env, err)
		}
		mems = append(mems, mem)
	}
	load1 := loadAvg()
	thr, err := scaleThroughput(ctx, o, dir, tg, tu)
	if err != nil {
		return fmt.Errorf("throughput phase: %w", err)
	}
	report := scaleReport(o, mems, thr, load0, load1, loadAvg(), time.Since(t0))
	return emit(report)
}

func scaleReport(o options, ms0 []scaleMem, t scaleThr, load0, load1, load2 string, wall time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Scale: memory per held task, tasks/get on 1 vs 3 replicas\n\n")
	fmt.Fprintf(&b, "Machine: %s; nproc %d. Load average (1/5/15 min) at start %s, after the memory phase %s, at end %s; the load generator shares the CPUs with taskgate, the upstream and Redis.\n",
		machine(), nproc(), load0, load1, load2)
	fmt.Fprintf(&b, "%s (no persistence, loopback), a fresh one per phase; upstream: testupstream --stateless (go-sdk, 2026-07-28); every request is a 2026-07-28 request with the tasks extension declared and one Authorization (one owner). RLIMIT_NOFILE of every process: %d. Wall time %s.\n\n",
		versionOf("redis-server", "--version"), ms0[0].nofile, wall.Round(time.Second))

	fmt.Fprintf(&b, "### Memory per held task\n\n")
	fmt.Fprintf(&b, "taskgate --task slow --max-inflight 20000 --max-inflight-per-principal 0 --max-task-rate 0 --max-tasks-per-owner -1 --default-ttl 10m, in front of the stateless upstream. -held `tools/call slow` (%d s) are created as tasks by %d concurrent clients; each is held (one open upstream POST). VmRSS from /proc/PID/status: before after one warm-up task, after once two samples 500 ms apart agree within 1%%; a sample of the tasks must still be `working` afterwards. Each row is its own taskgate process, upstream and redis-server, with the environment shown.\n\n",
		scaleHoldSecs, scaleCreateConc)
	fmt.Fprintf(&b, "RSS is watched every second for %s once it settled (the held tasks keep renewing their leases, so the heap grows toward the GC goal); the figure judged is the largest sample, the one an operator sizes for.\n\n", ms0[0].window)
	fmt.Fprintf(&b, "| taskgate environment | held | created in | refused or failed | still working (sampled) | RSS before | RSS settled | RSS largest / last in the window | **per held task** (largest) | per held task (settled) | upstream per held task (context) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms0 {
		perTask := func(before, after int64) float64 { return float64(after-before) / float64(max(m.created, 1)) }
		envText := "defaults"
		if len(m.env) > 0 {
			envText = "`" + strings.Join(m.env, " ") + "`"
		}
		fmt.Fprintf(&b, "| %s | %d | %s (%.0f/s) | %d | %d of %d | %s | %s | %s / %s | **%.1f KiB** | %.1f KiB | %.1f KiB |\n", envText, m.created,
			m.createdIn.Round(time.Millisecond), float64(m.created)/m.createdIn.Seconds(), m.failed, m.sampledWorking, m.sampled,
			mib(m.tgBefore), mib(m.tgAfter), mib(m.tgMax), mib(m.tgEnd), perTask(m.tgBefore, m.tgMax), perTask(m.tgBefore, m.tgAfter), perTask(m.upBefore, m.upAfter))
	}
	fmt.Fprintf(&b, "\n")
	for _, m := range ms0 {
		tgPer := float64(m.tgMax-m.tgBefore) / float64(max(m.created, 1))
		if len(m.env) == 0 {
			fmt.Fprintf(&b, "- taskgate RSS per held task, default GC settings: **%.1f KiB** (target ≤ 24 KiB: %s)\n", tgPer, met(tgPer <= 24 && m.failed == 0 && m.created == o.held))
		} else {
			fmt.Fprintf(&b, "- taskgate RSS per held task with `%s` (operator knob): **%.1f KiB** (target ≤ 24 KiB: %s)\n", strings.Join(m.env, " "), tgPer, met(tgPer <= 24 && m.failed == 0 && m.created == o.held))
		}
		if m.goroutines > 0 {
			fmt.Fprintf(&b, "  - goroutines with the tasks held: %d (%.2f per held task)\n", m.goroutines, float64(m.goroutines)/float64(max(m.created, 1)))
		}
		for _, p := range m.profiles {
			fmt.Fprintf(&b, "  - profile: `%s`\n", p)
		}
		if m.createErr != "" {
			fmt.Fprintf(&b, "  - first creation error: `%s`\n", strings.ReplaceAll(m.createErr, "`", "'"))
		}
	}
	fmt.Fprintf(&b, "\n### tasks/get: 1 replica vs 3 replicas on one redis-server\n\n")
	fmt.Fprintf(&b, "Three taskgate processes on one redis-server; tasks/get on %d completed tasks at c=%d, %d rounds of %s per setup, interleaved; \"3 replicas\" is client-side round robin (each client's successive requests go to the next replica).\n\n",
		t.tasks, o.concurrency, o.rounds, o.duration)
	fmt.Fprintf(&b, "| setup | req/s (c=%d) | p50 | p99 | requests | errors |\n|---|---|---|---|---|---|\n", o.concurrency)
	for _, r := range []struct {
		name string
		r    result
	}{{"1 replica", t.one}, {"3 replicas (round robin)", t.three}} {
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %d | %d |\n", r.name, r.r.rps(), ms(r.r.pct(.5)), ms(r.r.pct(.99)), r.r.requests, r.r.errors)
	}
	ratio := t.three.rps() / t.one.rps()
	fmt.Fprintf(&b, "\n- 3 replicas / 1 replica: **%.2f×** (target ≥ 2.5× when the machine allows: %s)", ratio, met(ratio >= 2.5))
	if nproc() < 8 {
		fmt.Fprintf(&b, ". This machine has %d CPUs shared by the load generator, three replicas, redis-server and the upstream: a single replica already competes with the client and Redis for them, so more replicas cannot add CPU here and this ratio says little about the scaling a machine with spare cores would show", nproc())
	}
	fmt.Fprintf(&b, "\n")
	if p := firstErr.Load(); p != nil {
		fmt.Fprintf(&b, "- first load error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "scale", "held", "hold-window", "duration", "rounds", "concurrency", "tasks", "gc-env"))
	return b.String()
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// nproc is the CPUs this process may run on (as nproc(1) prints: the
// runtime reads the affinity mask).
func nproc() int { return runtime.NumCPU() }
