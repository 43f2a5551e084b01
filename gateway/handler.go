package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/gateway/internal/front2025"
	"github.com/taskgate/taskgate/gateway/internal/front2026"
	"github.com/taskgate/taskgate/gateway/internal/identity"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// Handler is the gateway's http.Handler: it reads and parses each request
// and routes it to the component that serves it (docs/ARCHITECTURE.md,
// "Package map"). It owns nothing else. It is safe for concurrent use.
// Close it to stop the runner's workers.
type Handler struct {
	cfg     Config
	log     zerolog.Logger
	metrics *obs.Metrics

	// life ends when Close begins: streams the gateway serves itself
	// (subscriptions/listen) end gracefully.
	life context.Context
	end  context.CancelFunc

	origins *originPolicy        // the allowed Origins (frontdoor.go)
	pub     *identity.PublicURLs // the gateway's public URLs (internal/identity/publicurl.go)
	meta    *identity.OAuthMeta  // OAuth discovery on the gateway's origin (internal/identity/oauthmeta.go)
	guard   *identity.AuthGuard  // Config.Auth's check of every request (internal/identity/auth.go)
	// creds are the principals' freshest tokens
	// (internal/identity/credentials.go); nil: none kept.
	creds *identity.Credentials
	// sessions binds sessions to their principals
	// (internal/identity/sessionbind.go); nil without Config.Auth or a
	// store: the session id is the credential.
	sessions *identity.SessionGuard
	trace    *obs.Tracing       // spans (internal/obs); nil: off
	up       *upstreamside.Side // the era probe, owner sessions, forwarding
	decider  *decide.Decider    // policy, tool catalogue, learned latencies
	// health is the upstream's as last seen (internal/upstreamside/health.go).
	health *upstreamside.Health

	// With a store only (nil: a plain pass-through proxy).
	runner *runner.Runner   // the in-flight calls of tasks, hybrid and bridged calls
	f2025  *front2025.Front // 2025-11-25 clients: sessions and their tasks
	f2026  *front2026.Front // 2026-07-28 clients: stateless requests, extension tasks
	// trends adds up the console's trends and writes them to the store
	// (trends.go); nil: off.
	trends *obs.Trends
	// stopRemovals ends the render cache's subscription to the store's
	// removal notices (internal/front/rendercache.go).
	stopRemovals func()
}

// New returns a Handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Upstream == nil {
		return nil, errors.New("gateway: Config.Upstream is required")
	}
	c := cfg.withDefaults()
	origins, err := newOriginPolicy(c.AllowedOrigins, c.ListenHost)
	if err != nil {
		return nil, err
	}
	pub, err := identity.NewPublicURLs(c.PublicURL, c.Path, c.TrustedProxies)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: c, log: c.Logger, origins: origins, pub: pub}
	h.life, h.end = context.WithCancel(context.Background())
	h.trace = obs.NewTracing(c.Tracer, c.ReplicaID)
	h.meta = identity.NewOAuthMeta(c.Upstream, pub, c.Auth, c.Path, c.MaxBody, c.Logger)
	h.decider = decide.NewDecider(c.Policy, c.Store, c.Logger)
	h.up = upstreamside.New(c.Upstream, c.Store, h.decider, c.KeepAlive, c.Logger)
	var inflight func() int
	h.metrics = obs.NewMetrics(func() float64 {
		if inflight == nil {
			return 0
		}
		return float64(inflight())
	})
	h.health = upstreamside.NewHealth(c.Upstream.URL(), c.Logger, h.metrics.UpstreamUp)
	c.Upstream.SetObserver(func(o upstream.Observation) {
		h.metrics.ObserveUpstream(o)
		h.health.Observe(o)
	})
	h.metrics.Trace = h.trace
	h.metrics.RegisterBuild(c.Version)
	h.metrics.RegisterLimit(c.MaxInflight)
	h.metrics.RegisterRefusals(c.Logger)
	if c.Auth != nil {
		h.metrics.RegisterAuth()
	}
	h.guard = identity.NewAuthGuard(c.Auth, c.AuthStrip, pub, h.metrics, c.Logger)
	if c.Store == nil {
		if c.Fallback.Enabled {
			return nil, errors.New("gateway: Config.Fallback needs a Store (the fallback tools run tasks)")
		}
		return h, nil
	}
	c.Store.AddHook(obs.NewStoreHook(h.metrics))
	h.startTrends(c) // trends.go
	if c.Auth != nil {
		h.sessions = identity.NewSessionGuard(c.Store, h.metrics, c.Logger)
	}
	if c.Auth != nil && !c.AuthStrip { // only a forwarded token can go stale upstream
		h.creds = identity.NewCredentials(c.Store, c.Logger)
	}
	h.metrics.RegisterPool(c.Store.PoolStats)
	if c.Store.Cluster() {
		h.metrics.RegisterCluster(c.Store)
	}
	var polls *front.PollLimiter
	if c.PollLimit > 0 {
		polls = front.NewPollLimiter(c.PollLimit, 2*c.PollLimit)
	}
	renders := front.NewRenderCache(front.CacheEntries, front.CacheBytes)
	if h.stopRemovals, err = c.Store.WatchRemovals(context.Background(), renders.Removals()); err != nil {
		return nil, err
	}
	h.runner = runner.New(runner.Params{
		Store: c.Store, Up: c.Upstream, Observe: h.decider.Observe,
		Metrics: h.metrics, Trace: h.trace, Log: c.Logger, Replica: c.ReplicaID,
		Lease: c.Lease, Renew: c.LeaseRenew, MaxInflight: c.MaxInflight, Creds: h.creds,
		MaxPerPrincipal: max(c.MaxInflightPerPrincipal, 0), TaskRate: max(c.MaxTaskRate, 0),
		Anonymous: core.Anonymous{Store: c.Store, Caps: c.Anonymous},
		Durable:   h.durable(c), // durable.go
		Alone:     c.Alone, RestartGrace: c.UpstreamRestartGrace,
	})
	inflight = h.runner.Inflight
	fb, err := fallback.New(c.Fallback, c.Store, h.metrics, c.Logger)
	if err != nil {
		h.runner.Stop()
		return nil, err
	}
	deps := front.Deps{Runner: h.runner, Up: h.up, Decider: h.decider, Metrics: h.metrics, Log: c.Logger, Trace: h.trace,
		Polls: polls, Renders: renders, Fallback: fb}
	h.f2025 = front2025.New(deps, c.Store, c.Anonymous)
	h.f2026 = front2026.New(deps, c.Store, c.Anonymous, h.life, c.MRTRHold)
	h.decider.StartSync(c.LatencySync, c.ReplicaID) // merges once first: a warm start
	h.metrics.RegisterCollectors(c.Collectors...)
	if c.Webhooks != nil {
		h.metrics.RegisterCollectors(c.Webhooks.Metrics().Collectors()...)
		c.Webhooks.Start() // its own goroutines, beside the hot path (docs/webhooks.md)
	}
	return h, nil
}

// Close stops every worker the runner started (their tasks are failed with
// a message saying the gateway stopped) and waits for them, then publishes
// the latencies this replica learned one last time. The shutdown order:
// streams first (nothing new reaches the runner), then the runner and its
// recoverer, then the latency sync.
func (h *Handler) Close() error {
	h.end()
	if h.runner != nil {
		h.runner.Stop()
	}
	h.stopTrends() // after the runner: the tasks it just failed are counted
	if h.stopRemovals != nil {
		h.stopRemovals()
	}
	if h.cfg.Webhooks != nil {
		// After the runner: the events of the tasks it just failed are
		// queued before this replica goes (bounded: webhook.Dispatcher.Stop).
		h.cfg.Webhooks.Stop()
	}
	h.decider.StopSync()
	return nil
}

// EndStreams ends the streams the gateway serves itself
// (subscriptions/listen), each with its closing message, so a shutdown does
// not wait for them. Close does it too.
func (h *Handler) EndStreams() { h.end() }

// Drain begins a graceful shutdown: /readyz answers 503 "draining", and a
// tools/call that would create a task or start an in-flight call is
// refused with -32603 (requests relayed as they are still pass). It then
// waits until no in-flight call and no worker is left, or ctx ends (its
// error is returned). Call Close afterwards: it fails what remains.
func (h *Handler) Drain(ctx context.Context) error {
	if h.runner == nil {
		return nil
	}
	return h.runner.Drain(ctx)
}

// PolicyReloaded counts a reload of the rules file (Config.Policy's
// source), ok or not, in taskgate_policy_reloads_total.
func (h *Handler) PolicyReloaded(ok bool) {
	result := "ok"
	if !ok {
		result = "error"
	}
	h.metrics.Reloads.WithLabelValues(result).Inc()
}

// MetricNames are the names of the metric families the Handler exports
// (taskgate_*), sorted, whether or not they have a series yet: a family
// with labels shows on /metrics only once a series exists. Dashboards and
// alerts are checked against them (deploy/).
func (h *Handler) MetricNames() []string { return h.metrics.Names() }

// Metrics serves this Handler's Prometheus metrics, for a listener of
// their own (Config.MetricsPath "-").
func (h *Handler) Metrics() http.Handler { return h.metrics.Handler() }

// PublicURL is the gateway's external MCP URL for r: Config.PublicURL,
// else what r says it reached (its Host and TLS, and the forwarding
// headers of a trusted proxy) plus Config.Path. It is the protected
// resource's identifier (RFC 9728 §1.2), so the audience tokens for the
// gateway carry (RFC 8707).
func (h *Handler) PublicURL(r *http.Request) string { return h.pub.MCPURL(r) }

// ResourceMetadataURL is the URL of the gateway's protected resource
// metadata for r (RFC 9728 §3.1), as a WWW-Authenticate challenge names
// it in resource_metadata (RFC 9728 §5.1).
func (h *Handler) ResourceMetadataURL(r *http.Request) string { return h.pub.MetadataURL(r) }

// ServeHTTP routes /healthz, /readyz, the metrics and the MCP endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, pub: h.pub, req: r}
	defer h.served(rec, r, time.Now())
	w = rec
	switch r.URL.Path {
	case h.cfg.Path:
		r = h.pub.Resolve(r)
		rec.req = r
		r, rec.span = h.trace.StartRequest(r)
		if h.frontDoor(w, r) {
			if r, ok := h.guard.Authenticate(w, r); ok {
				h.creds.Note(r)
				// Whose fair share the request counts in, for a local
				// server's bridge too (its sessions per principal).
				r = r.WithContext(upstream.WithPrincipal(r.Context(),
					upstream.Principal{Key: core.Principal(r), Refused: h.metrics.Refused}))
				h.serveMCP(w, r)
			}
		}
	case "/healthz":
		h.serveHealth(w, r)
	case "/readyz":
		h.serveReady(w, r)
	case h.cfg.MetricsPath:
		h.metrics.Handler().ServeHTTP(w, r)
	default:
		if !h.meta.Serve(w, r) {
			http.NotFound(w, r)
		}
	}
}

func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		h.servePost(w, r)
		return
	}
	// GET (a session's SSE stream), DELETE (end of session) and anything
	// else (OPTIONS for CORS, say) are the upstream's to answer; the
	// 2025-11-25 front watches the sessions it serves tasks for.
	if h.sessions != nil {
		if !h.sessions.Allows(w, r, nil) {
			return
		}
		if rec, ok := w.(*recorder); ok && r.Method == http.MethodDelete {
			defer func() { h.sessions.Ended(r, rec.status) }()
		}
	}
	if h.f2025 != nil && h.f2025.ServeEmulatedSession(w, r) {
		return // a session the gateway holds itself: nothing upstream to ask
	}
	var body io.Reader
	lift := func() {}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBody)
		lift = h.bodyDeadline(w) // a body streamed upstream arrives in time too
	}
	header := r.Header
	if h.f2025 != nil {
		header = h.f2025.UpstreamHeader(r)
	}
	resp, err := h.up.Pass(r.Context(), r.Method, header, body)
	lift()
	if err != nil {
		h.up.FailHTTP(w, r, err)
		return
	}
	if h.f2025 != nil && h.f2025.StreamOrEnd(w, r, resp) {
		return
	}
	h.up.Relay(w, r, resp)
}

// servePost reads and checks one POSTed JSON-RPC body, then routes it.
func (h *Handler) servePost(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusUnsupportedMediaType, mcpwire.CodeInvalidRequest,
			fmt.Sprintf("Content-Type must be application/json, not %q", ct)))
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		if e := core.RPCError(err, core.Era2025); e.Status == http.StatusRequestTimeout {
			w.Header().Set("Connection", "close") // the rest of the body may still come
		}
		mcpwire.WriteError(w, nil, core.RPCError(err, core.Era2025))
		return
	}
	msg, perr := mcpwire.Parse(body)
	if perr != nil {
		h.log.Debug().Str("op", "parse").Int("code", perr.Code).Msg(perr.Message)
		mcpwire.WriteError(w, nil, perr)
		return
	}
	if msg.Kind == mcpwire.KindBatch {
		// Each member would need deciding like a single request (policy,
		// limits, drain, owners); MCP dropped batching after 2025-03-26.
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeInvalidRequest,
			"Invalid Request: JSON-RPC batches are not supported; send one message per request"))
		return
	}
	noteMethod(w, obs.MetricMethod(msg))
	if h.trace != nil {
		h.trace.LinkMeta(r.Context(), r, obs.TraceMeta(msg.Meta()))
	}
	h.route(w, r, msg)
}

// route sends each message to the component that serves it: the
// 2026-07-28 front for a stateless request, the 2025-11-25 front for the
// methods of its sessions, and the upstream side (relayed unchanged) for
// everything else.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	if h.runner == nil {
		h.up.Forward(w, r, msg, r.Header, "")
		return
	}
	if front2026.IsStateless(r, msg) {
		h.f2026.Serve(w, r, msg) // no session: a 2026-07-28 request names none
		return
	}
	if h.sessions != nil {
		if !h.sessions.Allows(w, r, msg) {
			return
		}
		if msg.MethodName() == "initialize" {
			w = h.sessions.BindInitialize(w, r, msg)
		}
	}
	if h.f2025.Serve(w, r, msg) {
		return
	}
	h.up.Forward(w, r, msg, h.f2025.UpstreamHeader(r), "")
}

// readBody reads the POSTed body up to MaxBody, within ReadTimeout. It
// reads what arrives: a body that announces a large Content-Length and
// sends little costs what it sent, and one that stalls is cut off.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := h.cfg.MaxBody
	tooLarge := func() error {
		return mcpwire.NewError(http.StatusRequestEntityTooLarge, mcpwire.CodeInvalidRequest,
			"request body exceeds the gateway's limit of "+strconv.FormatInt(limit, 10)+" bytes")
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	defer h.bodyDeadline(w)()
	size := int64(512) // room for a small body whose length is unknown
	if r.ContentLength >= 0 {
		size = min(r.ContentLength, maxBodyPrealloc) + 1 // +1: the read that sees EOF
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow, as append does
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, tooLarge()
		}
		switch {
		case err == io.EOF:
			return buf, nil
		case err == nil:
		case isTimeout(err):
			return nil, mcpwire.NewError(http.StatusRequestTimeout, mcpwire.CodeParseError,
				"Parse error: the request body did not arrive within "+h.cfg.ReadTimeout.String())
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeParseError, "Parse error: the request body ended early")
		default:
			return nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeParseError, "Parse error: the request body could not be read")
		}
	}
}

// bodyDeadline sets ReadTimeout as the deadline for reading the request's
// body and returns what lifts it: the deadline covers the body only, not
// the answer, which may be a stream that lasts for minutes.
func (h *Handler) bodyDeadline(w http.ResponseWriter) (lift func()) {
	if h.cfg.ReadTimeout <= 0 {
		return func() {}
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(h.cfg.ReadTimeout)) != nil {
		return func() {}
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}

// maxBodyPrealloc is the most readBody sets aside before bytes arrive.
const maxBodyPrealloc = 64 << 10

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isJSON(ct string) bool {
	if ct == "application/json" {
		return true // the common case, without parsing
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
