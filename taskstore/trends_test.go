package taskstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// trendCounts builds counts with a few of each kind.
func trendCounts(started, completed, failed, cancelled, reruns int64, durs ...time.Duration) TrendCounts {
	c := TrendCounts{Started: started, Completed: completed, Failed: failed, Cancelled: cancelled, Reruns: reruns}
	for _, d := range durs {
		c.Duration[TrendBucket(d)]++
	}
	return c
}

// TestTrendsAddAndRead: flushes from two replicas add up per minute and
// per hour, per tool and overall; a retried flush id adds nothing; the
// keys expire; the hour and day views read what was written, at the right
// points.
func TestTrendsAddAndRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		now := e.clock.Now()
		minute := now.Unix() / 60
		a := trendCounts(3, 2, 1, 0, 1, 40*time.Millisecond, 3*time.Second, 3*time.Second)
		b := trendCounts(1, 0, 0, 1, 0)
		b.Waits, b.WaitHist[TrendBucket(2*time.Second)] = 1, 1
		if err := s.AddTrends(ctx, "flush-a", []TrendDelta{{Minute: minute, Tool: "search", Counts: a}, {Minute: minute, Counts: a}}); err != nil {
			t.Fatal(err)
		}
		// The same id again (a retry after a lost reply): nothing twice.
		if err := s.AddTrends(ctx, "flush-a", []TrendDelta{{Minute: minute, Tool: "search", Counts: a}, {Minute: minute, Counts: a}}); err != nil {
			t.Fatal(err)
		}
		// Another replica, a minute before, another tool.
		if err := s.AddTrends(ctx, "flush-b", []TrendDelta{{Minute: minute - 1, Tool: `<script>"x"`, Counts: b}, {Minute: minute - 1, Counts: b},
			{Minute: minute, Tool: "search", Counts: a}, {Minute: minute, Counts: a}}); err != nil {
			t.Fatal(err)
		}
		hour, err := s.Trend(ctx, "search", TrendLastHour)
		if err != nil {
			t.Fatal(err)
		}
		if len(hour) != 60 || !hour[59].Start.Equal(time.Unix(minute*60, 0).UTC()) || !hour[0].Start.Equal(time.Unix((minute-59)*60, 0).UTC()) {
			t.Fatalf("hour view: %d points from %v to %v", len(hour), hour[0].Start, hour[len(hour)-1].Start)
		}
		want := a
		want.Add(&a)
		if hour[59].TrendCounts != want {
			t.Errorf("search's minute = %+v, want %+v", hour[59].TrendCounts, want)
		}
		if !hour[58].IsZero() {
			t.Errorf("search's minute before = %+v, want nothing", hour[58].TrendCounts)
		}
		all, err := s.Trend(ctx, "", TrendLastHour)
		if err != nil {
			t.Fatal(err)
		}
		if all[59].TrendCounts != want || all[58].TrendCounts != b {
			t.Errorf("overall minutes = %+v, %+v, want %+v, %+v", all[58].TrendCounts, all[59].TrendCounts, b, want)
		}
		if q := all[59].Duration.Quantile(0.5); !q.OK || q.Ms != 5000 || q.Above {
			t.Errorf("p50 = %+v, want <= 5000 ms", q)
		}
		day, err := s.Trend(ctx, "", TrendLastDay)
		if err != nil {
			t.Fatal(err)
		}
		var total TrendCounts
		for _, p := range day {
			total.Add(&p.TrendCounts)
		}
		want.Add(&b)
		if len(day) != 24 || total != want {
			t.Errorf("day view: %d points, total %+v, want 24 and %+v", len(day), total, want)
		}
		if day[23].Start.Unix() != (minute/60)*3600 {
			t.Errorf("day view ends at %v", day[23].Start)
		}
		// Keys: one slot, expiring.
		key := s.k.trendMinute("search", minute)
		if ttl, _ := e.rdb.PTTL(ctx, key).Result(); ttl <= time.Hour || ttl > TrendMinuteKeep {
			t.Errorf("minute key's ttl %v", ttl)
		}
		if ttl, _ := e.rdb.PTTL(ctx, s.k.trendHour("search", minute/60)).Result(); ttl <= 24*time.Hour || ttl > TrendHourKeep {
			t.Errorf("hour key's ttl %v", ttl)
		}
		if got := e.hash(key); got["s"] != "6" || got["c"] != "4" || len(got) != 6 {
			t.Errorf("raw minute hash %v: want only the counts written", got)
		}
		if e.mini != nil { // a redis-server would take the two hours
			e.elapse(TrendMinuteKeep + time.Second)
			if e.exists(key) {
				t.Error("the minute key outlived its keep")
			}
		}
	})
}

// TestTrendsToolCap: the fleet tracks at most the cap of tools (TrendOther
// besides); a tracked tool stays admitted, a new one past the cap is not,
// and a tool quiet for longer than the hour keys last gives its place up.
func TestTrendsToolCap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		got, err := s.AdmitTrendTools(ctx, []string{"a", "b", TrendOther, "c"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !got["a"] || !got["b"] || !got[TrendOther] || got["c"] {
			t.Fatalf("admitted %v, want a, b and (other), not c", got)
		}
		got, _ = s.AdmitTrendTools(ctx, []string{"c", "a"}, 2)
		if got["c"] || !got["a"] {
			t.Fatalf("admitted %v on the second flush", got)
		}
		tools, err := s.TrendTools(ctx)
		if err != nil || len(tools) != 3 || tools[0] != TrendOther || tools[1] != "a" || tools[2] != "b" {
			t.Fatalf("TrendTools = %q, %v", tools, err)
		}
		e.clock.Advance(TrendHourKeep / 2)
		_, _ = s.AdmitTrendTools(ctx, []string{"a"}, 2) // a is refreshed, b is not
		e.clock.Advance(TrendHourKeep/2 + time.Minute)
		got, _ = s.AdmitTrendTools(ctx, []string{"c"}, 2)
		if !got["c"] {
			t.Fatalf("c not admitted once b went quiet: %v", got)
		}
		if tools, _ := s.TrendTools(ctx); len(tools) != 2 || tools[0] != "a" || tools[1] != "c" {
			t.Fatalf("TrendTools = %q, want a and c", tools)
		}
		if n, _ := e.rdb.ZCard(ctx, s.k.trendTools()).Result(); n != 2 {
			t.Errorf("the tools set holds %d, want 2", n)
		}
	})
}

// TestTrendDurations: the tools page's histograms are the current and
// the previous hour's, per tool.
func TestTrendDurations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		minute := e.clock.Now().Unix() / 60
		hourStart := (minute / 60) * 60
		fast := trendCounts(0, 2, 0, 0, 0, 3*time.Millisecond, 3*time.Millisecond)
		slow := trendCounts(0, 1, 0, 0, 0, 90*time.Second)
		old := trendCounts(0, 1, 0, 0, 0, time.Hour)
		if err := s.AddTrends(ctx, "f1", []TrendDelta{{Minute: minute, Tool: "x", Counts: fast}, {Minute: hourStart - 1, Tool: "x", Counts: slow},
			{Minute: hourStart - 61, Tool: "x", Counts: old}}); err != nil {
			t.Fatal(err)
		}
		h, err := s.TrendDurations(ctx, []string{"x", "never"})
		if err != nil {
			t.Fatal(err)
		}
		x := h["x"]
		if x.Total() != 3 || x[TrendBucket(3*time.Millisecond)] != 2 || x[TrendBucket(90*time.Second)] != 1 {
			t.Errorf("x's histogram %v: want the two fast and the slow one, not the older hour's", x)
		}
		if n := h["never"]; n.Total() != 0 {
			t.Errorf("a tool without trends has %v", n)
		}
	})
}

// TestTrendsLargeFlush: a flush over the script's key bound is sent in
// parts, all of it applied, and retried parts add nothing twice.
func TestTrendsLargeFlush(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		minute := e.clock.Now().Unix() / 60
		var ds []TrendDelta
		for i := range 150 {
			ds = append(ds, TrendDelta{Minute: minute, Tool: "t" + strconv.Itoa(i), Counts: trendCounts(1, 1, 0, 0, 0, time.Second)})
		}
		for range 2 {
			if err := s.AddTrends(ctx, "big", ds); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range []int{0, 63, 64, 149} {
			p, err := s.Trend(ctx, "t"+strconv.Itoa(i), TrendLastHour)
			if err != nil || p[59].Started != 1 || p[59].Completed != 1 {
				t.Errorf("t%d: %+v, %v", i, p[59].TrendCounts, err)
			}
		}
	})
}

// TestTrendsBadStoredField: a count that is not one is an error naming
// the field, not a zero or a panic.
func TestTrendsBadStoredField(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		minute := e.clock.Now().Unix() / 60
		e.rdb.HSet(ctx, s.k.trendMinute("", minute), "s", "lots")
		if _, err := s.Trend(ctx, "", TrendLastHour); !errors.Is(err, ErrBadTrend) {
			t.Fatalf("Trend over a bad field: %v, want ErrBadTrend", err)
		}
	})
}

// TestTrendsCluster: on a real 3-master Cluster every trend key is in one
// slot, so the flush script and a page's pipeline run there.
func TestTrendsCluster(t *testing.T) {
	rdb := clusterClient(t)
	s := New(rdb, Options{})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	minute := time.Now().Unix() / 60
	if _, err := s.AdmitTrendTools(ctx, []string{"a", "b"}, 10); err != nil {
		t.Fatal(err)
	}
	c := trendCounts(2, 1, 1, 0, 0, time.Second, time.Second)
	if err := s.AddTrends(ctx, "cl", []TrendDelta{{Minute: minute, Tool: "a", Counts: c}, {Minute: minute, Tool: "b", Counts: c}, {Minute: minute, Counts: c}}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Trend(ctx, "b", TrendLastHour)
	if err != nil || p[59].TrendCounts != c {
		t.Fatalf("Trend on Cluster: %+v, %v", p[59].TrendCounts, err)
	}
	if d, err := s.TrendDurations(ctx, []string{"a", "b"}); err != nil || d["a"].Total() != 2 {
		t.Fatalf("TrendDurations on Cluster: %v, %v", d, err)
	}
}

// TestTrendQuantile pins the bucket-resolution percentiles.
func TestTrendQuantile(t *testing.T) {
	var h Histogram
	if q := h.Quantile(0.5); q.OK {
		t.Fatalf("empty: %+v", q)
	}
	h[TrendBucket(time.Millisecond)] = 50 // <= 1 ms
	h[TrendBucket(150*time.Millisecond)] = 45
	h[TrendBucket(2*time.Hour)] = 5 // above the last bound
	for _, c := range []struct {
		q     float64
		ms    int64
		above bool
	}{{0.5, 1, false}, {0.51, 200, false}, {0.95, 200, false}, {0.96, 5000000, true}, {1, 5000000, true}} {
		if got := h.Quantile(c.q); !got.OK || got.Ms != c.ms || got.Above != c.above {
			t.Errorf("q%.2f = %+v, want %d ms above=%t", c.q, got, c.ms, c.above)
		}
	}
	for _, c := range []struct {
		d time.Duration
		i int
	}{{0, 0}, {time.Millisecond, 0}, {1500 * time.Microsecond, 1}, {5 * time.Second, 11}, {5001 * time.Millisecond, 12}, {24 * time.Hour, len(TrendBounds)}} {
		if got := TrendBucket(c.d); got != c.i {
			t.Errorf("TrendBucket(%v) = %d, want %d", c.d, got, c.i)
		}
	}
}

// FuzzParseTrendFields: whatever a trend hash holds, parsing errors or
// returns counts that write back to the same fields (never a panic).
func FuzzParseTrendFields(f *testing.F) {
	f.Add("s", "3", "d4", "1")
	f.Add("d22", "1", "i0", "-1")
	f.Add("i07", "2", "x", "99999999999999999999")
	f.Add("zz", "x", "d", "1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m := map[string]string{k1: v1, k2: v2}
		c, err := ParseTrendFields(m)
		if err != nil {
			if !errors.Is(err, ErrBadTrend) {
				t.Fatalf("error %v is not ErrBadTrend", err)
			}
			return
		}
		back := map[string]string{}
		fs := c.fields()
		for i := 0; i < len(fs); i += 2 {
			back[fs[i].(string)] = strconv.FormatInt(fs[i+1].(int64), 10)
		}
		again, err := ParseTrendFields(back)
		if err != nil || again != c {
			t.Fatalf("%v -> %+v -> %v -> %+v, %v", m, c, back, again, err)
		}
	})
}

// FuzzParseTrendSpan: only "", hour and day are spans.
func FuzzParseTrendSpan(f *testing.F) {
	f.Add("hour")
	f.Add("day ")
	f.Fuzz(func(t *testing.T, v string) {
		sp, err := ParseTrendSpan(v)
		ok := v == "" || v == "hour" || v == "day"
		if (err == nil) != ok || (ok && sp.Points() != map[TrendSpan]int{TrendLastHour: 60, TrendLastDay: 24}[sp]) {
			t.Fatalf("ParseTrendSpan(%q) = %q, %v", v, sp, err)
		}
	})
}
