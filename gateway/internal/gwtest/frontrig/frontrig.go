// Package frontrig builds what a protocol front stands on, without the
// Handler: one replica's front.Deps (a runner, the upstream side, the
// decider, the metrics, the render cache, the fallback tools) on a store
// and an upstream, wired as gateway.New wires them, and fleets of such
// replicas on one Redis. The tests of front2025 and front2026 build their
// front on it, each with the few lines of routing the Handler does for
// that front. Only tests import it.
//
//   - frontrig.go: Config, Replica (New), Fleet (Add, or Next and Start;
//     Observer), FallbackFleet, MiniStore, ReadPost.
package frontrig

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Config is the part of gateway.Config a front's tests set. Each zero
// value means what it means for gateway.Config.
type Config struct {
	Upstream  *upstream.Client // required
	Store     *taskstore.Store // required
	ReplicaID string           // "": "r0"
	Policy    *policy.Current  // nil: the policy package's defaults
	PollLimit float64          // zero: 10 polls a second; negative: none
	KeepAlive time.Duration    // zero: upstreamside.DefaultKeepAlive; negative: none
	MRTRHold  time.Duration
	Anonymous core.AnonymousTasks // zero: 10,000 and 100 per address
	Fallback  fallback.Config
	Logger    zerolog.Logger
}

// Replica is one replica's components, as gateway.New builds them.
type Replica struct {
	Cfg  Config // with the defaults filled in
	Deps front.Deps
	// Life ends when the test ends (the Handler's life: the streams the
	// gateway serves itself).
	Life context.Context
}

// New builds a replica's components on cfg; the test's cleanup stops
// them.
func New(t testing.TB, cfg Config) *Replica {
	t.Helper()
	c := withDefaults(cfg)
	r := &Replica{Cfg: c}
	life, end := context.WithCancel(context.Background())
	r.Life = life
	decider := decide.NewDecider(c.Policy, c.Store, c.Logger)
	up := upstreamside.New(c.Upstream, c.Store, decider, c.KeepAlive, c.Logger)
	var inflight func() int
	metrics := obs.NewMetrics(func() float64 {
		if inflight == nil {
			return 0
		}
		return float64(inflight())
	})
	var polls *front.PollLimiter
	if c.PollLimit > 0 {
		polls = front.NewPollLimiter(c.PollLimit, 2*c.PollLimit)
	}
	renders := front.NewRenderCache(front.CacheEntries, front.CacheBytes)
	stopRemovals, err := c.Store.WatchRemovals(context.Background(), renders.Removals())
	if err != nil {
		t.Fatal(err)
	}
	run := runner.New(runner.Params{
		Store: c.Store, Up: c.Upstream, Observe: decider.Observe,
		Metrics: metrics, Log: c.Logger, Replica: c.ReplicaID,
		Lease: 15 * time.Second, Renew: 5 * time.Second, TaskRate: 600,
		Anonymous: core.Anonymous{Store: c.Store, Caps: c.Anonymous},
		Durable:   runner.Durable{MaxAttempts: runner.DefaultMaxAttempts, Backoff: runner.DefaultRerunBackoff, Reruns: metrics.NewReruns()},
	})
	inflight = run.Inflight
	fb, err := fallback.New(c.Fallback, c.Store, metrics, c.Logger)
	if err != nil {
		t.Fatal(err)
	}
	decider.StartSync(decide.DefaultLatencySync, c.ReplicaID)
	// The Handler's Close order: streams, the runner, the removals, the
	// latency sync.
	t.Cleanup(func() {
		end()
		run.Stop()
		stopRemovals()
		decider.StopSync()
	})
	r.Deps = front.Deps{Runner: run, Up: up, Decider: decider, Metrics: metrics, Log: c.Logger,
		Polls: polls, Renders: renders, Fallback: fb}
	return r
}

func withDefaults(c Config) Config {
	if c.ReplicaID == "" {
		c.ReplicaID = "r0"
	}
	c.Logger = c.Logger.With().Str("replica", c.ReplicaID).Logger()
	if c.Policy == nil {
		c.Policy = policy.NewCurrent(&policy.Config{})
	}
	if c.PollLimit == 0 {
		c.PollLimit = 10
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = upstreamside.DefaultKeepAlive
	}
	if c.Anonymous.Max == 0 {
		c.Anonymous.Max = 10000
	}
	if c.Anonymous.PerAddress == 0 {
		c.Anonymous.PerAddress = 100
	}
	return c
}

// ReadPost reads and parses a POSTed JSON-RPC body as the Handler does
// (gateway/handler.go, servePost), answering what it refuses itself.
func ReadPost(w http.ResponseWriter, r *http.Request) (*mcpwire.Message, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeParseError, "Parse error: "+err.Error()))
		return nil, false
	}
	msg, perr := mcpwire.Parse(body)
	if perr != nil {
		mcpwire.WriteError(w, nil, perr)
		return nil, false
	}
	return msg, true
}

// Fleet is replicas of one front on one Redis in front of one upstream,
// each built with its own Config (the mod of Add).
type Fleet struct {
	T  *testing.T
	Up string // the upstream's MCP endpoint
	MR *miniredis.Miniredis
	// Redis, when set, makes each replica's Redis client instead of one
	// on MR (a real redis-server, the production options).
	Redis func() redis.UniversalClient
	// Serve is the front's routing: the http.Handler of a replica Add
	// starts (nil for a fleet that builds its replicas itself, on Next
	// and Start).
	Serve func(*Replica) http.Handler
	Rs    []*Replica
	URLs  []string
	Cmds  []*atomic.Int64 // Redis commands each replica's store sent
}

// NewFleet is a fleet in front of upstreamURL on a fresh miniredis, its
// replicas served by serve.
func NewFleet(t *testing.T, upstreamURL string, serve func(*Replica) http.Handler) *Fleet {
	return &Fleet{T: t, Up: upstreamURL, MR: miniredis.RunT(t), Serve: serve}
}

// Add starts one more replica; mod may change its Config.
func (f *Fleet) Add(mod func(*Config)) *Replica {
	f.T.Helper()
	cfg := f.Next()
	if mod != nil {
		mod(&cfg)
	}
	r := New(f.T, cfg)
	f.Rs = append(f.Rs, r)
	f.Start(f.Serve(r))
	return r
}

// Next is the Config of the next replica: a store of its own on the
// fleet's Redis, its commands counted in Cmds, and a client of the
// upstream. The test's cleanup closes them after what it registers later
// (cleanups run last-registered first): the HTTP server, the replica's
// components (their workers), the store, the client.
func (f *Fleet) Next() Config {
	t := f.T
	t.Helper()
	var rdb redis.UniversalClient
	if f.Redis != nil {
		rdb = f.Redis()
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: f.MR.Addr()})
	}
	n := &atomic.Int64{}
	rdb.AddHook(redistest.CountHook{N: n})
	store := taskstore.New(rdb, taskstore.Options{ResyncInterval: 500 * time.Millisecond})
	client, err := upstream.New(f.Up, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	t.Cleanup(func() { store.Close() })
	f.Cmds = append(f.Cmds, n)
	// Tests poll in tight loops; the poll limit has its own tests.
	return Config{Upstream: client, Store: store, ReplicaID: fmt.Sprintf("f%d", len(f.URLs)), PollLimit: -1}
}

// Start serves h, the replica made on Next's Config, as the fleet's next
// replica.
func (f *Fleet) Start(h http.Handler) {
	srv := httptest.NewServer(h)
	f.T.Cleanup(srv.Close)
	f.URLs = append(f.URLs, srv.URL+"/mcp")
}

// Observer is a store of its own on the fleet's Redis, for a test's
// assertions: no retries, so it fails fast while Redis is down.
func (f *Fleet) Observer() *taskstore.Store {
	rdb := redis.NewClient(&redis.Options{Addr: f.MR.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	store := taskstore.New(rdb, taskstore.Options{})
	f.T.Cleanup(func() { rdb.Close() })
	f.T.Cleanup(func() { store.Close() })
	return store
}

// FallbackFleet is replicas served by serve with the fallback tools on
// and three task candidates (--task): "slow" with a 300 ms hybrid wait
// (its calls that must become tasks are held at the gate or run far
// longer), "elicit" and "echo" with a long one (gwtest.DirectWait), so
// that elicit's question always comes before the wait ends and echo is
// always answered directly. The upstream records its calls and sits
// behind a gate (gwtest.GatedUpstream).
func FallbackFleet(t *testing.T, replicas int, serve func(*Replica) http.Handler) (*Fleet, *testupstream.Recorder, *gwtest.Gate) {
	t.Helper()
	rec := &testupstream.Recorder{}
	upURL, gate := gwtest.GatedUpstream(t, testupstream.Handler(testupstream.Options{Recorder: rec}))
	f := NewFleet(t, upURL, serve)
	for i := 0; i < replicas; i++ {
		f.Add(func(c *Config) {
			c.Policy = gwtest.HybridPolicy(append(gwtest.Rules(t, "slow", policy.Task),
				gwtest.WithWait(gwtest.Rules(t, "elicit", policy.Task, "echo", policy.Task), gwtest.DirectWait)...), 300*time.Millisecond)
			c.Fallback = fallback.Config{Enabled: true}
		})
	}
	return f, rec, gate
}

// MiniStore is a store with options so on mr, its client with hooks and
// go-redis's own retries off; the test's cleanup closes both.
func MiniStore(t testing.TB, mr *miniredis.Miniredis, so taskstore.Options, hooks ...redis.Hook) *taskstore.Store {
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	for _, hook := range hooks {
		rdb.AddHook(hook)
	}
	store := taskstore.New(rdb, so)
	t.Cleanup(func() { store.Close() })
	return store
}
