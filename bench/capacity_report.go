package main

// The capacity report: the measured figures of every phase as Markdown
// (docs/CAPACITY.md), the projection and the cluster check after them.

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// scriptBody is how many commands a script label ("EVALSHA[HMGET HSET]")
// ran.
func scriptBody(label string) int {
	_, body, ok := strings.Cut(label, "[")
	if !ok {
		return 0
	}
	return len(strings.Fields(strings.TrimSuffix(body, "]")))
}

func capacityReport(o options, defs tgDefaults, a *capA, h *capH, b *capB, c *capC, loads []string, wall time.Duration) string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
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

	rows := map[string]capRow{}
	rows["life"] = row("create + finish (echo task)", "tools/call echo → task, the worker's upstream call, result stored", a.life, float64(a.life.n), &a.lifeCPU, 0, true)
	rows["create"] = row("create alone", "tools/call slow → task, until the worker holds its upstream call", a.create, float64(a.create.n), &a.createCPU, 0, true)
	rows["finish"] = minusRow("finish", "create + finish − create", rows["life"], rows["create"])
	rows["pollWork"] = row("tasks/get, working task", "one task, again and again", a.pollWork, float64(a.pollWork.n), &a.pollWorkCPU, 0, true)
	rows["pollFirst"] = row("tasks/get, completed task, first time", "each completed task once", a.lifeFirst, float64(a.lifeFirst.n), &a.firstCPU, 0, true)
	rows["pollRepeat"] = row("tasks/get, completed task, again", fmt.Sprintf("%d completed tasks, again and again", o.tasks), a.pollDone, float64(a.pollDone.n), &a.pollDoneCPU, 0, true)
	elicit := row("elicit task", "create; wait (reading Redis) for input_required; tasks/get; tasks/update; wait for completed", a.round, float64(a.round.n), &a.roundCPU, 0, true)
	rows["round"] = minusRow("one input round", "elicit task − create + finish", elicit, rows["life"])
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
	sweep := capRow{name: "lease sweep, per sweep", how: fmt.Sprintf("the same window: %d sweeps, background taken out", h.sweeps), cmds: h.sweepCmds, global: h.sweepLeases,
		writes: -1, scripts: -1, rtt: -1, tg: -1, rs: -1, tgLo: -1, tgHi: -1,
		kinds: fmt.Sprintf("ZRANGEBYSCORE LIMIT %d, HMGET %.3g (candidates read), tidy script %.3g", h.sweepPage, h.sweepReads, h.sweepTidy)}
	idle := row("idle replica, per second", fmt.Sprintf("no task, %s window, --lease-renew and --latency-sync %s", capWindow, h.renewEvery), h.idle, h.idleWin.Seconds(), nil, 0, false)
	idle.tg = float64(h.idle.tg.Microseconds()) / h.idleWin.Seconds()
	rows["idle"] = idle

	w("### Per operation (2026-07-28 client, stateless upstream, one replica, one redis-server)\n\n")
	w("The echo result, as tasks/get inlines it, is %d bytes. Renewal, sweep and latency sync were off for the operations above the renewal row (--lease-renew %s); those rows come from a replica with %d held tasks and --lease-renew %s, --lease %s, once every held task had been renewed at least twice.\n\n",
		a.resultBytes, capClusterRenew, h.held, h.renewEvery, h.lease)
	writeRows(&sb, []capRow{rows["create"], rows["finish"], rows["life"], rows["pollWork"], rows["pollFirst"], rows["pollRepeat"], elicit, rows["round"], rn, sweep, idle})
	w("\n- Finish and input round are differences of measured rows. An input round includes the one tasks/get that shows the client the request.\n")
	w("- Renewal: commands per held task per renewal do not depend on --lease-renew; the CPU row is the whole replica's CPU in the window divided by held tasks × renewals, so it includes the sweeps and the runtime's cost of keeping %d tasks.\n", h.held)
	w("- Sweep: every --lease-renew on every replica, %d index entries per page (the ZRANGEBYSCORE LIMIT taskgate sends). After the windows the leases index held %d entries for %d held tasks, %d of them with a score a sweep would read (past now − %s); the lowest score lay %.1f s ahead of now.\n",
		h.sweepPage, h.leasesCard, h.held, h.leasesDue, defs.grace, h.leasesLead)
	_, lsDone := a.mem.delta.role("leases")
	w("- Leases index commands per create + finish: %s. Entries %d finished tasks left in it: %d (phase A's memory batch).\n\n", perCallF(a.life.leases, float64(a.life.n)), a.mem.n, lsDone.members)

	lrows := []capRow{
		row("create + finish (echo task)", "one session", b.life, float64(b.life.n), &b.lifeCPU, 0, true),
		row("tasks/get, working task", "one task, again and again", b.pollWork, float64(b.pollWork.n), &b.pollWorkCPU, 0, true),
		row("tasks/get, completed task, again", fmt.Sprintf("%d completed tasks, again and again", o.tasks), b.pollDone, float64(b.pollDone.n), &b.pollDoneCPU, 0, true),
	}
	w("### The same for a 2025-11-25 client (one session, stateful upstream)\n\n")
	writeRows(&sb, lrows)
	w("\nNot repeated here: the input round (a 2025-11-25 client gets the request on its tasks/result stream), renewals and sweeps (the runner's, the same for both).\n\n")

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
	writeCensus(&sb, a.mem.delta, a.mem.n)
	w("\nWorking (held) tasks, by key:\n\n")
	writeCensus(&sb, h.mem.delta, h.mem.n)
	_, cr := a.oneOwner.role("created")
	_, ls := a.oneOwner.role("leases")
	w("\nLarge sorted sets (phase A's one Authorization, which made thousands of tasks): its created index, %d ids in %s, **%.0f B per id**; the global leases index, %d entries in %s, **%.0f B per entry**. Past 128 members a sorted set leaves its compact encoding; an owner's created index keeps every id for --max-ttl.\n\n",
		cr.members, bytesText(float64(cr.bytes)), float64(cr.bytes)/float64(max(cr.members, 1)), ls.members, bytesText(float64(ls.bytes)), float64(ls.bytes)/float64(max(ls.members, 1)))

	w("### Gateway memory per held task\n\n")
	w("taskgate VmRSS with %d held tasks (phase H, created in %s): before %s, settled %s, largest over the following %s %s: **%s per held task** (largest), %s settled. (The scale mode watches for longer and with more tasks.)\n\n",
		h.held, h.createdIn.Round(time.Millisecond), mib(h.rssBefore), mib(h.rssAfter), (capHeldLease + defs.grace + capHeldRenew + 2*capWindow).Round(time.Second), mib(h.rssMax),
		bytesText(float64(h.rssMax-h.rssBefore)*1024/float64(h.held)), bytesText(float64(h.rssAfter-h.rssBefore)*1024/float64(h.held)))

	p := project(defs, rows, a, h)
	w("### Projection: %s concurrent tasks, %s polls/s\n\n", countText(planTasks), countText(planPolls))
	w("Planning assumptions (constants in bench/capacity.go; change them there): mean task lifetime %s, so %s tasks created and finished per second; %.2g input rounds per task; a client polls until it sees the result, so %.2f polls per task, the last one of a completed task not yet rendered by that replica. ",
		planLifetime, countText(p.rate), planInputRounds, p.pollsPerTask)
	w("A Redis shard may hold %s of used_memory, serve %s commands/s and spend %.0f%% of its one main thread; used_memory × %.1f for fragmentation and buffers. A gateway replica has %.0f cores, run at %.0f%%, and %s of memory. ",
		bytesText(planShardMem), countText(planShardOps), planShardCPU*100, planMemHeadroom, planReplicaCores, planReplicaUtil*100, bytesText(planReplicaMem))
	w("taskgate's defaults, read from this build's serve --help: --lease-renew %s, --lease %s (+ %s grace), --default-ttl %s, --max-ttl %s, --max-inflight %d.\n\n", defs.renew, defs.lease, defs.grace, defs.ttl, defs.maxTTL, defs.maxInflight)
	w("| load | rate | Redis commands each | **Redis commands/s** | redis-server µs each | taskgate µs each | **taskgate cores** |\n|---|---|---|---|---|---|---|\n")
	w("| create + finish | %s/s | %s | %s | %s | %s | %.1f |\n", countText(p.rate), f3(rows["life"].cmds), countText(p.opsLife), f3(rows["life"].rs), f3(rows["life"].tg), p.tgLife)
	w("| polls of working tasks | %s/s | %s | %s | %s | %s | |\n", countText(p.rate*p.workPolls), f3(rows["pollWork"].cmds), countText(p.rate*p.workPolls*rows["pollWork"].cmds), f3(rows["pollWork"].rs), f3(rows["pollWork"].tg))
	w("| polls of completed tasks | %s/s | %s | %s | %s | %s | %.1f (all polls) |\n", countText(p.rate*p.donePolls), f3(rows["pollFirst"].cmds), countText(p.rate*p.donePolls*rows["pollFirst"].cmds), f3(rows["pollFirst"].rs), f3(rows["pollFirst"].tg), p.tgPolls)
	w("| input rounds | %s/s | %s | %s | %s | %s | %.1f |\n", countText(p.rate*planInputRounds), f3(rows["round"].cmds), countText(p.opsRounds), f3(rows["round"].rs), f3(rows["round"].tg), p.tgRounds)
	rnTask := rn // per held task: the script (the ZADD XX is per replica, the row above)
	rnTask.cmds = h.extendPer
	w("| lease renewals, every %s | %s/s | %s | %s | %s | %s | %.1f |\n", defs.renew, countText(p.renewals), f3(rnTask.cmds), countText(p.opsRenew), f3(rn.rs), f3(rn.tg), p.tgRenew)
	w("| leases index re-scoring, one ZADD XX per replica every %s | %s/s | %s (%s entries) | %s | | | |\n", defs.renew, f3(float64(p.replicas)/defs.renew.Seconds()), f3(h.zaddPer), countText(planTasks/float64(p.replicas)*h.rescoredPer), countText(p.opsIndex))
	w("| lease sweeps, every %s per replica | %s/s | %s | %s | | | |\n", defs.renew, f3(float64(p.replicas)/defs.renew.Seconds()), f3(h.sweepCmds), countText(p.opsSweep))
	w("| idle replicas (measured at 1 s periods: an upper bound) | %d replicas | %s/s each | %s | | | |\n", p.replicas, f3(idle.cmds), countText(p.opsIdle))
	w("| **total** | | | **%s** | **%.1f cores** | | **%.1f** |\n\n", countText(p.opsTotal), p.rsCPU, p.tgTotal)

	per := func(f func(capRow) float64) float64 {
		return f(rows["life"]) + p.workPolls*f(rows["pollWork"]) + p.donePolls*f(rows["pollFirst"]) + planInputRounds*f(rows["round"]) + planLifetime.Seconds()/defs.renew.Seconds()*f(rnTask)
	}
	w("One task's whole life at these assumptions (create, %.2g polls while working, one of the completed task, %.2g input rounds, finish, %.0f renewals): **%.1f Redis commands**, %.0f µs of redis-server CPU, **%.0f µs of taskgate CPU**.\n\n",
		p.workPolls, planInputRounds, planLifetime.Seconds()/defs.renew.Seconds(),
		per(func(r capRow) float64 { return r.cmds }), per(func(r capRow) float64 { return r.rs }), per(func(r capRow) float64 { return r.tg }))
	pub := func(c capCount) float64 {
		return float64(c.t.inScript["PUBLISH"]+c.t.top["PUBLISH"]) / float64(max(c.n, 1))
	}
	pubTask := pub(a.life) + planInputRounds*(pub(a.round)-pub(a.life))
	subTask := float64(a.life.t.top["SUBSCRIBE"]+a.life.t.top["UNSUBSCRIBE"]) / float64(max(a.life.n, 1))
	w("Pub/sub, not in the shard budget above: %.2g PUBLISH per task (inside the scripts: %.2g at finish, %.2g per input round), %s/s in all; in a Cluster a PUBLISH reaches every master over the cluster bus, so every shard receives all of them, however many shards there are. %.2g SUBSCRIBE/UNSUBSCRIBE per task (%s/s) go to the master each replica's one pub/sub connection sits on.\n\n",
		pubTask, pub(a.life), pub(a.round)-pub(a.life), countText(p.rate*pubTask), subTask, countText(p.rate*subTask))

	w("**Gateway replicas: %d.** CPU: %.1f cores / (%.0f cores × %.0f%%) → %d. Memory: %s per held task (largest RSS above) × %s = %s / %s per replica → %d. Connections: with %d tasks held, taskgate had %d established connections to the upstream (%.2f per held task), each on a local port, and one replica address reaches one upstream address on at most %d local ports (this machine's ip_local_port_range) → %d. ",
		p.replicas, p.tgTotal, planReplicaCores, planReplicaUtil*100, p.repCPU, bytesText(p.rssPerHeld), countText(planTasks), bytesText(planTasks*p.rssPerHeld), bytesText(planReplicaMem), p.repMem,
		h.held, h.upConns, p.sockPerHeld, p.ports, p.repPorts)
	w("That is %s held tasks per replica: --max-inflight (default %d) and the file descriptor limit must allow it.\n\n", countText(planTasks/float64(p.replicas)), defs.maxInflight)

	w("**Redis memory.** Working tasks: %s × %s = %s. Finished tasks stay behind, part by part: the hash until ttl (%s each), the tombstone until ttl + %s (%s), the owner's created-index id until --max-ttl (%s); MEMORY USAGE × %.2f, the measured used_memory / MEMORY USAGE ratio.\n\n",
		countText(planTasks), bytesText(p.memWork), bytesText(planTasks*p.memWork), bytesText(p.hashDone), p.window, bytesText(p.gone), bytesText(p.createdEntry), p.calib)
	w("| retention | working tasks | completed hashes | tombstones | created-index ids | **Redis used_memory** | × %.1f | shards by memory | by commands/s | by CPU | **shards** | used_memory per shard |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", planMemHeadroom)
	for i := range p.memScen {
		name := fmt.Sprintf("--default-ttl %s, --max-ttl %s", p.scenTTL[i], p.scenMax[i])
		if i == 0 {
			name += " (defaults)"
		}
		w("| %s | %s | %s | %s | %s | **%s** | %s | %d | %d | %d | **%d** | %s |\n", name,
			bytesText(p.memParts[i][0]), bytesText(p.memParts[i][1]), bytesText(p.memParts[i][2]), bytesText(p.memParts[i][3]),
			bytesText(p.memScen[i]), bytesText(p.memScen[i]*planMemHeadroom),
			p.shardsMem[i], p.shardsOps[i], p.shardsCPU[i], p.shards[i], bytesText(p.memScen[i]/float64(p.shards[i])))
	}
	w("\nThe result size moves the completed hashes: each KiB more of result adds %s of used_memory at the defaults' retention (%.2f bytes per result byte, measured above).\n", bytesText(p.perResultKiB), (a.big.perTask()-a.mem.perTask())/float64(a.bigResultBytes-a.resultBytes))
	w("\n**The leases index is one key**, so one slot on one shard however many shards there are: %s commands/s land there (%.2f per task: %s; per replica every %s, %.2f: one ZADD XX and the sweep's %.2f), ",
		countText(p.hotOps), p.hotTask, perCallF(a.life.leases, float64(a.life.n)), defs.renew, p.hotRenew, h.sweepLeases)
	w("and the ZADD XX name %s entries/s to re-score (every held task's, every --lease-renew). Their execution time in the slow log (%.2f µs per entry named, on a %d-entry index) comes to **%.2f of that shard's main thread**, a lower bound: reading and parsing the commands are not in it, and the index would hold %s entries, not %d. ",
		countText(p.hotEntries), h.usPerEntry, h.leasesCard, p.hotCores, countText(planTasks), h.leasesCard)
	w("One replica's ZADD XX names all its %s held tasks: %.1f ms in which that shard serves nothing else, every %s per replica. The index holds one entry per working task, %s on that shard (%.0f B each). ",
		countText(planTasks/float64(p.replicas)), p.zaddMS, defs.renew, bytesText(p.hotMem), p.leaseEntry)
	if p.shards[0] < 0 {
		w("**No shard count fits: the index alone is over one shard's budget.** ")
	}
	w("The shard counts above keep that shard, its even share of the rest plus all of the index, within the budget (at the defaults' %d shards: %s commands/s, %.2f cores); spread evenly, the same load would need %d shards by commands/s and %d by CPU.\n\n",
		p.shards[0], countText(p.hotShardOps), p.hotShardCPU, ceilDiv(p.opsTotal, planShardOps), ceilDiv(p.rsCPU, planShardCPU))

	// The cluster check.
	w("### Check: %d replicas on a %d-master Redis Cluster\n\n", len(c.addrs), len(c.addrs))
	w("redis-cli --cluster create … --cluster-replicas 0, then taskgate --redis-url redis+cluster://… with --lease %s --lease-renew %s, so no renewal or sweep runs during the check (both are measured above). %d tasks (slow tool, %d s), %d per owner, created round robin over the replicas at c=%d; each polled once while working, on the next replica (%d were working); after they finished, polled twice on the third replica. ",
		capClusterLease, capClusterRenew, c.n, capClusterHold, capTasksPerOwner, o.concurrency, c.working)
	w("Commands summed over the masters' slow logs; memory over their used_memory. On 2 CPUs this checks what a task costs, not throughput.\n\n")
	crow := func(cnt capCount) capRow { return row("", "", cnt, float64(c.n), nil, 0, false) }
	cc := []struct {
		name        string
		clu, single capRow
	}{
		{"create", crow(c.create), rows["create"]},
		{"tasks/get, working", crow(c.pollWork), rows["pollWork"]},
		{"finish", crow(c.finish), rows["finish"]},
		{"tasks/get, completed, first time", crow(c.pollFirst), rows["pollFirst"]},
		{"tasks/get, completed, again", crow(c.pollRepeat), rows["pollRepeat"]},
	}
	w("| per task | cluster: commands | single server | **ratio** | cluster: run inside scripts | single | cluster: round trips | single | cluster: unsharded | single |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var cluTot, sinTot float64
	for _, x := range cc {
		cluTot += x.clu.cmds
		sinTot += x.single.cmds
		w("| %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s |\n", x.name, f3(x.clu.cmds), f3(x.single.cmds), ratioF(x.clu.cmds, x.single.cmds),
			f3(x.clu.scripts), f3(x.single.scripts), f3(x.clu.rtt), f3(x.single.rtt), f3(x.clu.global), f3(x.single.global))
	}
	w("| **the whole life** | **%s** | **%s** | **%s** | | | | | | |\n\n", f3(cluTot), f3(sinTot), ratioF(cluTot, sinTot))
	w("| Redis memory per task | cluster | single server | **ratio** | cluster: client buffers | single |\n|---|---|---|---|---|---|\n")
	w("| working | %s | %s | **%s** | %s | %s |\n", bytesText(c.memWork.perTask()), bytesText(h.mem.perTask()), ratioF(c.memWork.perTask(), h.mem.perTask()), bytesText(c.memWork.clientsPerTask()), bytesText(h.mem.clientsPerTask()))
	w("| completed | %s | %s | **%s** | %s | %s |\n", bytesText(c.memDone.perTask()), bytesText(a.mem.perTask()), ratioF(c.memDone.perTask(), a.mem.perTask()), bytesText(c.memDone.clientsPerTask()), bytesText(a.mem.clientsPerTask()))
	w("| completed, MEMORY USAGE | %s | %s | **%s** | | |\n\n", bytesText(float64(c.memDone.delta.total())/float64(c.n)), bytesText(float64(a.mem.delta.total())/float64(a.mem.n)),
		ratioF(float64(c.memDone.delta.total())/float64(c.n), float64(a.mem.delta.total())/float64(a.mem.n)))
	w("Completed tasks in the cluster, by key (all masters):\n\n")
	writeCensus(&sb, c.memDone.delta, c.n)
	w("\nHow the tasks spread over the masters:\n\n| master | slots | task hashes | share | commands (all batches) | share | of which SUBSCRIBE, UNSUBSCRIBE | used_memory delta, completed (less client buffers) | per task hash on it |\n|---|---|---|---|---|---|---|---|---|\n")
	var allCmds int
	perNode := make([]int, len(c.addrs))
	subNode := make([]int, len(c.addrs))
	for _, cnt := range []capCount{c.create, c.pollWork, c.finish, c.pollFirst, c.pollRepeat} {
		for i, v := range cnt.perNode {
			perNode[i] += v
			subNode[i] += cnt.subNode[i]
			allCmds += v
		}
	}
	mx, mean := 0, 0.0
	for i := range c.addrs {
		_, t := c.memDone.nodes[i].role("task")
		mx = max(mx, t.keys)
		mean += float64(t.keys) / float64(len(c.addrs))
		note := ""
		if _, l := c.memWork.nodes[i].role("leases"); l.members > 0 {
			_, ld := c.memDone.nodes[i].role("leases")
			note = fmt.Sprintf(" (leases index: %d entries working, %d finished)", l.members, ld.members)
		}
		d := float64((c.memDone.after[i].used - c.memDone.after[i].clients) - (c.memDone.before[i].used - c.memDone.before[i].clients))
		w("| %s%s | %d | %d | %.1f%% | %d | %.1f%% | %d | %s | %s |\n", c.addrs[i], note, c.slots[i], t.keys, 100*float64(t.keys)/float64(c.n), perNode[i], 100*float64(perNode[i])/float64(max(allCmds, 1)),
			subNode[i], bytesText(d), bytesText(d/float64(max(t.keys, 1))))
	}
	subMax, subOn, subAll := 0, 0, 0
	for _, v := range subNode {
		subMax, subAll = max(subMax, v), subAll+v
		if v > 0 {
			subOn++
		}
	}
	w("\n- The replicas' SUBSCRIBE and UNSUBSCRIBE went to %d of the %d masters, the busiest taking %.0f%% of them.", subOn, len(c.addrs), 100*float64(subMax)/float64(max(subAll, 1)))
	w("\n- Largest master / mean, task hashes: %.2f×. An owner's keys share its hash tag, so the spread comes from owners (%d here), not from tasks: one Authorization's tasks all live on one master.\n", float64(mx)/mean, c.n/capTasksPerOwner)
	if p := firstErr.Load(); p != nil {
		w("- first load error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	w("\nReproduce: `%s`\n", reproduce(o, "capacity", "count-requests", "tasks", "concurrency", "held"))
	return sb.String()
}
