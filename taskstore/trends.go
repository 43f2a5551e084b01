package taskstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Trends, for the operator's console (docs/console.md, "Trends"): per
// tool and overall, per minute, the tasks started, completed, failed and
// cancelled, the reruns, the input waits, and two small fixed-bucket
// histograms (the tasks' durations, the waits' lengths). Each replica
// adds up what it saw in memory and writes it here every few seconds
// (gateway/internal/obs/trends.go), never on a task's own path; replicas'
// figures add up because every write is an increment.
//
// Every key shares the hash tag {trends}: one slot, so the one script
// that writes a flush touches a single node on a Redis Cluster too, and
// a page's reads are one pipeline to that node.
//
//	<prefix>:{trends}:tools               ZSET tool -> last flush ms (at most the cap; dropped after TrendHourKeep)
//	<prefix>:{trends}:m:<minute>:<series> HASH field -> count, a minute (unix minutes); kept TrendMinuteKeep
//	<prefix>:{trends}:h:<hour>:<series>   HASH the same, an hour (unix hours); kept TrendHourKeep
//	<prefix>:{trends}:w:<flush id>        STR  a flush already applied (its retry changes nothing); kept TrendFlushKeep
//
// <series> is "all" for every tool together, or "t:" and 16 hex digits
// of the tool name's SHA-256 (tool names are client input: a digest keeps
// them out of key names and bounds the key's length). The hash fields:
//
//	s c f x      started (created), completed, failed, cancelled
//	r            reruns begun
//	w            input waits ended (input_required → working, or the task's end)
//	d<i>, i<i>   the duration (creation → completed or failed) and input
//	             wait histograms: bucket i counts values <= TrendBounds[i]
//	             (ms), bucket len(TrendBounds) those above
//
// A field is written only when its count is not zero, so a quiet tool
// costs nothing and a busy minute at most 6 + 2×TrendBucketCount fields.

// TrendBounds are the histograms' bucket upper bounds in milliseconds,
// about log-spaced (1-2-5), from 1 ms to 5,000 s; one more bucket counts
// everything above. A percentile is the bound of the bucket it falls in:
// bucket resolution, never finer.
var TrendBounds = [...]int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000,
	50000, 100000, 200000, 500000, 1000000, 2000000, 5000000}

// TrendBucketCount is the number of histogram buckets: the bounds and
// the one above them.
const TrendBucketCount = len(TrendBounds) + 1

// Histogram counts values per TrendBounds bucket.
type Histogram [TrendBucketCount]int64

// TrendBucket is the bucket of d.
func TrendBucket(d time.Duration) int {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond) // ceiling: 1.5 ms is above the 1 ms bound
	i := sort.Search(len(TrendBounds), func(i int) bool { return TrendBounds[i] >= ms })
	return i
}

// Total is the number of values h counts.
func (h Histogram) Total() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile is a percentile read from a Histogram: at most Ms
// milliseconds, or, with Above, more than Ms (the last bucket, which has
// no upper bound). OK is false when the histogram is empty.
type Quantile struct {
	Ms    int64
	Above bool
	OK    bool
}

// Quantile is the q-quantile (0 < q <= 1) of h at bucket resolution: the
// upper bound of the bucket holding the value of rank ceil(q×n). Merging
// replicas' histograms is summing their buckets, so the fleet's quantile
// is as exact as one replica's.
func (h Histogram) Quantile(q float64) Quantile {
	n := h.Total()
	if n == 0 {
		return Quantile{}
	}
	rank := int64(q*float64(n) + 0.999999999) // ceil, without float trouble at exact ranks
	rank = min(max(rank, 1), n)
	var seen int64
	for i, c := range h {
		seen += c
		if seen >= rank {
			if i == len(TrendBounds) {
				return Quantile{Ms: TrendBounds[len(TrendBounds)-1], Above: true, OK: true}
			}
			return Quantile{Ms: TrendBounds[i], OK: true}
		}
	}
	return Quantile{} // not reached: seen ends at n >= rank
}

// TrendCounts are one series' figures over a minute, an hour or a
// window.
type TrendCounts struct {
	Started, Completed, Failed, Cancelled int64
	Reruns                                int64
	// Waits is the number of input waits ended (WaitHist counts their
	// lengths).
	Waits    int64
	Duration Histogram
	WaitHist Histogram
}

// Add adds o to c.
func (c *TrendCounts) Add(o *TrendCounts) {
	c.Started += o.Started
	c.Completed += o.Completed
	c.Failed += o.Failed
	c.Cancelled += o.Cancelled
	c.Reruns += o.Reruns
	c.Waits += o.Waits
	for i := range c.Duration {
		c.Duration[i] += o.Duration[i]
		c.WaitHist[i] += o.WaitHist[i]
	}
}

// IsZero is true when c counts nothing.
func (c *TrendCounts) IsZero() bool { return *c == TrendCounts{} }

// fields are c's non-zero hash fields and their counts, as ARGV pairs.
func (c *TrendCounts) fields() []any {
	var out []any
	add := func(f string, v int64) {
		if v != 0 {
			out = append(out, f, v)
		}
	}
	add("s", c.Started)
	add("c", c.Completed)
	add("f", c.Failed)
	add("x", c.Cancelled)
	add("r", c.Reruns)
	add("w", c.Waits)
	for i := range c.Duration {
		add("d"+strconv.Itoa(i), c.Duration[i])
		add("i"+strconv.Itoa(i), c.WaitHist[i])
	}
	return out
}

// ErrBadTrend is a trend hash field that is not what the store writes.
var ErrBadTrend = errors.New("taskstore: bad trend field")

// ParseTrendFields reads a trend hash (HGETALL). A field of another name
// is skipped (a later version's); a count that is not a non-negative
// integer, or a bucket out of range, is ErrBadTrend naming the field.
func ParseTrendFields(m map[string]string) (TrendCounts, error) {
	var c TrendCounts
	for f, v := range m {
		var p *int64
		switch f {
		case "s":
			p = &c.Started
		case "c":
			p = &c.Completed
		case "f":
			p = &c.Failed
		case "x":
			p = &c.Cancelled
		case "r":
			p = &c.Reruns
		case "w":
			p = &c.Waits
		default:
			if len(f) < 2 || (f[0] != 'd' && f[0] != 'i') {
				continue
			}
			i, err := strconv.Atoi(f[1:])
			if err != nil || i < 0 || i >= TrendBucketCount || strconv.Itoa(i) != f[1:] {
				return TrendCounts{}, fmt.Errorf("%w %q: no such bucket", ErrBadTrend, f)
			}
			if f[0] == 'd' {
				p = &c.Duration[i]
			} else {
				p = &c.WaitHist[i]
			}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return TrendCounts{}, fmt.Errorf("%w %q: %q is not a count", ErrBadTrend, f, v)
		}
		*p = n
	}
	return c, nil
}

// How long the trend keys last: a minute's key as long as the hour view
// can read it (plus a margin), an hour's as long as the day view can.
const (
	TrendMinuteKeep = 2 * time.Hour
	TrendHourKeep   = 25 * time.Hour
	// TrendFlushKeep is how long a flush's id is remembered: its writer
	// retries it for less (obs.TrendRetryFor), so a retry of a flush Redis
	// applied, whose reply was lost, adds nothing twice.
	TrendFlushKeep = 15 * time.Minute
)

// TrendOther is the series every tool past the cap is counted in.
const TrendOther = "(other)"

// MaxTrendToolName is the longest tool name kept as a series of its own;
// a longer one is counted in TrendOther.
const MaxTrendToolName = 128

func (k keys) trendsBase() string { return k.prefix + ":{trends}" }

func (k keys) trendTools() string { return k.trendsBase() + ":tools" }

// trendSeries is "all" for tool "", else the tool's digest.
func trendSeries(tool string) string {
	if tool == "" {
		return "all"
	}
	sum := sha256.Sum256([]byte(tool))
	return "t:" + hex.EncodeToString(sum[:8])
}

func (k keys) trendMinute(tool string, minute int64) string {
	return k.trendsBase() + ":m:" + strconv.FormatInt(minute, 10) + ":" + trendSeries(tool)
}

func (k keys) trendHour(tool string, hour int64) string {
	return k.trendsBase() + ":h:" + strconv.FormatInt(hour, 10) + ":" + trendSeries(tool)
}

func (k keys) trendFlush(id string) string { return k.trendsBase() + ":w:" + id }

// TrendDelta is what one replica adds to one series' minute (and so to
// its hour).
type TrendDelta struct {
	// Minute is the minute the events happened in, in unix minutes.
	Minute int64
	// Tool is the series: "" for every tool together.
	Tool   string
	Counts TrendCounts
}

// admitTrendTools keeps the tools ZSET bounded: it drops tools not seen
// within the keep, refreshes the ones named that it holds, and adds new
// ones while it holds fewer than the cap (TrendOther always, and not
// counted in the cap). It answers 1 or 0 per name.
//
//	KEYS[1] tools ZSET
//	ARGV[1] now ms, ARGV[2] cutoff ms (drop below), ARGV[3] cap, ARGV[4] keep ms,
//	ARGV[5] TrendOther, ARGV[6..] names
var admitTrendTools = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[5]) then n = n - 1 end
local cap = tonumber(ARGV[3])
local out = {}
for i = 6, #ARGV do
  local name = ARGV[i]
  if name == ARGV[5] or redis.call('ZSCORE', KEYS[1], name) then
    redis.call('ZADD', KEYS[1], ARGV[1], name)
    out[#out+1] = 1
  elseif n < cap then
    redis.call('ZADD', KEYS[1], ARGV[1], name)
    n = n + 1
    out[#out+1] = 1
  else
    out[#out+1] = 0
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return out
`)

// AdmitTrendTools says which of names have a series of their own: the
// ones the fleet already tracks and new ones while fewer than max are
// tracked (a flood of made-up tool names cannot grow Redis); the others
// are to be counted in TrendOther. One round trip.
func (s *Store) AdmitTrendTools(ctx context.Context, names []string, max int) (map[string]bool, error) {
	if len(names) == 0 {
		return map[string]bool{}, nil
	}
	now := s.nowMS()
	args := []any{now, now - TrendHourKeep.Milliseconds(), max, TrendHourKeep.Milliseconds(), TrendOther}
	for _, n := range names {
		args = append(args, n)
	}
	res, err := admitTrendTools.Run(ctx, s.rdb, []string{s.k.trendTools()}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("taskstore: admit trend tools: %w", classify(ctx, err))
	}
	if len(res) != len(names) {
		return nil, fmt.Errorf("taskstore: admit trend tools: %d answers for %d names", len(res), len(names))
	}
	out := make(map[string]bool, len(names))
	for i, n := range names {
		out[n] = res[i] == 1
	}
	return out, nil
}

// addTrends applies one flush once.
//
//	KEYS[1]     the flush's id key; KEYS[2..] trend hashes
//	ARGV[1]     the id key's keep ms; then per hash: its keep ms, its field
//	            count n, and n field/increment pairs
//
// It returns 1, or 0 when the flush was applied before (a retry).
var addTrends = redis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
local a = 2
for i = 2, #KEYS do
  local keep = ARGV[a]
  local n = tonumber(ARGV[a+1])
  a = a + 2
  for j = 1, n do
    redis.call('HINCRBY', KEYS[i], ARGV[a], ARGV[a+1])
    a = a + 2
  end
  redis.call('PEXPIRE', KEYS[i], keep)
end
return 1
`)

// maxTrendKeysPerScript bounds one script call; a larger flush is sent in
// parts, each with its own id.
const maxTrendKeysPerScript = 128

// AddTrends adds deltas to the minute and hour hashes of their series,
// once per id: a retry with the same id after a lost reply adds nothing
// twice. The tools named must have been admitted (AdmitTrendTools).
// Atomic per part of at most 64 deltas; one round trip per part.
func (s *Store) AddTrends(ctx context.Context, id string, deltas []TrendDelta) error {
	if id == "" || strings.ContainsAny(id, "\r\n ") {
		return fmt.Errorf("taskstore: add trends: bad flush id %q", id)
	}
	for part := 0; len(deltas) > 0; part++ {
		n := min(len(deltas), maxTrendKeysPerScript/2)
		keys := []string{s.k.trendFlush(id + "-" + strconv.Itoa(part))}
		args := []any{TrendFlushKeep.Milliseconds()}
		for _, d := range deltas[:n] {
			f := d.Counts.fields()
			for _, key := range []struct {
				name string
				keep time.Duration
			}{{s.k.trendMinute(d.Tool, d.Minute), TrendMinuteKeep}, {s.k.trendHour(d.Tool, d.Minute/60), TrendHourKeep}} {
				keys = append(keys, key.name)
				args = append(args, key.keep.Milliseconds(), len(f)/2)
				args = append(args, f...)
			}
		}
		if err := addTrends.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
			return fmt.Errorf("taskstore: add trends: %w", classify(ctx, err))
		}
		deltas = deltas[n:]
	}
	return nil
}

// TrendSpan is a trends window: the last hour by minute, or the last day
// by hour.
type TrendSpan string

const (
	TrendLastHour TrendSpan = "hour"
	TrendLastDay  TrendSpan = "day"
)

// ParseTrendSpan reads a span ("" is the hour).
func ParseTrendSpan(v string) (TrendSpan, error) {
	switch TrendSpan(v) {
	case "", TrendLastHour:
		return TrendLastHour, nil
	case TrendLastDay:
		return TrendLastDay, nil
	}
	return "", fmt.Errorf("taskstore: trend span %q: want hour or day", v)
}

// Step is the length of one of the span's points.
func (sp TrendSpan) Step() time.Duration {
	if sp == TrendLastDay {
		return time.Hour
	}
	return time.Minute
}

// Points is how many points the span has.
func (sp TrendSpan) Points() int {
	if sp == TrendLastDay {
		return 24
	}
	return 60
}

// TrendPoint is one minute or hour of a series.
type TrendPoint struct {
	Start time.Time
	TrendCounts
}

// Trend reads tool's series ("" for every tool) over span, oldest first,
// ending with the minute (hour) now is in, which is still filling: 60
// minute hashes or 24 hour hashes in one pipelined round trip.
func (s *Store) Trend(ctx context.Context, tool string, span TrendSpan) ([]TrendPoint, error) {
	now := s.opt.Clock()
	step := span.Step()
	last := now.Unix() / int64(step.Seconds())
	n := span.Points()
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, n)
	out := make([]TrendPoint, n)
	for i := range n {
		at := last - int64(n-1-i)
		out[i].Start = time.Unix(at*int64(step.Seconds()), 0).UTC()
		key := s.k.trendMinute(tool, at)
		if span == TrendLastDay {
			key = s.k.trendHour(tool, at)
		}
		cmds[i] = pipe.HGetAll(ctx, key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("taskstore: trend: %w", classify(ctx, err))
	}
	for i, c := range cmds {
		counts, err := ParseTrendFields(c.Val())
		if err != nil {
			return nil, err
		}
		out[i].TrendCounts = counts
	}
	return out, nil
}

// TrendTools are the tools with a series of their own, by name.
func (s *Store) TrendTools(ctx context.Context) ([]string, error) {
	cutoff := s.nowMS() - TrendHourKeep.Milliseconds()
	names, err := s.rdb.ZRangeByScore(ctx, s.k.trendTools(), &redis.ZRangeBy{Min: strconv.FormatInt(cutoff, 10), Max: "+inf", Count: 10000}).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: trend tools: %w", classify(ctx, err))
	}
	sort.Strings(names)
	return names, nil
}

// TrendDurations are the duration histograms of tools over the hour now
// is in and the one before it (one to two hours): two hour hashes a tool,
// one pipelined round trip. A tool without a series (past the cap, or
// quiet) has an empty histogram.
func (s *Store) TrendDurations(ctx context.Context, tools []string) (map[string]Histogram, error) {
	out := make(map[string]Histogram, len(tools))
	if len(tools) == 0 {
		return out, nil
	}
	hour := s.opt.Clock().Unix() / 3600
	pipe := s.rdb.Pipeline()
	cmds := make([][2]*redis.MapStringStringCmd, len(tools))
	for i, t := range tools {
		cmds[i] = [2]*redis.MapStringStringCmd{pipe.HGetAll(ctx, s.k.trendHour(t, hour-1)), pipe.HGetAll(ctx, s.k.trendHour(t, hour))}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("taskstore: trend durations: %w", classify(ctx, err))
	}
	for i, t := range tools {
		var sum TrendCounts
		for _, c := range cmds[i] {
			counts, err := ParseTrendFields(c.Val())
			if err != nil {
				return nil, err
			}
			sum.Add(&counts)
		}
		out[t] = sum.Duration
	}
	return out, nil
}
