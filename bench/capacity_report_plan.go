package main

// The capacity report, the projection: what planTasks concurrent tasks and
// planPolls polls/s need (capacity_project.go), load by load, in gateway
// replicas, Redis memory and shards, and on the shard of the leases index.

import "fmt"

// renewTask is the renewal row per held task: the script alone (the ZADD
// XX is per replica, the row after it).
func (r *capReport) renewTask() capRow {
	rn := r.rows["renew"]
	rn.cmds = r.h.extendPer
	return rn
}

// projLoads is the assumptions, then the load table.
func (r *capReport) projLoads() {
	defs, h, rows, p, w := r.defs, r.h, r.rows, r.p, r.w
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
	w("| lease renewals, every %s | %s/s | %s | %s | %s | %s | %.1f |\n", defs.renew, countText(p.renewals), f3(r.renewTask().cmds), countText(p.opsRenew), f3(rows["renew"].rs), f3(rows["renew"].tg), p.tgRenew)
	w("| leases index re-scoring, one ZADD XX per replica every %s | %s/s | %s (%s entries) | %s | | | |\n", defs.renew, f3(float64(p.replicas)/defs.renew.Seconds()), f3(h.zaddPer), countText(planTasks/float64(p.replicas)*h.rescoredPer), countText(p.opsIndex))
	w("| lease sweeps, every %s per replica | %s/s | %s | %s | | | |\n", defs.renew, f3(float64(p.replicas)/defs.renew.Seconds()), f3(h.sweepCmds), countText(p.opsSweep))
	w("| idle replicas (measured at 1 s periods: an upper bound) | %d replicas | %s/s each | %s | | | |\n", p.replicas, f3(rows["idle"].cmds), countText(p.opsIdle))
	w("| **total** | | | **%s** | **%.1f cores** | | **%.1f** |\n\n", countText(p.opsTotal), p.rsCPU, p.tgTotal)

}

// projLife is one task's whole life, and pub/sub.
func (r *capReport) projLife() {
	defs, a, rows, p, w := r.defs, r.a, r.rows, r.p, r.w
	rnTask := r.renewTask()
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
}

// projReplicas is the replicas and what sets their count.
func (r *capReport) projReplicas() {
	defs, h, p, w := r.defs, r.h, r.p, r.w
	w("**Gateway replicas: %d.** CPU: %.1f cores / (%.0f cores × %.0f%%) → %d. Memory: %s per held task (largest RSS above) × %s = %s / %s per replica → %d. Connections: with %d tasks held, taskgate had %d established connections to the upstream (%.2f per held task), each on a local port, and one replica address reaches one upstream address on at most %d local ports (this machine's ip_local_port_range) → %d. ",
		p.replicas, p.tgTotal, planReplicaCores, planReplicaUtil*100, p.repCPU, bytesText(p.rssPerHeld), countText(planTasks), bytesText(planTasks*p.rssPerHeld), bytesText(planReplicaMem), p.repMem,
		h.held, h.upConns, p.sockPerHeld, p.ports, p.repPorts)
	w("That is %s held tasks per replica: --max-inflight (default %d) and the file descriptor limit must allow it.\n\n", countText(planTasks/float64(p.replicas)), defs.maxInflight)
}

// projMemory is Redis memory and the shards, by retention.
func (r *capReport) projMemory() {
	a, p, w := r.a, r.p, r.w
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
}

// projLeases is the shard that holds the leases index.
func (r *capReport) projLeases() {
	defs, a, h, p, w := r.defs, r.a, r.h, r.p, r.w
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
}
