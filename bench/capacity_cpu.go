package main

// CPU per batch of operations: the run time of taskgate's and
// redis-server's threads over a batch sent with the slow log off, kept
// per round so the report can give the median.

import (
	"slices"
	"time"
)

// cpuCheck sums every CPU batch as procCPU and as cpuTime saw it, so the
// report can say how well the two agree.
var cpuCheck struct{ sched, ticks time.Duration }

// pids are taskgate's and redis-server's processes.
func (e *capEnv) pids() []int {
	out := slices.Clone(e.tgPIDs)
	for _, n := range e.nodes {
		out = append(out, n.cmd.Process.Pid)
	}
	return out
}

func (e *capEnv) tgCPU() time.Duration { return sumCPU(e.tgPIDs, procCPU) }

func (e *capEnv) redisCPU() time.Duration {
	var pids []int
	for _, n := range e.nodes {
		pids = append(pids, n.cmd.Process.Pid)
	}
	return sumCPU(pids, procCPU)
}

// capCPU is one CPU batch: operations, taskgate and redis-server CPU.
type capCPU struct {
	n      int
	tg, rs time.Duration
	el     time.Duration
	rounds []capCPU // when the batch ran in rounds: each one
}

// add counts round r into c.
func (c *capCPU) add(r capCPU) {
	c.n += r.n
	c.tg += r.tg
	c.rs += r.rs
	c.el += r.el
	c.rounds = append(c.rounds, r)
}

// perOp is the CPU per operation: the median over the rounds (with the
// smallest and largest), or the whole batch's when it ran once.
func (c capCPU) perOp(f func(capCPU) time.Duration) (med, lo, hi float64) {
	if len(c.rounds) < 2 {
		v := float64(f(c).Nanoseconds()) / 1e3 / float64(max(c.n, 1))
		return v, -1, -1
	}
	var vs []float64
	for _, r := range c.rounds {
		vs = append(vs, float64(f(r).Nanoseconds())/1e3/float64(max(r.n, 1)))
	}
	slices.Sort(vs)
	return vs[len(vs)/2], vs[0], vs[len(vs)-1]
}

// cpuBatch runs fn (which returns how many operations it made) and
// measures the CPU taskgate and redis-server spent meanwhile.
func (e *capEnv) cpuBatch(fn func() (int, error)) (capCPU, error) {
	tk0 := sumCPU(e.pids(), cpuTime)
	tg0, rs0, t0 := e.tgCPU(), e.redisCPU(), time.Now()
	n, err := fn()
	c := capCPU{n: n, tg: e.tgCPU() - tg0, rs: e.redisCPU() - rs0, el: time.Since(t0)}
	cpuCheck.ticks += sumCPU(e.pids(), cpuTime) - tk0
	cpuCheck.sched += c.tg + c.rs
	return c, err
}
