package obs

import "github.com/prometheus/client_golang/prometheus"

// NewReruns registers taskgate_task_reruns_total{tool,cause}: attempts
// this replica began again of rerunnable tasks (docs/durable.md).
func (m *Metrics) NewReruns() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_task_reruns_total", Help: "Attempts this replica began again of rerunnable tasks, per tool and cause (replica_stopped, connection_refused, connection_reset, http_502/503/504, session_gone, process_exited).",
	}, []string{"tool", "cause"})
	m.register(c)
	return c
}
