package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCounter counts the Redis commands taskgate sends while a batch of
// requests runs, without MONITOR: the slow log with a 0 µs threshold
// records every command with the client that sent it. Commands a Lua
// script runs are recorded too, with client "?:0", just before the
// EVALSHA that ran them (Redis is single-threaded, and an entry is
// written when its command ends), so each script call is seen with its
// body. The slow log is on only during a counted batch, never while
// latency or throughput is measured.
type redisCounter struct {
	rdb *redis.Client
}

// benchClientName marks this program's own Redis connection, whose
// commands (CONFIG, SLOWLOG) are not counted.
const benchClientName = "taskgate-bench"

// slowlogCap bounds the entries one batch may record.
const slowlogCap = 1 << 18

func newRedisCounter(addr string) *redisCounter {
	return &redisCounter{rdb: redis.NewClient(&redis.Options{
		Addr: addr, ClientName: benchClientName, PoolSize: 1, Protocol: 2, DisableIdentity: true,
	})}
}

func (rc *redisCounter) close() { _ = rc.rdb.Close() }

// begin starts recording every command.
func (rc *redisCounter) begin(ctx context.Context) error {
	for _, kv := range [][2]string{{"slowlog-max-len", fmt.Sprint(slowlogCap)}, {"slowlog-log-slower-than", "0"}} {
		if err := rc.rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return fmt.Errorf("redis CONFIG SET %s: %w", kv[0], err)
		}
	}
	if err := rc.rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		return fmt.Errorf("redis SLOWLOG RESET: %w", err)
	}
	return nil
}

// end stops recording (back to Redis's default 10 ms threshold) and
// returns what taskgate sent since begin.
func (rc *redisCounter) end(ctx context.Context) (redisTally, error) {
	logs, err := rc.endRaw(ctx)
	if err != nil {
		return redisTally{}, err
	}
	return tally(logs), nil
}

// endRaw is end without the tally: the entries, oldest first.
func (rc *redisCounter) endRaw(ctx context.Context) ([]redis.SlowLog, error) {
	if err := rc.rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err(); err != nil {
		return nil, fmt.Errorf("redis CONFIG SET slowlog-log-slower-than: %w", err)
	}
	logs, err := rc.rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redis SLOWLOG GET: %w", err)
	}
	slices.SortFunc(logs, func(a, b redis.SlowLog) int { return int(a.ID - b.ID) })
	return logs, nil
}

// tallySplit tallies logs in two parts: up to and including the first
// top-level command with an argument containing marker, and the rest.
func tallySplit(logs []redis.SlowLog, marker string) (head, tail redisTally) {
	cut := len(logs)
	for i, l := range logs {
		if l.ClientName == benchClientName || strings.HasPrefix(l.ClientAddr, "?") || l.ClientAddr == "" {
			continue
		}
		if slices.ContainsFunc(l.Args, func(a string) bool { return strings.Contains(a, marker) }) {
			cut = i + 1
			break
		}
	}
	return tally(logs[:cut]), tally(logs[cut:])
}

// add adds o's counts to t.
func (t *redisTally) add(o redisTally) {
	if t.top == nil {
		t.top, t.inScript = map[string]int{}, map[string]int{}
	}
	for k, v := range o.top {
		t.top[k] += v
	}
	for k, v := range o.inScript {
		t.inScript[k] += v
	}
	t.writes += o.writes
	t.truncated = t.truncated || o.truncated
}

// redisTally is what one batch sent to Redis.
type redisTally struct {
	top       map[string]int // top-level commands (round trips) by label
	writes    int            // top-level commands that write (a script counts if its body writes)
	inScript  map[string]int // commands run inside scripts, by name
	truncated bool           // the slow log filled up
}

func (t redisTally) topTotal() int {
	n := 0
	for _, v := range t.top {
		n += v
	}
	return n
}

// readOnly are the commands that change no data. Everything else (PUBLISH
// included) counts as a write.
var readOnly = map[string]bool{
	"GET": true, "MGET": true, "EXISTS": true, "TTL": true, "PTTL": true, "TYPE": true, "STRLEN": true,
	"HGET": true, "HMGET": true, "HGETALL": true, "HEXISTS": true, "HLEN": true, "HKEYS": true, "HVALS": true, "HSCAN": true,
	"ZRANGE": true, "ZRANGEBYSCORE": true, "ZREVRANGE": true, "ZREVRANGEBYSCORE": true, "ZSCORE": true, "ZCARD": true, "ZCOUNT": true, "ZSCAN": true,
	"SMEMBERS": true, "SISMEMBER": true, "SCARD": true, "SSCAN": true, "LRANGE": true, "LLEN": true, "SCAN": true,
	"PING": true, "INFO": true, "TIME": true, "EVALSHA_RO": true, "EVAL_RO": true, "FCALL_RO": true,
	// The pub/sub connection's bookkeeping changes no data.
	"SUBSCRIBE": true, "UNSUBSCRIBE": true, "PSUBSCRIBE": true, "PUNSUBSCRIBE": true, "SSUBSCRIBE": true, "SUNSUBSCRIBE": true,
	"HELLO": true, "CLIENT": true, "SELECT": true,
}

func isScript(cmd string) bool {
	switch cmd {
	case "EVAL", "EVALSHA", "FCALL", "EVAL_RO", "EVALSHA_RO", "FCALL_RO":
		return true
	}
	return false
}

// tally sorts slow log entries into top-level and in-script commands. A
// script is labelled with its body, e.g. "EVALSHA[HMGET HDEL]", so the
// scripts of one batch tell themselves apart without their source.
func tally(logs []redis.SlowLog) redisTally {
	logs = slices.Clone(logs)
	slices.SortFunc(logs, func(a, b redis.SlowLog) int { return int(a.ID - b.ID) })
	t := redisTally{top: map[string]int{}, inScript: map[string]int{}, truncated: len(logs) >= slowlogCap}
	var body []string // in-script commands since the last top-level one
	for _, l := range logs {
		if len(l.Args) == 0 || l.ClientName == benchClientName {
			body = body[:0]
			continue
		}
		cmd := strings.ToUpper(l.Args[0])
		if strings.HasPrefix(l.ClientAddr, "?") || l.ClientAddr == "" { // run by a script
			t.inScript[cmd]++
			body = append(body, cmd)
			continue
		}
		label, write := cmd, !readOnly[cmd]
		if isScript(cmd) {
			label = cmd + "[" + strings.Join(body, " ") + "]"
			write = false
			for _, b := range body {
				write = write || !readOnly[b]
			}
		}
		t.top[label]++
		if write {
			t.writes++
		}
		body = body[:0]
	}
	return t
}

// perCall renders counts divided by calls, largest first: "HGETALL 1.00, …".
func perCall(m map[string]int, calls int) string {
	if len(m) == 0 {
		return "none"
	}
	type kv struct {
		k string
		v int
	}
	var s []kv
	for k, v := range m {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].v != s[j].v {
			return s[i].v > s[j].v
		}
		return s[i].k < s[j].k
	})
	var parts []string
	for _, e := range s {
		parts = append(parts, fmt.Sprintf("%s %s", e.k, ratio(e.v, calls)))
	}
	return strings.Join(parts, ", ")
}

func ratio(n, calls int) string {
	if calls <= 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%.3g", float64(n)/float64(calls))
}

// countedBatch is one row of the Redis commands table.
type countedBatch struct {
	name    string
	calls   int // 0: not per call (e.g. an idle window)
	elapsed time.Duration
	t       redisTally
	opens   int64 // TCP connects machine-wide during the batch; -1 unknown
}
