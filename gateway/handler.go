package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Handler is the gateway's http.Handler. It is safe for concurrent use.
// Close it to stop the workers it started.
type Handler struct {
	cfg   Config
	up    *upstream.Client
	log   zerolog.Logger
	store *taskstore.Store // nil: no tasks

	sessions *sessionCache // what each client session negotiated (session.go)
	tools    *toolCatalog  // what the upstream declared per tool (toolslist.go)
	workers  *workers      // upstream calls held for tasks (worker.go)
	modern   modernFront   // the 2026-07-28 front: upstream era, held sessions (discover.go)

	policy  *policy.Current   // the rules in force (decide.go)
	lat     *policy.Latencies // learned tool latencies (latency.go)
	latSync *latencySync      // shares lat with the other replicas; nil without a store

	draining atomic.Bool // Drain was called: not ready, no new held calls
	sweep    sweepState  // the recoverer's view of the store (recoverer.go)

	storeRetry time.Duration // how long retryStore tries (worker.go)

	metrics *metrics     // metrics.go
	polls   *pollLimiter // ratelimit.go; nil: no limit
	renders *renderCache // tasks/get answers of terminal tasks (rendercache.go)
}

// New returns a Handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Upstream == nil {
		return nil, errors.New("gateway: Config.Upstream is required")
	}
	c := cfg.withDefaults()
	h := &Handler{cfg: c, up: c.Upstream, log: c.Logger, store: c.Store, policy: c.Policy}
	h.sessions = newSessionCache()
	h.tools = newToolCatalog()
	h.workers = newWorkers(c.MaxInflight)
	h.lat = policy.NewLatencies(0)
	h.renders = newRenderCache(renderCacheEntries, renderCacheBytes)
	h.storeRetry = defaultStoreRetry
	h.metrics = newMetrics(func() float64 { return float64(h.workers.inflight()) })
	h.up.SetObserver(h.metrics.observeUpstream)
	if c.PollLimit > 0 {
		h.polls = newPollLimiter(c.PollLimit, 2*c.PollLimit)
	}
	if h.store != nil {
		h.store.AddHook(storeHook{h.metrics})
		h.startRecoverer()
		if c.LatencySync > 0 {
			h.latSync = h.startLatencySync() // merges once first: a warm start
		}
	}
	return h, nil
}

// Close stops every worker this Handler started (their tasks are failed
// with a message saying the gateway stopped) and waits for them, then
// publishes the latencies this replica learned one last time.
func (h *Handler) Close() error {
	h.workers.stop()
	if h.latSync != nil {
		h.latSync.stop()
	}
	return nil
}

// Drain begins a graceful shutdown: /readyz answers 503 "draining", and a
// tools/call that would create a task or hold an upstream call is refused
// with -32603 (requests relayed as they are still pass). It then waits
// until no upstream call is held and no worker runs, or ctx ends (its
// error is returned). Call Close afterwards: it fails what remains.
func (h *Handler) Drain(ctx context.Context) error {
	if !h.draining.Swap(true) {
		h.log.Info().Str("op", "drain").Int("inflight", h.workers.inflight()).Msg("draining: new tasks are refused")
	}
	return h.workers.idle(ctx)
}

// errDraining refuses, while draining, a tools/call that would hold an
// upstream call; no task is created.
var errDraining = newRPCErr(http.StatusOK, codeInternalError, "this gateway replica is shutting down; retry on another replica")

// admit reserves an in-flight slot for a new held upstream call (a task,
// a hybrid or bridged call), or says why not. The caller hands the slot to
// startCall (held=true) or to a job (job.slot), or gives it back with
// workers.unreserve.
func (h *Handler) admit() *rpcErr {
	if h.draining.Load() {
		return errDraining
	}
	if !h.workers.reserve() {
		h.log.Warn().Str("op", "admit").Int("limit", h.workers.limit).Msg("max-inflight reached: tools/call refused")
		return newRPCErr(http.StatusOK, codeInternalError,
			fmt.Sprintf("too many upstream calls in flight on this replica (limit %d); retry later", h.workers.limit))
	}
	if h.draining.Load() { // Drain began meanwhile
		h.workers.unreserve()
		return errDraining
	}
	return nil
}

// Metrics serves this Handler's Prometheus metrics, for a listener of
// their own (Config.MetricsPath "-").
func (h *Handler) Metrics() http.Handler { return h.metrics.handler() }

// ServeHTTP routes /healthz, /readyz, the metrics and the MCP endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case h.cfg.Path:
		h.serveMCP(w, r)
	case "/healthz":
		h.serveHealth(w, r)
	case "/readyz":
		h.serveReady(w, r)
	case h.cfg.MetricsPath:
		h.metrics.handler().ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		h.servePost(w, r)
		return
	}
	// GET (the session's SSE stream), DELETE (end of session) and anything
	// else (OPTIONS for CORS, say) are the upstream's to answer.
	var body io.Reader
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBody)
	}
	resp, err := h.up.Forward(r.Context(), r.Method, h.upstreamHeader(r), body)
	if err != nil {
		h.failHTTP(w, r, err)
		return
	}
	if r.Method == http.MethodDelete && (resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotFound) {
		h.forgetSession(r) // the upstream ended the session, or had already (session.go)
	}
	if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && isStream(resp) {
		if s := h.session(r); s.legacyTasks() {
			h.relayMerged(w, r, resp, s.ID)
			return
		}
	}
	h.relay(w, r, resp)
}

// servePost reads and checks one POSTed JSON-RPC body, then routes it.
func (h *Handler) servePost(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		writeRPCError(w, nil, newRPCErr(http.StatusUnsupportedMediaType, codeInvalidRequest,
			fmt.Sprintf("Content-Type must be application/json, not %q", ct)))
		return
	}
	body, err := h.readBody(r)
	if err != nil {
		writeRPCError(w, nil, rpcError(err))
		return
	}
	msg, perr := parseMessage(body)
	if perr != nil {
		h.log.Debug().Str("op", "parse").Int("code", perr.Code).Msg(perr.Message)
		writeRPCError(w, nil, perr)
		return
	}
	h.route(w, r, msg)
}

// route sends each message to whoever handles its method. Everything the
// gateway does not handle itself is relayed unchanged.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, msg *message) {
	if h.store == nil {
		h.forward(w, r, msg)
		return
	}
	if isModern(r, msg) {
		h.serveModern(w, r, msg)
		return
	}
	switch msg.kind {
	case kindRequest:
		switch msg.method() {
		case "initialize":
			h.serveInitialize(w, r, msg)
			return
		case "tools/list":
			h.serveToolsList(w, r, msg)
			return
		case "tools/call":
			h.serveToolsCall(w, r, msg)
			return
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
			s, err := h.sessionErr(r)
			if s.legacyTasks() {
				h.serveLegacyTasks(w, r, msg, s)
				return
			}
			if err != nil {
				// The session may be one the gateway serves tasks for; only
				// the store could tell. Not the upstream's to answer.
				writeRPCError(w, msg.ID, rpcError(err))
				return
			}
		}
	case kindResponse:
		if isInputID(msg.ID) {
			h.serveInputResponse(w, r, msg)
			return
		}
	}
	h.forward(w, r, msg)
}

// forward relays msg to the upstream and its answer back. For a
// tools/call whose latency is learned (msg.learn), the time from sending
// to the end of the answer is recorded (latency.go).
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, msg *message) {
	start := time.Now()
	resp, err := h.up.Forward(methodCtx(r, msg), http.MethodPost, h.upstreamHeader(r), bytes.NewReader(msg.raw))
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away; nobody to answer
		}
		e := rpcError(err)
		h.log.Warn().Str("op", "forward").Str("method", msg.method()).Msg(e.Message)
		if msg.kind != kindRequest {
			// Nothing to answer with a JSON-RPC response; say it in HTTP.
			e.status = http.StatusBadGateway
		}
		writeRPCError(w, msg.ID, e)
		return
	}
	h.relayRequest(w, r, resp, msg, start)
}

// readBody reads the POSTed body up to MaxBody.
func (h *Handler) readBody(r *http.Request) ([]byte, error) {
	limit := h.cfg.MaxBody
	tooLarge := newRPCErr(http.StatusRequestEntityTooLarge, codeInvalidRequest,
		"request body exceeds the gateway's limit of "+strconv.FormatInt(limit, 10)+" bytes")
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	var buf []byte
	if r.ContentLength > 0 {
		buf = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, newRPCErr(http.StatusBadRequest, codeParseError, "Parse error: the request body ended early")
		}
		return buf, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, newRPCErr(http.StatusBadRequest, codeParseError, "Parse error: the request body could not be read")
	}
	if int64(len(buf)) > limit {
		return nil, tooLarge
	}
	return buf, nil
}

// failHTTP answers a non-POST request whose upstream round trip failed.
func (h *Handler) failHTTP(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	e := rpcError(err)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		e.status = http.StatusRequestEntityTooLarge
	case errors.Is(err, upstream.ErrUnreachable):
		e.status = http.StatusBadGateway
	}
	h.log.Warn().Str("op", "forward").Str("http_method", r.Method).Msg(e.Message)
	writeRPCError(w, nil, e)
}

func isJSON(ct string) bool {
	if ct == "application/json" {
		return true // the common case, without parsing
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
