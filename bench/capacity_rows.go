package main

// The capacity report's per-operation rows: a counted batch and a CPU
// batch divided into costs per operation, and the tables and number
// formats the report writes them with.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// capRow is one operation's cost per operation.
type capRow struct {
	name, how             string
	n                     int     // counted operations
	cmds, writes, scripts float64 // top-level commands, of which writes, commands run inside scripts
	rtt, global           float64 // taskgate's round trips; commands on unsharded keys
	kinds                 string
	cpuN, rounds          int
	tg, rs                float64 // µs per operation (the median of the rounds); < 0 not measured
	tgLo, tgHi            float64 // the rounds' smallest and largest taskgate CPU; < 0 none
}

func sumMap(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// row divides a counted batch by per and a CPU batch by its own count
// (cpuPer, if > 0, instead).
func row(name, how string, c capCount, per float64, cpu *capCPU, cpuPer float64, rsToo bool) capRow {
	r := capRow{name: name, how: how, n: c.n, tg: -1, rs: -1}
	r.cmds = float64(c.t.topTotal()) / per
	r.writes = float64(c.t.writes) / per
	r.scripts = float64(sumMap(c.t.inScript)) / per
	r.rtt = c.rtt / per
	r.global = float64(c.global) / per
	r.kinds = perCallF(c.t.top, per)
	r.tgLo, r.tgHi = -1, -1
	switch {
	case cpu != nil && cpuPer > 0:
		r.cpuN = int(cpuPer)
		r.tg = float64(cpu.tg.Nanoseconds()) / 1e3 / cpuPer
		if rsToo {
			r.rs = float64(cpu.rs.Nanoseconds()) / 1e3 / cpuPer
		}
	case cpu != nil:
		r.cpuN, r.rounds = cpu.n, len(cpu.rounds)
		r.tg, r.tgLo, r.tgHi = cpu.perOp(func(c capCPU) time.Duration { return c.tg })
		if rsToo {
			r.rs, _, _ = cpu.perOp(func(c capCPU) time.Duration { return c.rs })
		}
	default:
		r.tg = float64(c.tg.Microseconds()) / per
	}
	return r
}

// perCallF is perCall with a fractional divisor.
func perCallF(m map[string]int, per float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		v := float64(m[k]) / per
		if v < 0.005 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.3g", k, v))
	}
	if len(parts) == 0 {
		return "< 0.005 each"
	}
	return strings.Join(parts, ", ")
}

// minusRow is a − b: an operation measured as the difference of two.
func minusRow(name, how string, a, b capRow) capRow {
	r := capRow{name: name, how: how, kinds: "—", tg: -1, rs: -1, tgLo: -1, tgHi: -1}
	// A difference of two measured counts; a few thousandths below zero is
	// rounding, not a negative cost.
	d := func(x, y float64) float64 {
		v := x - y
		if v < 0 && v > -0.01 {
			return 0
		}
		return v
	}
	r.cmds, r.writes, r.scripts = d(a.cmds, b.cmds), d(a.writes, b.writes), d(a.scripts, b.scripts)
	r.rtt, r.global = d(a.rtt, b.rtt), d(a.global, b.global)
	if a.tg >= 0 && b.tg >= 0 {
		r.tg = a.tg - b.tg
	}
	if a.rs >= 0 && b.rs >= 0 {
		r.rs = a.rs - b.rs
	}
	return r
}

// f3 is a count with three significant digits; "—" when not measured.
func f3(v float64) string {
	switch {
	case v < 0:
		return "—"
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// us is microseconds; "—" when not measured.
func us(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f µs", v)
}

func bytesText(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1<<30:
		return fmt.Sprintf("%.1f GiB", v/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.2f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func countText(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// ratioF is a / b as "1.23×".
func ratioF(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "1.00×"
		}
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// writeRows is the per-operation table.
func writeRows(b *strings.Builder, rows []capRow) {
	fmt.Fprintf(b, "| operation | how measured | counted | Redis commands | of which writes | run inside scripts | round trips (taskgate) | on unsharded keys | commands by kind | taskgate CPU | redis-server CPU |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		n := "—"
		if r.n > 0 {
			n = strconv.Itoa(r.n)
		}
		cpuNote := ""
		switch {
		case r.cpuN > 0 && r.tg >= 0 && r.tgLo >= 0:
			cpuNote = fmt.Sprintf(" (%d in %d rounds: %.0f–%.0f)", r.cpuN, r.rounds, r.tgLo, r.tgHi)
		case r.cpuN > 0 && r.tg >= 0:
			cpuNote = fmt.Sprintf(" (%d)", r.cpuN)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%s | %s |\n", r.name, r.how, n, f3(r.cmds), f3(r.writes), f3(r.scripts),
			f3(r.rtt), f3(r.global), r.kinds, us(r.tg), cpuNote, us(r.rs))
	}
}

// writeCensus is a census table, per task over per tasks.
func writeCensus(b *strings.Builder, cs census, per int) {
	keys := make([]string, 0, len(cs))
	for k := range cs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return cs[keys[i]].bytes > cs[keys[j]].bytes })
	fmt.Fprintf(b, "| key (ids and owner digests elided) | keys | members | MEMORY USAGE | per task | longest time to live left |\n|---|---|---|---|---|---|\n")
	for _, k := range keys {
		s := cs[k]
		ttl := "none"
		if s.pttl > 0 {
			ttl = (time.Duration(s.pttl) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(b, "| `%s` | %d | %d | %s | %s | %s |\n", k, s.keys, s.members, bytesText(float64(s.bytes)), bytesText(float64(s.bytes)/float64(max(per, 1))), ttl)
	}
	fmt.Fprintf(b, "| total | | | %s | %s | |\n", bytesText(float64(cs.total())), bytesText(float64(cs.total())/float64(max(per, 1))))
}

// capacityRows divides the counted and CPU batches of phases A and H into
// the per-operation rows: life, create, finish, pollWork, pollFirst,
// pollRepeat, elicit, round, renew, sweep, idle.
func capacityRows(o options, a *capA, h *capH) map[string]capRow {
	rows := map[string]capRow{}
	rows["life"] = row("create + finish (echo task)", "tools/call echo → task, the worker's upstream call, result stored", a.life, float64(a.life.n), &a.lifeCPU, 0, true)
	rows["create"] = row("create alone", "tools/call slow → task, until the worker holds its upstream call", a.create, float64(a.create.n), &a.createCPU, 0, true)
	rows["finish"] = minusRow("finish", "create + finish − create", rows["life"], rows["create"])
	rows["pollWork"] = row("tasks/get, working task", "one task, again and again", a.pollWork, float64(a.pollWork.n), &a.pollWorkCPU, 0, true)
	rows["pollFirst"] = row("tasks/get, completed task, first time", "each completed task once", a.lifeFirst, float64(a.lifeFirst.n), &a.firstCPU, 0, true)
	rows["pollRepeat"] = row("tasks/get, completed task, again", fmt.Sprintf("%d completed tasks, again and again", o.tasks), a.pollDone, float64(a.pollDone.n), &a.pollDoneCPU, 0, true)
	rows["elicit"] = row("elicit task", "create; wait (reading Redis) for input_required; tasks/get; tasks/update; wait for completed", a.round, float64(a.round.n), &a.roundCPU, 0, true)
	rows["round"] = minusRow("one input round", "elicit task − create + finish", rows["elicit"], rows["life"])
	periods := h.renewWin.Seconds() / h.renewEvery.Seconds()
	cpuPeriods := h.renewCPU.el.Seconds() / h.renewEvery.Seconds()
	rn := row("lease renewal, per held task", fmt.Sprintf("%d held tasks, %s window, --lease-renew %s", h.held, capWindow, h.renewEvery),
		h.renew, float64(h.held)*periods, &h.renewCPU, float64(h.held)*cpuPeriods, true)
	// The renewal script and the replica's one ZADD XX per renewal; the
	// sweeps are the next row.
	zx := h.zaddPer / float64(h.held)
	rn.cmds, rn.writes, rn.scripts = h.extendPer+zx, h.extendPer+zx, h.extendPer*float64(scriptBody(h.extendLabel))
	rn.rtt, rn.global = -1, zx
	rn.kinds = fmt.Sprintf("%s %.3g; per replica and renewal ZADD XX %.3g, re-scoring %.3g index entries per held task, %.2f µs each (slow log); one pipeline per replica per renewal",
		h.extendLabel, h.extendPer, h.zaddPer, h.rescoredPer, h.usPerEntry)
	rows["renew"] = rn
	rows["sweep"] = capRow{name: "lease sweep, per sweep", how: fmt.Sprintf("the same window: %d sweeps, background taken out", h.sweeps), cmds: h.sweepCmds, global: h.sweepLeases,
		writes: -1, scripts: -1, rtt: -1, tg: -1, rs: -1, tgLo: -1, tgHi: -1,
		kinds: fmt.Sprintf("ZRANGEBYSCORE LIMIT %d, HMGET %.3g (candidates read), tidy script %.3g", h.sweepPage, h.sweepReads, h.sweepTidy)}
	idle := row("idle replica, per second", fmt.Sprintf("no task, %s window, --lease-renew and --latency-sync %s", capWindow, h.renewEvery), h.idle, h.idleWin.Seconds(), nil, 0, false)
	idle.tg = float64(h.idle.tg.Microseconds()) / h.idleWin.Seconds()
	rows["idle"] = idle
	return rows
}
