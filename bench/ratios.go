package main

// -mode ratios: the performance goals at a glance, in a few minutes, to
// judge a change before it lands. One line per goal: the ratio measured in
// this run against its baseline measured in the same run, the goal, and
// met or missed. The phases are the other modes' with shorter loads
// (-duration 3s, -rounds 2, -latency-requests 500 unless given), so the
// figures are noisier than the report's; the report (docs/BENCHMARKS.md)
// is what a claim cites.
//
//	pass-through throughput and CPU per call vs httputil.ReverseProxy (passthrough.go)
//	tasks/get throughput, both flavours, vs the parse-and-GET floor (tasksget.go)
//	taskgate RSS per held task, 10,000 held, default GC (scale.go)
//	lease renewal of 1,000 held tasks: round trips and time, batched vs one per task (here)
//	a stdio server behind taskgate (both modes) vs behind supergateway 4.0.0 (stdiopeer.go)

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/taskstore"
)

// figures are what the modes measured, by name, for this mode's lines.
var figures = map[string]float64{}

func figure(name string, v float64) { figures[name] = v }

func ratiosBench(o options) error {
	t0 := time.Now()
	load0 := loadAvg()
	q := o
	unlessGiven(&o, "duration", &q.duration, 3*time.Second)
	unlessGiven(&o, "rounds", &q.rounds, 2)
	unlessGiven(&o, "latency-requests", &q.latencyReqs, 500)
	unlessGiven(&o, "hold-window", &q.holdWindow, 5*time.Second)
	q.set = map[string]bool{"duration": true, "latency-requests": true}
	dir, tg, tu, cleanup, err := buildOnce()
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Fprintln(os.Stderr, "bench: ratios: pass-through")
	if err := passthrough(q); err != nil {
		return fmt.Errorf("pass-through: %w", err)
	}
	fmt.Fprintln(os.Stderr, "bench: ratios: tasks/get")
	if err := tasksGetBench(q); err != nil {
		return fmt.Errorf("tasks/get: %w", err)
	}
	fmt.Fprintln(os.Stderr, "bench: ratios: memory per held task")
	nofile, err := raiseNofile()
	if err != nil {
		return err
	}
	if nofile < uint64(q.held)+1000 {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is too low for -held %d", nofile, q.held)
	}
	ctx, stop := interruptible()
	defer stop()
	mem, err := scaleMemory(ctx, q, dir, tg, tu, nofile, nil)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	perHeld := float64(mem.tgMax-mem.tgBefore) / float64(max(mem.created, 1))
	fmt.Fprintln(os.Stderr, "bench: ratios: lease renewal")
	lr, err := leaseRenewal(ctx, dir)
	if err != nil {
		return fmt.Errorf("lease renewal: %w", err)
	}

	fmt.Fprintln(os.Stderr, "bench: ratios: stdio server, taskgate against supergateway")
	if _, err := stdioPeerBench(ctx, q, tg, tu); err != nil {
		return fmt.Errorf("stdio against supergateway: %w", err)
	}

	var b strings.Builder
	line := func(name string, got, goal float64, atLeast bool, unit, base string) {
		ok := got <= goal
		cmp := "≤"
		if atLeast {
			ok, cmp = got >= goal, "≥"
		}
		verdict := "met"
		if !ok {
			verdict = "MISSED"
		}
		fmt.Fprintf(&b, "%-44s %8.2f%s  goal %s %g%s  %-6s  (%s)\n", name, got, unit, cmp, goal, unit, verdict, base)
	}
	fmt.Fprintf(&b, "taskgate performance ratios, %s; load average %s at start, %s at end; %s\n", machine(), load0, loadAvg(), time.Since(t0).Round(time.Second))
	line("pass-through throughput / httputil", figures["passthrough.rps"], 1.1, true, "×", "req/s at c=16, same run")
	line("pass-through CPU per call / httputil", figures["passthrough.cpu"], 0.9, false, "×", "proxy process user+sys")
	line("tasks/get 2026-07-28 / parse-and-GET", figures["tasksget.2026.rps"], 1.0, true, "×", fmt.Sprintf("req/s; CPU %.2f×", figures["tasksget.2026.cpu"]))
	line("tasks/get 2025-11-25 / parse-and-GET", figures["tasksget.2025.rps"], 1.0, true, "×", fmt.Sprintf("req/s; CPU %.2f×", figures["tasksget.2025.cpu"]))
	line("RSS per held task (10,000 held, default GC)", perHeld, 24, false, " KiB", fmt.Sprintf("%d held, %d refused or failed, largest sample in %s", mem.created, mem.failed, q.holdWindow))
	line("lease renewal round trips per period", float64(lr.batchedRTT), 1, false, "", fmt.Sprintf("%d held tasks; one per task: %d", lr.held, lr.perTaskRTT))
	line("lease renewal time, one per task / batched", lr.perTask.Seconds()/lr.batched.Seconds(), 1, true, "×",
		fmt.Sprintf("%s vs %s for %d leases", lr.perTask.Round(time.Microsecond), lr.batched.Round(time.Microsecond), lr.held))
	for i, mode := range []string{"per-session", "shared"} { // stdiopeer.go's targets 0 and 1
		line("stdio "+mode+" throughput / supergateway", figures[fmt.Sprintf("stdio.peer%d.rps", i)], 1.5, true, "×", "req/s at c=16, a session per client, same stdio server")
		line("stdio "+mode+" p50 at c=1 / supergateway", figures[fmt.Sprintf("stdio.peer%d.p50", i)], 0.8, false, "×", "one client")
	}
	return emit(b.String())
}

type leaseFigures struct {
	held                   int
	perTaskRTT, batchedRTT int64
	perTask, batched       time.Duration
}

// rttCounter counts round trips: one per command sent alone, one per
// pipeline.
type rttCounter struct{ n atomic.Int64 }

func (c *rttCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *rttCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *rttCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// leaseRenewal renews the leases of 1,000 held tasks on a fresh
// redis-server, one Extend per task and then one ExtendMany (what a
// replica does every renewal period), three times each; the best time of
// each counts.
func leaseRenewal(ctx context.Context, dir string) (leaseFigures, error) {
	const held = 1000
	rs, err := startRedis(dir)
	if err != nil {
		return leaseFigures{}, err
	}
	defer rs.stop()
	rdb := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer rdb.Close()
	rtt := &rttCounter{}
	rdb.AddHook(rtt)
	s := taskstore.New(rdb, taskstore.Options{MaxTasksPerOwner: -1})
	defer s.Close()
	refs := make([]taskstore.LeaseRef, held)
	for i := range refs {
		t, err := s.Create(ctx, taskstore.NewTask{Owner: "bench", Tool: "slow", Protocol: taskstore.Protocol2026,
			Lease: &taskstore.LeaseRequest{Holder: "r1", Duration: time.Minute}})
		if err != nil {
			return leaseFigures{}, err
		}
		refs[i] = taskstore.LeaseRef{Owner: "bench", ID: t.ID}
	}
	f := leaseFigures{held: held, perTask: time.Hour, batched: time.Hour}
	for round := 0; round < 3; round++ {
		n0, t0 := rtt.n.Load(), time.Now()
		for _, r := range refs {
			if err := s.Extend(ctx, r.Owner, r.ID, "r1", time.Minute); err != nil {
				return f, err
			}
		}
		f.perTask, f.perTaskRTT = min(f.perTask, time.Since(t0)), rtt.n.Load()-n0
		n0, t0 = rtt.n.Load(), time.Now()
		for _, err := range s.ExtendMany(ctx, refs, "r1", time.Minute) {
			if err != nil {
				return f, err
			}
		}
		f.batched, f.batchedRTT = min(f.batched, time.Since(t0)), rtt.n.Load()-n0
	}
	if f.batchedRTT == 0 {
		return f, errors.New("ExtendMany sent nothing")
	}
	return f, nil
}
