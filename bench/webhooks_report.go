package main

import (
	"fmt"
	"strings"
	"time"
)

// whGoal is the bound on every on/off latency ratio.
const whGoal = 1.1

// webhooksReport is -mode webhooks' Markdown section: a table per target
// and one line per on/off ratio, judged against whGoal.
func webhooksReport(o options, ts []*whTarget, load0 string, wall time.Duration) string {
	var b strings.Builder
	cn := max(2, o.concurrency/2)
	fmt.Fprintf(&b, "## Webhooks: a failing or slow receiver and the hot path\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average (1/5/15 min) at start %s, at end %s; the load generator shares the CPUs with the three taskgates, their redis-servers, the receivers and the upstream. Wall time %s.\n",
		machine(), load0, loadAvg(), wall.Round(time.Second))
	fmt.Fprintf(&b, "%s (no persistence, loopback), one per target; one test upstream; a 2025-11-25 session per target. The same taskgate build three times: webhooks off; on (`--webhook-url`, every event type, no filter, default retry, 10 s timeout, 4 deliveries at once) with a receiver that answers 500 at once (every delivery fails and is retried, first within 5 s); on with a receiver that answers after 10 s (every delivery times out; the queue only grows). ",
		versionOf("redis-server", "--version"))
	fmt.Fprintf(&b, "%d rounds interleaving the targets (order reversed every other round); per round and target: CreateTaskResult latency at c=1 and c=%d (up to %d calls each, or %s), tasks/get of %d completed tasks at c=1 (up to %d, or %s) and at c=%d for %s. While one target is measured the other targets' taskgate and receiver are stopped (SIGSTOP/SIGCONT by PID), so each one's webhook work in the background (dispatch, retries) runs only in its own phases.\n\n",
		o.rounds, cn, o.createReqs, o.duration, o.tasks, o.latencyReqs, o.duration, o.concurrency, o.duration)
	fmt.Fprintf(&b, "| target | create p50 (c=1) | p99 (c=1) | create p50 (c=%d) | p99 (c=%d) | tasks/get p50 (c=1) | p99 (c=1) | tasks/get req/s (c=%d) | p50 | p99 | taskgate CPU per create | redis-server CPU per create | deliveries: receiver got / delivered / retried / dead |\n",
		cn, cn, o.concurrency)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range ts {
		per := func(d time.Duration) string {
			return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000/float64(max(t.created, 1)))
		}
		dl := "—"
		if t.recvAddr != "" {
			dl = fmt.Sprintf("%d / %d / %d / %d", t.posts, t.outcomes["delivered"], t.outcomes["retried"], t.outcomes["dead"])
		}
		c1, cN, g := t.lat[whCreate], t.lat[whCreateN], t.lat[whGet]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s |\n", t.name,
			ms(c1.pct(.5)), ms(c1.pct(.99)), ms(cN.pct(.5)), ms(cN.pct(.99)), ms(g.pct(.5)), ms(g.pct(.99)),
			t.thr.rps(), ms(t.thr.pct(.5)), ms(t.thr.pct(.99)), per(t.cpuTG), per(t.cpuRds), dl)
	}
	b.WriteString("\n")
	off := ts[0]
	for _, on := range ts[1:] {
		for _, l := range webhookRatios(on, off, cn, o.concurrency) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "webhooks", "rounds", "duration", "concurrency", "create-requests", "latency-requests", "tasks"))
	return b.String()
}

// webhookRatios are on's lines against off: the latency quantiles the
// goal bounds, and tasks/get throughput (which must not fall below
// 1/whGoal).
func webhookRatios(on, off *whTarget, cn, conc int) []string {
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }
	var worst float64
	var parts []string
	for _, q := range []struct {
		name string
		op   string
		p    float64
	}{
		{"create p50 c=1", whCreate, .5}, {"create p99 c=1", whCreate, .99},
		{fmt.Sprintf("create p50 c=%d", cn), whCreateN, .5}, {fmt.Sprintf("create p99 c=%d", cn), whCreateN, .99},
		{"tasks/get p50 c=1", whGet, .5}, {"tasks/get p99 c=1", whGet, .99},
	} {
		r := ratio(on.lat[q.op].pct(q.p), off.lat[q.op].pct(q.p))
		worst = max(worst, r)
		parts = append(parts, fmt.Sprintf("%s %.3f×", q.name, r))
	}
	thr := on.thr.rps() / max(off.thr.rps(), 1e-9)
	head := fmt.Sprintf("%s / off: create p50 at c=1 **%.3f×**, tasks/get p50 at c=1 **%.3f×** (target ≤ %g×: %s); tasks/get throughput at c=%d %.3f×",
		on.name, ratio(on.lat[whCreate].pct(.5), off.lat[whCreate].pct(.5)), ratio(on.lat[whGet].pct(.5), off.lat[whGet].pct(.5)),
		whGoal, met(ratio(on.lat[whCreate].pct(.5), off.lat[whCreate].pct(.5)) <= whGoal && ratio(on.lat[whGet].pct(.5), off.lat[whGet].pct(.5)) <= whGoal), conc, thr)
	return []string{head, fmt.Sprintf("%s / off, every quantile: %s (largest %.3f×)", on.name, strings.Join(parts, ", "), worst)}
}
