package main

// -mode tasksget: taskgate's tasks/get against the parse-and-GET limit
// (parseget.go): the same redis-server, the same requests, the same answer
// bytes, interleaved in rounds. Both task flavours are measured: the
// 2026-07-28 one (stateless requests, _meta validated on every poll) and
// the 2025-11-25 one (a session; the session's negotiated version is
// looked up per request). Target: taskgate ≥ 0.9× the baseline's
// throughput.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	tgModernGet = "taskgate tasks/get, 2026-07-28 (DetailedTask, result inlined)"
	tgLegacyGet = "taskgate tasks/get, 2025-11-25 (session, Task)"
	pgModern    = "parse-and-GET, 2026-07-28 request and answer bytes"
	pgLegacy    = "parse-and-GET, 2025-11-25 request and answer bytes"
)

// pollLimitArgs disables a per-owner tasks/get rate limiter, if this
// taskgate has one: the load polls a few tasks of one owner as fast as it
// can, which is what such a limiter exists to stop. The flag's name is
// read from `taskgate serve --help`.
func pollLimitArgs(tg string) (args []string, note string) {
	if v, ok := pollLimitCache[tg]; ok {
		return v.args, v.note
	}
	defer func() {
		pollLimitCache[tg] = struct {
			args []string
			note string
		}{args, note}
	}()
	out, _ := exec.Command(tg, "serve", "--help").CombinedOutput()
	for _, name := range []string{"poll-limit", "poll-rate", "poll-rate-limit", "max-poll-rate"} {
		if strings.Contains(string(out), "--"+name+" ") || strings.Contains(string(out), "--"+name+"=") || strings.Contains(string(out), "--"+name+"\t") {
			return []string{"--" + name, "0"}, fmt.Sprintf("the per-owner poll rate limiter is off (--%s 0): the load polls 8 tasks of one owner as fast as it can", name)
		}
	}
	return nil, ""
}

// pollArgs is pollLimitArgs without the note, with the fair shares off
// (fairArgs).
func pollArgs(tg string) []string {
	a, _ := pollLimitArgs(tg)
	return append(append([]string(nil), a...), fairArgs(tg)...)
}

var fairCache = map[string][]string{}

// fairArgs turn off the per-principal limits of a build that has them
// (--max-inflight-per-principal, --max-task-rate,
// --max-sessions-per-principal): a benchmark's load is one principal (every
// client from 127.0.0.1, without credentials), and measures the gateway,
// not its limits on one principal (BenchmarkNoisyNeighbour measures those).
func fairArgs(tg string) []string {
	if a, ok := fairCache[tg]; ok {
		return a
	}
	out, _ := exec.Command(tg, "serve", "--help").CombinedOutput()
	var a []string
	for _, name := range []string{"max-inflight-per-principal", "max-task-rate", "max-sessions-per-principal"} {
		if strings.Contains(string(out), "--"+name+" ") || strings.Contains(string(out), "--"+name+"=") || strings.Contains(string(out), "--"+name+"\t") {
			a = append(a, "--"+name, "0")
		}
	}
	fairCache[tg] = a
	return a
}

var pollLimitCache = map[string]struct {
	args []string
	note string
}{}

// pprofEnv is the environment that turns on taskgate's pprof listener
// (a -pprof build), and the listener's address.
func pprofEnv(o options) ([]string, string) {
	if o.pprofDir == "" {
		return nil, ""
	}
	a, _ := freeAddr()
	return []string{"TASKGATE_BENCH_PPROF=" + a}, a
}

// fetchProfile saves http://addr/debug/pprof/<what> as dir/file.
func fetchProfile(ctx context.Context, addr, what, dir, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+what, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: HTTP %d", what, resp.StatusCode)
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadFrom(resp.Body)
	return err
}

func tasksGetBench(o options) error {
	shortDefaults(&o)
	if o.tasks < 1 || o.concurrency < 1 || o.rounds < 1 {
		return errors.New("-tasks, -concurrency and -rounds must be positive")
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx, load0, t0, dir, tg, tu := run.ctx, run.load0, run.t0, run.dir, run.tg, run.tu
	self, err := os.Executable()
	if err != nil {
		return err
	}
	rs, err := startRedis(dir)
	if err != nil {
		return err
	}
	defer rs.stop()
	upL, _ := freeAddr() // stateful (2025-11-25 sessions)
	upM, _ := freeAddr() // stateless (2026-07-28)
	tgL, _ := freeAddr()
	tgM, _ := freeAddr()
	pgA, _ := freeAddr()
	var ps procs
	defer ps.stopAll()
	limitArgs, limitNote := pollLimitArgs(tg)
	common := append(append([]string{"--redis-url", "redis://" + rs.addr, "--max-tasks-per-owner", "-1", "--log-level", "warn"}, limitArgs...), fairArgs(tg)...)
	envL, pprofL := pprofEnv(o)
	envM, pprofM := pprofEnv(o)
	if err := ps.start(tu, "--listen", upL); err != nil {
		return err
	}
	if err := ps.start(tu, "--listen", upM, "--stateless"); err != nil {
		return err
	}
	if err := ps.startEnv("", envL, tg, append([]string{"serve", "--listen", tgL, "--upstream", "http://" + upL + "/mcp", "--task", "echo"}, common...)...); err != nil {
		return err
	}
	if err := ps.startEnv("", envM, tg, append([]string{"serve", "--listen", tgM, "--upstream", "http://" + upM + "/mcp", "--task", "slow"}, common...)...); err != nil {
		return err
	}
	if err := ps.start(self, "-role", "parseget", "-listen", pgA, "-target", rs.addr); err != nil {
		return err
	}
	for _, a := range []string{upL, upM, tgL, tgM, pgA} {
		if err := waitTCP(a); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: tasksget: redis-server %s (PID %d), taskgate 2025-11-25 %s (PID %d), taskgate 2026-07-28 %s (PID %d), parse-and-GET %s (PID %d)\n",
		rs.addr, rs.cmd.Process.Pid, tgL, ps[2].Process.Pid, tgM, ps[3].Process.Pid, pgA, ps[4].Process.Pid)
	c := newClient(o.concurrency)
	rdb := redis.NewClient(&redis.Options{Addr: rs.addr, PoolSize: 1})
	defer rdb.Close()
	pgURL := "http://" + pgA + "/mcp"

	// 2026-07-28: completed slow tasks; the baseline serves the very
	// result taskgate answers for each.
	mr := &modernRun{o: o, c: c, tgURL: "http://" + tgM + "/mcp", upURL: "http://" + upM + "/mcp"}
	mGet := request{want: []byte(`"status":"completed"`)}
	var answerM, answerL int
	for i := 0; i < o.tasks; i++ {
		id, err := mr.toolTask(ctx, "slow", map[string]any{"seconds": slowToolSecs, "text": "x"})
		if err != nil {
			return err
		}
		if _, err := mr.waitStatus(ctx, id, "completed"); err != nil {
			return err
		}
		res, _, err := modernCall(ctx, c, mr.tgURL, "tasks/get", id, true, map[string]any{"taskId": id})
		if err != nil {
			return err
		}
		answerM = len(res)
		if err := rdb.Set(ctx, parseGetPrefix+id, []byte(res), 0).Err(); err != nil {
			return err
		}
		q, _ := json.Marshal(id)
		mGet.bodies = append(mGet.bodies, modernBody("tasks/get", `"taskId":`+string(q), true))
		mGet.headers = append(mGet.headers, modernHeader("tasks/get", id))
	}
	// 2025-11-25: completed echo tasks on one session.
	lURL := "http://" + tgL + "/mcp"
	sid, err := initSession(ctx, c, lURL)
	if err != nil {
		return fmt.Errorf("2025-11-25 session: %w", err)
	}
	lHdr := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Session-Id":       {sid},
		"Mcp-Protocol-Version": {"2025-11-25"},
	}
	ids, _, err := completedTasks(ctx, c, lURL, lHdr, o.tasks)
	if err != nil {
		return fmt.Errorf("2025-11-25 tasks: %w", err)
	}
	lGet := request{header: lHdr, want: []byte(`"completed"`)}
	for _, id := range ids {
		res, _, err := rpc(ctx, c, lURL, lHdr, "tasks/get", map[string]any{"taskId": id})
		if err != nil {
			return err
		}
		answerL = len(res)
		if err := rdb.Set(ctx, parseGetPrefix+id, []byte(res), 0).Err(); err != nil {
			return err
		}
		q, _ := json.Marshal(id)
		lGet.bodies = append(lGet.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+
			strings.ReplaceAll(string(q), "%", "%%")+`}}`)
	}
	all := []op{
		{pgModern, "parse-and-GET", pgURL, mGet},
		{tgModernGet, "taskgate", mr.tgURL, mGet},
		{pgLegacy, "parse-and-GET", pgURL, lGet},
		{tgLegacyGet, "taskgate", lURL, lGet},
	}
	// The process that answers each target, whose CPU time per request is
	// the figure least moved by a busy machine.
	pidOf := map[string]int{pgModern: ps[4].Process.Pid, tgModernGet: ps[3].Process.Pid, pgLegacy: ps[4].Process.Pid, tgLegacyGet: ps[2].Process.Pid}
	cpu := map[string]time.Duration{}
	if err := warm(ctx, c, all, o.concurrency); err != nil {
		return err
	}
	lat, thr := map[string]*result{}, map[string]*result{}
	for _, x := range all {
		lat[x.name], thr[x.name] = &result{}, &result{}
	}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		xs := roundOrder(all, round)
		for _, x := range xs {
			lat[x.name].merge(load(ctx, c, x.url, x.req, 1, o.duration, o.latencyReqs))
		}
		for _, x := range xs {
			c0 := cpuTime(pidOf[x.name])
			thr[x.name].merge(load(ctx, c, x.url, x.req, o.concurrency, o.duration, 0))
			cpu[x.name] += cpuTime(pidOf[x.name]) - c0
		}
		fmt.Fprintf(os.Stderr, "bench: tasksget round %d/%d done\n", round+1, o.rounds)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var profiled []string
	if o.pprofDir != "" {
		for _, p := range []struct {
			x    op
			addr string
			file string
		}{{all[1], pprofM, "tasksget-modern.cpu.pprof"}, {all[3], pprofL, "tasksget-legacy.cpu.pprof"}} {
			done := make(chan error, 1)
			go func() { done <- fetchProfile(ctx, p.addr, "profile?seconds=8", o.pprofDir, p.file) }()
			load(ctx, c, p.x.url, p.x.req, o.concurrency, 9*time.Second, 0)
			if err := <-done; err != nil {
				return fmt.Errorf("CPU profile: %w", err)
			}
			profiled = append(profiled, filepath.Join(o.pprofDir, p.file))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## tasks/get against the parse-and-GET limit\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average (1/5/15 min) at start %s, at end %s; the load generator shares the CPUs with taskgate, the baseline and Redis. Wall time %s.\n",
		machine(), load0, loadAvg(), time.Since(t0).Round(time.Second))
	fmt.Fprintf(&b, "%s (no persistence, loopback), one for all targets. The parse-and-GET baseline is this program in the `parseget` role (bench/parseget.go): net/http, the JSON-RPC body decoded with encoding/json, one GET with go-redis (default options) and the stored value written back as the JSON-RPC result; it checks no header, owner or protocol version. It stores, per task, the exact result taskgate answers (%d bytes 2026-07-28, %d bytes 2025-11-25), so both send the same bytes. ",
		versionOf("redis-server", "--version"), answerM, answerL)
	fmt.Fprintf(&b, "The requests are the same: 2026-07-28 stateless requests with the tasks extension in _meta and the routing headers, or 2025-11-25 requests on one session. %d completed tasks per flavour, %d rounds interleaving the targets (order reversed every other round); per round and target: latency at c=1 (up to %d requests or %s), throughput at c=%d for %s.",
		o.tasks, o.rounds, o.latencyReqs, o.duration, o.concurrency, o.duration)
	if limitNote != "" {
		fmt.Fprintf(&b, " Note: %s.", limitNote)
	}
	fmt.Fprintf(&b, " CPU per request: user+system CPU time of the answering process (/proc/PID/stat) over the throughput loads, divided by the requests answered; it is the figure a busy machine moves least.")
	fmt.Fprintf(&b, "\n\n| target | req/s (c=%d) | CPU per request | p50 | p99 | p50 (c=1) | p99 (c=1) | errors |\n|---|---|---|---|---|---|---|---|\n", o.concurrency)
	perReq := func(name string) float64 {
		return float64(cpu[name].Microseconds()) / float64(max(thr[name].requests, 1))
	}
	for _, x := range all {
		t, l := thr[x.name], lat[x.name]
		fmt.Fprintf(&b, "| %s | %.0f | %.0f µs | %s | %s | %s | %s | %d |\n", x.name, t.rps(), perReq(x.name), ms(t.pct(.5)), ms(t.pct(.99)), ms(l.pct(.5)), ms(l.pct(.99)), t.errors+l.errors)
	}
	rm := thr[tgModernGet].rps() / thr[pgModern].rps()
	rl := thr[tgLegacyGet].rps() / thr[pgLegacy].rps()
	fmt.Fprintf(&b, "\n- 2026-07-28 tasks/get / parse-and-GET throughput: **%.2f×** (target ≥ 1.0×: %s); p50 at c=1 %s vs %s\n",
		rm, met(rm >= 1.0), ms(lat[tgModernGet].pct(.5)), ms(lat[pgModern].pct(.5)))
	fmt.Fprintf(&b, "- 2025-11-25 tasks/get / parse-and-GET throughput: **%.2f×** (target ≥ 1.0×: %s); p50 at c=1 %s vs %s\n",
		rl, met(rl >= 1.0), ms(lat[tgLegacyGet].pct(.5)), ms(lat[pgLegacy].pct(.5)))
	figure("tasksget.2026.rps", rm)
	figure("tasksget.2025.rps", rl)
	figure("tasksget.2026.cpu", perReq(tgModernGet)/perReq(pgModern))
	figure("tasksget.2025.cpu", perReq(tgLegacyGet)/perReq(pgLegacy))
	fmt.Fprintf(&b, "- CPU per tasks/get: 2026-07-28 taskgate %.0f µs vs parse-and-GET %.0f µs (%.2f×); 2025-11-25 taskgate %.0f µs vs %.0f µs (%.2f×)\n",
		perReq(tgModernGet), perReq(pgModern), perReq(tgModernGet)/perReq(pgModern), perReq(tgLegacyGet), perReq(pgLegacy), perReq(tgLegacyGet)/perReq(pgLegacy))
	if p := firstErr.Load(); p != nil {
		fmt.Fprintf(&b, "- first error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	for _, p := range profiled {
		fmt.Fprintf(&b, "- CPU profile (8 s at c=%d): `%s`\n", o.concurrency, p)
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "tasksget", "duration", "rounds", "concurrency", "latency-requests", "tasks"))
	return emit(b.String())
}

// cpuTime is the user+system CPU time pid has used (/proc/PID/stat), or 0.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces), from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * time.Second / clkTck
}

// clkTck is USER_HZ, 100 on every Linux this runs on.
const clkTck = 100
