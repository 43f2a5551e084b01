package obs

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/taskstore"
)

// trendBackends are the stores the accumulator is tested against: the
// embedded store's miniredis and a real redis-server.
var trendBackends = []struct {
	name string
	open func(t *testing.T) redis.UniversalClient
}{
	{"miniredis", func(t *testing.T) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	}},
	{"redis-server", func(t *testing.T) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: redistest.Start(t)})
	}},
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func eachTrendBackend(t *testing.T, fn func(t *testing.T, s *taskstore.Store, clk *clock)) {
	for _, b := range trendBackends {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.open(t)
			t.Cleanup(func() { rdb.Close() })
			clk := &clock{t: time.Now().Truncate(time.Hour).Add(30 * time.Minute)}
			s := taskstore.New(rdb, taskstore.Options{Clock: clk.Now})
			t.Cleanup(func() { s.Close() })
			fn(t, s, clk)
		})
	}
}

// TestTrendsAccumulateAndFlush: what the gateway records (through
// Metrics, as the runner and the fronts call it) is what the store holds
// after a flush, per tool and overall, in the minute it happened; a
// second replica's figures add to the first's.
func TestTrendsAccumulateAndFlush(t *testing.T) {
	eachTrendBackend(t, func(t *testing.T, s *taskstore.Store, clk *clock) {
		ctx := context.Background()
		replica := func() (*Metrics, *Trends) {
			m := NewMetrics(func() float64 { return 0 })
			tr := NewTrends(TrendsParams{Store: s, clock: clk.Now})
			m.SetTrends(tr)
			return m, tr
		}
		m1, t1 := replica()
		m2, t2 := replica()
		created := time.Now().Add(-1500 * time.Millisecond) // TaskFinished times with the real clock
		for range 3 {
			m1.TaskCreated("search", taskstore.Protocol2025)
		}
		m1.TaskFinished(&taskstore.Task{Tool: "search", CreatedAt: created}, taskstore.StatusCompleted, 0)
		m1.TaskFinished(&taskstore.Task{Tool: "search", CreatedAt: created}, taskstore.StatusFailed, 0)
		m2.TaskFinished(&taskstore.Task{Tool: "search", CreatedAt: created}, taskstore.StatusCancelled, 0) // tasks/cancel on another replica
		m1.TrendInputWait("search", 3*time.Second)
		m1.TrendRerun("search")
		m2.TaskCreated("mail", taskstore.Protocol2026)
		m2.TaskFinished(&taskstore.Task{}, taskstore.StatusFailed, 0) // a recovered lease: no tool, no creation time
		if err := t1.flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := t2.flush(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := s.Trend(ctx, "search", taskstore.TrendLastHour)
		if err != nil {
			t.Fatal(err)
		}
		got := p[59].TrendCounts
		if got.Started != 3 || got.Completed != 1 || got.Failed != 1 || got.Cancelled != 1 || got.Reruns != 1 || got.Waits != 1 {
			t.Errorf("search's minute: %+v", got)
		}
		// Durations of the completed and failed one, not the cancelled.
		if got.Duration.Total() != 2 || got.Duration[taskstore.TrendBucket(1500*time.Millisecond)] != 2 {
			t.Errorf("search's durations: %v", got.Duration)
		}
		if got.WaitHist[taskstore.TrendBucket(3*time.Second)] != 1 {
			t.Errorf("search's input waits: %v", got.WaitHist)
		}
		all, _ := s.Trend(ctx, "", taskstore.TrendLastHour)
		if a := all[59]; a.Started != 4 || a.Failed != 2 || a.Cancelled != 1 || a.Completed != 1 {
			t.Errorf("overall minute: %+v", a.TrendCounts)
		}
		if tools, _ := s.TrendTools(ctx); len(tools) != 3 || tools[0] != "(unknown)" || tools[1] != "mail" || tools[2] != "search" {
			t.Errorf("tools: %q", tools)
		}
		// Nothing new: a flush writes nothing, the figures stay.
		if err := t1.flush(ctx); err != nil {
			t.Fatal(err)
		}
		if p, _ := s.Trend(ctx, "search", taskstore.TrendLastHour); p[59].Started != 3 {
			t.Errorf("after an empty flush: %+v", p[59].TrendCounts)
		}
		// The next minute is another point.
		clk.Add(time.Minute)
		m1.TaskCreated("search", taskstore.Protocol2025)
		_ = t1.flush(ctx)
		if p, _ := s.Trend(ctx, "search", taskstore.TrendLastHour); p[58].Started != 3 || p[59].Started != 1 {
			t.Errorf("two minutes: %d then %d", p[58].Started, p[59].Started)
		}
	})
}

// TestTrendsToolFlood: a client calling a thousand made-up tool names
// costs one series per tool up to the cap and one "(other)", locally and
// across replicas.
func TestTrendsToolFlood(t *testing.T) {
	eachTrendBackend(t, func(t *testing.T, s *taskstore.Store, clk *clock) {
		ctx := context.Background()
		a := NewTrends(TrendsParams{Store: s, clock: clk.Now, MaxTools: 5})
		b := NewTrends(TrendsParams{Store: s, clock: clk.Now, MaxTools: 5})
		for i := range 1000 {
			a.created("made-up-" + strconv.Itoa(i))
			b.created("other-up-" + strconv.Itoa(i))
		}
		a.created(string(make([]byte, taskstore.MaxTrendToolName+1))) // too long a name
		if len(a.tools) != 5 || len(a.cur) != 6 {
			t.Fatalf("the accumulator holds %d tools, %d series; want 5 and 6", len(a.tools), len(a.cur))
		}
		if err := a.flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.flush(ctx); err != nil {
			t.Fatal(err)
		}
		tools, err := s.TrendTools(ctx)
		if err != nil || len(tools) != 6 {
			t.Fatalf("the store tracks %q, %v: want 5 tools and (other)", tools, err)
		}
		other, _ := s.Trend(ctx, taskstore.TrendOther, taskstore.TrendLastHour)
		all, _ := s.Trend(ctx, "", taskstore.TrendLastHour)
		// a: 995 + the long name in (other); b: all 1000 (the fleet's cap
		// was reached by a's five).
		if other[59].Started != 996+1000 || all[59].Started != 2001 {
			t.Errorf("(other) started %d, overall %d; want 1996 and 2001", other[59].Started, all[59].Started)
		}
	})
}

// failingStore fails its writes while down, and may apply a flush yet
// lose its reply (lost).
type failingStore struct {
	*taskstore.Store
	down, lost atomic.Bool
	ids        []string
}

func (f *failingStore) AddTrends(ctx context.Context, id string, d []taskstore.TrendDelta) error {
	f.ids = append(f.ids, id)
	if f.down.Load() {
		return errors.New("store down")
	}
	if err := f.Store.AddTrends(ctx, id, d); err != nil {
		return err
	}
	if f.lost.Load() {
		return errors.New("reply lost")
	}
	return nil
}

// TestTrendsFlushRetry: a flush the store did not take is retried under
// its id, so a flush whose reply was lost is not counted twice, and
// nothing recorded meanwhile is lost; past trendRetryFor it is dropped.
func TestTrendsFlushRetry(t *testing.T) {
	eachTrendBackend(t, func(t *testing.T, s *taskstore.Store, clk *clock) {
		ctx := context.Background()
		fs := &failingStore{Store: s}
		tr := NewTrends(TrendsParams{Store: fs, clock: clk.Now})
		tr.created("x")
		fs.lost.Store(true) // applied, but the flusher does not know
		if err := tr.flush(ctx); err == nil {
			t.Fatal("a lost reply flushed without an error")
		}
		fs.lost.Store(false)
		tr.created("x")
		if err := tr.flush(ctx); err != nil { // the retry, then the new one
			t.Fatal(err)
		}
		if len(fs.ids) != 3 || fs.ids[0] != fs.ids[1] || fs.ids[1] == fs.ids[2] {
			t.Errorf("flush ids %q: want the first retried once, then a new one", fs.ids)
		}
		if p, _ := s.Trend(ctx, "x", taskstore.TrendLastHour); p[59].Started != 2 {
			t.Errorf("started %d, want 2 (the lost reply's flush counted once)", p[59].Started)
		}
		// Down: kept, then dropped after trendRetryFor.
		fs.down.Store(true)
		tr.created("x")
		_ = tr.flush(ctx)
		tr.created("x") // waits in memory behind the pending flush
		_ = tr.flush(ctx)
		fs.down.Store(false)
		if err := tr.flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tr.flush(ctx); err != nil {
			t.Fatal(err)
		}
		if p, _ := s.Trend(ctx, "x", taskstore.TrendLastHour); p[59].Started != 4 {
			t.Errorf("started %d after the store came back, want 4", p[59].Started)
		}
		fs.down.Store(true)
		tr.created("x")
		_ = tr.flush(ctx)
		clk.Add(trendRetryFor + time.Second)
		_ = tr.flush(ctx) // gives up the pending flush
		fs.down.Store(false)
		_ = tr.flush(ctx)
		if p, _ := s.Trend(ctx, "x", taskstore.TrendLastHour); p[49].Started != 4 || p[59].Started != 0 {
			t.Errorf("after giving up: %d then %d, want 4 and 0", p[49].Started, p[59].Started)
		}
	})
}

// TestTrendsStopFlushes: Stop writes what is left; a second Stop and a
// nil accumulator do nothing.
func TestTrendsStopFlushes(t *testing.T) {
	eachTrendBackend(t, func(t *testing.T, s *taskstore.Store, clk *clock) {
		tr := NewTrends(TrendsParams{Store: s, clock: clk.Now, Every: time.Hour})
		tr.Start()
		tr.created("x")
		tr.Stop()
		tr.Stop()
		if p, _ := s.Trend(context.Background(), "x", taskstore.TrendLastHour); p[59].Started != 1 {
			t.Errorf("started %d after Stop, want 1", p[59].Started)
		}
		var off *Trends
		off.created("x")
		off.finished("x", taskstore.StatusCompleted, time.Second)
		off.inputWait("x", time.Second)
		off.rerun("x")
		var m *Metrics
		m.TrendRerun("x")
	})
}
