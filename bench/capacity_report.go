package main

// The capacity report, first part: the measured figures of phases A, H
// and B as Markdown (docs/CAPACITY.md): costs per operation, Redis and
// gateway memory per task. The projection (capacity_report_plan.go) and
// the cluster check (capacity_report_cluster.go) follow them.

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// capReport is what the report's sections are written from, and into.
type capReport struct {
	sb   strings.Builder
	o    options
	defs tgDefaults
	a    *capA
	h    *capH
	b    *capB
	c    *capC
	rows map[string]capRow // capacityRows
	p    capPlan
}

func (r *capReport) w(format string, args ...any) { fmt.Fprintf(&r.sb, format, args...) }

// scriptBody is how many commands a script label ("EVALSHA[HMGET HSET]")
// ran.
func scriptBody(label string) int {
	_, body, ok := strings.Cut(label, "[")
	if !ok {
		return 0
	}
	return len(strings.Fields(strings.TrimSuffix(body, "]")))
}

// capacityReport is the Markdown section of the whole mode.
func capacityReport(o options, defs tgDefaults, a *capA, h *capH, b *capB, c *capC, loads []string, wall time.Duration) string {
	r := &capReport{o: o, defs: defs, a: a, h: h, b: b, c: c, rows: capacityRows(o, a, h)}
	r.p = project(defs, r.rows, a, h)
	r.header(loads, wall)
	for _, section := range []func(){r.perOperation, r.legacy, r.redisMemory, r.gatewayMemory,
		r.projLoads, r.projLife, r.projReplicas, r.projMemory, r.projLeases,
		r.clusterCommands, r.clusterMemory, r.clusterSpread, r.footer} {
		section()
	}
	return r.sb.String()
}

// header is the title, where and when, and how everything is measured.
func (r *capReport) header(loads []string, wall time.Duration) {
	o, w := r.o, r.w
	w("## Capacity: cost per operation, per task, and a projection\n\n")
	rev := "unknown"
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	if alt := os.Getenv("BENCH_TASKGATE_BIN"); alt != "" {
		rev += " (taskgate itself: BENCH_TASKGATE_BIN=" + alt + ")"
	}
	w("%s, taskgate from the checkout at %s. Machine: %s; nproc %d. %s (no persistence, loopback). Load average (1/5/15 min): %s. Wall time %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), rev, machine(), nproc(), versionOf("redis-server", "--version"), strings.Join(loads, "; "), wall.Round(time.Second))
	w("Every figure is measured in this run, on processes over 127.0.0.1; only the planning assumptions of the projection are chosen. ")
	w("Redis commands: every node's slow log at 0 µs while the operations are sent one at a time; a script call is one command, what it runs inside is counted apart. ")
	w("Round trips: taskgate's own count (taskgate_store_command_duration_seconds; a pipeline is one). ")
	w("CPU: the run time of taskgate's and redis-server's threads (/proc/PID/task/*/schedstat, ns) over separate batches at c=%d (input rounds: c=%d) with the slow log off, divided by the operations; phase A's batches ran in %d interleaved rounds, and the table gives the median round with the operations in all rounds and the rounds' range in parentheses. Over all CPU batches, utime+stime from /proc/PID/stat (10 ms ticks) came to %s of the schedstat figure. ",
		o.concurrency, capPollConc, capCPURounds, ratioF(float64(cpuCheck.ticks), float64(cpuCheck.sched)))
	w("\"Unsharded\": commands on a key without an owner hash tag, which a Cluster puts on one shard whatever its size.\n\n")
}

// perOperation is phase A's and H's per-operation table and its notes.
func (r *capReport) perOperation() {
	defs, a, h, rows, w := r.defs, r.a, r.h, r.rows, r.w
	w("### Per operation (2026-07-28 client, stateless upstream, one replica, one redis-server)\n\n")
	w("The echo result, as tasks/get inlines it, is %d bytes. Renewal, sweep and latency sync were off for the operations above the renewal row (--lease-renew %s); those rows come from a replica with %d held tasks and --lease-renew %s, --lease %s, once every held task had been renewed at least twice.\n\n",
		a.resultBytes, capClusterRenew, h.held, h.renewEvery, h.lease)
	writeRows(&r.sb, []capRow{rows["create"], rows["finish"], rows["life"], rows["pollWork"], rows["pollFirst"], rows["pollRepeat"], rows["elicit"], rows["round"], rows["renew"], rows["sweep"], rows["idle"]})
	w("\n- Finish and input round are differences of measured rows. An input round includes the one tasks/get that shows the client the request.\n")
	w("- Renewal: commands per held task per renewal do not depend on --lease-renew; the CPU row is the whole replica's CPU in the window divided by held tasks × renewals, so it includes the sweeps and the runtime's cost of keeping %d tasks.\n", h.held)
	w("- Sweep: every --lease-renew on every replica, %d index entries per page (the ZRANGEBYSCORE LIMIT taskgate sends). After the windows the leases index held %d entries for %d held tasks, %d of them with a score a sweep would read (past now − %s); the lowest score lay %.1f s ahead of now.\n",
		h.sweepPage, h.leasesCard, h.held, h.leasesDue, defs.grace, h.leasesLead)
	_, lsDone := a.mem.delta.role("leases")
	w("- Leases index commands per create + finish: %s. Entries %d finished tasks left in it: %d (phase A's memory batch).\n\n", perCallF(a.life.leases, float64(a.life.n)), a.mem.n, lsDone.members)
}

// legacy is phase B's table.
func (r *capReport) legacy() {
	o, b, w := r.o, r.b, r.w
	lrows := []capRow{
		row("create + finish (echo task)", "one session", b.life, float64(b.life.n), &b.lifeCPU, 0, true),
		row("tasks/get, working task", "one task, again and again", b.pollWork, float64(b.pollWork.n), &b.pollWorkCPU, 0, true),
		row("tasks/get, completed task, again", fmt.Sprintf("%d completed tasks, again and again", o.tasks), b.pollDone, float64(b.pollDone.n), &b.pollDoneCPU, 0, true),
	}
	w("### The same for a 2025-11-25 client (one session, stateful upstream)\n\n")
	writeRows(&r.sb, lrows)
	w("\nNot repeated here: the input round (a 2025-11-25 client gets the request on its tasks/result stream), renewals and sweeps (the runner's, the same for both).\n\n")
}

// redisMemory is Redis memory per task, working and completed, by key.
func (r *capReport) redisMemory() {
	a, h, w := r.a, r.h, r.w
	w("### Redis memory per task\n\n")
	w("INFO used_memory before and after, less client buffers (mem_clients_normal, shown apart: they follow the connections, not the tasks), divided by the tasks; connection pools warmed to the batch's concurrency first, the slow log emptied and the connections idle for %s before each reading; %d tasks per Authorization. ", memSettle, capTasksPerOwner)
	w("The key tables are MEMORY USAGE … SAMPLES 0 of every key, after minus before, by key shape.\n\n")
	w("| tasks | state | used_memory delta, less client buffers | **per task** | client buffers, per task | MEMORY USAGE per task |\n|---|---|---|---|---|---|\n")
	for _, m := range []struct {
		what string
		m    capMem
	}{{"working, held (phase H)", h.mem}, {fmt.Sprintf("completed, %d-byte result (phase A)", a.resultBytes), a.mem}} {
		w("| %d | %s | %s | **%s** | %s | %s |\n", m.m.n, m.what, bytesText(m.m.perTask()*float64(m.m.n)), bytesText(m.m.perTask()), bytesText(m.m.clientsPerTask()), bytesText(float64(m.m.delta.total())/float64(m.m.n)))
	}
	w("| %d | completed, %d-byte result (phase A) | %s | **%s** | %s | — |\n", a.big.n, a.bigResultBytes, bytesText(a.big.perTask()*float64(a.big.n)), bytesText(a.big.perTask()), bytesText(a.big.clientsPerTask()))
	slope := (a.big.perTask() - a.mem.perTask()) / float64(a.bigResultBytes-a.resultBytes)
	w("\nEach byte of result costs %.2f bytes of Redis memory (the two completed rows), kept for the task's ttl.\n", slope)
	w("\nCompleted tasks, by key:\n\n")
	writeCensus(&r.sb, a.mem.delta, a.mem.n)
	w("\nWorking (held) tasks, by key:\n\n")
	writeCensus(&r.sb, h.mem.delta, h.mem.n)
	_, cr := a.oneOwner.role("created")
	_, ls := a.oneOwner.role("leases")
	w("\nLarge sorted sets (phase A's one Authorization, which made thousands of tasks): its created index, %d ids in %s, **%.0f B per id**; the global leases index, %d entries in %s, **%.0f B per entry**. Past 128 members a sorted set leaves its compact encoding; an owner's created index keeps every id for --max-ttl.\n\n",
		cr.members, bytesText(float64(cr.bytes)), float64(cr.bytes)/float64(max(cr.members, 1)), ls.members, bytesText(float64(ls.bytes)), float64(ls.bytes)/float64(max(ls.members, 1)))
}

// gatewayMemory is taskgate's RSS per held task.
func (r *capReport) gatewayMemory() {
	defs, h, w := r.defs, r.h, r.w
	w("### Gateway memory per held task\n\n")
	w("taskgate VmRSS with %d held tasks (phase H, created in %s): before %s, settled %s, largest over the following %s %s: **%s per held task** (largest), %s settled. (The scale mode watches for longer and with more tasks.)\n\n",
		h.held, h.createdIn.Round(time.Millisecond), mib(h.rssBefore), mib(h.rssAfter), (capHeldLease + defs.grace + capHeldRenew + 2*capWindow).Round(time.Second), mib(h.rssMax),
		bytesText(float64(h.rssMax-h.rssBefore)*1024/float64(h.held)), bytesText(float64(h.rssAfter-h.rssBefore)*1024/float64(h.held)))
}
