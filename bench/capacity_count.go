package main

// Counting what one batch of operations sends to Redis: every node's slow
// log at 0 µs (redis_count.go), taskgate's own round-trip count, and apart
// the commands on keys outside any owner's hash tag, above all the global
// leases index.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// capCount is what one counted batch sent to Redis, on all nodes.
type capCount struct {
	n       int        // operations
	t       redisTally // slow log, every node
	perNode []int      // top-level commands per node
	subNode []int      // of which SUBSCRIBE and UNSUBSCRIBE
	global  int        // top-level commands on keys outside any owner's hash tag
	rtt     float64    // round trips taskgate counted
	tg      time.Duration
	el      time.Duration
	limit   int // the LIMIT count of the lease sweep's ZRANGEBYSCORE, if one ran
	// Top-level commands on the leases index ("ZADD XX" apart), their
	// execution time in the slow log (µs), and the entries ZADD XX named.
	leases   map[string]int
	leasesUS map[string]int64
	rescored int
}

// counted runs fn (which returns how many operations it made) with every
// node's slow log on.
func (e *capEnv) counted(ctx context.Context, fn func() (int, error)) (capCount, error) {
	var c capCount
	for _, rc := range e.rcs {
		if err := rc.begin(ctx); err != nil {
			return c, err
		}
	}
	r0, err := e.metricSum(ctx, mRoundTrips)
	if err != nil {
		return c, err
	}
	cpu0, t0 := e.tgCPU(), time.Now()
	n, err := fn()
	c.el, c.tg, c.n = time.Since(t0), e.tgCPU()-cpu0, n
	r1, err2 := e.metricSum(ctx, mRoundTrips)
	c.rtt = r1 - r0
	for _, rc := range e.rcs {
		logs, err3 := rc.endRaw(ctx)
		err2 = errors.Join(err2, err3, rc.rdb.Do(ctx, "SLOWLOG", "RESET").Err())
		t := tally(logs)
		c.t.add(t)
		c.perNode = append(c.perNode, t.topTotal())
		c.subNode = append(c.subNode, t.top["SUBSCRIBE"]+t.top["UNSUBSCRIBE"])
		c.unsharded(logs)
	}
	return c, errors.Join(err, err2)
}

// unsharded counts into c the top-level commands whose first key carries
// no hash tag (so it sits in one fixed Cluster slot whatever the owner),
// and apart those on the leases index, with the largest LIMIT count of a
// ZRANGEBYSCORE and the entries of each ZADD XX.
func (c *capCount) unsharded(logs []redis.SlowLog) {
	if c.leases == nil {
		c.leases, c.leasesUS = map[string]int{}, map[string]int64{}
	}
	for _, l := range logs {
		cmd, key, ok := firstKey(l)
		if !ok || strings.Contains(key, "{") {
			continue
		}
		c.global++
		if isLeasesKey(key) {
			c.onLeases(cmd, l)
		}
	}
}

// firstKey is a top-level command taskgate sent and the first key it
// names (a script's first KEYS entry); not ok for the bench's own
// commands, those without a key, and pub/sub and connection commands.
func firstKey(l redis.SlowLog) (cmd, key string, ok bool) {
	if len(l.Args) < 2 || l.ClientName == benchClientName || strings.HasPrefix(l.ClientAddr, "?") || l.ClientAddr == "" {
		return "", "", false
	}
	cmd = strings.ToUpper(l.Args[0])
	key = l.Args[1]
	if isScript(cmd) {
		if len(l.Args) < 4 || l.Args[2] == "0" {
			return "", "", false
		}
		key = l.Args[3]
	}
	switch cmd {
	case "SUBSCRIBE", "UNSUBSCRIBE", "PUBLISH", "PING", "CLIENT", "HELLO", "INFO":
		return "", "", false
	}
	return cmd, key, true
}

// onLeases counts command l on the leases index: by name (ZADD XX apart),
// its execution time, the entries a ZADD XX re-scored and the LIMIT count
// of a ZRANGEBYSCORE.
func (c *capCount) onLeases(cmd string, l redis.SlowLog) {
	name := cmd
	switch {
	case cmd == "ZADD" && len(l.Args) > 2 && strings.EqualFold(l.Args[2], "XX"):
		name = "ZADD XX"
		// The slow log keeps 32 arguments, the last one then saying
		// how many more there were.
		argc, more := len(l.Args), 0
		if _, err := fmt.Sscanf(l.Args[argc-1], "... (%d more arguments)", &more); err == nil {
			argc += more - 1
		}
		if l.CommandArgc > 0 { // Redis 8.10 and later say it
			argc = int(l.CommandArgc)
		}
		c.rescored += (argc - 3) / 2
	case cmd == "ZRANGEBYSCORE":
		for i := 2; i+2 < len(l.Args); i++ {
			if strings.EqualFold(l.Args[i], "LIMIT") {
				if v, err := strconv.Atoi(l.Args[i+2]); err == nil {
					c.limit = max(c.limit, v)
				}
			}
		}
	}
	c.leases[name]++
	c.leasesUS[name] += l.Duration.Microseconds()
}

// leasesTotal is the commands on the leases index and their execution time.
func (c capCount) leasesTotal() (n int, us int64) {
	for _, v := range c.leasesUS {
		us += v
	}
	return sumMap(c.leases), us
}

// isLeasesKey: the global leases index (taskstore's <prefix>:leases).
func isLeasesKey(k string) bool { return !strings.Contains(k, "{") && strings.HasSuffix(k, ":leases") }
