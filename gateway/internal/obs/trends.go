package obs

// Trends: the console's per-minute figures of tasks (docs/console.md,
// "Trends"), added up in memory on the task's path — a lock, a map
// lookup and a few increments — and written to the store by a flusher
// goroutine every few seconds, never by the task's own request.

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/taskstore"
)

// TrendStore is what the flusher writes to (taskstore.Store).
// Exported because TrendsParams.Store, which gateway sets, names it.
type TrendStore interface {
	AdmitTrendTools(ctx context.Context, names []string, max int) (map[string]bool, error)
	AddTrends(ctx context.Context, id string, deltas []taskstore.TrendDelta) error
}

// Defaults of TrendsParams.
const (
	DefaultTrendsFlush    = 5 * time.Second
	DefaultTrendsMaxTools = 50
	// trendRetryFor is how long a flush the store did not take is
	// retried (under the same id, so it never counts twice) before its
	// figures are dropped; less than taskstore.TrendFlushKeep.
	trendRetryFor = 10 * time.Minute
)

// TrendsParams configure Trends.
type TrendsParams struct {
	Store TrendStore
	// Every is how often the flusher writes; default DefaultTrendsFlush.
	Every time.Duration
	// MaxTools caps the tools with a series of their own, on this replica
	// and across the fleet (the store's tools set); the others are
	// counted in taskstore.TrendOther. Default DefaultTrendsMaxTools.
	MaxTools int
	// clock is "now" for the minute an event counts in; default time.Now.
	clock func() time.Time
	Log   zerolog.Logger
}

type trendKey struct {
	minute int64
	tool   string
}

// Trends is one replica's accumulator and its flusher. Its record
// methods are safe for concurrent use and do nothing on a nil *Trends.
type Trends struct {
	p TrendsParams

	mu    sync.Mutex
	cur   map[trendKey]*taskstore.TrendCounts
	tools map[string]struct{} // the tools cur counts on their own (at most MaxTools)

	// The flusher's own, touched by one goroutine at a time (flushMu).
	flushMu sync.Mutex
	pending *trendBatch // a flush the store did not take yet

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// trendBatch is one flush: its id (the store applies an id once) and
// its deltas.
type trendBatch struct {
	id     string
	since  time.Time
	deltas []taskstore.TrendDelta
}

// NewTrends returns an accumulator; Start starts its flusher.
func NewTrends(p TrendsParams) *Trends {
	if p.Every <= 0 {
		p.Every = DefaultTrendsFlush
	}
	if p.MaxTools <= 0 {
		p.MaxTools = DefaultTrendsMaxTools
	}
	if p.clock == nil {
		p.clock = time.Now
	}
	return &Trends{p: p, cur: map[trendKey]*taskstore.TrendCounts{}, tools: map[string]struct{}{}}
}

// counts is the figures of tool's current minute, under t.mu. A tool
// past the cap, or with a name too long, is counted in TrendOther.
func (t *Trends) counts(tool string) *taskstore.TrendCounts {
	if tool == "" {
		tool = "(unknown)"
	}
	if _, ok := t.tools[tool]; !ok {
		if len(t.tools) >= t.p.MaxTools || len(tool) > taskstore.MaxTrendToolName {
			tool = taskstore.TrendOther
		} else {
			t.tools[tool] = struct{}{}
		}
	}
	k := trendKey{minute: t.p.clock().Unix() / 60, tool: tool}
	c := t.cur[k]
	if c == nil {
		c = &taskstore.TrendCounts{}
		t.cur[k] = c
	}
	return c
}

// created counts a task started.
func (t *Trends) created(tool string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.counts(tool).Started++
	t.mu.Unlock()
}

// finished counts a task ended with status; took is its creation →
// end, counted in the duration histogram for completed and failed
// tasks (a cancel says nothing of how long the tool takes); took < 0:
// unknown.
func (t *Trends) finished(tool string, status taskstore.Status, took time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts(tool)
	switch status {
	case taskstore.StatusCompleted:
		c.Completed++
	case taskstore.StatusFailed:
		c.Failed++
	case taskstore.StatusCancelled:
		c.Cancelled++
		return
	default:
		return
	}
	if took >= 0 {
		c.Duration[taskstore.TrendBucket(took)]++
	}
}

// inputWait counts one wait for the client's answers that ended (the
// task went from input_required back to working, or ended), of length d.
func (t *Trends) inputWait(tool string, d time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	c := t.counts(tool)
	c.Waits++
	c.WaitHist[taskstore.TrendBucket(d)]++
	t.mu.Unlock()
}

// rerun counts an attempt begun again.
func (t *Trends) rerun(tool string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.counts(tool).Reruns++
	t.mu.Unlock()
}

// Start starts the flusher; Stop ends it.
func (t *Trends) Start() {
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	go t.run()
}

func (t *Trends) run() {
	defer close(t.done)
	tick := time.NewTicker(t.p.Every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), t.p.Every)
			_ = t.flush(ctx)
			cancel()
		}
	}
}

// Stop ends the flusher and flushes what is left, waiting at most 2 s
// for the store. After Start; a second call does nothing.
func (t *Trends) Stop() {
	if t.stop == nil {
		return
	}
	t.stopOnce.Do(func() {
		close(t.stop)
		<-t.done
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = t.flush(ctx)
	})
}

// flush writes what was counted since the last flush: the tools the
// fleet may track (AdmitTrendTools; the others folded into TrendOther),
// each series' minutes and the overall series, under one flush id. A
// flush the store does not take is retried at the next, under the same
// id, for trendRetryFor; meanwhile new counts wait in memory.
func (t *Trends) flush(ctx context.Context) error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	if t.pending != nil {
		if err := t.p.Store.AddTrends(ctx, t.pending.id, t.pending.deltas); err != nil {
			if t.p.clock().Sub(t.pending.since) > trendRetryFor {
				t.p.Log.Warn().Str("op", "trends").Err(err).Int("series_minutes", len(t.pending.deltas)).Msg("trends not written for too long; these figures are dropped")
				t.pending = nil
			}
			return err
		}
		t.pending = nil
	}
	t.mu.Lock()
	cur := t.cur
	t.cur, t.tools = map[trendKey]*taskstore.TrendCounts{}, map[string]struct{}{}
	t.mu.Unlock()
	if len(cur) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var names []string
	for k := range cur {
		if !seen[k.tool] {
			seen[k.tool] = true
			names = append(names, k.tool)
		}
	}
	admitted, err := t.p.Store.AdmitTrendTools(ctx, names, t.p.MaxTools)
	if err != nil {
		t.putBack(cur)
		t.p.Log.Debug().Str("op", "trends").Err(err).Msg("trends not written; kept for the next flush")
		return err
	}
	b := &trendBatch{id: uuid.NewString(), since: t.p.clock(), deltas: batchDeltas(cur, admitted)}
	if err := t.p.Store.AddTrends(ctx, b.id, b.deltas); err != nil {
		t.pending = b
		t.p.Log.Debug().Str("op", "trends").Err(err).Msg("trends not written; retried at the next flush")
		return err
	}
	return nil
}

// putBack returns counts a flush could not send to the accumulator.
// Minutes older than trendRetryFor are dropped: nothing shows them for
// long, and memory stays bounded while the store is away.
func (t *Trends) putBack(old map[trendKey]*taskstore.TrendCounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	oldest := t.p.clock().Add(-trendRetryFor).Unix() / 60
	for k, c := range old {
		if k.minute < oldest {
			continue
		}
		if _, ok := t.tools[k.tool]; !ok && k.tool != taskstore.TrendOther {
			if len(t.tools) >= t.p.MaxTools {
				k.tool = taskstore.TrendOther
			} else {
				t.tools[k.tool] = struct{}{}
			}
		}
		if have := t.cur[k]; have != nil {
			have.Add(c)
		} else {
			t.cur[k] = c
		}
	}
}

// batchDeltas folds the tools not admitted into TrendOther and adds the
// overall series ("") of each minute.
func batchDeltas(cur map[trendKey]*taskstore.TrendCounts, admitted map[string]bool) []taskstore.TrendDelta {
	series := map[trendKey]*taskstore.TrendCounts{}
	add := func(k trendKey, c *taskstore.TrendCounts) {
		if s := series[k]; s != nil {
			s.Add(c)
			return
		}
		cp := *c
		series[k] = &cp
	}
	for k, c := range cur {
		if !admitted[k.tool] {
			k.tool = taskstore.TrendOther
		}
		add(k, c)
		add(trendKey{minute: k.minute}, c)
	}
	out := make([]taskstore.TrendDelta, 0, len(series))
	for k, c := range series {
		out = append(out, taskstore.TrendDelta{Minute: k.minute, Tool: k.tool, Counts: *c})
	}
	return out
}

// SetTrends makes m record into t (nil: off). Call it before m records
// anything.
func (m *Metrics) SetTrends(t *Trends) { m.trends = t }

// TrendRerun counts an attempt of tool's task begun again
// (internal/runner/rerun.go), for the console's trends.
func (m *Metrics) TrendRerun(tool string) {
	if m != nil {
		m.trends.rerun(tool)
	}
}

// TrendInputWait counts a wait of tool's task for its client's answers
// that lasted d (internal/runner/input.go), for the console's trends.
func (m *Metrics) TrendInputWait(tool string, d time.Duration) {
	if m != nil {
		m.trends.inputWait(tool, d)
	}
}
