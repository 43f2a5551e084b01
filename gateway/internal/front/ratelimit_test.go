package front

import (
	"strconv"
	"testing"
	"time"
)

func TestPollLimiterBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewPollLimiter(2, 4) // 2/s, bursts of 4
	l.now = func() time.Time { return now }
	for i := 0; i < 4; i++ {
		if ok, _ := l.allow("o", "t"); !ok {
			t.Fatalf("poll %d of the burst refused", i+1)
		}
	}
	ok, wait := l.allow("o", "t")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("5th poll: ok=%v wait=%v, want refused, 500ms", ok, wait)
	}
	if ok, _ := l.allow("o", "other-task"); !ok {
		t.Error("another task of the same owner shares the bucket")
	}
	if ok, _ := l.allow("someone-else", "t"); !ok {
		t.Error("another owner shares the bucket")
	}
	now = now.Add(499 * time.Millisecond)
	if ok, _ := l.allow("o", "t"); ok {
		t.Error("allowed before a token refilled")
	}
	now = now.Add(time.Millisecond)
	if ok, _ := l.allow("o", "t"); !ok {
		t.Error("refused once a token refilled")
	}
	now = now.Add(time.Hour) // refills to the burst, not beyond
	for i := 0; i < 4; i++ {
		if ok, _ := l.allow("o", "t"); !ok {
			t.Fatalf("after an idle hour, poll %d refused", i+1)
		}
	}
	if ok, _ := l.allow("o", "t"); ok {
		t.Error("the bucket grew past its burst while idle")
	}
}

func TestPollLimiterMemoryBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewPollLimiter(1, 2)
	l.now = func() time.Time { return now }
	for i := 0; i < pollShards*maxBucketsPerShard*3; i++ {
		l.allow("o", strconv.Itoa(i))
	}
	for i := range l.shards {
		if n := len(l.shards[i].buckets); n > maxBucketsPerShard {
			t.Fatalf("shard %d holds %d buckets, bound %d", i, n, maxBucketsPerShard)
		}
	}
}
