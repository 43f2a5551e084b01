package main

// The capacity report, the cluster check (phase C): commands and memory
// per task on a 3-master Redis Cluster against the single server of
// phases A and H, and how the tasks spread over the masters.

import (
	"fmt"
	"strings"
)

// clusterCommands is commands per task, cluster against single server.
func (r *capReport) clusterCommands() {
	o, c, rows, w := r.o, r.c, r.rows, r.w
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
}

// clusterMemory is memory per task, cluster against single server.
func (r *capReport) clusterMemory() {
	a, h, c, w := r.a, r.h, r.c, r.w
	w("| Redis memory per task | cluster | single server | **ratio** | cluster: client buffers | single |\n|---|---|---|---|---|---|\n")
	w("| working | %s | %s | **%s** | %s | %s |\n", bytesText(c.memWork.perTask()), bytesText(h.mem.perTask()), ratioF(c.memWork.perTask(), h.mem.perTask()), bytesText(c.memWork.clientsPerTask()), bytesText(h.mem.clientsPerTask()))
	w("| completed | %s | %s | **%s** | %s | %s |\n", bytesText(c.memDone.perTask()), bytesText(a.mem.perTask()), ratioF(c.memDone.perTask(), a.mem.perTask()), bytesText(c.memDone.clientsPerTask()), bytesText(a.mem.clientsPerTask()))
	w("| completed, MEMORY USAGE | %s | %s | **%s** | | |\n\n", bytesText(float64(c.memDone.delta.total())/float64(c.n)), bytesText(float64(a.mem.delta.total())/float64(a.mem.n)),
		ratioF(float64(c.memDone.delta.total())/float64(c.n), float64(a.mem.delta.total())/float64(a.mem.n)))
	w("Completed tasks in the cluster, by key (all masters):\n\n")
	writeCensus(&r.sb, c.memDone.delta, c.n)
}

// clusterSpread is how the tasks, commands and memory spread over the
// masters.
func (r *capReport) clusterSpread() {
	c, w := r.c, r.w
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
}

// footer is the first load error, if any, and how to run this again.
func (r *capReport) footer() {
	w := r.w
	if p := firstErr.Load(); p != nil {
		w("- first load error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	w("\nReproduce: `%s`\n", reproduce(r.o, "capacity", "count-requests", "tasks", "concurrency", "held"))
}
