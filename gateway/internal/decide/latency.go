package decide

// Latency learning (docs/ARCHITECTURE.md, "How a tools/call is decided"): every
// upstream tools/call that produced an answer (a result or a JSON-RPC
// error) teaches the tool's latency, time spent waiting for the user's
// input left out, at the three places a call ends:
//
//	sync forward   upstreamSide.forward, forwardToStateless: Forward .. end of the relay
//	               (a stream that carried an input request is not counted:
//	               its user's time cannot be told apart)
//	hybrid         front2026.hybrid: the answer came within the budget
//	task           the runner's worker: start of the call .. its answer − input wait
//
// Only tools the upstream listed are learned (tool names come from
// clients, and policy.Latencies is bounded). The observations go into
// Policy.Latencies in memory; no Redis command is on a call's path.
// Replicas share them by periodic merge (latencySync): each publishes its
// own histograms every LatencySync and reads the others' back
// (taskstore/latency.go), and startSync merges once before the Handler
// serves, so a new replica starts warm.

import (
	"context"
	"errors"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/policy"
)

const (
	// DefaultLatencySync is how often a replica shares its latencies.
	DefaultLatencySync = 10 * time.Second
	// LatencyKeep is how long a replica's published latencies outlive its
	// last publish: replicas started within it start warm.
	LatencyKeep = time.Hour
	// latencyIOTimeout bounds one publish or load.
	latencyIOTimeout = 5 * time.Second
	// latencyWarmTimeout bounds the merge in New: a Redis that does not
	// answer delays the start this long at most (the replica then starts
	// cold and merges at the next tick).
	latencyWarmTimeout = 2 * time.Second
)

// Observe records that a call of tool took d; tool "" (not learned) is
// ignored. Allocation-free once the tool has an entry.
func (d *Decider) Observe(tool string, took time.Duration) {
	if tool == "" || took < 0 {
		return
	}
	d.lat.Observe(tool, took)
}

// StartSync starts sharing latencies every interval (negative: never)
// with replica's name, once it has merged what the others published.
func (d *Decider) StartSync(every time.Duration, replica string) {
	if d.store == nil || every < 0 {
		return
	}
	if every == 0 {
		every = DefaultLatencySync
	}
	d.sync = newLatencySync(d, every, replica)
}

// StopSync stops the sharing, publishing once more.
func (d *Decider) StopSync() {
	if d.sync != nil {
		d.sync.stop()
	}
}

// latencySync publishes this replica's latencies and merges the others'
// every interval, until stop.
type latencySync struct {
	d         *Decider
	replica   string
	every     time.Duration
	cancel    context.CancelFunc
	done      chan struct{}
	failed    bool // the last round failed; logged once per outage
	published bool // something was published: an empty publish must clear it
}

// newLatencySync merges what the other replicas published (warm start),
// then keeps sharing every interval in a goroutine stop waits for.
func newLatencySync(d *Decider, every time.Duration, replica string) *latencySync {
	s := &latencySync{d: d, replica: replica, every: every, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	warm, stop := context.WithTimeout(ctx, latencyWarmTimeout)
	s.load(warm)
	stop()
	go s.run(ctx)
	return s
}

func (s *latencySync) run(ctx context.Context) {
	defer close(s.done)
	core.Every(ctx, s.every, func(ctx context.Context) {
		if s.publish(ctx) {
			s.load(ctx)
		}
	})
}

// stop ends the loop and publishes once more, so what this replica learned
// last outlives it (for LatencyKeep).
func (s *latencySync) stop() {
	s.cancel()
	<-s.done
	s.publish(context.Background())
}

// publish writes this replica's own histograms; it reports success.
func (s *latencySync) publish(ctx context.Context) bool {
	local := s.d.lat.Local()
	hists := make(map[string][]byte, len(local))
	for tool, hist := range local {
		b, _ := hist.MarshalBinary()
		hists[tool] = b
	}
	if len(hists) == 0 && !s.published {
		return true // nothing learned yet: no keys for an idle replica
	}
	ctx, cancel := context.WithTimeout(ctx, latencyIOTimeout)
	defer cancel()
	err := s.d.store.PublishLatencies(ctx, s.replica, hists, LatencyKeep)
	s.result("publish", err)
	if err == nil {
		s.published = true
	}
	return err == nil
}

// load merges every other replica's histograms into this one's remote view.
func (s *latencySync) load(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, latencyIOTimeout)
	defer cancel()
	others, err := FleetLatencies(ctx, s.d.store, s.replica)
	s.result("load", err)
	if err == nil {
		s.d.lat.SetRemote(others)
	}
}

// result logs the first failure of an outage and the recovery.
func (s *latencySync) result(op string, err error) {
	switch {
	case err == nil && s.failed:
		s.failed = false
		s.d.log.Info().Str("op", "latency").Msg("sharing tool latencies again")
	case err != nil && !s.failed && !errors.Is(err, context.Canceled):
		s.failed = true
		s.d.log.Warn().Str("op", "latency").Err(err).
			Msg("cannot " + op + " tool latencies; deciding on what this replica knows until the store is back")
	}
}

// LatencyLoader reads what the replicas published (taskstore.Store).
type LatencyLoader interface {
	LoadLatencies(ctx context.Context, except string, keep time.Duration) (map[string]map[string][]byte, error)
}

// FleetLatencies reads what the replicas published to store (every one but
// except; "" for all) within LatencyKeep and merges it per tool. A
// malformed histogram is skipped.
func FleetLatencies(ctx context.Context, store LatencyLoader, except string) (map[string]policy.Histogram, error) {
	published, err := store.LoadLatencies(ctx, except, LatencyKeep)
	if err != nil {
		return nil, err
	}
	out := map[string]policy.Histogram{}
	for _, tools := range published {
		for tool, raw := range tools {
			var h policy.Histogram
			if h.UnmarshalBinary(raw) != nil {
				continue
			}
			sum := out[tool]
			sum.Merge(&h)
			out[tool] = sum
		}
	}
	return out, nil
}
