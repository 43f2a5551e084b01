package obs

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// The refusals that keep one principal from starving another (fair
// shares: internal/runner/admit.go, and the sessions of a local server in
// upstream/stdio and upstream/sse). Each is counted in
// taskgate_refusals_total{reason}; the log gets at most one line per reason
// per RefusalLogEvery, saying how many were refused since the last one: a
// principal hammering the gateway must not flood the log (112,000 warn
// lines in 70 s was the finding that asked for this).

// Refusal reasons, the label values of taskgate_refusals_total.
const (
	RefusedMaxInflight  = "max_inflight"               // --max-inflight full, no slot freed within the fair wait
	RefusedPerPrincipal = "max_inflight_per_principal" // the principal holds its cap of calls
	RefusedFairShare    = "fair_share"                 // the pool is full and the principal holds at least its share
	RefusedTaskRate     = "max_task_rate"              // the principal's task creations per minute
	refusedSessions     = "max_sessions_per_principal" // a local server's sessions of one principal
	refusedMaxSessions  = "max_sessions"               // a local server's sessions of all principals
)

var refusalReasons = []string{RefusedMaxInflight, RefusedPerPrincipal, RefusedFairShare, RefusedTaskRate,
	refusedSessions, refusedMaxSessions}

// refusalLogEvery is how often at most each reason is logged.
const refusalLogEvery = 10 * time.Second

// refusals counts and logs refusals; a nil one does nothing.
type refusals struct {
	counter *prometheus.CounterVec
	log     zerolog.Logger
	now     func() time.Time

	mu      sync.Mutex
	pending map[string]int       // refused since the reason's last line
	last    map[string]time.Time // when the reason was last logged
}

// RegisterRefusals adds taskgate_refusals_total, every reason present at 0
// so alerts see a rise from the start, and sets m.Refusals.
func (m *Metrics) RegisterRefusals(log zerolog.Logger) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_refusals_total", Help: "Requests refused so that one principal cannot starve another, by reason: max_inflight, max_inflight_per_principal, fair_share, max_task_rate, max_sessions_per_principal, max_sessions.",
	}, []string{"reason"})
	for _, r := range refusalReasons {
		c.WithLabelValues(r)
	}
	m.register(c)
	m.refusals = &refusals{counter: c, log: log, now: time.Now, pending: map[string]int{}, last: map[string]time.Time{}}
}

// refuse counts one refusal for reason and logs it, sampled: msg (the
// refusal's own words) with the number refused since the reason's last
// line.
func (r *refusals) refuse(reason, msg string) {
	if r == nil {
		return
	}
	r.counter.WithLabelValues(reason).Inc()
	now := r.now()
	r.mu.Lock()
	r.pending[reason]++
	if now.Sub(r.last[reason]) < refusalLogEvery {
		r.mu.Unlock()
		return
	}
	n := r.pending[reason]
	r.pending[reason], r.last[reason] = 0, now
	r.mu.Unlock()
	r.log.Warn().Str("op", "admit").Str("reason", reason).Int("refused", n).
		Dur("sampled_every", refusalLogEvery).Msg(msg)
}

// Refused is m.Refusals.Refuse, for a nil m too.
func (m *Metrics) Refused(reason, msg string) {
	if m != nil {
		m.refusals.refuse(reason, msg)
	}
}
