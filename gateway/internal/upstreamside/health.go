package upstreamside

// What this replica knows of the upstream's health: whether it can be
// reached, and whether its answers are an MCP endpoint's. It feeds the
// Upstream check of /readyz (health.go), the taskgate_upstream_up gauge
// and the log. A wrong upstream URL (a server's root instead of its /mcp)
// reaches the server, so a TCP probe calls it healthy while every MCP
// request gets 404: the answers tell, and the log says so with the fix.

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
		u.up.Set(0)
	case o.NotMCP != "":
		u.NotMCP(o.NotMCP)
	case o.Status < 500:
		u.Wrong.Store(nil)
		u.up.Set(1)
	}
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
// connections and its last answer (if any) was an MCP endpoint's. The
// error's text never names the upstream's address.
func (u *Health) Check(ctx context.Context, client *upstream.Client) error {
	if err := client.Ping(ctx); err != nil {
		u.up.Set(0)
		return err
	}
	if why := u.Wrong.Load(); why != nil {
		return errors.New("not an MCP endpoint (" + *why + "); the log names the URL and the fix")
	}
	u.up.Set(1)
	return nil
}
