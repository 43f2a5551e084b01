package gateway

import (
	"context"
	"net"
	"net/http"
	"net/url"
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

// serveReady answers readiness: the upstream accepts connections and the
// task store answers. 503 lists what is not ready; a draining replica
// (Drain) is not ready.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if h.runner != nil && h.runner.draining.Load() {
		mcpwire.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "checks": map[string]string{"gateway": "draining"}})
		return
	}
	checks := map[string]string{"upstream": "ok"}
	ready := true
	if err := dialUpstream(ctx, h.up.client.URL()); err != nil {
		checks["upstream"] = "upstream " + h.up.client.URL() + " is unreachable: " + err.Error()
		ready = false
	}
	if h.cfg.Store != nil {
		checks["store"] = "ok"
		if err := h.cfg.Store.Ping(ctx); err != nil {
			checks["store"] = "task store unavailable: " + err.Error()
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

// dialUpstream opens and closes a TCP connection to the upstream's host.
// It proves reachability without sending MCP traffic the upstream would
// have to answer.
func dialUpstream(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	return conn.Close()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
