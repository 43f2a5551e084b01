package gateway

import (
	"time"

	"github.com/google/uuid"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
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
	// Store holds task state, shared by every replica. Required for tasks;
	// nil means a plain pass-through proxy (no tasks), and /readyz checks
	// only the upstream.
	Store *taskstore.Store
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
	// ReplicaID names this replica in leases and logs. Empty means a
	// random id per process.
	ReplicaID string
	// Lease is how long a worker's claim on a task lasts without renewal;
	// LeaseRenew how often it is renewed. Zero means DefaultLease and
	// DefaultLeaseRenew.
	Lease, LeaseRenew time.Duration
	// Path is where MCP is served. Empty means DefaultPath.
	Path string
	// MaxInflight caps the in-flight calls (the upstream calls this
	// replica's runner holds for tasks, hybrid and bridged calls) at once;
	// past it, a tools/call that would start one more gets -32603 and no
	// task. Zero or negative: no limit.
	MaxInflight int
	// MetricsPath is where the Prometheus metrics are served on this
	// handler (metrics.go). Empty means DefaultMetricsPath; "-" serves
	// them nowhere here (Handler.Metrics can serve them on another
	// listener).
	MetricsPath string
	// PollLimit is how many polls (tasks/get, tasks/list) one owner may
	// send per second for one task on this replica, with bursts of twice
	// that; faster polls get HTTP 429 (ratelimit.go). Zero means
	// DefaultPollLimit; negative: no limit.
	PollLimit float64
	// MaxBody bounds a POSTed body in bytes; larger bodies get 413.
	// Zero means DefaultMaxBody.
	MaxBody int64
	// Logger receives one line per failed request and lifecycle events.
	// The zero value logs nothing.
	Logger zerolog.Logger
}

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
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = uuid.NewString()[:8]
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.LeaseRenew <= 0 || cfg.LeaseRenew >= cfg.Lease {
		cfg.LeaseRenew = cfg.Lease / 3
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.NewCurrent(&policy.Config{})
	}
	if cfg.LatencySync == 0 {
		cfg.LatencySync = DefaultLatencySync
	}
	return cfg
}
