package gateway

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Status is this replica's figures as the operator's console shows them
// (its heartbeat, cmd/taskgate): read-only, cheap, safe for concurrent
// use.
type Status struct {
	// Held is the upstream calls the runner holds (taskgate_held_calls),
	// against MaxInflight (0: no limit).
	Held, MaxInflight int
	// Leases is the tasks whose leases this replica's workers renew.
	Leases int
	// LastSweep is when the recoverer last reached the store; zero
	// before its first sweep.
	LastSweep time.Time
	// UpstreamUp is taskgate_upstream_up: the upstream last seen
	// reachable and answering as MCP.
	UpstreamUp bool
	// Draining: the replica began shutting down.
	Draining bool
}

// Status returns this replica's figures now.
func (h *Handler) Status() Status {
	rn := h.runner
	f := rn.Figures()
	st := Status{Held: f.Held, MaxInflight: rn.MaxInflight, Leases: f.Leases, LastSweep: f.LastSweep, Draining: rn.Draining.Load()}
	var m dto.Metric
	if h.metrics.UpstreamUp.Write(&m) == nil {
		st.UpstreamUp = m.GetGauge().GetValue() == 1
	}
	return st
}
