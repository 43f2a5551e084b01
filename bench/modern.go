package main

// -mode modern: the performance targets for 2026-07-28 clients, in one run,
// through taskgate on a real redis-server in front of a stateless
// (2026-07-28) go-sdk upstream:
//
//  1. a fast tool (echo) called "auto" (the client declares the tasks
//     extension, no rule matches: the gateway's hybrid path) against the
//     same call passed through (extension not declared) and sent directly
//     to the upstream: latency at c=1, throughput at -concurrency; target
//     auto ≤ 1.05× the pass-through latency, and no Redis write on the
//     auto path;
//  2. tasks/get on completed tasks (--task slow) against the pass-through
//     throughput of (1): target ≥ 1.5×;
//  3. tasks/update on a task in input_required (--task elicit: the
//     upstream's MRTR round becomes the task's inputRequests): ack latency
//     and Redis round trips per update: target one (1 EVALSHA).
//
// Redis commands are counted with the slow log at a 0 µs threshold
// (redis_count.go), on only while a counted batch runs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

const (
	modernProto   = "2026-07-28"
	tasksExtID    = "io.modelcontextprotocol/tasks"
	modernAuth    = "Bearer taskgate-bench" // one owner for every request
	slowToolSecs  = 0.02                    // the --task slow tool the tasks/get load polls
	unknownUpdKey = "bench-not-outstanding"

	mAuto   = "tools/call echo: auto (extension declared, no rule)"
	mPass   = "tools/call echo: pass-through (extension not declared)"
	mDirect = "tools/call echo: upstream direct"
	mGet    = "tasks/get (completed task)"
	mUpdNop = "tasks/update ack (key not outstanding: no state change)"
	mUpdAns = "tasks/update ack (answers the elicitation)"
)

// modernCaps is the client capabilities object: identical with and without
// the extension but for the extension itself.
func modernCaps(ext bool) string {
	if ext {
		return `{"elicitation":{"form":{}},"extensions":{"` + tasksExtID + `":{}}}`
	}
	return `{"elicitation":{"form":{}}}`
}

func modernMetaJSON(ext bool) string {
	return `{"io.modelcontextprotocol/protocolVersion":"` + modernProto + `","io.modelcontextprotocol/clientCapabilities":` + modernCaps(ext) + `}`
}

// modernHeader is a 2026-07-28 request's headers: no session, the routing
// headers on every request.
func modernHeader(method, name string) http.Header {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {modernProto},
		"Mcp-Method":           {method},
		"Authorization":        {modernAuth},
	}
	if name != "" {
		h["Mcp-Name"] = []string{name}
	}
	return h
}

// modernBody is a load body format (one %d, the id); members are params'
// members other than _meta, as JSON without the braces.
func modernBody(method, members string, ext bool) string {
	return `{"jsonrpc":"2.0","id":%d,"method":"` + method + `","params":{` +
		strings.ReplaceAll(members, "%", "%%") + `,"_meta":` + modernMetaJSON(ext) + `}}`
}

// modernCall sends one modern request as the bench's one owner
// (modernAuth) and returns its result.
func modernCall(ctx context.Context, c *http.Client, url, method, name string, ext bool, params map[string]any) (json.RawMessage, string, error) {
	return modernCallAs(ctx, c, url, method, name, modernAuth, ext, params)
}

// modernCallAs is modernCall with another Authorization: another owner.
func modernCallAs(ctx context.Context, c *http.Client, url, method, name, auth string, ext bool, params map[string]any) (json.RawMessage, string, error) {
	p := map[string]any{"_meta": json.RawMessage(modernMetaJSON(ext))}
	for k, v := range params {
		p[k] = v
	}
	h := modernHeader(method, name)
	h.Set("Authorization", auth)
	return rpc(ctx, c, url, h, method, p)
}

// createdTask is the id of the task a tools/call of tool answered with
// (a CreateTaskResult).
func createdTask(tool string, res json.RawMessage) (string, error) {
	var t mtask
	if json.Unmarshal(res, &t) != nil || t.ResultType != "task" || t.TaskID == "" {
		return "", fmt.Errorf("tools/call %s: want a CreateTaskResult, got %.300s", tool, res)
	}
	return t.TaskID, nil
}

// gotTask is the task a tasks/get answered with.
func gotTask(res json.RawMessage) (mtask, error) {
	var t mtask
	if err := json.Unmarshal(res, &t); err != nil {
		return mtask{}, fmt.Errorf("tasks/get: %w: %.300s", err, res)
	}
	return t, nil
}

// mtask is the part of a (Detailed)Task the bench looks at.
type mtask struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
	InputRequests map[string]struct {
		Method string `json:"method"`
	} `json:"inputRequests"`
}

type modernRun struct {
	o     options
	c     *http.Client
	tgURL string
	upURL string
	rc    *redisCounter
}

// toolTask calls tool as a task (a --task rule matches it) and returns its id.
func (m *modernRun) toolTask(ctx context.Context, tool string, args map[string]any) (string, error) {
	res, _, err := modernCall(ctx, m.c, m.tgURL, "tools/call", tool, true, map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", err
	}
	return createdTask(tool, res)
}

// getTask is one tasks/get.
func (m *modernRun) getTask(ctx context.Context, id string) (mtask, error) {
	res, _, err := modernCall(ctx, m.c, m.tgURL, "tasks/get", id, true, map[string]any{"taskId": id})
	if err != nil {
		return mtask{}, err
	}
	return gotTask(res)
}

// waitStatus polls tasks/get until the task has status (at most 15 s).
func (m *modernRun) waitStatus(ctx context.Context, id, status string) (mtask, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		t, err := m.getTask(ctx, id)
		switch {
		case err != nil:
			return t, err
		case t.Status == status:
			return t, nil
		case t.Status != "working" && t.Status != "input_required":
			return t, fmt.Errorf("task %s is %s (%s), want %s", id, t.Status, t.StatusMessage, status)
		case time.Now().After(deadline):
			return t, fmt.Errorf("task %s still %s after 15s, want %s", id, t.Status, status)
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// elicitWaiting starts an elicit task and waits until it is input_required;
// it returns the task's id and the key of its one input request.
func (m *modernRun) elicitWaiting(ctx context.Context) (string, string, error) {
	id, err := m.toolTask(ctx, "elicit", map[string]any{})
	if err != nil {
		return "", "", err
	}
	t, err := m.waitStatus(ctx, id, "input_required")
	if err != nil {
		return "", "", err
	}
	if len(t.InputRequests) != 1 {
		return "", "", fmt.Errorf("elicit task %s: want 1 input request, got %d", id, len(t.InputRequests))
	}
	for k, in := range t.InputRequests {
		if in.Method != "elicitation/create" {
			return "", "", fmt.Errorf("elicit task %s: input request %s is %s", id, k, in.Method)
		}
		return id, k, nil
	}
	panic("unreachable")
}

// answer sends the tasks/update that answers key with name and returns its
// ack latency.
func (m *modernRun) answer(ctx context.Context, id, key, name string) (time.Duration, error) {
	t0 := time.Now()
	res, _, err := modernCall(ctx, m.c, m.tgURL, "tasks/update", id, true, map[string]any{
		"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}},
	})
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if !strings.Contains(string(res), `"resultType":"complete"`) {
		return 0, fmt.Errorf("tasks/update ack: %.300s", res)
	}
	return d, nil
}

// answered waits until the answered task completes with the greeting.
func (m *modernRun) answered(ctx context.Context, id, name string) error {
	t, err := m.waitStatus(ctx, id, "completed")
	if err != nil {
		return err
	}
	if !strings.Contains(string(t.Result), "Hello, "+name+"!") {
		return fmt.Errorf("answered task %s: result %.300s", id, t.Result)
	}
	return nil
}

var answerSeq int

// answerSamples measures n tasks/update acks, each on a fresh elicit task
// that has reached input_required, and lets each task complete before the
// next (no background work overlaps a sample).
func (m *modernRun) answerSamples(ctx context.Context, n int) (result, error) {
	var r result
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		id, key, err := m.elicitWaiting(ctx)
		if err != nil {
			return r, err
		}
		answerSeq++
		name := fmt.Sprint("bench-", answerSeq)
		d, err := m.answer(ctx, id, key, name)
		if err != nil {
			return r, err
		}
		if err := m.answered(ctx, id, name); err != nil {
			return r, err
		}
		r.requests++
		r.lat = append(r.lat, d)
	}
	r.elapsed = time.Since(start)
	return r, nil
}

func modernBench(o options) error {
	// Defaults that keep a whole run near 90 s on 2 cores.
	if !o.set["duration"] {
		o.duration = 3 * time.Second
	}
	if !o.set["latency-requests"] {
		o.latencyReqs = 1000
	}
	if o.tasks < 1 || o.concurrency < 1 || o.rounds < 1 || o.updateReqs < 1 || o.countReqs < 1 {
		return errors.New("-tasks, -concurrency, -rounds, -update-requests and -count-requests must be positive")
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx, load0, t0, dir, tg, tu := run.ctx, run.load0, run.t0, run.dir, run.tg, run.tu
	rs, err := startRedis(dir)
	if err != nil {
		return err
	}
	defer rs.stop()
	upAddr, _ := freeAddr()
	tgAddr, _ := freeAddr()
	var ps procs
	defer ps.stopAll()
	m := &modernRun{o: o, c: newClient(o.concurrency), upURL: "http://" + upAddr + "/mcp", tgURL: "http://" + tgAddr + "/mcp"}
	if err := ps.start(tu, "--listen", upAddr, "--stateless"); err != nil {
		return err
	}
	if err := ps.start(tg, append([]string{"serve", "--listen", tgAddr, "--upstream", m.upURL,
		"--redis-url", "redis://" + rs.addr, "--task", "slow", "--task", "elicit", "--max-tasks-per-owner", "-1",
		"--log-level", "warn"}, pollArgs(tg)...)...); err != nil {
		return err
	}
	for _, a := range []string{upAddr, tgAddr} {
		if err := waitTCP(a); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: redis-server %s (PID %d), stateless upstream %s (PID %d), taskgate %s (PID %d)\n",
		rs.addr, rs.cmd.Process.Pid, upAddr, ps[0].Process.Pid, tgAddr, ps[1].Process.Pid)
	m.rc = newRedisCounter(rs.addr)
	defer m.rc.close()
	verbose := func(format string, args ...any) {
		if o.verbose {
			fmt.Fprintf(os.Stderr, "bench: %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		}
	}

	// (1) echo: auto, pass-through, direct. Every answer must carry the
	// echoed text and be final (an auto call that became a task would not).
	echo := `"name":"echo","arguments":{"text":"hello"}`
	want := []byte(`"text":"hello"`)
	echoes := []op{
		{mAuto, "taskgate", m.tgURL, request{body: modernBody("tools/call", echo, true), header: modernHeader("tools/call", "echo"), want: want}},
		{mPass, "taskgate", m.tgURL, request{body: modernBody("tools/call", echo, false), header: modernHeader("tools/call", "echo"), want: want}},
		{mDirect, "upstream", m.upURL, request{body: modernBody("tools/call", echo, false), header: modernHeader("tools/call", "echo"), want: want}},
	}
	formats := map[string]string{}
	for _, x := range echoes {
		res, ct, err := modernCall(ctx, m.c, x.url, "tools/call", "echo", x.name == mAuto, map[string]any{"name": "echo", "arguments": map[string]any{"text": "hello"}})
		if err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
		if !strings.Contains(string(res), `"resultType":"complete"`) || !strings.Contains(string(res), "hello") {
			return fmt.Errorf("%s: want a complete echo result, got %.300s", x.name, res)
		}
		formats[x.name] = ct
	}
	if err := warm(ctx, m.c, echoes, o.concurrency); err != nil {
		return err
	}

	// Redis commands on the echo paths, before any task exists (so no
	// worker renews a lease meanwhile), and in an idle window as long.
	var counted []countedBatch
	count := func(name string, calls int, run func() (int, error)) error {
		verbose("counting Redis commands: %s", name)
		if err := m.rc.begin(ctx); err != nil {
			return err
		}
		opens0 := tcpActiveOpens()
		start := time.Now()
		n, err := run()
		el := time.Since(start)
		opens := tcpActiveOpens() - opens0
		if opens0 < 0 {
			opens = -1
		}
		t, err2 := m.rc.end(ctx)
		if err = errors.Join(err, err2); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if calls > 0 {
			calls = n
		}
		counted = append(counted, countedBatch{name: name, calls: calls, elapsed: el, t: t, opens: opens})
		return nil
	}
	countLoad := func(x op) error {
		return count(x.name, 1, func() (int, error) {
			r := load(ctx, m.c, x.url, x.req, 1, time.Minute, o.countReqs)
			if r.errors > 0 {
				return r.requests, fmt.Errorf("%d errors: %s", r.errors, firstErrText())
			}
			return r.requests, nil
		})
	}
	for _, x := range echoes {
		if err := countLoad(x); err != nil {
			return err
		}
	}
	idle := max(counted[0].elapsed, counted[1].elapsed)
	if err := count(fmt.Sprintf("idle window (%s, no requests)", idle.Round(time.Millisecond)), 0, func() (int, error) {
		return 0, pause(ctx, idle)
	}); err != nil {
		return err
	}

	// (2) tasks/get on completed tasks, spread over the clients.
	verbose("creating %d completed tasks", o.tasks)
	get := request{want: []byte(`"status":"completed"`)}
	for i := 0; i < o.tasks; i++ {
		id, err := m.toolTask(ctx, "slow", map[string]any{"seconds": slowToolSecs, "text": "x"})
		if err != nil {
			return err
		}
		if _, err := m.waitStatus(ctx, id, "completed"); err != nil {
			return err
		}
		q, _ := json.Marshal(id)
		get.bodies = append(get.bodies, modernBody("tasks/get", `"taskId":`+string(q), true))
		get.headers = append(get.headers, modernHeader("tasks/get", id))
	}
	gets := []op{{mGet, "taskgate", m.tgURL, get}}
	if err := warm(ctx, m.c, gets, o.concurrency); err != nil {
		return err
	}
	if err := countLoad(gets[0]); err != nil {
		return err
	}

	// (3) tasks/update: a probe task stays input_required for the whole run
	// and gets updates for a key it never issued (the ack path without
	// state change: repeatable); fresh elicit tasks get real answers.
	verbose("tasks/update: warming up")
	probe, probeKey, err := m.elicitWaiting(ctx)
	if err != nil {
		return err
	}
	pq, _ := json.Marshal(probe)
	nop := request{
		body:   modernBody("tasks/update", `"taskId":`+string(pq)+`,"inputResponses":{"`+unknownUpdKey+`":{"action":"decline"}}`, true),
		header: modernHeader("tasks/update", probe),
		want:   []byte(`"resultType":"complete"`),
	}
	updates := []op{{mUpdNop, "taskgate", m.tgURL, nop}}
	if r := load(ctx, m.c, m.tgURL, nop, 1, 5*time.Second, 200); r.requests == 0 || r.errors > 0 {
		return fmt.Errorf("%s: %d answers, %d errors during warm-up: %s", mUpdNop, r.requests, r.errors, firstErrText())
	}
	if _, err := m.answerSamples(ctx, 3); err != nil {
		return fmt.Errorf("%s: warm-up: %w", mUpdAns, err)
	}
	if err := countLoad(updates[0]); err != nil {
		return err
	}
	// Real answers, one at a time: the handler's part is what Redis saw up
	// to and including the script call that carries the answer; the
	// worker's follow-up (hand the answer to the upstream, store the
	// result) comes after it.
	var head, tail redisTally
	const counted5 = 5
	for i := 0; i < counted5; i++ {
		id, key, err := m.elicitWaiting(ctx)
		if err != nil {
			return err
		}
		answerSeq++
		name := fmt.Sprint("bench-", answerSeq)
		if err := m.rc.begin(ctx); err != nil {
			return err
		}
		if _, err := m.answer(ctx, id, key, name); err != nil {
			return err
		}
		// Let the worker finish without polling (a poll would be counted).
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		logs, err := m.rc.endRaw(ctx)
		if err != nil {
			return err
		}
		if err := m.answered(ctx, id, name); err != nil {
			return err
		}
		h, t := tallySplit(logs, name)
		head.add(h)
		tail.add(t)
	}
	counted = append(counted,
		countedBatch{name: mUpdAns + ": up to the answering script call", calls: counted5, t: head, opens: -1},
		countedBatch{name: "the worker's follow-up per answered task (answer to upstream, result stored)", calls: counted5, t: tail, opens: -1})

	// Rounds: latency at c=1, real answers, throughput at c.
	lat := map[string]*result{}
	thr := map[string]*result{}
	all := slices.Concat(echoes, gets, updates)
	for _, x := range all {
		lat[x.name], thr[x.name] = &result{}, &result{}
	}
	lat[mUpdAns] = &result{}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		order := func(xs []op) []op {
			if round%2 == 1 {
				xs = slices.Clone(xs)
				slices.Reverse(xs)
			}
			return xs
		}
		for _, x := range order(all) {
			verbose("round %d: %s at c=1", round+1, x.name)
			lat[x.name].merge(load(ctx, m.c, x.url, x.req, 1, o.duration, o.latencyReqs))
		}
		verbose("round %d: %s ×%d", round+1, mUpdAns, o.updateReqs)
		r, err := m.answerSamples(ctx, o.updateReqs)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", mUpdAns, err)
		}
		lat[mUpdAns].merge(r)
		for _, x := range order(slices.Concat(echoes, gets)) {
			verbose("round %d: %s at c=%d", round+1, x.name, o.concurrency)
			thr[x.name].merge(load(ctx, m.c, x.url, x.req, o.concurrency, o.duration, 0))
		}
		fmt.Fprintf(os.Stderr, "bench: round %d/%d done\n", round+1, o.rounds)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Finish the probe task (nothing depends on it; it is tidy).
	if _, err := m.answer(ctx, probe, probeKey, "probe"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: answering the probe task: %v\n", err)
	}
	env := modernEnv{
		load0: load0, load1: loadAvg(), redis: versionOf("redis-server", "--version"),
		redisMem: redisInfo(rs.addr, "used_memory_human"), formats: formats, wall: time.Since(t0),
	}
	report := modernReport(o, env, all, lat, thr, counted)
	return emit(report)
}

// warm loads every op for a second; each must answer cleanly.
func warm(ctx context.Context, c *http.Client, xs []op, conc int) error {
	for _, x := range xs {
		fmt.Fprintf(os.Stderr, "bench: warming up %s\n", x.name)
		r := load(ctx, c, x.url, x.req, conc, time.Second, 0)
		if r.requests == 0 || r.errors > 0 {
			return fmt.Errorf("%s: %d answers, %d errors during warm-up: %s", x.name, r.requests, r.errors, firstErrText())
		}
	}
	return nil
}

func firstErrText() string {
	if p := firstErr.Load(); p != nil {
		return *p
	}
	return "-"
}

type modernEnv struct {
	load0, load1, redis, redisMem string
	formats                       map[string]string
	wall                          time.Duration
}

func modernReport(o options, env modernEnv, all []op, lat, thr map[string]*result, counted []countedBatch) string {
	var b strings.Builder
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	fmt.Fprintf(&b, "## MCP Tasks for 2026-07-28 clients: taskgate + redis-server in front of a stateless upstream\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average (1/5/15 min) at start %s, at end %s; the load generator shares the CPUs with taskgate, the upstream and Redis.\n",
		machine(), env.load0, env.load1)
	fmt.Fprintf(&b, "%s (no persistence, loopback); upstream: testupstream --stateless (go-sdk, 2026-07-28); taskgate --task slow --task elicit, no rule for echo. ", env.redis)
	fmt.Fprintf(&b, "No session: every request carries the 2026-07-28 _meta and MCP-Protocol-Version, Mcp-Method, Mcp-Name and one Authorization (one owner). ")
	fmt.Fprintf(&b, "%d rounds interleaving the targets; per round and target: latency at c=1 (up to %d requests or %s), throughput at c=%d for %s; %d answered tasks/update per round. ",
		o.rounds, o.latencyReqs, o.duration, o.concurrency, o.duration, o.updateReqs)
	fmt.Fprintf(&b, "tasks/get polls %d completed tasks (slow tool, %g s). Wall time %s.\n\n", o.tasks, slowToolSecs, env.wall.Round(time.Second))

	fmt.Fprintf(&b, "| operation | req/s (c=%d) | p50 | p99 | p50 (c=1) | p99 (c=1) | samples (c=1) | errors |\n|---|---|---|---|---|---|---|---|\n", o.concurrency)
	names := []string{}
	for _, x := range all {
		names = append(names, x.name)
	}
	names = append(names, mUpdAns)
	for _, n := range names {
		l, t := lat[n], thr[n]
		if t == nil || t.requests+t.errors == 0 {
			fmt.Fprintf(&b, "| %s | — | — | — | %s | %s | %d | %d |\n", n, ms(l.pct(.5)), ms(l.pct(.99)), len(l.lat), l.errors)
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %d | %d |\n", n, t.rps(), ms(t.pct(.5)), ms(t.pct(.99)),
			ms(l.pct(.5)), ms(l.pct(.99)), len(l.lat), t.errors+l.errors)
	}

	la, lp, ld := lat[mAuto], lat[mPass], lat[mDirect]
	ta, tp, td := thr[mAuto], thr[mPass], thr[mDirect]
	r50 := float64(la.pct(.5)) / float64(lp.pct(.5))
	r99 := float64(la.pct(.99)) / float64(lp.pct(.99))
	fmt.Fprintf(&b, "\n- auto / pass-through latency at c=1: p50 **%.3f×** (target ≤ 1.05×: %s), p99 %.3f×; throughput auto / pass-through %.3f×\n",
		r50, met(r50 <= 1.05), r99, ta.rps()/tp.rps())
	fmt.Fprintf(&b, "- over direct at c=1: auto +%s, pass-through +%s (p50); throughput auto %.2f×, pass-through %.2f× of direct\n",
		ms(la.pct(.5)-ld.pct(.5)), ms(lp.pct(.5)-ld.pct(.5)), ta.rps()/td.rps(), tp.rps()/td.rps())
	g := thr[mGet]
	rg := g.rps() / tp.rps()
	fmt.Fprintf(&b, "- tasks/get / pass-through tools/call throughput: **%.2f×** (target ≥ 1.5×: %s)\n", rg, met(rg >= 1.5))
	fmt.Fprintf(&b, "- tasks/update ack at c=1: answering p50 %s, p99 %s; key not outstanding p50 %s\n",
		ms(lat[mUpdAns].pct(.5)), ms(lat[mUpdAns].pct(.99)), ms(lat[mUpdNop].pct(.5)))
	fmt.Fprintf(&b, "- answers: auto %s, pass-through %s, direct %s; Redis used memory at end %s\n",
		orDash(env.formats[mAuto]), orDash(env.formats[mPass]), orDash(env.formats[mDirect]), orDash(env.redisMem))

	fmt.Fprintf(&b, "\n### Redis commands taskgate sent (slow log at 0 µs, per call)\n\n")
	fmt.Fprintf(&b, "Round trips are top-level commands; a script is shown with the commands it ran, in order. Writes: top-level commands that change data or publish (a script counts if its body does). ")
	fmt.Fprintf(&b, "TCP connects: machine-wide ActiveOpens (/proc/net/snmp) during the batch, per call; the bench client keeps its one connection, so on a quiet machine this is taskgate dialling the upstream (or Redis).\n\n")
	fmt.Fprintf(&b, "| batch | calls | round trips / call | writes / call | top-level commands / call | in-script / call | TCP connects / call |\n|---|---|---|---|---|---|---|\n")
	for _, c := range counted {
		calls := c.calls
		callsText := fmt.Sprint(c.calls)
		if calls == 0 {
			callsText = "—"
		}
		trunc := ""
		if c.t.truncated {
			trunc = " (slow log full: undercount)"
		}
		opens := "—"
		switch {
		case c.opens >= 0 && calls == 0:
			opens = fmt.Sprintf("%d in the window", c.opens)
		case c.opens >= 0:
			opens = ratio(int(c.opens), calls)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s%s | %s |\n", c.name, callsText, ratio(c.t.topTotal(), calls), ratio(c.t.writes, calls),
			perCall(c.t.top, calls), perCall(c.t.inScript, calls), trunc, opens)
	}
	var auto, pass, upd *countedBatch
	for i := range counted {
		switch counted[i].name {
		case mAuto:
			auto = &counted[i]
		case mPass:
			pass = &counted[i]
		case mUpdAns + ": up to the answering script call":
			upd = &counted[i]
		}
	}
	if auto != nil {
		fmt.Fprintf(&b, "\n- auto echo: %s round trips and %s writes per call (target: no Redis write: %s)\n",
			ratio(auto.t.topTotal(), auto.calls), ratio(auto.t.writes, auto.calls), met(auto.t.writes == 0))
	}
	if auto != nil && pass != nil && auto.opens >= 0 && pass.opens >= 0 {
		fmt.Fprintf(&b, "- TCP connects per call at c=1: auto %s, pass-through %s (a connect per call means the upstream connection was not reused)\n",
			ratio(int(auto.opens), auto.calls), ratio(int(pass.opens), pass.calls))
	}
	if upd != nil {
		scripts := 0
		for k, v := range upd.t.top {
			if isScript(strings.SplitN(k, "[", 2)[0]) {
				scripts += v
			}
		}
		ok := upd.t.topTotal() == upd.calls && scripts == upd.calls
		fmt.Fprintf(&b, "- answering tasks/update: %s round trips per update, %s of them script calls (target: one, 1 EVALSHA: %s)\n",
			ratio(upd.t.topTotal(), upd.calls), ratio(scripts, upd.calls), met(ok))
	}
	if p := firstErr.Load(); p != nil {
		fmt.Fprintf(&b, "- first error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "modern", "duration", "rounds", "concurrency", "latency-requests", "tasks", "update-requests", "count-requests"))
	return b.String()
}

// tcpActiveOpens is the machine's TCP ActiveOpens counter (connect()s that
// reached SYN_SENT), or -1 if /proc/net/snmp cannot be read.
func tcpActiveOpens() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return -1
	}
	var head []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, name := range head {
			if name == "ActiveOpens" && i < len(f) {
				var n int64
				if _, err := fmt.Sscan(f[i], &n); err == nil {
					return n
				}
			}
		}
		return -1
	}
	return -1
}
