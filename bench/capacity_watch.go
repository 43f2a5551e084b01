package main

// What the capacity phases wait on: taskgate's own metrics (scraped from
// every replica) and a task's status read straight from Redis on the
// bench's own, uncounted connection.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// scrape reads one replica's Prometheus metrics: "name{labels}" → value.
func (e *capEnv) scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}

// metricSum sums the metrics whose name starts with prefix, over every
// replica.
func (e *capEnv) metricSum(ctx context.Context, prefix string) (float64, error) {
	var s float64
	for _, u := range e.metrics {
		m, err := e.scrape(ctx, u)
		if err != nil {
			return 0, err
		}
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				s += v
			}
		}
	}
	return s, nil
}

const (
	mRoundTrips = "taskgate_store_command_duration_seconds_count"
	mLive       = "taskgate_tasks_live"
	mHeld       = "taskgate_held_calls"
)

// waitMetric waits (at most limit) until the sum of prefix over the
// replicas satisfies ok, then lets trailing commands land.
func (e *capEnv) waitMetric(ctx context.Context, prefix string, limit time.Duration, ok func(float64) bool) error {
	deadline := time.Now().Add(limit)
	for {
		v, err := e.metricSum(ctx, prefix)
		if err != nil {
			return err
		}
		if ok(v) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is still %g after %s", prefix, v, limit)
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return pause(ctx, capSettle)
}

// waitIdle waits until no task is live on any replica.
func (e *capEnv) waitIdle(ctx context.Context) error {
	return e.waitMetric(ctx, mLive, time.Minute, func(v float64) bool { return v == 0 })
}

// status reads a task's status straight from Redis on the bench's own
// (uncounted) connection of a single node: the hash key is found once per
// owner by SCAN (…:t:<id>), then built from that owner's prefix.
func (e *capEnv) status(ctx context.Context, auth, id string) (string, error) {
	rdb := e.rcs[0].rdb
	if p, ok := e.prefix.Load(auth); ok {
		st, err := rdb.HGet(ctx, p.(string)+":t:"+id, "status").Result()
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, redis.Nil) {
			return "", err
		}
	}
	keys, err := scanAll(ctx, rdb, "*:t:"+id)
	if err != nil || len(keys) == 0 {
		return "", err
	}
	e.prefix.Store(auth, strings.TrimSuffix(keys[0], ":t:"+id))
	return rdb.HGet(ctx, keys[0], "status").Result()
}

// waitStatus waits (at most 15 s) until task id has status want, reading
// Redis, not polling taskgate (a poll would be counted).
func (e *capEnv) waitStatus(ctx context.Context, auth, id, want string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := e.status(ctx, auth, id)
		if err != nil {
			return err
		}
		if st == want {
			return nil
		}
		if st != "" && st != "working" && st != "input_required" {
			return fmt.Errorf("task %s is %s, want %s", id, st, want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s still %q after 15s, want %s", id, st, want)
		}
		if err := pause(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// scanAll is every key matching match (SCAN).
func scanAll(ctx context.Context, rdb *redis.Client, match string) ([]string, error) {
	var out []string
	var cur uint64
	for {
		keys, next, err := rdb.Scan(ctx, cur, match, 1000).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
		if cur = next; cur == 0 {
			return out, nil
		}
	}
}
