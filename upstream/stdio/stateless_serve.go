package stdio

// The client-facing side of a 2026-07-28 child (stateless.go): one
// request per POST, answered as a stateless Streamable HTTP server answers.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// serveStateless is ServeHTTP for a 2026-07-28 child.
func (b *Bridge) serveStateless(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: the upstream process speaks 2026-07-28, which has no GET stream and no sessions", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxMessage)+1))
	if err != nil {
		jsonError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "cannot read the request body")
		return
	}
	if len(body) > b.opts.MaxMessage {
		jsonError(w, http.StatusRequestEntityTooLarge, nil, mcpwire.CodeInvalidRequest, "message larger than the upstream process accepts")
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		jsonError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "Parse error: one JSON-RPC message per POST")
		return
	}
	switch {
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
	p, down := b.st.child()
	if p == nil {
		exitedError(w, http.StatusServiceUnavailable, env.ID, "the upstream process is not running: "+down.Error())
		return
	}
	if env.Method == "tools/call" {
		if err := b.checkParamHeaders(r, p, env.Params); errors.Is(err, errUnchecked) {
			jsonError(w, http.StatusBadGateway, env.ID, mcpwire.CodeInternalError, err.Error())
			return
		} else if err != nil {
			jsonError(w, http.StatusBadRequest, env.ID, mcpwire.CodeHeaderMismatch, "Header mismatch: "+err.Error())
			return
		}
	}
	c, err := b.send(p, body, env)
	if err != nil {
		jsonError(w, http.StatusBadGateway, env.ID, mcpwire.CodeInternalError, err.Error())
		return
	}
	if env.Method == "subscriptions/listen" { // its notifications name it; untagged ones are not its
		b.st.mu.Lock()
		b.st.listens[c.key] = true
		b.st.mu.Unlock()
		defer func() {
			b.st.mu.Lock()
			delete(b.st.listens, c.key)
			b.st.mu.Unlock()
		}()
	}
	defer func() { // a reply that came as the client left: its file closed
		select {
		case rp := <-c.final:
			rp.big.release()
		default:
		}
	}()
	var sse *mcpwire.Writer
	for {
		select {
		case m := <-c.out:
			if sse == nil {
				sse = mcpwire.NewWriter(w)
			}
			if sse.SendRaw(m) != nil {
				b.cancel(c, "the client went away")
				return
			}
		case rp := <-c.final:
			for drained := false; !drained; { // what came before the answer goes first
				select {
				case x := <-c.out:
					if sse == nil {
						sse = mcpwire.NewWriter(w)
					}
					_ = sse.SendRaw(x)
				default:
					drained = true
				}
			}
			if rp.big != nil { // streamed from its file, as an SSE event
				_ = rp.big.writeTo(w, sse != nil && sse.Started(), c.origID)
				return
			}
			if sse != nil {
				_ = sse.SendRaw(rp.msg)
				return
			}
			mcpwire.WriteBody(w, answerStatus(rp.msg), "application/json", rp.msg)
			return
		case <-r.Context().Done():
			b.cancel(c, "the client went away")
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
