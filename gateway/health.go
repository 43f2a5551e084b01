package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// readyTimeout bounds each readiness probe.
const readyTimeout = 2 * time.Second

// serveHealth answers liveness: the process is up and serving.
func (h *Handler) serveHealth(w http.ResponseWriter, _ *http.Request) {
	mcpwire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveReady answers readiness: can this replica serve its clients' tasks?
// That is its task store answering (on a Redis Cluster, the part of the
// keyspace it reaches: storeCheck). The upstream is checked too (it
// accepts connections, its answers are an MCP endpoint's, and no
// exchange failed for a rejected certificate or refused credentials:
// internal/upstreamside/health.go) and reported in the body and in
// taskgate_upstream_up, but it makes the replica unready only with
// Config.ReadyRequiresUpstream (or without a store): an upstream outage
// must not take every replica out of its load balancer, or clients could
// not even poll the tasks they hold. 503 lists what is not ready; a
// draining replica (Drain) is not ready.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if h.runner != nil && h.runner.Draining.Load() {
		mcpwire.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "checks": map[string]string{"gateway": "draining"}})
		return
	}
	checks := map[string]string{"upstream": "ok"}
	ready := true
	if err := h.health.Check(ctx, h.cfg.Upstream, h.recheckUpstream); err != nil {
		checks["upstream"] = err.Error() // the reason, never the address
		ready = h.cfg.Store != nil && !h.cfg.ReadyRequiresUpstream
	}
	degraded := false
	if h.cfg.Store != nil {
		var storeOK bool
		checks["store"], storeOK, degraded = h.storeCheck(ctx)
		ready = ready && storeOK
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		h.log.Warn().Str("op", "readyz").Interface("checks", checks).Msg("not ready")
	}
	body := map[string]any{"ready": ready, "checks": checks}
	if degraded && ready {
		body["degraded"] = true
		h.log.Warn().Str("op", "readyz").Interface("checks", checks).Msg("ready, degraded")
	}
	mcpwire.WriteJSON(w, status, body)
}

// storeCheck is /readyz's view of the task store: the text of its check,
// whether it keeps the replica ready, and whether it is degraded.
//
// On a Redis Cluster part of the keyspace can be out of reach while the
// rest serves (taskstore.Keyspace). When the cluster itself reports those
// slots down (a dead master not yet replaced, or one with no replica
// left), every gateway replica shares the fault: taking them all out of
// rotation would refuse the users whose tasks are on the masters that
// still serve, so the replica stays ready (200) and the body says
// "degraded" with the count. When only this replica cannot reach a master
// that the cluster sees up, another replica can serve those users: 503.
// No slot reachable at all is 503, as a standalone Redis that does not
// answer.
func (h *Handler) storeCheck(ctx context.Context) (text string, ok, degraded bool) {
	ks, err := h.cfg.Store.Keyspace(ctx)
	switch {
	case err != nil:
		h.log.Warn().Str("op", "readyz").Err(err).Msg("task store unavailable") // the detail, with Redis' address, only in the log
		return "task store unavailable", false, false
	case ks.Unreachable == 0:
		return "ok", true, false
	case ks.Unreachable >= ks.Slots:
		return fmt.Sprintf("task store unavailable: no part of the keyspace is reachable (%d of %d slots)", ks.Unreachable, ks.Slots), false, false
	case !ks.Shared:
		return fmt.Sprintf("this replica cannot reach part of the keyspace (%d of %d slots) that the cluster serves", ks.Unreachable, ks.Slots), false, false
	}
	return fmt.Sprintf("degraded: part of the keyspace is unreachable (%d of %d slots); the cluster reports their master down, for every replica alike", ks.Unreachable, ks.Slots), true, true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

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
	log := h.log.With().Str("op", "upstream").Str("upstream", h.cfg.Upstream.URL()).Logger()
	res, err := h.exchange(ctx)
	var status *upstream.StatusError
	var proto *upstream.ProtocolError
	var refused *jsonrpc.Error
	switch {
	case err == nil:
		log.Info().Str("protocol_version", res.ProtocolVersion).Msg("the upstream answered initialize")
		return nil
	case errors.As(err, &refused):
		// A JSON-RPC answer is an MCP server's (a 2026-07-28-only one may
		// refuse initialize: SEP-2575).
		log.Info().Err(err).Msg("the upstream answered initialize with an error; it speaks MCP")
		return nil
	case h.health.Wrong.Load() != nil:
		return err // the observer logged it, with the fix
	case errors.As(err, &proto):
		h.health.NotMCP(proto.Err.Error())
	case h.health.Fault.Load() != nil:
		// Every call fails until the operator acts: say so, with the fix.
		log.Error().Err(err).Msg(*h.health.Fault.Load())
	case errors.As(err, &status) && (status.Status == http.StatusUnauthorized || status.Status == http.StatusForbidden):
		// An upstream behind sign-in, and the gateway sends no
		// credentials of its own: each client brings its own (MCP
		// Authorization).
		log.Info().Int("status", status.Status).Msg("the upstream wants credentials for initialize; clients bring their own, or give the gateway's with --upstream-header")
		return nil
	case upstream.Fault(err) == upstream.FaultRefused:
		log.Warn().Err(err).Msg(upstream.FaultText(err) + "; serving anyway")
	case errors.Is(err, upstream.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		log.Warn().Err(err).Msg("the upstream does not answer yet; serving anyway")
	case errors.As(err, &status):
		log.Warn().Err(err).Msg("the upstream refused initialize; serving anyway")
	default:
		log.Warn().Err(err).Msg("the upstream check failed; serving anyway")
	}
	return err
}

// exchange initializes a session with the upstream over the real
// transport (and closes it), and records in the upstream's health a
// failure that fails every call (upstream.FaultText): a certificate
// the gateway rejects, or a 401/403 to credentials the gateway sends
// itself (without any, clients bring theirs: MCP Authorization).
func (h *Handler) exchange(ctx context.Context) (*upstream.InitializeResult, error) {
	up := h.cfg.Upstream
	params := []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":` + string(upstreamside.GatewayInfo) + `}`)
	sess, res, err := up.Initialize(ctx, nil, params)
	var refused *jsonrpc.Error
	switch fault := upstream.Fault(err); {
	case err == nil:
		_ = up.CloseSession(context.WithoutCancel(ctx), sess)
		h.health.SetFault("")
	case errors.As(err, &refused):
		h.health.SetFault("")
	case fault == upstream.FaultTLS, fault == upstream.FaultCredentials && up.HasCredentials():
		h.health.SetFault(upstream.FaultText(err))
	}
	return res, err
}

// recheckUpstream is /readyz's real exchange while a fault stands.
func (h *Handler) recheckUpstream(ctx context.Context) error {
	_, err := h.exchange(ctx)
	return err
}
