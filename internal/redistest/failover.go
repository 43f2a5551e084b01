package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ReplicatedCluster is a Redis Cluster whose masters each have one
// replica, built as an operator builds one (`redis-cli --cluster create …
// --cluster-replicas 1`), for failover tests: kill a master by its PID
// (Kill) and wait for the cluster to promote its replica (WaitPromoted).
type ReplicatedCluster struct {
	// Servers are every node, masters and replicas, in start order.
	Servers []*Server
	// NodeTimeout is the cluster-node-timeout the nodes run with: a dead
	// master is flagged failed after about this long, and its replica
	// promoted about a second later.
	NodeTimeout time.Duration
	t           testing.TB
}

// StartReplicatedCluster starts masters×2 cluster-enabled redis-servers
// on free loopback ports with the given cluster-node-timeout, joins them
// with one replica per master, and waits until every node reports
// cluster_state:ok and every replica is in sync with its master. It fails
// the test when redis-cli is not in PATH.
func StartReplicatedCluster(t testing.TB, masters int, nodeTimeout time.Duration) *ReplicatedCluster {
	t.Helper()
	c := &ReplicatedCluster{NodeTimeout: nodeTimeout, t: t}
	c.Servers = startClusterServers(t, 2*masters, int(nodeTimeout/time.Millisecond))
	addrs := c.Addrs()
	runClusterCreate(t, addrs, 1)
	waitClusterOK(t, addrs)
	deadline := time.Now().Add(15 * time.Second)
	for {
		nodes, err := c.Nodes()
		synced := err == nil
		for _, n := range nodes {
			if n.Master() {
				continue
			}
			info, err := do(n.Addr, "INFO", "replication")
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				synced = false
			}
		}
		if synced && len(nodes) == 2*masters {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the replicas did not sync in 15 s: %v %+v", err, nodes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs are every node's host:port (seeds for a cluster URL).
func (c *ReplicatedCluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr string
	Flags    []string
	MasterID string // of a replica; "-" for a master
	Slots    [][2]int
}

// Master reports whether the node is a master that is not flagged failed.
func (n ClusterNode) Master() bool {
	return n.has("master") && !n.has("fail") && !n.has("fail?")
}

// Serves reports whether the node is a live master serving slot.
func (n ClusterNode) Serves(slot int) bool {
	if !n.Master() {
		return false
	}
	for _, r := range n.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func (n ClusterNode) has(flag string) bool {
	for _, f := range n.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Nodes asks the first node that answers for CLUSTER NODES.
func (c *ReplicatedCluster) Nodes() ([]ClusterNode, error) {
	var lastErr error
	for _, s := range c.Servers {
		if nodes, err := NodesOf(s.Addr); err == nil {
			return nodes, nil
		} else {
			lastErr = err
		}
	}
	return nil, lastErr
}

// NodesOf is addr's view of the cluster: its CLUSTER NODES, parsed.
func NodesOf(addr string) ([]ClusterNode, error) {
	text, err := do(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var nodes []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("redistest: CLUSTER NODES line %q", line)
		}
		hostport, _, _ := strings.Cut(f[1], "@")
		n := ClusterNode{ID: f[0], Addr: hostport, Flags: strings.Split(f[2], ","), MasterID: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated
				continue
			}
			lo, hi, found := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if found {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("redistest: CLUSTER NODES slots %q", r)
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// KeySlot is the cluster slot of key (CLUSTER KEYSLOT on a live node).
func (c *ReplicatedCluster) KeySlot(key string) (int, error) {
	var lastErr error
	for _, s := range c.Servers {
		v, err := do(s.Addr, "CLUSTER", "KEYSLOT", key)
		if err == nil {
			return strconv.Atoi(v)
		}
		lastErr = err
	}
	return 0, lastErr
}

// MasterOf is the address of the live master serving slot.
func (c *ReplicatedCluster) MasterOf(slot int) (string, error) {
	nodes, err := c.Nodes()
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if n.Serves(slot) {
			return n.Addr, nil
		}
	}
	return "", fmt.Errorf("redistest: no live master serves slot %d", slot)
}

// Kill SIGKILLs the node at addr (by its PID) and waits for it to exit.
func (c *ReplicatedCluster) Kill(addr string) {
	c.t.Helper()
	for _, s := range c.Servers {
		if s.Addr == addr {
			s.Stop()
			return
		}
	}
	c.t.Fatalf("redistest: no node at %s", addr)
}

// WaitPromoted polls (every 10 ms, for at most timeout) the replicas of
// the dead master until one of them reports itself the master of slot,
// and returns its address and the moment it was first seen so: the
// earliest moment any client could be served by it.
func (c *ReplicatedCluster) WaitPromoted(dead string, slot int, timeout time.Duration) (string, time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range c.Servers {
			if s.Addr == dead {
				continue
			}
			nodes, err := NodesOf(s.Addr)
			if err != nil {
				continue
			}
			for _, n := range nodes {
				if n.has("myself") && n.Serves(slot) {
					return n.Addr, time.Now(), nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", time.Time{}, fmt.Errorf("redistest: no replica of %s took slot %d over in %v", dead, slot, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitReplicated waits (10 s at most) until every replica has taken in
// every write its master had when WaitReplicated was called, so a test
// that kills a master loses nothing it wrote before.
func (c *ReplicatedCluster) WaitReplicated(t testing.TB) {
	t.Helper()
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range nodes {
		if !m.Master() {
			continue
		}
		want, err := replOffset(m.Addr, "master_repl_offset")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range nodes {
			if r.MasterID != m.ID {
				continue
			}
			for {
				got, err := replOffset(r.Addr, "slave_repl_offset")
				if err == nil && got >= want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("redistest: replica %s of %s at offset %d, want %d: %v", r.Addr, m.Addr, got, want, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// replOffset reads one offset field of addr's INFO replication.
func replOffset(addr, field string) (int64, error) {
	info, err := do(addr, "INFO", "replication")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redistest: no %s in %s's INFO replication", field, addr)
}
