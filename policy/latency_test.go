package policy

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {ms - 1, 0}, {ms, 1}, {2*ms - 1, 4}, {2 * ms, 5}, {time.Hour, NumBuckets - 2},
		{ms << 22, NumBuckets - 1}, {math.MaxInt64, NumBuckets - 1}, {-time.Second, 0},
	}
	for _, tt := range tests {
		if got := bucketOf(tt.d); got != tt.want {
			t.Errorf("bucketOf(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
	for i := 1; i < NumBuckets-1; i++ {
		if lo, hi := lowerBound(i), upperBound(i); bucketOf(lo) != i || bucketOf(hi-1) != i || hi <= lo {
			t.Errorf("bucket %d: [%v, %v) inconsistent", i, lo, hi)
		}
	}
}

// TestQuantileAccuracy: within 10% of the exact quantile on skewed data.
func TestQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var all []time.Duration
	for range 20000 {
		d := time.Duration(math.Exp(rng.NormFloat64()*1.2) * float64(300*ms)) // log-normal around 300ms
		h.Observe(d)
		all = append(all, d)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		exact := all[int(q*float64(len(all)))]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.10 {
			t.Errorf("q%.2f = %v, exact %v (off by %.1f%%)", q, got, exact, 100*rel)
		}
	}
	if st := h.Stats(); st.Count != 20000 || st.P50 != h.Quantile(0.5) || st.P95 != h.Quantile(0.95) {
		t.Errorf("Stats = %+v", st)
	}
}

func TestQuantileEdges(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Stats() != (Stats{}) {
		t.Error("empty histogram")
	}
	h.Observe(5 * time.Second)
	if p := h.Quantile(0.95); p < 4*time.Second || p > 6*time.Second {
		t.Errorf("one 5s call: p95 %v", p)
	}
	h = Histogram{}
	h.Observe(3 * time.Hour)
	if p := h.Quantile(0.5); p != lowerBound(NumBuckets-1) {
		t.Errorf("overflow bucket: %v", p)
	}
	if h.Quantile(-1) != h.Quantile(0) || h.Quantile(2) != h.Quantile(1) {
		t.Error("q outside [0,1] not clamped")
	}
}

func TestMergeAndHalve(t *testing.T) {
	var a, b, all Histogram
	for i := range 1000 {
		d := time.Duration(i) * ms
		all.Observe(d)
		if i%3 == 0 {
			a.Observe(d)
		} else {
			b.Observe(d)
		}
	}
	a.Merge(&b)
	if a != all {
		t.Error("merging the halves differs from observing everything")
	}
	a.Halve()
	if a.Count() > all.Count()/2 || a.Count() < all.Count()/2-NumBuckets {
		t.Errorf("halved count %d of %d", a.Count(), all.Count())
	}
	one := Histogram{}
	one.Observe(ms)
	one.Halve()
	if one.Count() != 0 || one.Quantile(0.5) != 0 {
		t.Error("a single observation should fade out")
	}
}

func TestHistogramBinary(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{0, ms, 3 * time.Second, 3 * time.Second, 5 * time.Hour} {
		h.Observe(d)
	}
	b, _ := h.MarshalBinary()
	var back Histogram
	if err := back.UnmarshalBinary(b); err != nil || back != h {
		t.Fatalf("round trip: %v", err)
	}
	empty, _ := (&Histogram{}).MarshalBinary()
	if err := back.UnmarshalBinary(empty); err != nil || back.Count() != 0 {
		t.Errorf("empty round trip: %v", err)
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0}, {1, 5, 1, 4, 1}, {1, NumBuckets, 1}, {1, 3, 0}, {1, 0x80}} {
		h2 := h
		if err := h2.UnmarshalBinary(bad); err == nil || h2 != h {
			t.Errorf("UnmarshalBinary(%v) accepted or changed the histogram", bad)
		}
	}
}

func FuzzHistogramUnmarshal(f *testing.F) {
	var h Histogram
	h.Observe(time.Second)
	b, _ := h.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Histogram
		if h.UnmarshalBinary(data) != nil {
			return
		}
		again, _ := h.MarshalBinary()
		var h2 Histogram
		if err := h2.UnmarshalBinary(again); err != nil || h2 != h {
			t.Fatal("re-encoding differs")
		}
		h.Stats()
	})
}

func TestLatencies(t *testing.T) {
	l := NewLatencies(2)
	if l.Stats("a") != (Stats{}) {
		t.Error("unseen tool has stats")
	}
	for range 10 {
		l.Observe("a", 3*time.Second)
	}
	l.Observe("b", ms)
	l.Observe("c", ms) // over maxTools: not tracked
	if st := l.Stats("a"); st.Count != 10 || st.P95 < 2*time.Second {
		t.Errorf("a: %+v", st)
	}
	if l.Stats("c") != (Stats{}) {
		t.Error("tracked more tools than maxTools")
	}

	// What the other replicas know adds to ours; replacing it replaces it.
	var other Histogram
	for range 30 {
		other.Observe(10 * ms)
	}
	l.SetRemote(map[string]Histogram{"a": other})
	if st := l.Stats("a"); st.Count != 40 || st.P50 > 20*ms {
		t.Errorf("a after merge: %+v", st)
	}
	local := l.Local()
	if a, b := local["a"], local["b"]; a.Count() != 10 || b.Count() != 1 {
		t.Errorf("Local holds others' data: %d %d", a.Count(), b.Count())
	}
	l.SetRemote(nil)
	if st := l.Stats("a"); st.Count != 10 {
		t.Errorf("a after the others forgot: %+v", st)
	}

	// A new replica starts warm from what the fleet published.
	fresh := NewLatencies(0)
	fresh.SetRemote(l.Local())
	if fresh.Stats("a") != l.Stats("a") {
		t.Error("a new replica does not start warm")
	}
}

func TestLatenciesDecay(t *testing.T) {
	l := NewLatencies(0)
	for range DecayAfter - 1 {
		l.Observe("t", 10*time.Second)
	}
	for range DecayAfter {
		l.Observe("t", 10*ms) // the tool got fast
	}
	if st := l.Stats("t"); st.Count >= DecayAfter || st.P50 > 20*ms {
		t.Errorf("old observations not decayed: %+v", st)
	}
}

func TestLatenciesConcurrent(t *testing.T) {
	l := NewLatencies(0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				tool := []string{"a", "b", "c"}[(g+i)%3]
				l.Observe(tool, time.Duration(i)*ms)
				l.Stats(tool)
				if i%500 == 0 {
					l.SetRemote(l.Local())
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkLatenciesObserve(b *testing.B) {
	l := NewLatencies(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Observe("tool", time.Duration(i%5000)*ms)
	}
}
