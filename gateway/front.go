package gateway

import (
	"net/http"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// frontDeps are what both fronts hold: the components they call, and the
// poll limit and render cache of tasks/get.
type frontDeps struct {
	runner  *runner
	up      *upstreamSide
	decider *decider
	metrics *metrics
	log     zerolog.Logger
	polls   *pollLimiter // nil: no limit
	renders *renderCache
}

// get answers a poll (tasks/get) of the owner's task id for a client of
// era, rendered as f: the poll limit first, then the render cache or the
// store (rendercache.go).
func (d *frontDeps) get(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, store renderStore,
	f renderFlavour, era clientEra, owner, id string) {
	if !d.polls.admit(w, msg, d.metrics, owner, id) { // ratelimit.go
		return
	}
	raw, err := d.renders.get(r.Context(), store, f, owner, id)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, taskError(d.log, err, "get", id, era))
		return
	}
	mcpwire.WriteMarshalled(w, msg.ID, raw)
}
