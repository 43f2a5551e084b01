package main

// Redis memory per task: INFO used_memory before and after a batch (less
// client buffers), and the key census, MEMORY USAGE of every key grouped
// by its shape, that shows where the bytes are.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// memReading is one node's INFO memory: used_memory, and the part of it
// that is client buffers (mem_clients_normal: grows with connections and
// their buffers, not with tasks).
type memReading struct{ used, clients int64 }

// memSettle is how long the connections idle before a memory reading:
// Redis shrinks an idle client's query buffer after 2 s.
const memSettle = 2500 * time.Millisecond

// usedMemory reads INFO memory of each node, once the connections have
// idled for memSettle.
func (e *capEnv) usedMemory(ctx context.Context) ([]memReading, error) {
	if err := pause(ctx, memSettle); err != nil {
		return nil, err
	}
	var out []memReading
	for _, rc := range e.rcs {
		// The slow log holds memory of its own: empty it first.
		if err := rc.rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
			return nil, err
		}
		info, err := rc.rdb.Info(ctx, "memory").Result()
		if err != nil {
			return nil, err
		}
		var m memReading
		var n int
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				m.used, err = strconv.ParseInt(v, 10, 64)
				n++
			}
			if v, ok := strings.CutPrefix(l, "mem_clients_normal:"); ok {
				m.clients, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if n != 1 || err != nil {
			return nil, fmt.Errorf("INFO memory of %s: no used_memory (%v)", rc.rdb.Options().Addr, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// capMem is one memory batch: n tasks, used_memory before and after on
// every node, and the census difference, merged and per node.
type capMem struct {
	n      int
	before []memReading
	after  []memReading
	delta  census // by class
	nodes  []census
}

// perTask is the used_memory delta per task, all nodes together, without
// client buffers (clientsPerTask), which follow the connections and what
// they last sent, not the tasks.
func (m capMem) perTask() float64 {
	var d int64
	for i := range m.after {
		d += (m.after[i].used - m.after[i].clients) - (m.before[i].used - m.before[i].clients)
	}
	return float64(d) / float64(max(m.n, 1))
}

// clientsPerTask is the part of perTask that is client buffers.
func (m capMem) clientsPerTask() float64 {
	var d int64
	for i := range m.after {
		d += m.after[i].clients - m.before[i].clients
	}
	return float64(d) / float64(max(m.n, 1))
}

var (
	uuidRe  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	tagRe   = regexp.MustCompile(`\{[0-9a-f]{16,}\}`)
	digitRe = regexp.MustCompile(`[0-9a-f]{24,}`)
)

// keyClass names a key with its ids and owner digests taken out:
// "tg:{<o>}:t:<id>".
func keyClass(k string) string {
	k = uuidRe.ReplaceAllString(k, "<id>")
	k = tagRe.ReplaceAllString(k, "{<o>}")
	return digitRe.ReplaceAllString(k, "<h>")
}

// classStat is one key class of a census.
type classStat struct {
	keys    int
	members int64 // ZCARD, HLEN, SCARD, LLEN; 1 for a string
	bytes   int64 // MEMORY USAGE … SAMPLES 0
	pttl    int64 // the longest remaining time to live in the class, ms (-1: none)
}

// census is every key of a node (or merged: of several), by class.
type census map[string]*classStat

// takeCensus walks every key of every node: MEMORY USAGE, TYPE, PTTL and
// the member count, by class.
func (e *capEnv) takeCensus(ctx context.Context) ([]census, error) {
	var out []census
	for _, rc := range e.rcs {
		cs := census{}
		keys, err := scanAll(ctx, rc.rdb, "*")
		if err != nil {
			return nil, err
		}
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), 500)]
			keys = keys[len(chunk):]
			if err := cs.addKeys(ctx, rc.rdb, chunk); err != nil {
				return nil, err
			}
		}
		out = append(out, cs)
	}
	return out, nil
}

// addKeys reads keys in two pipelines (MEMORY USAGE, TYPE and PTTL; then
// the member count, which depends on the type) and counts them in.
func (cs census) addKeys(ctx context.Context, rdb *redis.Client, keys []string) error {
	pipe := rdb.Pipeline()
	mem := make([]*redis.IntCmd, len(keys))
	typ := make([]*redis.StatusCmd, len(keys))
	ttl := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		mem[i] = pipe.MemoryUsage(ctx, k, 0)
		typ[i] = pipe.Type(ctx, k)
		ttl[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	cnt, err := memberCounts(ctx, rdb, keys, typ)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if typ[i].Val() == "none" { // expired meanwhile
			continue
		}
		c := keyClass(k)
		s := cs[c]
		if s == nil {
			s = &classStat{pttl: -1}
			cs[c] = s
		}
		s.keys++
		s.bytes += mem[i].Val()
		if cnt[i] != nil {
			s.members += cnt[i].Val()
		} else {
			s.members++
		}
		if d := ttl[i].Val(); d > 0 {
			s.pttl = max(s.pttl, d.Milliseconds())
		}
	}
	return nil
}

// memberCounts is ZCARD, HLEN, SCARD or LLEN of each key by its type; nil
// for a string (one member).
func memberCounts(ctx context.Context, rdb *redis.Client, keys []string, typ []*redis.StatusCmd) ([]*redis.IntCmd, error) {
	pipe := rdb.Pipeline()
	cnt := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		switch typ[i].Val() {
		case "zset":
			cnt[i] = pipe.ZCard(ctx, k)
		case "hash":
			cnt[i] = pipe.HLen(ctx, k)
		case "set":
			cnt[i] = pipe.SCard(ctx, k)
		case "list":
			cnt[i] = pipe.LLen(ctx, k)
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	return cnt, nil
}

// merged is the census of every node together.
func merged(cs []census) census {
	out := census{}
	for _, c := range cs {
		for k, s := range c {
			m := out[k]
			if m == nil {
				m = &classStat{pttl: -1}
				out[k] = m
			}
			m.keys += s.keys
			m.members += s.members
			m.bytes += s.bytes
			m.pttl = max(m.pttl, s.pttl)
		}
	}
	return out
}

// minus is after − before, class by class (the remaining time to live is
// after's).
func (c census) minus(before census) census {
	out := census{}
	for k, s := range c {
		b := before[k]
		if b == nil {
			b = &classStat{}
		}
		d := &classStat{keys: s.keys - b.keys, members: s.members - b.members, bytes: s.bytes - b.bytes, pttl: s.pttl}
		if d.keys != 0 || d.members != 0 || d.bytes != 0 {
			out[k] = d
		}
	}
	return out
}

// total is MEMORY USAGE of every class.
func (c census) total() int64 {
	var s int64
	for _, v := range c {
		s += v.bytes
	}
	return s
}

// role finds the class of one of the store's keys by its shape.
func (c census) role(r string) (string, *classStat) {
	for k, s := range c {
		var ok bool
		switch r {
		case "task":
			ok = strings.HasSuffix(k, ":t:<id>")
		case "gone":
			ok = strings.HasSuffix(k, ":t:<id>:gone")
		case "created":
			ok = strings.HasSuffix(k, "}:created")
		case "active":
			ok = strings.HasSuffix(k, "}:active")
		case "leases":
			ok = isLeasesKey(k)
		}
		if ok {
			return k, s
		}
	}
	return "", &classStat{pttl: -1}
}

// memSnap is every node's used_memory and key census at one moment.
type memSnap struct {
	used []memReading
	keys []census
}

// snapshot reads used_memory (once the connections idled, usedMemory) and
// then takes the census.
func (e *capEnv) snapshot(ctx context.Context) (memSnap, error) {
	used, err := e.usedMemory(ctx)
	if err != nil {
		return memSnap{}, err
	}
	keys, err := e.takeCensus(ctx)
	return memSnap{used: used, keys: keys}, err
}

// memDelta is what n tasks made between two snapshots: the used_memory
// readings, and the census after minus before, per node and merged.
func memDelta(n int, before, after memSnap) capMem {
	m := capMem{n: n, before: before.used, after: after.used}
	for i := range after.keys {
		m.nodes = append(m.nodes, after.keys[i].minus(before.keys[i]))
	}
	m.delta = merged(m.nodes)
	return m
}
