package upstreamside

// What this replica knows of the upstream's health: whether it can be
// reached, and whether its answers are an MCP endpoint's. It feeds the
// Upstream check of /readyz (health.go), the taskgate_upstream_up gauge
// and the log. A wrong upstream URL (a server's root instead of its /mcp)
// reaches the server, so a TCP probe calls it healthy while every MCP
// request gets 404: the answers tell, and the log says so with the fix.
// Likewise an https upstream whose certificate the gateway rejects, or
// that refuses the gateway's own credentials, accepts connections while
// every call fails: a real exchange tells (Fault, upstream.FaultText).

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream"
)

// notMCPLogEvery bounds the log lines about answers that are not an MCP
// endpoint's: one per interval, saying how many were not logged.
const notMCPLogEvery = time.Minute

// Health is the upstream's health as last seen. Safe for
// concurrent use.
type Health struct {
	url   string // for the log only: clients never see it
	log   zerolog.Logger
	up    prometheus.Gauge       // taskgate_upstream_up
	Wrong atomic.Pointer[string] // why the last answer was not MCP's; nil once one was
	// Fault is why the gateway's own last exchange failed in a way that
	// fails every call until the operator acts (a certificate it rejects,
	// its credentials refused), with the fix (upstream.FaultText); nil once an
	// exchange succeeded.
	Fault atomic.Pointer[string]

	mu         sync.Mutex
	lastLog    time.Time // of a "not an MCP endpoint" line
	suppressed int       // such answers not logged since
}

func NewHealth(url string, log zerolog.Logger, up prometheus.Gauge) *Health {
	return &Health{url: url, log: log, up: up}
}

// Observe hears of every exchange with the upstream (with the metrics:
// Client.SetObserver). A 5xx says nothing of the path: the state stays.
func (u *Health) Observe(o upstream.Observation) {
	switch {
	case o.Err != nil:
		if upstream.Fault(o.Err) == upstream.FaultTLS { // every call fails so: /readyz says it
			u.SetFault(upstream.FaultText(o.Err))
		}
		u.up.Set(0)
	case o.NotMCP != "":
		u.NotMCP(o.NotMCP)
	case o.Status < 400:
		u.Fault.Store(nil)
		u.Wrong.Store(nil)
		u.up.Set(1)
	case o.Status < 500 && u.Fault.Load() == nil:
		// A client's 401 says nothing of the gateway's credentials.
		u.Wrong.Store(nil)
		u.up.Set(1)
	}
}

// SetFault records why every call fails (upstream.FaultText), or clears it ("").
func (u *Health) SetFault(why string) {
	if why == "" {
		u.Fault.Store(nil)
		return
	}
	u.Fault.Store(&why)
	u.up.Set(0)
}

// NotMCP records an answer that is not an MCP endpoint's and logs it at
// error with the URL and the likely fix: the first at once, then at most
// one line per notMCPLogEvery.
func (u *Health) NotMCP(why string) {
	u.Wrong.Store(&why)
	u.up.Set(0)
	u.mu.Lock()
	now := time.Now()
	if !u.lastLog.IsZero() && now.Sub(u.lastLog) < notMCPLogEvery {
		u.suppressed++
		u.mu.Unlock()
		return
	}
	skipped := u.suppressed
	u.lastLog, u.suppressed = now, 0
	u.mu.Unlock()
	u.log.Error().Str("op", "upstream").Str("upstream", u.url).Str("answer", why).Int("not_logged_since", skipped).
		Msg("the upstream URL is not an MCP endpoint: " + upstream.PathHint(u.url))
}

// Check is /readyz's view of the upstream: nil when it accepts
// connections, its last answer (if any) was an MCP endpoint's, and no
// Fault stands. While one stands, recheck (a real MCP exchange over the
// real transport: Handler's initialize) runs on every check, so /readyz
// turns ready once the upstream is fixed; a healthy upstream costs a TCP
// dial. The error's text never names the upstream's address.
func (u *Health) Check(ctx context.Context, client *upstream.Client, recheck func(context.Context) error) error {
	if err := client.Ping(ctx); err != nil {
		u.up.Set(0)
		if why := upstream.FaultText(err); why != "" {
			return errors.New(why)
		}
		return err
	}
	if u.Fault.Load() != nil && recheck != nil {
		_ = recheck(ctx) // sets or clears Fault
	}
	if why := u.Fault.Load(); why != nil {
		u.up.Set(0)
		return errors.New(*why)
	}
	if why := u.Wrong.Load(); why != nil {
		return errors.New("not an MCP endpoint (" + *why + "); the log names the URL and the fix")
	}
	u.up.Set(1)
	return nil
}
