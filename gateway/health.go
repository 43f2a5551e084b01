package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// readyTimeout bounds each readiness probe.
const readyTimeout = 2 * time.Second

// serveHealth answers liveness: the process is up and serving.
func (h *Handler) serveHealth(w http.ResponseWriter, _ *http.Request) {
	mcpwire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveReady answers readiness: can this replica serve its clients' tasks?
// That is its task store answering. The upstream is checked too (it
// accepts connections, and its answers are an MCP endpoint's:
// upstream_health.go) and reported in the body and in
// taskgate_upstream_up, but it makes the replica unready only with
// Config.ReadyRequiresUpstream (or without a store): an upstream outage
// must not take every replica out of its load balancer, or clients could
// not even poll the tasks they hold. 503 lists what is not ready; a
// draining replica (Drain) is not ready.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if h.runner != nil && h.runner.draining.Load() {
		mcpwire.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "checks": map[string]string{"gateway": "draining"}})
		return
	}
	checks := map[string]string{"upstream": "ok"}
	ready := true
	if err := h.health.check(ctx, h.cfg.Upstream); err != nil {
		checks["upstream"] = err.Error() // the reason, never the address
		ready = h.cfg.Store != nil && !h.cfg.ReadyRequiresUpstream
	}
	if h.cfg.Store != nil {
		checks["store"] = "ok"
		if err := h.cfg.Store.Ping(ctx); err != nil {
			checks["store"] = "task store unavailable" // the detail, with Redis' address, only in the log
			h.log.Warn().Str("op", "readyz").Err(err).Msg("task store unavailable")
			ready = false
		}
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		h.log.Warn().Str("op", "readyz").Interface("checks", checks).Msg("not ready")
	}
	mcpwire.WriteJSON(w, status, map[string]any{"ready": ready, "checks": checks})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
