package policy

import (
	"sync"
	"time"
)

// Defaults for Latencies.
const (
	// DefaultMaxTools bounds how many tools a Latencies tracks: tool names
	// come from clients, so the map must not grow without limit.
	DefaultMaxTools = 10000
	// DecayAfter is how many of its own observations of a tool a replica
	// holds before halving them: the estimate follows roughly the last
	// DecayAfter/2 … DecayAfter calls, so a tool that got faster (or
	// slower) is seen to within a few hundred calls.
	DecayAfter = 1024
)

// Latencies is a replica's per-tool latency knowledge: its own
// observations (Local, which it publishes for the other replicas) plus the
// merged histograms of the other replicas (SetRemote). Stats reads the sum.
// Sharing is by periodic merge: the gateway publishes Local now and then
// and reads the others back; nothing is written per call. Safe for
// concurrent use.
type Latencies struct {
	maxTools int

	mu    sync.RWMutex
	tools map[string]*toolLatency
}

type toolLatency struct {
	mu            sync.Mutex
	local, remote Histogram
	stats         Stats // of local+remote, kept current by every change
}

// NewLatencies returns an empty Latencies tracking at most maxTools tools
// (zero or less: DefaultMaxTools).
func NewLatencies(maxTools int) *Latencies {
	if maxTools <= 0 {
		maxTools = DefaultMaxTools
	}
	return &Latencies{maxTools: maxTools, tools: map[string]*toolLatency{}}
}

// entry returns tool's entry, creating it unless the map is full (nil).
func (l *Latencies) entry(tool string) *toolLatency {
	l.mu.RLock()
	e := l.tools[tool]
	l.mu.RUnlock()
	if e != nil {
		return e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e = l.tools[tool]; e == nil && len(l.tools) < l.maxTools {
		e = &toolLatency{}
		l.tools[tool] = e
	}
	return e
}

// Observe records one upstream tools/call of tool that took d, time spent
// waiting for user input excluded.
func (l *Latencies) Observe(tool string, d time.Duration) {
	e := l.entry(tool)
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.local.Observe(d)
	if e.local.Count() >= DecayAfter {
		e.local.Halve()
	}
	e.update()
}

// update recomputes e.stats; e.mu is held.
func (e *toolLatency) update() {
	sum := e.local
	sum.Merge(&e.remote)
	e.stats = sum.Stats()
}

// Stats is what is known of tool's latency; zero for a tool never seen.
func (l *Latencies) Stats(tool string) Stats {
	l.mu.RLock()
	e := l.tools[tool]
	l.mu.RUnlock()
	if e == nil {
		return Stats{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Local returns a copy of this replica's own histograms, for publishing.
func (l *Latencies) Local() map[string]Histogram {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]Histogram, len(l.tools))
	for tool, e := range l.tools {
		e.mu.Lock()
		if e.local.Count() > 0 {
			out[tool] = e.local
		}
		e.mu.Unlock()
	}
	return out
}

// SetRemote replaces what the other replicas know with others: per tool,
// the merge of every other replica's published histogram. A tool absent
// from others keeps only this replica's observations. Calling it at start
// with what the fleet published makes a new replica start warm.
func (l *Latencies) SetRemote(others map[string]Histogram) {
	for tool, h := range others {
		if e := l.entry(tool); e != nil {
			e.mu.Lock()
			e.remote = h
			e.update()
			e.mu.Unlock()
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for tool, e := range l.tools {
		if _, ok := others[tool]; ok {
			continue
		}
		e.mu.Lock()
		if e.remote.Count() > 0 {
			e.remote = Histogram{}
			e.update()
		}
		e.mu.Unlock()
	}
}
