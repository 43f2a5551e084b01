package main

// -mode webhooks: what webhooks cost the hot path through the gateway.
// The goal: a receiver that answers slowly (10 s) or with 500
// does not move task creation's or tasks/get's latency (webhooks on / off
// ≤ 1.1×). The same taskgate build runs three times, each on its own
// redis-server, behind one test upstream: webhooks off; on, every event
// (all six types, no filter) sent to a receiver that answers 500 at once
// (every delivery is retried: the retry churn runs beside the load); on,
// to a receiver that answers after 10 s (taskgate's 10 s timeout: every
// delivery holds one of the endpoint's 4 slots until it gives up, and the
// queue only grows). The receivers are this program in the "whreceiver"
// role (whreceiver.go).
//
// Rounds interleave the targets (order reversed every other round); per
// round and target: CreateTaskResult latency at c=1 and at a moderate
// concurrency, tasks/get latency at c=1 and throughput at -concurrency.
// While one target is measured the other targets' taskgate and receiver
// are stopped (SIGSTOP, SIGCONT after, by PID): a target's webhook work
// in the background (dispatch, retries) then runs only in its own
// phases, where it belongs, and never slows another target's.

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// webhook targets and the ops measured on each.
const (
	whOff     = "webhooks off"
	whFail    = "on, receiver answers 500"
	whSlow    = "on, receiver answers after 10 s"
	whCreate  = "create c=1"
	whCreateN = "create c=N"
	whGet     = "tasks/get c=1"
)

// whSecret signs the benchmark's deliveries (a fixed test key: whsec_ and
// the base64 of 32 bytes).
const whSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type whTarget struct {
	name     string
	answer   string // the receiver's -target ("" for off)
	url      string
	addr     string // taskgate's listen address
	recvAddr string
	pids     []int // taskgate and receiver: stopped while others are measured
	tgPID    int
	redis    *redisServer
	create   request
	get      request
	lat      map[string]*result // by op
	thr      *result            // tasks/get at -concurrency
	cpuTG    time.Duration      // taskgate CPU over the create phases
	cpuRds   time.Duration      // redis-server CPU over the create phases
	created  int
	posts    int64            // POSTs the receiver got
	outcomes map[string]int64 // taskgate_webhook_deliveries_total by outcome
}

func webhooksBench(o options) error {
	shortDefaults(&o)
	unlessGiven(&o, "create-requests", &o.createReqs, 500)
	if o.tasks < 1 || o.createReqs < 1 || o.concurrency < 2 || o.rounds < 1 {
		return errors.New("-tasks, -create-requests and -rounds must be positive, -concurrency at least 2")
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	var ps procs
	defer ps.stopAll()
	targets, err := startWebhookTargets(run, &ps)
	if err != nil {
		return err
	}
	// Whatever happens, leave nothing stopped: stopAll's SIGTERM would
	// wait on a stopped process.
	defer func() {
		for _, t := range targets {
			signalAll(t.pids, syscall.SIGCONT)
		}
	}()
	c := newClient(o.concurrency)
	for _, t := range targets {
		activate(targets, t)
		if t.create, t.get, err = warmTaskRequests(run.ctx, c, t.name, t.url, o.tasks, o.concurrency); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: webhooks: %d targets, %d rounds\n", len(targets), o.rounds)
	for round := 0; round < o.rounds && run.ctx.Err() == nil; round++ {
		xs := roundOrder(targets, round)
		for _, t := range xs {
			measureWebhookTarget(run, c, o, targets, t)
		}
		fmt.Fprintf(os.Stderr, "bench: webhooks: round %d/%d done\n", round+1, o.rounds)
	}
	if err := run.ctx.Err(); err != nil {
		return err
	}
	for _, t := range targets {
		activate(targets, t)
		if e := t.lat[whCreate].errors + t.lat[whCreateN].errors + t.lat[whGet].errors + t.thr.errors; e > 0 {
			return fmt.Errorf("%s: %d errors under load: %s", t.name, e, firstErrText())
		}
		if err := readWebhookCounts(t); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return emit(webhooksReport(o, targets, run.load0, time.Since(run.t0)))
}

// startWebhookTargets starts the upstream, and per target its
// redis-server, its receiver and taskgate.
func startWebhookTargets(run *modeRun, ps *procs) ([]*whTarget, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	upAddr, _ := freeAddr()
	if err := ps.start(run.tu, "--listen", upAddr); err != nil {
		return nil, err
	}
	wait := []string{upAddr}
	var targets []*whTarget
	for _, s := range []struct{ name, answer string }{{whOff, ""}, {whFail, "500"}, {whSlow, "10s"}} {
		rs, err := startRedis(run.dir)
		if err != nil {
			return targets, err
		}
		t := &whTarget{name: s.name, answer: s.answer, redis: rs, thr: &result{},
			lat: map[string]*result{whCreate: {}, whCreateN: {}, whGet: {}}}
		targets = append(targets, t)
		t.addr, _ = freeAddr()
		t.url = "http://" + t.addr + "/mcp"
		args := append([]string{"serve", "--listen", t.addr, "--upstream", "http://" + upAddr + "/mcp",
			"--redis-url", "redis://" + rs.addr, "--task", "echo", "--max-tasks-per-owner", "-1", "--log-level", "error"}, pollArgs(run.tg)...)
		if s.answer != "" {
			t.recvAddr, _ = freeAddr()
			if err := ps.start(self, "-role", "whreceiver", "-listen", t.recvAddr, "-target", s.answer); err != nil {
				return targets, err
			}
			t.pids = append(t.pids, (*ps)[len(*ps)-1].Process.Pid)
			wait = append(wait, t.recvAddr)
			args = append(args, "--webhook-url", "http://"+t.recvAddr+"/hook", "--webhook-secret", whSecret)
		}
		if err := ps.start(run.tg, args...); err != nil {
			return targets, err
		}
		t.tgPID = (*ps)[len(*ps)-1].Process.Pid
		t.pids = append(t.pids, t.tgPID)
		wait = append(wait, t.addr)
	}
	for _, a := range wait {
		if err := waitTCP(a); err != nil {
			return targets, err
		}
	}
	for _, t := range targets {
		fmt.Fprintf(os.Stderr, "bench: webhooks: %s: taskgate %s (PID %d), redis-server %s (PID %d), receiver %s\n",
			t.name, t.addr, t.tgPID, t.redis.addr, t.redis.cmd.Process.Pid, orDash(t.recvAddr))
	}
	return targets, nil
}

// measureWebhookTarget runs one round's phases on t, the others stopped.
func measureWebhookTarget(run *modeRun, c *http.Client, o options, all []*whTarget, t *whTarget) {
	ctx := run.ctx
	activate(all, t)
	_ = pause(ctx, 200*time.Millisecond) // let a resumed process catch up on its timers
	cn := max(2, o.concurrency/2)
	r0, g0 := cpuTime(t.redis.cmd.Process.Pid), cpuTime(t.tgPID)
	r := load(ctx, c, t.url, t.create, 1, o.duration, o.createReqs)
	drain(ctx, c, op{opCreate, t.name, t.url, t.create})
	rn := load(ctx, c, t.url, t.create, cn, o.duration, o.createReqs*cn)
	drain(ctx, c, op{opCreate, t.name, t.url, t.create})
	t.cpuRds += cpuTime(t.redis.cmd.Process.Pid) - r0
	t.cpuTG += cpuTime(t.tgPID) - g0
	t.created += r.requests + rn.requests
	t.lat[whCreate].merge(r)
	t.lat[whCreateN].merge(rn)
	t.lat[whGet].merge(load(ctx, c, t.url, t.get, 1, o.duration, o.latencyReqs))
	t.thr.merge(load(ctx, c, t.url, t.get, o.concurrency, o.duration, 0))
}

// activate lets t's processes run and stops every other target's.
func activate(all []*whTarget, t *whTarget) {
	for _, x := range all {
		if x != t {
			signalAll(x.pids, syscall.SIGSTOP)
		}
	}
	signalAll(t.pids, syscall.SIGCONT)
}

// signalAll sends sig to each of pids, processes this run started.
func signalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// readWebhookCounts reads what the receiver got and taskgate's
// delivery counters; a target with webhooks on that delivered nothing
// measured nothing.
func readWebhookCounts(t *whTarget) error {
	if t.recvAddr == "" {
		return nil
	}
	n, err := receiverPosts(t.recvAddr)
	if err != nil {
		return err
	}
	t.posts = n
	if t.outcomes, err = deliveryOutcomes("http://" + t.addr + "/metrics"); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("the receiver got no delivery: webhooks were not on")
	}
	return nil
}

// deliveryOutcomes sums taskgate_webhook_deliveries_total by outcome.
func deliveryOutcomes(metricsURL string) (map[string]int64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(metricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "taskgate_webhook_deliveries_total{") {
			continue
		}
		_, rest, _ := strings.Cut(l, `outcome="`)
		outcome, _, _ := strings.Cut(rest, `"`)
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", l, err)
		}
		out[outcome] += int64(v)
	}
	return out, sc.Err()
}
