package taskstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// keyspaceCacheFor is how long a Keyspace answer is reused: /readyz and
// every metrics scrape ask, and each asking costs one round trip to
// every master.
const keyspaceCacheFor = time.Second

// Keyspace is how much of the store this replica can use.
type Keyspace struct {
	// Slots is the number of hash slots (ClusterSlots); 0 when Redis is
	// not a Cluster, where the store answers as a whole (Ping).
	Slots int
	// Unreachable is how many of the Slots no master serves for this
	// replica: its master does not answer, or answers CLUSTERDOWN.
	Unreachable int
	// Shared: the cluster itself reports those slots down (their master
	// flagged failing or disconnected by the masters that answer, or a
	// master that answers reports cluster_state:fail), so every gateway
	// replica sees the same. False with Unreachable > 0: the masters this
	// replica reaches see the others up, so the fault is between this
	// replica and them.
	Shared bool
}

// Keyspace reports which part of the keyspace this replica can reach.
// On a Cluster it asks every master it knows for CLUSTER INFO and CLUSTER
// NODES (one pipeline each, in parallel); the answer is reused for
// keyspaceCacheFor. Elsewhere it is Ping. ErrUnavailable when no node
// answers.
func (s *Store) Keyspace(ctx context.Context) (Keyspace, error) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return Keyspace{}, s.Ping(ctx)
	}
	s.ksMu.Lock()
	defer s.ksMu.Unlock()
	if !s.ksAt.IsZero() && time.Since(s.ksAt) < keyspaceCacheFor {
		return s.ks, s.ksErr
	}
	s.ks, s.ksErr = clusterKeyspace(ctx, cc)
	s.ksAt = time.Now()
	return s.ks, s.ksErr
}

// masterView is one answering master's view of the cluster.
type masterView struct {
	id    string // its own node id
	ok    bool   // cluster_state:ok
	nodes []clusterNode
}

func clusterKeyspace(ctx context.Context, cc *redis.ClusterClient) (Keyspace, error) {
	var mu sync.Mutex
	var views []masterView
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		pipe := c.Pipeline()
		info := pipe.ClusterInfo(ctx)
		nodes := pipe.ClusterNodes(ctx)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil // unreachable: not among the views
		}
		parsed, err := parseClusterNodes(nodes.Val())
		if err != nil {
			return nil
		}
		v := masterView{ok: strings.Contains(info.Val(), "cluster_state:ok"), nodes: parsed}
		for _, n := range parsed {
			if n.has("myself") {
				v.id = n.id
			}
		}
		mu.Lock()
		views = append(views, v)
		mu.Unlock()
		return nil
	})
	if len(views) == 0 {
		return Keyspace{}, fmt.Errorf("taskstore: keyspace: %w: no Cluster master answers", ErrUnavailable)
	}
	sort.Slice(views, func(i, j int) bool { return views[i].id < views[j].id }) // one view, the same each time
	answered := map[string]masterView{}
	for _, v := range views {
		answered[v.id] = v
	}
	ks := Keyspace{Slots: ClusterSlots}
	covered := 0
	for _, n := range views[0].nodes {
		if !n.has("master") {
			continue
		}
		size := n.slots()
		covered += size
		if v, ok := answered[n.id]; ok && v.ok {
			continue
		}
		ks.Unreachable += size
		if size > 0 && seenDown(views, n.id) {
			ks.Shared = true
		}
	}
	if covered < ClusterSlots { // slots no master holds: the cluster's own gap
		ks.Unreachable += ClusterSlots - covered
		ks.Shared = true
	}
	return ks, nil
}

// seenDown reports whether the cluster itself says the master id is down:
// a master that answers flags it failing or has lost its link to it, or
// the master answers but reports the cluster down.
func seenDown(views []masterView, id string) bool {
	for _, v := range views {
		if v.id == id && !v.ok {
			return true
		}
		for _, n := range v.nodes {
			if n.id == id && (n.has("fail") || n.has("fail?") || n.link == "disconnected") {
				return true
			}
		}
	}
	return false
}

// clusterNode is one line of CLUSTER NODES: "<id> <ip:port@cport[,host]>
// <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state>
// <slot>…" (Redis Cluster specification, CLUSTER NODES).
type clusterNode struct {
	id     string
	flags  []string
	link   string   // connected | disconnected
	ranges [][2]int // served slots, inclusive
}

func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

func (n clusterNode) slots() int {
	total := 0
	for _, r := range n.ranges {
		total += r[1] - r[0] + 1
	}
	return total
}

// parseClusterNodes parses a CLUSTER NODES reply. Slots being imported or
// migrated ("[…]") are not served by the line's node yet or any more, and
// are skipped.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("taskstore: CLUSTER NODES line of %d fields, want 8 or more", len(f))
		}
		n := clusterNode{id: f[0], flags: strings.Split(f[2], ","), link: f[7]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			b := a
			if err == nil && isRange {
				b, err = strconv.Atoi(hi)
			}
			if err != nil || a < 0 || b < a || b >= ClusterSlots {
				return nil, fmt.Errorf("taskstore: CLUSTER NODES slot range %q", r)
			}
			n.ranges = append(n.ranges, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}
