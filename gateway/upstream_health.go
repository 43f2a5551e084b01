package gateway

// What this replica knows of the upstream's health: whether it can be
// reached, and whether its answers are an MCP endpoint's. It feeds the
// upstream check of /readyz (health.go), the taskgate_upstream_up gauge
// and the log. A wrong upstream URL (a server's root instead of its /mcp)
// reaches the server, so a TCP probe calls it healthy while every MCP
// request gets 404: the answers tell, and the log says so with the fix.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream"
)

// notMCPLogEvery bounds the log lines about answers that are not an MCP
// endpoint's: one per interval, saying how many were not logged.
const notMCPLogEvery = time.Minute

// upstreamHealth is the upstream's health as last seen. Safe for
// concurrent use.
type upstreamHealth struct {
	url   string // for the log only: clients never see it
	log   zerolog.Logger
	up    prometheus.Gauge       // taskgate_upstream_up
	wrong atomic.Pointer[string] // why the last answer was not MCP's; nil once one was

	mu         sync.Mutex
	lastLog    time.Time // of a "not an MCP endpoint" line
	suppressed int       // such answers not logged since
}

func newUpstreamHealth(url string, log zerolog.Logger, up prometheus.Gauge) *upstreamHealth {
	return &upstreamHealth{url: url, log: log, up: up}
}

// observe hears of every exchange with the upstream (with the metrics:
// Client.SetObserver). A 5xx says nothing of the path: the state stays.
func (u *upstreamHealth) observe(o upstream.Observation) {
	switch {
	case o.Err != nil:
		u.up.Set(0)
	case o.NotMCP != "":
		u.notMCP(o.NotMCP)
	case o.Status < 500:
		u.wrong.Store(nil)
		u.up.Set(1)
	}
}

// notMCP records an answer that is not an MCP endpoint's and logs it at
// error with the URL and the likely fix: the first at once, then at most
// one line per notMCPLogEvery.
func (u *upstreamHealth) notMCP(why string) {
	u.wrong.Store(&why)
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

// check is /readyz's view of the upstream: nil when it accepts
// connections and its last answer (if any) was an MCP endpoint's. The
// error's text never names the upstream's address.
func (u *upstreamHealth) check(ctx context.Context, client *upstream.Client) error {
	if err := client.Ping(ctx); err != nil {
		u.up.Set(0)
		return err
	}
	if why := u.wrong.Load(); why != nil {
		return errors.New("not an MCP endpoint (" + *why + "); the log names the URL and the fix")
	}
	u.up.Set(1)
	return nil
}

// upstreamCheckTimeout bounds CheckUpstream's initialize.
const upstreamCheckTimeout = 5 * time.Second

// CheckUpstream initializes a session with the upstream once (and closes
// it), so that a wrong upstream is in the log before the first client
// comes: an answer that is not an MCP endpoint's (the URL's path is wrong)
// is logged at error with the fix; an unreachable upstream, or one that
// answers with another HTTP error, at warn. The gateway serves either way.
// It returns what it logged (nil: the upstream answered as an MCP server,
// a JSON-RPC refusal included).
func (h *Handler) CheckUpstream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, upstreamCheckTimeout)
	defer cancel()
	up, log := h.cfg.Upstream, h.log.With().Str("op", "upstream").Str("upstream", h.cfg.Upstream.URL()).Logger()
	params := []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":` + string(gatewayInfo) + `}`)
	sess, res, err := up.Initialize(ctx, nil, params)
	var status *upstream.StatusError
	var proto *upstream.ProtocolError
	var refused *jsonrpc.Error
	switch {
	case err == nil:
		_ = up.CloseSession(context.WithoutCancel(ctx), sess)
		log.Info().Str("protocol_version", res.ProtocolVersion).Msg("the upstream answered initialize")
		return nil
	case errors.As(err, &refused):
		// A JSON-RPC answer is an MCP server's (a 2026-07-28-only one may
		// refuse initialize: SEP-2575).
		log.Info().Err(err).Msg("the upstream answered initialize with an error; it speaks MCP")
		return nil
	case h.health.wrong.Load() != nil:
		return err // the observer logged it, with the fix
	case errors.As(err, &proto):
		h.health.notMCP(proto.Err.Error())
	case errors.Is(err, upstream.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		log.Warn().Err(err).Msg("the upstream does not answer yet; serving anyway")
	case errors.As(err, &status) && (status.Status == http.StatusUnauthorized || status.Status == http.StatusForbidden):
		// An upstream behind sign-in: each client brings its own
		// credentials (MCP Authorization).
		log.Info().Int("status", status.Status).Msg("the upstream wants credentials for initialize; clients bring their own")
		return nil
	case errors.As(err, &status):
		log.Warn().Err(err).Msg("the upstream refused initialize; serving anyway")
	default:
		log.Warn().Err(err).Msg("the upstream check failed; serving anyway")
	}
	return err
}
