package front2025

import (
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Serve serves msg if it is the 2025-11-25 front's to serve, and reports
// whether it did; anything else the caller relays unchanged.
func (f *Front) Serve(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) bool {
	if len(r.Header["Mcp-Session-Id"]) > 0 {
		s, err := f.sessions.sessionErr(r)
		if s.emulated() && f.held.serveEmulated(w, r, msg, s) { // stateless.go
			return true
		}
		if s == nil && err == nil && f.held.unknownStatelessSession(w, r) {
			return true
		}
	}
	switch msg.Kind {
	case mcpwire.KindRequest:
		switch msg.MethodName() {
		case "initialize":
			f.initialize(w, r, msg)
			return true
		case "tools/list":
			f.toolsList(w, r, msg)
			return true
		case "tools/call":
			f.toolsCall(w, r, msg)
			return true
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
			s, err := f.sessions.sessionErr(r)
			if s.tasks2025() {
				f.tasks(w, r, msg, s)
				return true
			}
			if err != nil {
				// The session may be one the gateway serves tasks for; only
				// the store could tell. Not the upstream's to answer.
				mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
				return true
			}
			// Relayed as it is, except the upstream's own task that another
			// owner's call created (native.go): never reached from
			// a session the gateway does not check.
			return f.native.foreignUpstreamTask(w, r, msg)
		}
	case mcpwire.KindResponse:
		if core.IsInputID(msg.ID) {
			f.inputResponse(w, r, msg)
			return true
		}
	}
	return false
}

// StreamOrEnd handles the upstream's answer to a GET or DELETE of a
// session: a 2025-11-25 session's GET stream is relayed with the gateway's
// own notifications merged in (it reports true: answered); a session the
// upstream ended is forgotten.
func (f *Front) StreamOrEnd(w http.ResponseWriter, r *http.Request, resp *http.Response) bool {
	if r.Method == http.MethodDelete && (resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotFound) {
		f.sessions.forget(r) // the upstream ended the session, or had already
	}
	if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && upstreamside.IsStream(resp) {
		if s := f.sessions.session(r); s.tasks2025() {
			f.relayMerged(w, r, resp, s.ID)
			return true
		}
	}
	return false
}
