package main

// -mode modern's report: the table of latency and throughput per
// operation, the targets met or missed, and the Redis commands taskgate
// sent per call (counted in modern_run.go).

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// modernEnv is where and how long the run took place.
type modernEnv struct {
	load0, load1, redis, redisMem string
	formats                       map[string]string
	wall                          time.Duration
}

// modernReport is the mode's Markdown section.
func modernReport(o options, env modernEnv, all []op, lat, thr map[string]*result, counted []countedBatch) string {
	var b strings.Builder
	modernHeaderText(&b, o, env)
	modernTable(&b, o, all, lat, thr)
	modernTargets(&b, env, lat, thr)
	modernCounted(&b, counted)
	if p := firstErr.Load(); p != nil {
		fmt.Fprintf(&b, "- first error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "modern", "duration", "rounds", "concurrency", "latency-requests", "tasks", "update-requests", "count-requests"))
	return b.String()
}

// modernHeaderText is the title, the machine and what was run.
func modernHeaderText(b *strings.Builder, o options, env modernEnv) {
	fmt.Fprintf(b, "## MCP Tasks for 2026-07-28 clients: taskgate + redis-server in front of a stateless upstream\n\n")
	fmt.Fprintf(b, "Machine: %s. Load average (1/5/15 min) at start %s, at end %s; the load generator shares the CPUs with taskgate, the upstream and Redis.\n",
		machine(), env.load0, env.load1)
	fmt.Fprintf(b, "%s (no persistence, loopback); upstream: testupstream --stateless (go-sdk, 2026-07-28); taskgate --task slow --task elicit, no rule for echo. ", env.redis)
	fmt.Fprintf(b, "No session: every request carries the 2026-07-28 _meta and MCP-Protocol-Version, Mcp-Method, Mcp-Name and one Authorization (one owner). ")
	fmt.Fprintf(b, "%d rounds interleaving the targets; per round and target: latency at c=1 (up to %d requests or %s), throughput at c=%d for %s; %d answered tasks/update per round. ",
		o.rounds, o.latencyReqs, o.duration, o.concurrency, o.duration, o.updateReqs)
	fmt.Fprintf(b, "tasks/get polls %d completed tasks (slow tool, %g s). Wall time %s.\n\n", o.tasks, slowToolSecs, env.wall.Round(time.Second))
}

// modernTable is latency and throughput per operation.
func modernTable(b *strings.Builder, o options, all []op, lat, thr map[string]*result) {
	fmt.Fprintf(b, "| operation | req/s (c=%d) | p50 | p99 | p50 (c=1) | p99 (c=1) | samples (c=1) | errors |\n|---|---|---|---|---|---|---|---|\n", o.concurrency)
	names := []string{}
	for _, x := range all {
		names = append(names, x.name)
	}
	names = append(names, mUpdAns)
	for _, n := range names {
		l, t := lat[n], thr[n]
		if t == nil || t.requests+t.errors == 0 {
			fmt.Fprintf(b, "| %s | — | — | — | %s | %s | %d | %d |\n", n, ms(l.pct(.5)), ms(l.pct(.99)), len(l.lat), l.errors)
			continue
		}
		fmt.Fprintf(b, "| %s | %.0f | %s | %s | %s | %s | %d | %d |\n", n, t.rps(), ms(t.pct(.5)), ms(t.pct(.99)),
			ms(l.pct(.5)), ms(l.pct(.99)), len(l.lat), t.errors+l.errors)
	}
}

// modernTargets is the latency and throughput targets, met or missed.
func modernTargets(b *strings.Builder, env modernEnv, lat, thr map[string]*result) {
	la, lp, ld := lat[mAuto], lat[mPass], lat[mDirect]
	ta, tp, td := thr[mAuto], thr[mPass], thr[mDirect]
	r50 := float64(la.pct(.5)) / float64(lp.pct(.5))
	r99 := float64(la.pct(.99)) / float64(lp.pct(.99))
	fmt.Fprintf(b, "\n- auto / pass-through latency at c=1: p50 **%.3f×** (target ≤ 1.05×: %s), p99 %.3f×; throughput auto / pass-through %.3f×\n",
		r50, met(r50 <= 1.05), r99, ta.rps()/tp.rps())
	fmt.Fprintf(b, "- over direct at c=1: auto +%s, pass-through +%s (p50); throughput auto %.2f×, pass-through %.2f× of direct\n",
		ms(la.pct(.5)-ld.pct(.5)), ms(lp.pct(.5)-ld.pct(.5)), ta.rps()/td.rps(), tp.rps()/td.rps())
	g := thr[mGet]
	rg := g.rps() / tp.rps()
	fmt.Fprintf(b, "- tasks/get / pass-through tools/call throughput: **%.2f×** (target ≥ 1.5×: %s)\n", rg, met(rg >= 1.5))
	fmt.Fprintf(b, "- tasks/update ack at c=1: answering p50 %s, p99 %s; key not outstanding p50 %s\n",
		ms(lat[mUpdAns].pct(.5)), ms(lat[mUpdAns].pct(.99)), ms(lat[mUpdNop].pct(.5)))
	fmt.Fprintf(b, "- answers: auto %s, pass-through %s, direct %s; Redis used memory at end %s\n",
		orDash(env.formats[mAuto]), orDash(env.formats[mPass]), orDash(env.formats[mDirect]), orDash(env.redisMem))
}

// modernCounted is the Redis commands per call, and the targets on them.
func modernCounted(b *strings.Builder, counted []countedBatch) {
	fmt.Fprintf(b, "\n### Redis commands taskgate sent (slow log at 0 µs, per call)\n\n")
	fmt.Fprintf(b, "Round trips are top-level commands; a script is shown with the commands it ran, in order. Writes: top-level commands that change data or publish (a script counts if its body does). ")
	fmt.Fprintf(b, "TCP connects: machine-wide ActiveOpens (/proc/net/snmp) during the batch, per call; the bench client keeps its one connection, so on a quiet machine this is taskgate dialling the upstream (or Redis).\n\n")
	fmt.Fprintf(b, "| batch | calls | round trips / call | writes / call | top-level commands / call | in-script / call | TCP connects / call |\n|---|---|---|---|---|---|---|\n")
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
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s%s | %s |\n", c.name, callsText, ratio(c.t.topTotal(), calls), ratio(c.t.writes, calls),
			perCall(c.t.top, calls), perCall(c.t.inScript, calls), trunc, opens)
	}
	modernCountedTargets(b, counted)
}

// modernCountedTargets is the targets on Redis commands: no write on the
// auto path, one script call per answering tasks/update.
func modernCountedTargets(b *strings.Builder, counted []countedBatch) {
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
		fmt.Fprintf(b, "\n- auto echo: %s round trips and %s writes per call (target: no Redis write: %s)\n",
			ratio(auto.t.topTotal(), auto.calls), ratio(auto.t.writes, auto.calls), met(auto.t.writes == 0))
	}
	if auto != nil && pass != nil && auto.opens >= 0 && pass.opens >= 0 {
		fmt.Fprintf(b, "- TCP connects per call at c=1: auto %s, pass-through %s (a connect per call means the upstream connection was not reused)\n",
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
		fmt.Fprintf(b, "- answering tasks/update: %s round trips per update, %s of them script calls (target: one, 1 EVALSHA: %s)\n",
			ratio(upd.t.topTotal(), upd.calls), ratio(scripts, upd.calls), met(ok))
	}
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
