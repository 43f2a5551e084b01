package stdio

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a Bridge's Prometheus collectors (Bridge.Metrics; the
// gateway registers them, this package imports nothing of it):
//
//	taskgate_stdio_starts_total{kind}          sessions' children readied: cold (started for the session) | warm (taken from the pool)
//	taskgate_stdio_start_seconds{kind}         a session's initialize sent → the child's answer (cold: the start included)
//	taskgate_stdio_children{scope}             running children: session | principal (--upstream-scope principal) | shared (the --upstream-shared or 2026-07-28 child) | warm
//	taskgate_stdio_resident_bytes{stat}        resident memory of the children (VmRSS of each child's process group, /proc): total | max
//	taskgate_stdio_kills_total{limit}          children stopped over their budget: memory | memory_total | cpu | open_files
//
// No label names a process or a session: the cardinality is fixed.
type Metrics struct {
	starts   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	kills    *prometheus.CounterVec
	children *childrenCollector
	resident *prometheus.GaugeVec
}

// The kinds of start, and the limits a child is stopped for.
const (
	startCold = "cold"
	startWarm = "warm"

	limitMemory      = "memory"
	limitMemoryTotal = "memory_total"
	limitCPU         = "cpu"
	limitOpenFiles   = "open_files"
)

// NewMetrics are a bridge's collectors, unattached (Start makes its own).
func NewMetrics() *Metrics {
	m := &Metrics{
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_stdio_starts_total",
			Help: "Children of --upstream-command made ready for a client session: cold (started for it) or warm (taken from the --upstream-warm pool).",
		}, []string{"kind"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "taskgate_stdio_start_seconds",
			Help:    "Time from a session's initialize to its child's answer; a cold start includes starting the process.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskgate_stdio_kills_total",
			Help: "Children of --upstream-command stopped over their budget, by the limit they passed: memory (--upstream-memory-limit), memory_total (--upstream-memory-total), cpu (--upstream-cpu-limit), open_files (--upstream-open-files).",
		}, []string{"limit"}),
		children: &childrenCollector{desc: prometheus.NewDesc("taskgate_stdio_children",
			"Running children of --upstream-command on this replica: session (a client session's own), principal (a principal's, --upstream-scope principal), shared (--upstream-shared, or the 2026-07-28 child), warm (started ahead, waiting for a session).",
			[]string{"scope"}, nil)},
		resident: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "taskgate_stdio_resident_bytes",
			Help: "Resident memory of the children of --upstream-command (VmRSS summed over each child's process group, read from /proc on Linux): total over the children, and max of one child.",
		}, []string{"stat"}),
	}
	for _, k := range []string{startCold, startWarm} {
		m.starts.WithLabelValues(k)
		m.seconds.WithLabelValues(k)
	}
	for _, l := range []string{limitMemory, limitMemoryTotal, limitCPU, limitOpenFiles} {
		m.kills.WithLabelValues(l)
	}
	return m
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.starts, m.seconds, m.kills, m.children, m.resident}
}

// Metrics are the bridge's collectors.
func (b *Bridge) Metrics() *Metrics { return b.metrics }

func (m *Metrics) observeStart(kind string, took time.Duration, err error) {
	if m == nil || err != nil {
		return
	}
	m.starts.WithLabelValues(kind).Inc()
	m.seconds.WithLabelValues(kind).Observe(took.Seconds())
}

func (m *Metrics) killed(limit string) {
	if m != nil {
		m.kills.WithLabelValues(limit).Inc()
	}
}

// childrenCollector counts the bridge's running children when scraped.
type childrenCollector struct {
	desc *prometheus.Desc
	b    *Bridge // set by Start
}

func (c *childrenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *childrenCollector) Collect(ch chan<- prometheus.Metric) {
	var session, principal, shared, warm int
	if b := c.b; b != nil {
		b.mu.Lock()
		for _, p := range b.fleet.procs {
			switch {
			case p.sess != nil:
				session++
			case p.principal != "":
				principal++
			case b.fleet.isWarmLocked(p):
				warm++
			default: // the shared or 2026-07-28 child, a probe, one being started ahead
				shared++
			}
		}
		b.mu.Unlock()
	}
	for scope, n := range map[string]int{"session": session, "principal": principal, "shared": shared, "warm": warm} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), scope)
	}
}

func (f *fleet) isWarmLocked(p *proc) bool {
	for _, q := range f.warm.ready {
		if q == p {
			return true
		}
	}
	return false
}
