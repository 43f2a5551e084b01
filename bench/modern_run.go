package main

// -mode modern's run (modern.go says what it measures): the processes,
// then the steps in order, each on what the earlier ones left: the echo
// paths and their Redis commands, tasks/get on completed tasks,
// tasks/update acks, and the interleaved rounds of latency and throughput.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// modernMode is what the mode's steps share.
type modernMode struct {
	*modernRun
	ctx      context.Context
	counted  []countedBatch    // Redis commands per batch, in the order counted
	formats  map[string]string // the echo answers' Content-Type, by op
	echoes   []op              // (1) auto, pass-through, direct
	gets     []op              // (2) tasks/get on completed tasks
	updates  []op              // (3) tasks/update for a key not outstanding
	probe    string            // the task those updates go to, and its real key
	probeKey string
}

// modernBench is -mode modern.
func modernBench(o options) error {
	shortDefaults(&o)
	if o.tasks < 1 || o.concurrency < 1 || o.rounds < 1 || o.updateReqs < 1 || o.countReqs < 1 {
		return errors.New("-tasks, -concurrency, -rounds, -update-requests and -count-requests must be positive")
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	rs, err := startRedis(run.dir)
	if err != nil {
		return err
	}
	defer rs.stop()
	var ps procs
	defer ps.stopAll()
	m, err := startModern(run, o, rs, &ps)
	if err != nil {
		return err
	}
	defer m.rc.close()
	for _, step := range []func() error{m.echoPaths, m.countEchoes, m.completedGets, m.updateAcks, m.countAnswers} {
		if err := step(); err != nil {
			return err
		}
	}
	all := slices.Concat(m.echoes, m.gets, m.updates)
	lat, thr, err := m.rounds(all)
	if err != nil {
		return err
	}
	// Finish the probe task (nothing depends on it; it is tidy).
	if _, err := m.answer(m.ctx, m.probe, m.probeKey, "probe"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: answering the probe task: %v\n", err)
	}
	env := modernEnv{
		load0: run.load0, load1: loadAvg(), redis: versionOf("redis-server", "--version"),
		redisMem: redisInfo(rs.addr, "used_memory_human"), formats: m.formats, wall: time.Since(run.t0),
	}
	return emit(modernReport(o, env, all, lat, thr, m.counted))
}

// startModern starts the stateless upstream and taskgate (into ps) on rs.
func startModern(run *modeRun, o options, rs *redisServer, ps *procs) (*modernMode, error) {
	upAddr, _ := freeAddr()
	tgAddr, _ := freeAddr()
	m := &modernMode{ctx: run.ctx, modernRun: &modernRun{o: o, c: newClient(o.concurrency), upURL: "http://" + upAddr + "/mcp", tgURL: "http://" + tgAddr + "/mcp"}}
	if err := ps.start(run.tu, "--listen", upAddr, "--stateless"); err != nil {
		return nil, err
	}
	if err := ps.start(run.tg, append([]string{"serve", "--listen", tgAddr, "--upstream", m.upURL,
		"--redis-url", "redis://" + rs.addr, "--task", "slow", "--task", "elicit", "--max-tasks-per-owner", "-1",
		"--log-level", "warn"}, pollArgs(run.tg)...)...); err != nil {
		return nil, err
	}
	for _, a := range []string{upAddr, tgAddr} {
		if err := waitTCP(a); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: redis-server %s (PID %d), stateless upstream %s (PID %d), taskgate %s (PID %d)\n",
		rs.addr, rs.cmd.Process.Pid, upAddr, (*ps)[0].Process.Pid, tgAddr, (*ps)[1].Process.Pid)
	m.rc = newRedisCounter(rs.addr)
	return m, nil
}

// verbose says, with -v, what starts now (to attach a profiler).
func (m *modernMode) verbose(format string, args ...any) {
	if m.o.verbose {
		fmt.Fprintf(os.Stderr, "bench: %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// echoPaths is (1): echo auto, passed through, direct. Every answer must
// carry the echoed text and be final (an auto call that became a task
// would not).
func (m *modernMode) echoPaths() error {
	echo := `"name":"echo","arguments":{"text":"hello"}`
	want := []byte(`"text":"hello"`)
	m.echoes = []op{
		{mAuto, "taskgate", m.tgURL, request{body: modernBody("tools/call", echo, true), header: modernHeader("tools/call", "echo"), want: want}},
		{mPass, "taskgate", m.tgURL, request{body: modernBody("tools/call", echo, false), header: modernHeader("tools/call", "echo"), want: want}},
		{mDirect, "upstream", m.upURL, request{body: modernBody("tools/call", echo, false), header: modernHeader("tools/call", "echo"), want: want}},
	}
	m.formats = map[string]string{}
	for _, x := range m.echoes {
		res, ct, err := modernCall(m.ctx, m.c, x.url, "tools/call", "echo", x.name == mAuto, map[string]any{"name": "echo", "arguments": map[string]any{"text": "hello"}})
		if err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
		if !strings.Contains(string(res), `"resultType":"complete"`) || !strings.Contains(string(res), "hello") {
			return fmt.Errorf("%s: want a complete echo result, got %.300s", x.name, res)
		}
		m.formats[x.name] = ct
	}
	return warm(m.ctx, m.c, m.echoes, m.o.concurrency)
}

// count runs a batch with the slow log on and keeps what Redis saw; calls
// > 0 means per call (run returns how many), 0 a window.
func (m *modernMode) count(name string, calls int, run func() (int, error)) error {
	m.verbose("counting Redis commands: %s", name)
	if err := m.rc.begin(m.ctx); err != nil {
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
	t, err2 := m.rc.end(m.ctx)
	if err = errors.Join(err, err2); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if calls > 0 {
		calls = n
	}
	m.counted = append(m.counted, countedBatch{name: name, calls: calls, elapsed: el, t: t, opens: opens})
	return nil
}

// countLoad counts -count-requests of x, one at a time.
func (m *modernMode) countLoad(x op) error {
	return m.count(x.name, 1, func() (int, error) {
		r := load(m.ctx, m.c, x.url, x.req, 1, time.Minute, m.o.countReqs)
		return r.requests, errIf(r)
	})
}

// countEchoes counts Redis commands on the echo paths, before any task
// exists (so no worker renews a lease meanwhile), and in an idle window as
// long.
func (m *modernMode) countEchoes() error {
	for _, x := range m.echoes {
		if err := m.countLoad(x); err != nil {
			return err
		}
	}
	idle := max(m.counted[0].elapsed, m.counted[1].elapsed)
	return m.count(fmt.Sprintf("idle window (%s, no requests)", idle.Round(time.Millisecond)), 0, func() (int, error) {
		return 0, pause(m.ctx, idle)
	})
}

// completedGets is (2): tasks/get on completed tasks, spread over the
// clients.
func (m *modernMode) completedGets() error {
	m.verbose("creating %d completed tasks", m.o.tasks)
	get := request{want: []byte(`"status":"completed"`)}
	for i := 0; i < m.o.tasks; i++ {
		id, err := m.toolTask(m.ctx, "slow", map[string]any{"seconds": slowToolSecs, "text": "x"})
		if err != nil {
			return err
		}
		if _, err := m.waitStatus(m.ctx, id, "completed"); err != nil {
			return err
		}
		q, _ := json.Marshal(id)
		get.bodies = append(get.bodies, modernBody("tasks/get", `"taskId":`+string(q), true))
		get.headers = append(get.headers, modernHeader("tasks/get", id))
	}
	m.gets = []op{{mGet, "taskgate", m.tgURL, get}}
	if err := warm(m.ctx, m.c, m.gets, m.o.concurrency); err != nil {
		return err
	}
	return m.countLoad(m.gets[0])
}

// updateAcks is (3): a probe task stays input_required for the whole run
// and gets updates for a key it never issued (the ack path without state
// change: repeatable); fresh elicit tasks get real answers.
func (m *modernMode) updateAcks() error {
	m.verbose("tasks/update: warming up")
	var err error
	if m.probe, m.probeKey, err = m.elicitWaiting(m.ctx); err != nil {
		return err
	}
	pq, _ := json.Marshal(m.probe)
	nop := request{
		body:   modernBody("tasks/update", `"taskId":`+string(pq)+`,"inputResponses":{"`+unknownUpdKey+`":{"action":"decline"}}`, true),
		header: modernHeader("tasks/update", m.probe),
		want:   []byte(`"resultType":"complete"`),
	}
	m.updates = []op{{mUpdNop, "taskgate", m.tgURL, nop}}
	if r := load(m.ctx, m.c, m.tgURL, nop, 1, 5*time.Second, 200); r.requests == 0 || r.errors > 0 {
		return fmt.Errorf("%s: %d answers, %d errors during warm-up: %s", mUpdNop, r.requests, r.errors, firstErrText())
	}
	if _, err := m.answerSamples(m.ctx, 3); err != nil {
		return fmt.Errorf("%s: warm-up: %w", mUpdAns, err)
	}
	return m.countLoad(m.updates[0])
}

// modernAnswersCounted is how many real answers countAnswers counts.
const modernAnswersCounted = 5

// countAnswers counts real answers, one at a time: the handler's part is
// what Redis saw up to and including the script call that carries the
// answer; the worker's follow-up (hand the answer to the upstream, store
// the result) comes after it.
func (m *modernMode) countAnswers() error {
	var head, tail redisTally
	for i := 0; i < modernAnswersCounted; i++ {
		h, t, err := m.countAnswer()
		if err != nil {
			return err
		}
		head.add(h)
		tail.add(t)
	}
	m.counted = append(m.counted,
		countedBatch{name: mUpdAns + ": up to the answering script call", calls: modernAnswersCounted, t: head, opens: -1},
		countedBatch{name: "the worker's follow-up per answered task (answer to upstream, result stored)", calls: modernAnswersCounted, t: tail, opens: -1})
	return nil
}

// countAnswer answers one fresh elicit task with the slow log on and
// splits what Redis saw at the answering script call.
func (m *modernMode) countAnswer() (head, tail redisTally, err error) {
	ctx := m.ctx
	id, key, err := m.elicitWaiting(ctx)
	if err != nil {
		return head, tail, err
	}
	answerSeq++
	name := fmt.Sprint("bench-", answerSeq)
	if err := m.rc.begin(ctx); err != nil {
		return head, tail, err
	}
	if _, err := m.answer(ctx, id, key, name); err != nil {
		return head, tail, err
	}
	// Let the worker finish without polling (a poll would be counted).
	if err := pause(ctx, 300*time.Millisecond); err != nil {
		return head, tail, err
	}
	logs, err := m.rc.endRaw(ctx)
	if err != nil {
		return head, tail, err
	}
	if err := m.answered(ctx, id, name); err != nil {
		return head, tail, err
	}
	head, tail = tallySplit(logs, name)
	return head, tail, nil
}

// rounds: latency at c=1, real answers, throughput at c; the order
// reversed every other round.
func (m *modernMode) rounds(all []op) (lat, thr map[string]*result, err error) {
	ctx, o := m.ctx, m.o
	lat, thr = map[string]*result{}, map[string]*result{}
	for _, x := range all {
		lat[x.name], thr[x.name] = &result{}, &result{}
	}
	lat[mUpdAns] = &result{}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		for _, x := range roundOrder(all, round) {
			m.verbose("round %d: %s at c=1", round+1, x.name)
			lat[x.name].merge(load(ctx, m.c, x.url, x.req, 1, o.duration, o.latencyReqs))
		}
		m.verbose("round %d: %s ×%d", round+1, mUpdAns, o.updateReqs)
		r, err := m.answerSamples(ctx, o.updateReqs)
		if err != nil && ctx.Err() == nil {
			return nil, nil, fmt.Errorf("%s: %w", mUpdAns, err)
		}
		lat[mUpdAns].merge(r)
		for _, x := range roundOrder(slices.Concat(m.echoes, m.gets), round) {
			m.verbose("round %d: %s at c=%d", round+1, x.name, o.concurrency)
			thr[x.name].merge(load(ctx, m.c, x.url, x.req, o.concurrency, o.duration, 0))
		}
		fmt.Fprintf(os.Stderr, "bench: round %d/%d done\n", round+1, o.rounds)
	}
	return lat, thr, ctx.Err()
}
