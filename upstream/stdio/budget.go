package stdio

// A budget per child (--upstream-memory-limit, --upstream-cpu-limit,
// --upstream-open-files) and for all of a replica's children
// (--upstream-memory-total). What enforces each, on Linux:
//
//	open files    RLIMIT_NOFILE set on the child right after it starts
//	              (prlimit): an open past it fails with EMFILE in the
//	              child, which keeps running; its helpers inherit it.
//	memory        the watcher: every Options.BudgetEvery it sums the
//	              resident memory (rss of /proc/<pid>/stat, VmRSS) of each
//	              child's process group; a child over its limit is
//	              killed (SIGKILL to the group). Not RLIMIT_AS: a node or
//	              Java runtime reserves far more address space than it
//	              touches, so no address-space limit tracks its cost.
//	cpu (cores)   the watcher too: a child whose process group used more
//	              than the limit, in cores, averaged over cpuWindow, is
//	              killed (a runaway loop, not a burst).
//	memory total  the watcher: while the children's resident memory
//	              together is over it, one child a tick is stopped (victim:
//	              a warm one, else an idle session's or principal's, else
//	              a busy one's, whose stop suffices).
//
// A child stopped over its budget ends its session as a crash does (the
// client gets 404 and initializes again), fails its calls in flight with
// the reason, and is logged and counted (taskgate_stdio_kills_total{limit}).
// Elsewhere (budget_other.go) the limits are refused at Start.

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// DefaultBudgetEvery is how often the watcher reads the children's usage.
const DefaultBudgetEvery = time.Second

// cpuWindow is the span the CPU use of a child is averaged over.
const cpuWindow = 10 * time.Second

// usage is what one process group used, read from /proc.
type usage struct {
	rss int64 // bytes resident
	cpu int64 // clock ticks of CPU time (user and system), of the live processes
}

// budget watches the children's usage; nil when no limit is set and
// nothing is measured (never on a platform without /proc).
type budget struct {
	b *Bridge

	mu      sync.Mutex
	samples map[*proc][]cpuSample // the recent CPU readings of each child
	window  time.Duration         // cpuWindow (tests shorten it)
}

type cpuSample struct {
	at    time.Time
	ticks int64
}

// budgeted reports whether Options ask for any limit.
func (o *Options) budgeted() bool {
	return o.MemoryLimit > 0 || o.MemoryTotal > 0 || o.CPULimit > 0 || o.OpenFiles > 0
}

// checkBudget refuses limits that cannot hold.
func checkBudget(o *Options) error {
	switch {
	case o.MemoryLimit < 0:
		return fmt.Errorf("stdio: memory limit %d: it must be positive, or 0 for none", o.MemoryLimit)
	case o.MemoryTotal < 0:
		return fmt.Errorf("stdio: memory total %d: it must be positive, or 0 for none", o.MemoryTotal)
	case o.CPULimit < 0:
		return fmt.Errorf("stdio: CPU limit %g: it must be positive, or 0 for none", o.CPULimit)
	case o.OpenFiles < 0:
		return fmt.Errorf("stdio: open-file limit %d: it must be positive, or 0 for none", o.OpenFiles)
	case o.MemoryTotal > 0 && o.MemoryLimit > o.MemoryTotal:
		return fmt.Errorf("stdio: a child's memory limit (%d bytes) is over the total for all children (%d bytes)", o.MemoryLimit, o.MemoryTotal)
	}
	if o.BudgetEvery <= 0 {
		o.BudgetEvery = DefaultBudgetEvery
	}
	return budgetSupported(o)
}

// startBudget starts the watcher (always where /proc is: it also feeds
// taskgate_stdio_resident_bytes).
func (f *fleet) startBudget() {
	if !procReadable() {
		return
	}
	f.budget = &budget{b: f.b, samples: map[*proc][]cpuSample{}, window: cpuWindow}
	f.b.wg.Add(1)
	go f.budget.watch()
}

// started applies the per-process limits to a child just started.
func (bu *budget) started(p *proc) {
	if bu == nil || bu.b.opts.OpenFiles <= 0 {
		return
	}
	if err := setOpenFiles(p.cmd.Process.Pid, bu.b.opts.OpenFiles); err != nil {
		p.log.Error().Str("op", "stdio").Err(err).Msg("cannot limit the open files of the upstream process; stopped")
		p.kill("its open-file limit could not be set")
		bu.b.metrics.killed(limitOpenFiles)
	}
}

func (bu *budget) watch() {
	b := bu.b
	defer b.wg.Done()
	t := time.NewTicker(b.opts.BudgetEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			bu.check(now)
		}
	}
}

// check reads the usage of every running child once, and stops those
// over their budget.
func (bu *budget) check(now time.Time) {
	b := bu.b
	b.mu.Lock()
	procs := make([]*proc, 0, len(b.fleet.procs))
	for _, p := range b.fleet.procs {
		if p.alive() {
			procs = append(procs, p)
		}
	}
	b.mu.Unlock()
	if len(procs) == 0 {
		b.metrics.resident.WithLabelValues("total").Set(0)
		b.metrics.resident.WithLabelValues("max").Set(0)
		return
	}
	groups := readGroups()
	var total, largest int64
	use := make(map[*proc]usage, len(procs))
	for _, p := range procs {
		u := groups[p.cmd.Process.Pid]
		use[p] = u
		total += u.rss
		largest = max(largest, u.rss)
	}
	b.metrics.resident.WithLabelValues("total").Set(float64(total))
	b.metrics.resident.WithLabelValues("max").Set(float64(largest))

	o := b.opts
	for _, p := range procs {
		u := use[p]
		if o.MemoryLimit > 0 && u.rss > o.MemoryLimit {
			bu.stop(p, limitMemory, fmt.Sprintf("its resident memory (%d MiB) went over --upstream-memory-limit (%d MiB)", u.rss>>20, o.MemoryLimit>>20), u)
			total -= u.rss
			continue
		}
		if o.CPULimit > 0 {
			if cores, span, ok := bu.cpu(p, now, u.cpu); ok && cores > o.CPULimit {
				bu.stop(p, limitCPU, fmt.Sprintf("it used %.2f cores over %s, more than --upstream-cpu-limit (%g)", cores, span.Round(time.Second/10), o.CPULimit), u)
				total -= u.rss
			}
		}
	}
	bu.mu.Lock()
	for p := range bu.samples {
		if _, ok := use[p]; !ok {
			delete(bu.samples, p)
		}
	}
	bu.mu.Unlock()
	if o.MemoryTotal > 0 && total > o.MemoryTotal {
		if p := bu.victim(procs, use, total-o.MemoryTotal); p != nil {
			bu.stop(p, limitMemoryTotal, fmt.Sprintf("the children's resident memory together (%d MiB) went over --upstream-memory-total (%d MiB); this child was the one to give way (%d MiB)", total>>20, o.MemoryTotal>>20, use[p].rss>>20), use[p])
		}
	}
}

// cpu is the cores p used over about cpuWindow; false until the window
// is covered.
func (bu *budget) cpu(p *proc, now time.Time, ticks int64) (float64, time.Duration, bool) {
	bu.mu.Lock()
	defer bu.mu.Unlock()
	s := append(bu.samples[p], cpuSample{now, ticks})
	for len(s) > 2 && now.Sub(s[1].at) >= bu.window {
		s = s[1:]
	}
	bu.samples[p] = s
	span := now.Sub(s[0].at)
	if span < bu.window || ticks < s[0].ticks {
		return 0, 0, false
	}
	return float64(ticks-s[0].ticks) / clockTicks / span.Seconds(), span, true
}

// victim is the child to stop when the total is over by excess bytes:
// the first, in this order, whose stop alone brings the total under: a
// warm child, an idle session's or principal's (no call in flight), a
// busy one's, each largest first; if none would, the largest of them. The
// shared child serves everyone: never it. A principal's child is one
// user's, bounded as a session's is: stopping it ends her sessions on it.
func (bu *budget) victim(procs []*proc, use map[*proc]usage, excess int64) *proc {
	b := bu.b
	rank := func(p *proc) int {
		switch {
		case b.fleet.isWarmLocked(p):
			return 0
		case p.principal != "": // a principal's child: idle when no call of her sessions is on it
			if len(b.calls.CallsOfPeerLocked(p)) == 0 {
				return 1
			}
			return 2
		case p.sess == nil:
			return -1
		case p.sess.Inflight == 0:
			return 1
		}
		return 2
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var cands []*proc
	ranks := map[*proc]int{}
	for _, p := range procs {
		if r := rank(p); r >= 0 {
			cands = append(cands, p)
			ranks[p] = r
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if ranks[cands[i]] != ranks[cands[j]] {
			return ranks[cands[i]] < ranks[cands[j]]
		}
		return use[cands[i]].rss > use[cands[j]].rss
	})
	largest := cands[0]
	for _, p := range cands {
		if use[p].rss >= excess {
			return p
		}
		if use[p].rss > use[largest].rss {
			largest = p
		}
	}
	return largest
}

// stop kills p over limit, says why in the log, and counts it.
func (bu *budget) stop(p *proc, limit, why string, u usage) {
	if !p.alive() {
		return
	}
	b := bu.b
	b.mu.Lock()
	session := ""
	if p.sess != nil {
		session = p.sess.id
	}
	b.mu.Unlock()
	b.metrics.killed(limit) // before its session ends: whoever sees the 404 sees the count
	p.kill(why)
	b.log.Warn().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Str("session", session).Str("limit", limit).
		Int64("resident_bytes", u.rss).Msg("upstream process stopped over its budget: " + why)
}
