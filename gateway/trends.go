package gateway

import (
	"time"

	"github.com/taskgate/taskgate/gateway/internal/obs"
)

// TrendsConfig configures the console's trends: per tool and overall,
// per minute, the tasks started, completed, failed and cancelled, their
// durations, the input waits and the reruns, added up in memory on each
// replica and written to the Store every Flush (docs/console.md,
// "Trends").
type TrendsConfig struct {
	// Off keeps no trends: nothing is added up, nothing written.
	Off bool
	// Flush is how often a replica writes what it added up; zero means
	// DefaultTrendsFlush.
	Flush time.Duration
	// MaxTools caps the tools with a series of their own across the
	// fleet; the others are counted in "(other)". Zero means
	// DefaultTrendsMaxTools.
	MaxTools int
}

// Defaults of TrendsConfig.
const (
	DefaultTrendsFlush    = obs.DefaultTrendsFlush
	DefaultTrendsMaxTools = obs.DefaultTrendsMaxTools
)

// startTrends starts the trends' flusher unless they are off (a Store is
// there: New calls it only then).
func (h *Handler) startTrends(c Config) {
	if c.Trends.Off {
		return
	}
	h.trends = obs.NewTrends(obs.TrendsParams{Store: c.Store, Every: c.Trends.Flush, MaxTools: c.Trends.MaxTools, Log: c.Logger})
	h.metrics.SetTrends(h.trends)
	h.trends.Start()
}

// stopTrends stops the flusher after a last flush (bounded: obs.Trends.Stop).
func (h *Handler) stopTrends() {
	if h.trends != nil {
		h.trends.Stop()
	}
}
