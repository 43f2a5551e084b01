package policy

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"time"
)

// Histogram is a mergeable latency estimate: counts in fixed log-scale
// buckets, four per doubling from 1 ms to about 70 min (each bucket about
// 19% wide, so a quantile is off by at most about 9% after interpolation),
// plus one bucket below 1 ms and one above. Two histograms merge by adding
// counts, which is what lets replicas share what they learned without
// coordinating; old data decays by halving the counts. The zero value is
// empty and ready. Not safe for concurrent use; Latencies is.
type Histogram struct {
	counts [NumBuckets]uint64
	n      uint64
}

// NumBuckets is the number of buckets of a Histogram.
const NumBuckets = 1 + logBuckets + 1

const (
	perDoubling = 4
	logBuckets  = 22 * perDoubling // 1 ms · 2^22 ≈ 70 min
	bucketBase  = time.Millisecond
)

// bounds[i] is the lower bound of bucket i+1: bucket 0 is [0, bounds[0]),
// bucket i is [bounds[i-1], bounds[i]), the last is [bounds[logBuckets], ∞).
var bounds = func() (b [logBuckets + 1]time.Duration) {
	for i := range b {
		b[i] = time.Duration(float64(bucketBase) * math.Exp2(float64(i)/perDoubling))
	}
	return b
}()

func bucketOf(d time.Duration) int {
	return sort.Search(len(bounds), func(i int) bool { return bounds[i] > d })
}

// Observe records one call that took d.
func (h *Histogram) Observe(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
}

// Count is the number of observations held.
func (h *Histogram) Count() uint64 { return h.n }

// Merge adds other's counts to h.
func (h *Histogram) Merge(other *Histogram) {
	for i, c := range other.counts {
		h.counts[i] += c
	}
	h.n += other.n
}

// Halve halves every count, rounding down: old observations weigh half as
// much as new ones, and buckets seen once fade out.
func (h *Histogram) Halve() {
	h.n = 0
	for i := range h.counts {
		h.counts[i] /= 2
		h.n += h.counts[i]
	}
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1), interpolating linearly
// within the bucket it falls in. An empty histogram gives 0; a quantile in
// the top bucket gives that bucket's lower bound.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := q * float64(h.n)
	var cum uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		if float64(cum+c) >= rank {
			lo, hi := lowerBound(i), upperBound(i)
			if hi < 0 {
				return lo
			}
			frac := (rank - float64(cum)) / float64(c)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		cum += c
	}
	return lowerBound(NumBuckets - 1) // not reached: cum == n ≥ rank
}

func lowerBound(i int) time.Duration {
	if i == 0 {
		return 0
	}
	return bounds[i-1]
}

// upperBound is -1 for the unbounded top bucket.
func upperBound(i int) time.Duration {
	if i >= len(bounds) {
		return -1
	}
	return bounds[i]
}

// Stats summarises h for Decide.
func (h *Histogram) Stats() Stats {
	if h.n == 0 {
		return Stats{}
	}
	return Stats{Count: int(min(h.n, math.MaxInt32)), P50: h.Quantile(0.5), P95: h.Quantile(0.95)}
}

// histogramVersion is the first byte of a marshalled Histogram.
const histogramVersion = 1

// MarshalBinary encodes h compactly: a version byte, then a uvarint pair
// (bucket index, count) for each non-empty bucket in increasing order.
func (h *Histogram) MarshalBinary() ([]byte, error) {
	out := make([]byte, 1, 1+4*8)
	out[0] = histogramVersion
	for i, c := range h.counts {
		if c > 0 {
			out = binary.AppendUvarint(out, uint64(i))
			out = binary.AppendUvarint(out, c)
		}
	}
	return out, nil
}

var errHistogram = errors.New("policy: malformed histogram")

// UnmarshalBinary replaces h with what MarshalBinary wrote. Malformed input
// (another version, buckets out of range or order, empty buckets, a total
// that overflows, trailing bytes) is an error and leaves h unchanged.
func (h *Histogram) UnmarshalBinary(data []byte) error {
	if len(data) == 0 || data[0] != histogramVersion {
		return errHistogram
	}
	var out Histogram
	next := 0
	for p := 1; p < len(data); {
		i, n1 := binary.Uvarint(data[p:])
		if n1 <= 0 {
			return errHistogram
		}
		c, n2 := binary.Uvarint(data[p+n1:])
		if n2 <= 0 || i < uint64(next) || i >= NumBuckets || c == 0 || out.n+c < out.n {
			return errHistogram
		}
		out.counts[i], out.n = c, out.n+c
		next, p = int(i)+1, p+n1+n2
	}
	*h = out
	return nil
}
