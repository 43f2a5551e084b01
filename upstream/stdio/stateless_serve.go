package stdio

// The client-facing side of a 2026-07-28 child (stateless.go): one
// request per POST, answered as a stateless Streamable HTTP server answers.

import (
	"encoding/json"
	"errors"

	"net/http"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// serve is ServeHTTP for a 2026-07-28 child's requests of no session: a
// 2026-07-28 client's, or (without Shared) the initialize of a 2025-11-25
// client, which opens a session with a child of its own (Bridge.initialize).
func (st *statelessSide) serve(w http.ResponseWriter, r *http.Request) {
	b := st.b
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: the upstream process speaks 2026-07-28, which has no GET stream and no sessions", http.StatusMethodNotAllowed)
		return
	}
	body, env, ok := bridgesession.ReadPost(w, r, b.opts.MaxMessage, "message larger than the upstream process accepts", "a 2026-07-28 upstream process")
	if !ok {
		return
	}
	switch {
	case env.Method == "initialize" && !b.opts.Shared:
		b.initialize(w, r, body, env)
		return
	case env.Method == "":
		jsonError(w, http.StatusBadRequest, env.ID, mcpwire.CodeInvalidRequest, "Invalid Request: a client sends no responses in 2026-07-28")
		return
	case len(env.ID) == 0:
		// No client notification is defined over Streamable HTTP in
		// 2026-07-28: closing a stream cancels its request.
		w.WriteHeader(http.StatusAccepted)
		return
	case removedMethods[env.Method]:
		jsonError(w, http.StatusNotFound, env.ID, mcpwire.CodeMethodNotFound,
			"Method not found: "+env.Method+" (the upstream process speaks 2026-07-28, which has no "+env.Method+")")
		return
	}
	p, down := st.child()
	if p == nil {
		exitedError(w, http.StatusServiceUnavailable, env.ID, "the upstream process is not running: "+down.Error())
		return
	}
	if env.Method == "tools/call" {
		if err := st.checkParamHeaders(r, p, env.Params); errors.Is(err, errUnchecked) {
			jsonError(w, http.StatusBadGateway, env.ID, mcpwire.CodeInternalError, err.Error())
			return
		} else if err != nil {
			jsonError(w, http.StatusBadRequest, env.ID, mcpwire.CodeHeaderMismatch, "Header mismatch: "+err.Error())
			return
		}
	}
	c, err := st.send(p, body, env)
	if err != nil {
		jsonError(w, http.StatusBadGateway, env.ID, mcpwire.CodeInternalError, err.Error())
		return
	}
	if env.Method == "subscriptions/listen" { // its notifications name it; untagged ones are not its
		st.mu.Lock()
		st.listens[c.Key] = true
		st.mu.Unlock()
		defer func() {
			st.mu.Lock()
			delete(st.listens, c.Key)
			st.mu.Unlock()
		}()
	}
	defer func() { // a reply that came as the client left: its file closed
		select {
		case rp := <-c.Final:
			rp.big.release()
		default:
		}
	}()
	var sse *mcpwire.Writer
	for {
		select {
		case m := <-c.Out:
			if sse == nil {
				sse = mcpwire.NewWriter(w)
			}
			if sse.SendRaw(m) != nil {
				b.calls.Cancel(c, "the client went away")
				return
			}
		case rp := <-c.Final:
			for drained := false; !drained; { // what came before the answer goes first
				select {
				case x := <-c.Out:
					if sse == nil {
						sse = mcpwire.NewWriter(w)
					}
					_ = sse.SendRaw(x)
				default:
					drained = true
				}
			}
			if rp.big != nil { // streamed from its file, as an SSE event
				_ = rp.big.writeTo(w, sse != nil && sse.Started(), c.OrigID)
				return
			}
			if sse != nil {
				_ = sse.SendRaw(rp.msg)
				return
			}
			mcpwire.WriteBody(w, answerStatus(rp.msg), "application/json", rp.msg)
			return
		case <-r.Context().Done():
			b.calls.Cancel(c, "the client went away")
			return
		}
	}
}

// removedMethods are what 2026-07-28 removed (SEP-2575, "Deprecated and
// Removed RPCs"); initialize would also turn the shared child into one
// client's session.
var removedMethods = map[string]bool{"initialize": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true}

// answerStatus is the HTTP status of a whole answer: a JSON-RPC error gets
// the one its code prescribes to a 2026-07-28 client.
func answerStatus(msg []byte) int {
	var resp struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &resp) != nil || resp.Error == nil {
		return http.StatusOK
	}
	return mcpwire.StatelessStatus(resp.Error.Code)
}
