package gateway

import (
	"context"
	"net/netip"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/identity"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/webhook"
)

// DefaultMaxBody is the default limit on a POSTed body: 4 MiB, as the
// go-sdk's streamable server uses.
const DefaultMaxBody = 4 << 20

// DefaultPath is where MCP is served when Config.Path is empty.
const DefaultPath = "/mcp"

// DefaultMetricsPath is where the metrics are served when
// Config.MetricsPath is empty.
const DefaultMetricsPath = "/metrics"

// DefaultPollLimit is Config.PollLimit's default: ten polls a second per
// task, ten times the default pollInterval (1 s) and 2.5 times the
// shortest one the policy suggests (250 ms).
const DefaultPollLimit = 10.0

// DefaultMaxTaskRate is Config.MaxTaskRate's default: 600 task creations
// a minute per principal (10 a second sustained), far above what an agent
// starts, far below a loop starting them as fast as it can.
const DefaultMaxTaskRate = 600.0

// Defaults for the worker's lease (docs/ARCHITECTURE.md invariant 4).
const (
	DefaultLease      = 15 * time.Second
	DefaultLeaseRenew = 5 * time.Second
)

// Config configures a Handler. Only Upstream is required; every other field
// says what happens when it is unset.
type Config struct {
	// Upstream is the client of the fronted MCP server. Required.
	Upstream *upstream.Client
	// Webhooks delivers the events the Store records (the Store must be
	// opened with taskstore.Options.Webhooks). The Handler starts it,
	// registers its metrics, and stops it in Close after the runner, so
	// the last tasks' events are still queued for delivery. nil: none.
	Webhooks *webhook.Dispatcher
	// Collectors are more metrics to serve with the gateway's (the stdio
	// bridge's: upstream/stdio.Metrics). nil: none.
	Collectors []prometheus.Collector
	// Store holds task state, shared by every replica. Required for tasks;
	// nil means a plain pass-through proxy (no tasks), and /readyz checks
	// only the upstream.
	Store *taskstore.Store
	// ReadyRequiresUpstream makes /readyz answer 503 while the upstream is
	// unreachable or not an MCP endpoint. False: /readyz is 200 whenever
	// the Store answers (the replica can still serve its tasks: polls,
	// results, cancels), and the upstream's state is in the body and in
	// taskgate_upstream_up. Without a Store the upstream always counts.
	ReadyRequiresUpstream bool
	// Policy decides every tools/call and what 2025-11-25 clients see in
	// tools/list (policy.Decide). It is read per call, so a Config stored
	// in it (a reload) applies from the next call on; tasks already created
	// keep what they got. Nil: no rules, the policy package's defaults
	// (every tool as the upstream declares it, or as its learned latency
	// says; auto-after 2s, hybrid wait 1s).
	Policy *policy.Current
	// LatencySync is how often this replica publishes the tool latencies
	// it learned to the store and merges in the other replicas' (the first
	// merge happens in New, so a replica starts warm). Zero means
	// DefaultLatencySync; negative: never, latencies stay per replica.
	// Without a Store nothing is learned.
	LatencySync time.Duration
	// Trends are the console's per-minute figures of tasks, kept in the
	// Store (trends.go; docs/console.md, "Trends").
	Trends TrendsConfig
	// ReplicaID names this replica in leases, failed-task messages and
	// every log line (New adds it to Logger as "replica"). Empty means a
	// random id per process. Replicas sharing a store need distinct ids.
	ReplicaID string
	// Lease is how long a worker's claim on a task lasts without renewal;
	// LeaseRenew how often it is renewed. Zero means DefaultLease and
	// DefaultLeaseRenew.
	Lease, LeaseRenew time.Duration
	// MaxAttempts is how many attempts a rerunnable task may have in all
	// (docs/durable.md); zero means DefaultMaxAttempts, 1 never reruns.
	// RerunBackoff is the wait before the first rerun, doubled for each
	// next one (at most half a Lease); zero means DefaultRerunBackoff.
	MaxAttempts  int
	RerunBackoff time.Duration
	// Alone says no other replica shares Store (the embedded store): a
	// task this replica stops under is failed saying it is lost
	// (runner.LostMessage), never left for another replica to run again.
	Alone bool
	// UpstreamRestartGrace is how long a held call through the upstream's
	// own task asks again for its tasks/result while the upstream is
	// unreachable (a rolling restart); zero means DefaultUpstreamRestartGrace.
	UpstreamRestartGrace time.Duration
	// Path is where MCP is served. Empty means DefaultPath.
	Path string
	// MaxInflight caps the in-flight calls (the upstream calls this
	// replica's runner holds for tasks, hybrid and bridged calls) at once;
	// past it, a tools/call that would start one more gets -32603 and no
	// task. Zero or negative: no limit.
	MaxInflight int
	// MaxInflightPerPrincipal caps the in-flight calls of one principal
	// (core.Principal: its credentials' owner, else its client address) on
	// this replica, so that no one principal takes the whole of
	// MaxInflight; past it, its tools/call gets -32603 with
	// data.retryAfterMs (internal/runner/admit.go). Zero means half of
	// MaxInflight (at least 1); negative: no cap.
	MaxInflightPerPrincipal int
	// MaxTaskRate is how many tasks one principal may create a minute on
	// this replica, a minute's worth at once (internal/runner/rate.go).
	// Zero means DefaultMaxTaskRate; negative: no limit.
	MaxTaskRate float64
	// MetricsPath is where the Prometheus metrics are served on this
	// handler (internal/obs). Empty means DefaultMetricsPath; "-" serves
	// them nowhere here (Handler.Metrics can serve them on another
	// listener).
	MetricsPath string
	// PollLimit is how many polls (tasks/get, tasks/list) one owner may
	// send per second for one task on this replica, with bursts of twice
	// that; faster polls get HTTP 429 (internal/front/ratelimit.go). Zero means
	// DefaultPollLimit; negative: no limit.
	PollLimit float64
	// MaxBody bounds a POSTed body in bytes; larger bodies get 413.
	// Zero means DefaultMaxBody.
	MaxBody int64
	// KeepAlive is how often a plain tools/call's answer stream carries a
	// keep-alive while the upstream works on it, when nothing else crossed
	// it meanwhile: a progress notification for the client's
	// progressToken, else an SSE comment (internal/upstreamside/keepalive.go). Zero
	// means DefaultKeepAlive; negative: none.
	KeepAlive time.Duration
	// MRTRHold is how long an input_required round a 2026-07-28 client
	// got before its task began (a session upstream asked during the
	// hybrid wait: internal/front2026/mrtr.go) waits for the client's retry; then
	// the held upstream call is cancelled. Zero means
	// DefaultMRTRHoldFactor times the call's hybrid wait.
	MRTRHold time.Duration
	// ReadTimeout bounds how long a POSTed body may take to arrive, from
	// the end of its headers; a slower one gets 408 and its connection is
	// closed. The body is read as it arrives, so memory follows the bytes
	// received, never the Content-Length announced. Zero means
	// DefaultReadTimeout; negative: no limit.
	ReadTimeout time.Duration
	// AllowedOrigins are the browser origins ("https://app.example:8443")
	// allowed to call the MCP endpoint (MCP 2026-07-28, Streamable HTTP
	// transport, "Security Warning": servers MUST validate Origin); a
	// request with another Origin gets 403, and allowed origins get CORS
	// answers, preflight included. "*" allows any origin. Nil: requests
	// without Origin, and those whose Origin is on localhost or the
	// ListenHost.
	AllowedOrigins []string
	// ListenHost is the host the gateway listens on (for the default
	// Origin check); empty or a wildcard address adds nothing to
	// localhost.
	ListenHost string
	// PublicURL is the gateway's external MCP URL
	// ("https://mcp.example.com/mcp"), when it runs behind TLS termination
	// or an ingress: the protected resource OAuth clients ask tokens for
	// (RFC 9728, RFC 8707). An empty path means Path. Empty: each
	// request's Host and TLS, with the forwarding headers of
	// TrustedProxies (internal/identity/publicurl.go).
	PublicURL string
	// TrustedProxies are the peers whose Forwarded (RFC 7239) and
	// X-Forwarded-Proto/X-Forwarded-Host headers say what the client
	// reached, when PublicURL is empty. Nil: nobody's.
	TrustedProxies []netip.Prefix
	// Auth, when set, makes the gateway an OAuth 2.1 resource server: a
	// request to the MCP endpoint needs a bearer token Auth accepts, and
	// its principal owns the tasks (internal/identity/auth.go). Nil: the
	// gateway checks no token, and the upstream is the resource server.
	Auth Authenticator
	// AuthStrip drops the client's Authorization once Auth accepted it,
	// so nothing sends it upstream: for an upstream that trusts the
	// gateway. False: it is forwarded as sent. Ignored without Auth.
	AuthStrip bool
	// Anonymous bounds the tasks of 2026-07-28 clients that send no
	// Authorization (docs/ARCHITECTURE.md, "Owners").
	Anonymous AnonymousTasks
	// Fallback offers tasks to clients that can do none, as tools
	// (internal/fallback). Off by default; it needs a Store.
	Fallback FallbackTools
	// AccessLog logs one info line per HTTP request when it ends (op
	// "access": method, status, bytes, duration, remote address).
	AccessLog bool
	// Tracer, when set, traces every MCP request, every task (one span
	// from creation to its end, whichever replica ends it) and every
	// upstream call (give the upstream.Client the same provider, and
	// build it with TraceIDGenerator). Nil: no tracing, at no cost.
	Tracer trace.TracerProvider
	// Version names this build in taskgate_build_info. Empty: "unknown".
	Version string
	// Logger receives one line per failed request and lifecycle events.
	// The zero value logs nothing.
	Logger zerolog.Logger
}

// AnonymousTasks bounds the tasks of 2026-07-28 clients without
// Authorization (core.AnonymousTasks, where the fronts count against it).
type AnonymousTasks = core.AnonymousTasks

// Authenticator checks the credentials of a request (Config.Auth;
// *auth.Guard is one): identity.Authenticator, where the auth guard uses
// it.
type Authenticator = identity.Authenticator

// ParsePublicURL checks a public URL (Config.PublicURL): an absolute
// http(s) URL with a host, and no user, query or fragment
// (identity.ParsePublicURL).
func ParsePublicURL(raw string) (*url.URL, error) { return identity.ParsePublicURL(raw) }

// Defaults of the front door.
const (
	DefaultReadTimeout         = 30 * time.Second
	DefaultAnonymousMax        = 10000
	DefaultAnonymousPerAddress = 100
)

func (c *Config) withDefaults() Config {
	cfg := *c
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.MetricsPath == "" {
		cfg.MetricsPath = DefaultMetricsPath
	}
	if cfg.PollLimit == 0 {
		cfg.PollLimit = DefaultPollLimit
	}
	if cfg.MaxInflightPerPrincipal == 0 && cfg.MaxInflight > 0 {
		cfg.MaxInflightPerPrincipal = max(cfg.MaxInflight/2, 1)
	}
	if cfg.MaxTaskRate == 0 {
		cfg.MaxTaskRate = DefaultMaxTaskRate
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = uuid.NewString()[:8]
	}
	cfg.Logger = cfg.Logger.With().Str("replica", cfg.ReplicaID).Logger()
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.LeaseRenew <= 0 || cfg.LeaseRenew >= cfg.Lease {
		cfg.LeaseRenew = cfg.Lease / 3
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.NewCurrent(&policy.Config{})
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RerunBackoff <= 0 {
		cfg.RerunBackoff = DefaultRerunBackoff
	}
	if cfg.LatencySync == 0 {
		cfg.LatencySync = DefaultLatencySync
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Anonymous.Max == 0 {
		cfg.Anonymous.Max = DefaultAnonymousMax
	}
	if cfg.Anonymous.PerAddress == 0 {
		cfg.Anonymous.PerAddress = DefaultAnonymousPerAddress
	}
	return cfg
}

// TraceIDGenerator is the IDGenerator to build Config.Tracer's provider
// with: it lets the gateway record a task's span, once the task ends, with
// the ids it minted when the task was created (internal/obs/tracing.go).
func TraceIDGenerator() sdktrace.IDGenerator { return obs.TraceIDGenerator() }

// FleetLatencies reads what the replicas published to store (every one but
// except; "" for all) within decide.LatencyKeep and merges it per tool. A
// malformed histogram is skipped.
func FleetLatencies(ctx context.Context, store decide.LatencyLoader, except string) (map[string]policy.Histogram, error) {
	return decide.FleetLatencies(ctx, store, except)
}

// Defaults of the policy decider (internal/decide).
const (
	// DefaultHybridWait is how long an "auto" tools/call may run before it
	// becomes a task when the policy sets no wait (--hybrid-wait).
	DefaultHybridWait = decide.DefaultHybridWait
	// DefaultLatencySync is how often a replica shares its latencies.
	DefaultLatencySync = decide.DefaultLatencySync
	// LatencyKeep is how long a replica's published latencies outlive its
	// last publish: replicas started within it start warm.
	LatencyKeep = decide.LatencyKeep
)

// DefaultKeepAlive is how often a quiet answer stream gets a keep-alive
// when Config.KeepAlive is zero (upstreamside.DefaultKeepAlive).
const DefaultKeepAlive = upstreamside.DefaultKeepAlive

// PresentsTasks reports whether a client that negotiated version is shown
// the 2025-11-25 tasks (upstreamside.PresentsTasks).
func PresentsTasks(version string) bool { return upstreamside.PresentsTasks(version) }

// FallbackTools configures the fallback task tools (Config.Fallback).
type FallbackTools = fallback.Config

// DefaultFallbackPrefix starts the fallback tools' names.
const DefaultFallbackPrefix = fallback.DefaultPrefix

// FallbackToolNames are the four tool names for prefix (empty: the
// default), or an error saying why prefix cannot make tool names.
func FallbackToolNames(prefix string) ([]string, error) { return fallback.ToolNames(prefix) }
