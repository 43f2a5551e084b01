package main

// The capacity projection: from the measured rows alone, taskgate's
// defaults and the plan* constants (capacity.go), what planTasks
// concurrent tasks and planPolls polls/s need in gateway replicas, Redis
// shards and the one shard that holds the leases index.

import (
	"math"
	"time"
)

// capPlan is the projection: the load, then what it takes.
type capPlan struct {
	rate, pollsPerTask, workPolls, donePolls, renewals float64
	// Redis commands per second, by load.
	opsLife, opsRounds, opsPolls, opsRenew, opsSweep, opsIdle, opsTotal float64
	rsCPU                                                               float64 // redis-server cores
	// Gateway cores, by load.
	tgLife, tgRounds, tgPolls, tgRenew, tgTotal float64
	// Redis memory.
	memWork                                  float64 // per working task
	hashDone, gone, createdEntry, leaseEntry float64 // per completed task (MEMORY USAGE)
	calib                                    float64 // used_memory / MEMORY USAGE
	window                                   time.Duration
	scenTTL, scenMax                         [2]time.Duration
	memScen                                  [2]float64
	memParts                                 [2][4]float64 // working, completed hashes, tombstones, created-index ids
	perResultKiB                             float64       // used_memory per KiB of result, defaults' retention
	shardsMem, shardsOps, shardsCPU, shards  [2]int
	// Gateway replicas.
	rssPerHeld, sockPerHeld            float64
	ports                              int
	repCPU, repMem, repPorts, replicas int
	// The one-slot leases index: commands/s, of which per task, per
	// replica and renewal, and per sweep; entries re-scored/s; execution
	// time (slow log) in cores; its memory; one replica's ZADD XX.
	hotOps, hotTask, hotRenew, hotEntries, hotCores, hotMem, zaddMS float64
	opsIndex                                                        float64 // its re-scoring in the command budget
	hotShardOps, hotShardCPU                                        float64 // that shard's load: its even share and the index
}

// shardsFor is how many shards keep the one holding the leases index (hot
// of total, which the others share evenly) within budget; -1: none do.
func shardsFor(total, hot, budget float64) int {
	if hot >= budget {
		return -1
	}
	return ceilDiv(total-hot, budget-hot)
}

func ceilDiv(a, b float64) int {
	if b <= 0 {
		return 0
	}
	return int(math.Ceil(a / b))
}

// project computes what planTasks concurrent tasks and planPolls polls/s
// need, from the measured rows and the defaults of the build measured.
func project(defs tgDefaults, rows map[string]capRow, a *capA, h *capH) capPlan {
	var p capPlan
	p.rate = planTasks / planLifetime.Seconds()
	p.pollsPerTask = planPolls / p.rate
	// A client polls until it sees the terminal status: its last poll is of
	// a completed task this replica has not rendered yet, the others of a
	// working task.
	p.workPolls, p.donePolls = math.Max(p.pollsPerTask-1, 0), math.Min(p.pollsPerTask, 1)
	p.renewals = planTasks / defs.renew.Seconds()
	// The replica count first: the per-replica costs need it.
	p.gateway(rows, h)
	p.redisLoad(defs, rows, h)
	p.leasesIndex(defs, a, h)
	p.memory(a, h)
	return p
}

// gateway is the gateway's CPU and the replicas it takes.
func (p *capPlan) gateway(rows map[string]capRow, h *capH) {
	life, round, pw, pd, rn := rows["life"], rows["round"], rows["pollWork"], rows["pollFirst"], rows["renew"]
	p.tgLife = p.rate * life.tg / 1e6
	p.tgRounds = p.rate * planInputRounds * round.tg / 1e6
	p.tgPolls = p.rate * (p.workPolls*pw.tg + p.donePolls*pd.tg) / 1e6
	p.tgRenew = p.renewals * rn.tg / 1e6
	p.tgTotal = p.tgLife + p.tgRounds + p.tgPolls + p.tgRenew
	p.rssPerHeld = float64(h.rssMax-h.rssBefore) * 1024 / float64(h.held)
	p.ports = ephemeralPorts()
	p.repCPU = ceilDiv(p.tgTotal, planReplicaCores*planReplicaUtil)
	p.repMem = ceilDiv(planTasks*p.rssPerHeld, planReplicaMem-float64(h.rssBefore)*1024)
	p.sockPerHeld = float64(h.upConns) / float64(h.held)
	p.repPorts = ceilDiv(planTasks*p.sockPerHeld, float64(p.ports))
	p.replicas = max(p.repCPU, p.repMem, p.repPorts, 1)
}

// redisLoad is Redis commands per second and redis-server CPU.
func (p *capPlan) redisLoad(defs tgDefaults, rows map[string]capRow, h *capH) {
	life, round, pw, pd, rn, idle := rows["life"], rows["round"], rows["pollWork"], rows["pollFirst"], rows["renew"], rows["idle"]
	reps := float64(p.replicas)
	p.opsLife = p.rate * life.cmds
	p.opsRounds = p.rate * planInputRounds * round.cmds
	p.opsPolls = p.rate * (p.workPolls*pw.cmds + p.donePolls*pd.cmds)
	p.opsRenew = p.renewals * h.extendPer
	p.opsSweep = reps * h.sweepCmds / defs.renew.Seconds()
	p.opsIndex = reps * h.zaddPer / defs.renew.Seconds()
	p.opsIdle = reps * idle.cmds
	p.opsTotal = p.opsLife + p.opsRounds + p.opsPolls + p.opsRenew + p.opsSweep + p.opsIndex + p.opsIdle
	p.rsCPU = (p.rate*(life.rs+planInputRounds*round.rs+p.workPolls*pw.rs+p.donePolls*pd.rs) + p.renewals*rn.rs) / 1e6
}

// leasesIndex is the load on the leases index: one key, so one slot and
// one shard. Its commands (a ZADD at create, a ZREM at release; per replica
// and renewal one ZADD XX naming every lease it renewed, and the sweeps)
// and their execution time in the slow log, which leaves out reading and
// parsing them: a lower bound of what they cost that shard's main thread.
func (p *capPlan) leasesIndex(defs tgDefaults, a *capA, h *capH) {
	reps := float64(p.replicas)
	lc := func(c capCount) (n, us float64) {
		cn, cu := c.leasesTotal()
		return float64(cn) / float64(max(c.n, 1)), float64(cu) / float64(max(c.n, 1))
	}
	lifeN, lifeUS := lc(a.life)
	roundN, roundUS := lc(a.round)
	p.hotTask = lifeN + planInputRounds*math.Max(roundN-lifeN, 0)
	taskUS := lifeUS + planInputRounds*math.Max(roundUS-lifeUS, 0)
	p.hotRenew = h.zaddPer + h.sweepLeases
	p.hotOps = p.rate*p.hotTask + reps*p.hotRenew/defs.renew.Seconds()
	p.hotEntries = p.renewals * h.rescoredPer
	p.hotCores = (p.rate*taskUS + p.hotEntries*h.usPerEntry + reps*h.sweepUS/defs.renew.Seconds()) / 1e6
	p.zaddMS = planTasks / reps * h.rescoredPer * h.usPerEntry / 1e3
}

// memory is Redis memory and the shards it and the load take. A working
// task: used_memory per held task (hash, tombstone, index entries,
// channel). What a finished task leaves, part by part for as long as each
// stays: the hash until ttl, the tombstone until ttl + the expired window,
// the owner's created-index entry until --max-ttl; MEMORY USAGE of each,
// scaled to used_memory by the measured ratio. Its leases index entry is
// gone (Release).
func (p *capPlan) memory(a *capA, h *capH) {
	p.memWork = h.mem.perTask()
	d := a.mem.delta
	n := float64(a.mem.n)
	_, task := d.role("task")
	_, gone := d.role("gone")
	_, crd := d.role("created")
	_, cr := a.oneOwner.role("created")
	_, ls := a.oneOwner.role("leases")
	p.hashDone, p.gone = float64(task.bytes)/n, float64(gone.bytes)/n
	p.createdEntry = float64(cr.bytes) / float64(max(cr.members, 1))
	p.leaseEntry = float64(ls.bytes) / float64(max(ls.members, 1))
	p.calib = a.mem.perTask() * n / float64(max(d.total(), 1))
	p.window = (time.Duration(gone.pttl-task.pttl) * time.Millisecond).Round(time.Minute)
	p.scenTTL = [2]time.Duration{(time.Duration(task.pttl) * time.Millisecond).Round(time.Minute), planShortTTL}
	p.scenMax = [2]time.Duration{(time.Duration(crd.pttl) * time.Millisecond).Round(time.Minute), planShortTTL}
	for i := range p.memScen {
		p.scenario(i)
	}
	p.hotMem = planTasks * p.leaseEntry
	sh := float64(max(p.shards[0], 1))
	p.hotShardOps = p.opsTotal/sh + p.hotOps*(1-1/sh)
	p.hotShardCPU = p.rsCPU/sh + p.hotCores*(1-1/sh)
	// A result byte costs slope bytes (measured) for as long as the hash
	// stays: the working life and the rest of the ttl.
	slope := (a.big.perTask() - a.mem.perTask()) / float64(a.bigResultBytes-a.resultBytes)
	p.perResultKiB = slope * 1024 * (planTasks + p.rate*math.Max(p.scenTTL[0].Seconds()-planLifetime.Seconds(), 0))
}

// scenario is retention scenario i's memory and shards.
func (p *capPlan) scenario(i int) {
	t, mx, L := p.scenTTL[i].Seconds(), p.scenMax[i].Seconds(), planLifetime.Seconds()
	p.memParts[i] = [4]float64{planTasks * p.memWork, p.rate * p.calib * math.Max(t-L, 0) * p.hashDone,
		p.rate * p.calib * math.Max(t+p.window.Seconds()-L, 0) * p.gone, p.rate * p.calib * math.Max(mx-L, 0) * p.createdEntry}
	p.memScen[i] = p.memParts[i][0] + p.memParts[i][1] + p.memParts[i][2] + p.memParts[i][3]
	p.shardsMem[i] = ceilDiv(p.memScen[i]*planMemHeadroom, planShardMem)
	// The shard holding the leases index takes its even share of the
	// rest and all of the index: enough shards that it fits.
	p.shardsOps[i] = shardsFor(p.opsTotal, p.hotOps, planShardOps)
	p.shardsCPU[i] = shardsFor(p.rsCPU, p.hotCores, planShardCPU)
	p.shards[i] = max(p.shardsMem[i], p.shardsOps[i], p.shardsCPU[i], 1)
	if p.shardsOps[i] < 0 || p.shardsCPU[i] < 0 {
		p.shards[i] = -1
	}
}
