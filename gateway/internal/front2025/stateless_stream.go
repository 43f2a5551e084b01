package front2025

// What a session the gateway holds in front of a stateless upstream
// (stateless.go) changes after initialize, and its GET stream.
//
// 2026-07-28 dropped the session-scoped requests a 2025-11-25 client still
// sends (changelog: logging/setLevel removed, resources/subscribe replaced
// by subscriptions/listen's filter; SEP-2575). The gateway keeps their
// effect in the session's record (taskstore/session_state.go), so every
// replica applies it:
//
//	logging/setLevel        the level, sent as _meta
//	                        "io.modelcontextprotocol/logLevel" on every
//	                        request made for the session (SEP-2575: a server
//	                        sends notifications/message only for requests
//	                        that carry it); the messages reach the client on
//	                        its call's stream, a task's on the GET stream
//	resources/subscribe,    the URIs, sent as the listen filter's
//	resources/unsubscribe   resourceSubscriptions
//	notifications/cancelled the plain call it names (its task, found through
//	                        the record) cancelled
//	DELETE                  announced: every replica's GET stream of the
//	                        session ends
//
// The GET stream is the upstream's subscriptions/listen stream, opened with
// the session's filter and reopened whenever another request changes it
// (an announcement on the session's channel), merged with the gateway's
// own notifications of the session's tasks.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

const (
	// maxSubscriptions bounds the resources one held session subscribes
	// to, and maxAnonymousSubscriptions one opened without Authorization.
	maxSubscriptions          = 256
	maxAnonymousSubscriptions = 32
	// maxSubscriptionURI bounds one subscribed URI.
	maxSubscriptionURI = 4096
	// metaSubscriptionID tags a listen stream's notifications (2026-07-28
	// schema, SubscriptionsListenResultMetaObject); not the client's.
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// logLevels are MCP's LoggingLevel values (RFC 5424 severities).
var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true}

// setLogLevel answers logging/setLevel of held session s: the level
// recorded for every request made for it from now on.
func (h *heldSessions) setLogLevel(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo) {
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || !logLevels[p.Level] {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			"logging/setLevel: level must be one of debug, info, notice, warning, error, critical, alert, emergency"))
		return
	}
	changed, err := h.store.SetSessionLogLevel(r.Context(), s.ID, p.Level)
	h.answerStateChange(w, r, msg, s, changed, err)
}

// subscribe answers resources/subscribe (on) and resources/unsubscribe of
// held session s: the URI joins or leaves its GET stream's filter.
func (h *heldSessions) subscribe(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, on bool) {
	method := msg.MethodName()
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.URI == "" {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, method+": params must name a uri"))
		return
	}
	if len(p.URI) > maxSubscriptionURI {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			fmt.Sprintf("%s: the uri takes more than %d bytes", method, maxSubscriptionURI)))
		return
	}
	most := maxSubscriptions
	if s.Principal == "" {
		most = maxAnonymousSubscriptions
	}
	changed, err := h.store.SubscribeSession(r.Context(), s.ID, p.URI, on, most)
	if errors.Is(err, taskstore.ErrTooManySubscriptions) {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			fmt.Sprintf("resources/subscribe: the session already has %d subscriptions; unsubscribe first", most)))
		return
	}
	h.answerStateChange(w, r, msg, s, changed, err)
}

// answerStateChange answers a request that changed held session s's
// record (err nil: {}, announced to its GET streams when something
// changed), or whose change failed: the session gone (404, initialize
// again), or the store's error.
func (h *heldSessions) answerStateChange(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, changed bool, err error) {
	switch {
	case errors.Is(err, taskstore.ErrNoSession):
		h.sessions.cache.delete(s.ID)
		writeSessionNotFound(w)
		return
	case err != nil:
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
		return
	case changed:
		h.announce(r, s.ID, taskstore.SessionChanged)
	}
	mcpwire.WriteResult(w, msg.ID, json.RawMessage(`{}`))
}

// announce tells every replica's GET stream of session id what happened
// (best effort: a stream that misses it re-reads at its next reopen).
func (h *heldSessions) announce(r *http.Request, id string, what taskstore.Status) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), core.StoreTimeout)
	defer cancel()
	if err := h.store.AnnounceSession(ctx, id, what); err != nil {
		h.log.Warn().Str("op", "session").Err(err).Msg("cannot announce the session's change to its streams")
	}
}

// logLevelOf is the level held session s set, "" for none (or when the
// store cannot tell now: the request goes without, so it gets no logs).
func (h *heldSessions) logLevelOf(ctx context.Context, s *sessionInfo) string {
	level, err := h.store.SessionLogLevel(ctx, s.ID)
	if err != nil {
		h.log.Debug().Str("op", "session").Err(err).Msg("cannot read the session's log level; the request goes without")
	}
	return level
}

// cancelPlainCall cancels the plain call of held session s that
// notifications/cancelled names (MCP "Cancellation"): its task, so the
// worker aborts the upstream call. A call that already ended, or one the
// gateway does not know, is ignored, as the spec asks of a receiver.
func (h *heldSessions) cancelPlainCall(r *http.Request, msg *mcpwire.Message, s *sessionInfo) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	id, err := h.store.SessionCall(r.Context(), s.ID, callKey(p.RequestID))
	if err != nil || id == "" {
		return
	}
	why := "the client cancelled the call"
	if p.Reason != "" {
		why += ": " + truncate(p.Reason, 200)
	}
	h.abandonCall(core.OwnerOf(r), id, why)
}

// callKey is a JSON-RPC id as the record keys it: compact JSON, so the id
// of notifications/cancelled finds the call whatever its spacing.
func callKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// emulatedStream serves the GET stream of held session s until the client
// goes, the session ends, or the upstream's listen stream ends or refuses
// the client's credentials.
func (h *heldSessions) emulatedStream(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	watch, err := h.store.WatchSession(r.Context(), s.ID)
	if err != nil {
		mcpwire.WriteError(w, nil, core.RPCError(err, core.Era2025))
		return
	}
	defer watch.Close()
	tick := time.NewTicker(core.ResyncInterval(h.store))
	defer tick.Stop()
	es := &emulatedGet{h: h, w: w, r: r, s: s, watch: watch, tick: tick}
	es.flusher, _ = w.(http.Flusher)
	for es.listen() && es.drainQueued() {
		// listen again: the session's filter may have changed
	}
}

// emulatedGet is one GET stream of an emulated session between its steps.
type emulatedGet struct {
	h       *heldSessions
	w       http.ResponseWriter
	flusher http.Flusher // nil: w cannot flush
	r       *http.Request
	s       *sessionInfo
	watch   *taskstore.Watch // the session's announcements and messages
	tick    *time.Ticker

	cur     listenState // what the open upstream listen asks for
	started bool        // the stream's headers went out
	// quiet counts the listens in a row that gave no stream, or one that
	// ended before it delivered anything (an upstream with nothing to
	// subscribe to answers at once, one that is down not at all): each
	// waits twice as long as the one before to try again.
	quiet int
}

// write sends ev and flushes it; false: the client is gone.
func (es *emulatedGet) write(ev []byte) bool {
	if _, err := es.w.Write(ev); err != nil {
		return false
	}
	if es.flusher != nil {
		es.flusher.Flush()
	}
	return true
}

// retryAt is when to listen upstream again after quiet listens.
func (es *emulatedGet) retryAt() time.Time {
	return time.Now().Add(min(core.ResyncInterval(es.h.store)<<min(es.quiet, 10), upstreamside.MaxListenRetry))
}

// listen opens the upstream listen for the session's filter as recorded
// now and relays until it must be opened again (true) or the stream ends
// (false).
func (es *emulatedGet) listen() bool {
	ctx := es.r.Context()
	next, gone := es.h.listenStateOf(ctx, es.s, es.cur)
	if gone {
		if !es.started {
			writeSessionNotFound(es.w)
		}
		return false // deleted or expired: the client initializes again
	}
	es.cur = next
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	events, readErr, refused := es.h.openListen(lctx, es.r, es.s, es.cur)
	if refused != nil {
		if !es.started {
			// The upstream refuses the client's credentials: its 401 or
			// 403 and challenge, so the client authorizes again.
			e := core.RPCError(refused, core.Era2025)
			upstreamside.PassChallenge(es.w, refused, e)
			mcpwire.WriteError(es.w, nil, e)
		}
		return false // a stream already open ends: the client reconnects, and learns it then
	}
	if !es.started {
		es.w.Header().Set("Content-Type", "text/event-stream")
		es.w.Header().Set("Cache-Control", "no-cache")
		es.w.WriteHeader(http.StatusOK)
		es.write(nil)
		es.started = true
	}
	return es.relay(events, readErr)
}

// relay sends the upstream's events and the session's messages until the
// listen must be opened again (true) or the stream ends (false).
func (es *emulatedGet) relay(events <-chan []byte, readErr <-chan error) bool {
	ctx := es.r.Context()
	listening := events != nil
	if !listening {
		es.quiet++
	}
	retryAt := es.retryAt()
	for {
		select {
		case ev := <-events:
			es.quiet = 0 // a stream that delivers
			if !es.write(ev) {
				return false
			}
		case ev, ok := <-es.watch.C:
			reopen := false
			switch {
			case !ok:
				return false
			case ev.Kind == taskstore.EventMessage:
				if !es.write(mcpwire.AppendEvent(nil, nil, []byte(ev.Data))) {
					return false
				}
			case ev.Kind == taskstore.EventSession && ev.Status == taskstore.SessionEnded:
				return false
			case ev.Kind == taskstore.EventSession || ev.Kind == taskstore.EventResync:
				reopen = true // the filter may have changed: listen again
			}
			if es.watch.Dropped(true) || reopen { // a lost event may have been an announcement
				return true
			}
		case <-es.tick.C:
			// Announcements are best effort: look at the record now and
			// then, and listen again if the filter changed unannounced,
			// or, now and then, if there is no stream from upstream.
			next, gone := es.h.listenStateOf(ctx, es.s, es.cur)
			changed := gone || !next.equal(es.cur)
			if changed {
				es.quiet = 0
			}
			if changed || !listening && !time.Now().Before(retryAt) {
				return true
			}
		case <-readErr:
			// The upstream ended its stream (a graceful close, or
			// nothing to listen for): the gateway's notifications go on.
			events, readErr, listening = nil, nil, false
			es.quiet++
			retryAt = es.retryAt()
		case <-ctx.Done():
			return false
		}
	}
}

// drainQueued sends the session's messages already queued and drops its
// announcements: they are in the record the next listen reads, so a burst
// of them reopens it once, not once each. false: the stream ended.
func (es *emulatedGet) drainQueued() bool {
	for {
		select {
		case ev, ok := <-es.watch.C:
			switch {
			case !ok, ev.Kind == taskstore.EventSession && ev.Status == taskstore.SessionEnded:
				return false
			case ev.Kind == taskstore.EventMessage:
				if !es.write(mcpwire.AppendEvent(nil, nil, []byte(ev.Data))) {
					return false
				}
			}
		default:
			return true
		}
	}
}

// listenState is what a held session's listen stream is opened with.
type listenState struct {
	level string
	subs  []string
}

func (a listenState) equal(b listenState) bool {
	return a.level == b.level && slices.Equal(a.subs, b.subs)
}

// listenStateOf reads held session s's level and subscriptions; gone
// when its record is. When the store cannot tell now, last stands.
func (h *heldSessions) listenStateOf(ctx context.Context, s *sessionInfo, last listenState) (st listenState, gone bool) {
	rec, err := h.store.GetSession(ctx, s.ID)
	switch {
	case errors.Is(err, taskstore.ErrNoSession):
		return last, true
	case err != nil:
		if ctx.Err() == nil {
			h.log.Warn().Str("op", "listen").Err(err).Msg("cannot read the session's subscriptions; listening as before")
		}
		return last, false
	}
	return listenState{level: rec.LogLevel, subs: rec.Subscriptions}, false
}

// openListen opens the upstream's subscriptions/listen stream for held
// session s with its filter (the list changes, its subscriptions) and log
// level, and returns its events as a 2025-11-25 client's (listenEvent).
// events is nil when the upstream has no stream to give (the GET stream
// then carries the gateway's notifications alone), and refused is set
// when it refuses the client's credentials (401, 403). Ending ctx closes
// it.
func (h *heldSessions) openListen(ctx context.Context, r *http.Request, s *sessionInfo, st listenState) (events <-chan []byte, readErr <-chan error, refused error) {
	filter := map[string]any{"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}
	if len(st.subs) > 0 {
		filter["resourceSubscriptions"] = st.subs
	}
	params := statelessParams(mcpwire.MustMarshal(map[string]any{"notifications": filter}), s, st.level)
	body := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-listen-" + uuid.NewString(),
		"method": "subscriptions/listen", "params": params})
	header := core.ForwardedAuth(r)
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json, text/event-stream")
	header.Set("Mcp-Protocol-Version", core.Version2026)
	header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := h.up.Post(ctx, header, bytes.NewReader(body))
	if err != nil {
		if ctx.Err() == nil {
			h.log.Debug().Str("op", "listen").Err(err).Msg("cannot open the upstream's subscriptions/listen stream; retrying later")
		}
		return nil, nil, nil
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		resp.Body.Close()
		return nil, nil, &upstream.StatusError{Status: resp.StatusCode, Authenticate: resp.Header.Values("WWW-Authenticate")}
	}
	if resp.StatusCode != http.StatusOK || !upstreamside.IsStream(resp) {
		resp.Body.Close()
		return nil, nil, nil
	}
	out, errc := make(chan []byte), make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		sr := mcpwire.NewReader(resp.Body, upstreamside.MaxAnswerBytes)
		for {
			ev, err := sr.Next()
			if err != nil {
				errc <- err
				return
			}
			data := listenEvent(ev.Data)
			if data == nil {
				continue
			}
			select {
			case out <- data:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errc, nil
}

// listenEvent is one event of a subscriptions/listen stream as a
// 2025-11-25 GET stream's, nil when it is not the client's: the
// notifications it asked for (list changes, resource updates, log
// messages) without the stream's subscription _meta. The stream's
// acknowledgement and closing response are the gateway's.
func listenEvent(data []byte) []byte {
	var n struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if len(data) == 0 || json.Unmarshal(data, &n) != nil || n.ID != nil {
		return nil
	}
	switch {
	case strings.HasSuffix(n.Method, "/list_changed"):
		n.Params = nil
	case n.Method == "notifications/resources/updated", n.Method == "notifications/message":
		n.Params = upstreamside.WithoutMetaKeys(n.Params, metaSubscriptionID)
	default:
		return nil
	}
	return mcpwire.AppendEvent(nil, nil, mcpwire.Notification(n.Method, n.Params))
}

// trackPlainCall records the plain call msg of held session s as task
// id, for notifications/cancelled; the returned func forgets it.
func (h *heldSessions) trackPlainCall(r *http.Request, msg *mcpwire.Message, s *sessionInfo, id string) func() {
	key := callKey(msg.ID)
	if err := h.store.SetSessionCall(r.Context(), s.ID, key, id); err != nil {
		h.log.Debug().Str("op", "call").Err(err).Msg("cannot record the plain call; notifications/cancelled will not find it")
		return func() {}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), core.StoreTimeout)
		defer cancel()
		_ = h.store.ClearSessionCall(ctx, s.ID, key, id)
	}
}

// sessionIdle is how long an idle held session's record lives: a day, an
// hour for one opened without Authorization (anyone can open those, so
// they are also counted against the anonymous caps, anonymousSessionTTL).
func sessionIdle(s *sessionInfo) time.Duration {
	if s.emulated() && s.Principal == "" {
		return anonymousSessionTTL
	}
	return sessionTTL
}

// anonymousSessionTTL is sessionTTL for a held session opened without
// Authorization.
const anonymousSessionTTL = time.Hour

// anonSessionSlot is the id a held session opened without Authorization
// counts under in the anonymous caps (never a task's id).
func anonSessionSlot(sessionID string) string { return "session:" + sessionID }

// releaseAnonymous gives back the anonymous caps' place of held session
// id (its DELETE, or an initialize that failed after counting it).
func (h *heldSessions) releaseAnonymous(r *http.Request, s *sessionInfo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), core.StoreTimeout)
	defer cancel()
	_ = h.store.ReleaseAnonymous(ctx, anonSessionSlot(s.ID), s.Addr)
}

// anonymousSessionRefused is the answer to an initialize without
// Authorization that the anonymous caps refuse.
func anonymousSessionRefused(err error) *mcpwire.Error {
	switch {
	case errors.Is(err, taskstore.ErrTooManyFromAddress):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError,
			"too many sessions and tasks without Authorization from this address: end unused sessions (DELETE), wait (an hour at most), or send credentials")
	case errors.Is(err, taskstore.ErrTooManyAnonymous):
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError,
			"too many sessions and tasks of clients without Authorization right now: retry later, or send credentials")
	}
	return core.RPCError(err, core.Era2025)
}
