package main

// The Redis Cluster of phase C: cluster-enabled redis-server nodes on
// free ports (their bus ports free too), joined by redis-cli --cluster
// create as an operator would, and how many slots each one serves.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedisNode starts redis-server like startRedis, with extra
// arguments, on a free port whose cluster bus port (+10000) is free too.
func startRedisNode(dir string, extra ...string) (*redisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startRedisOn(dir, busPortFree, extra...)
}

// busPortFree: a cluster node also listens on its port + 10000, the
// cluster bus.
func busPortFree(port int) bool {
	if port+10000 > 65535 {
		return false
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// startCluster starts n cluster-enabled nodes and joins them with
// redis-cli --cluster create (--cluster-replicas 0), as an operator would.
func startCluster(ctx context.Context, dir string, n int) ([]*redisServer, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found in PATH (apt-get install -y redis-server)")
	}
	var nodes []*redisServer
	fail := func(err error) ([]*redisServer, error) {
		for _, s := range nodes {
			s.stop()
		}
		return nil, err
	}
	var addrs []string
	for i := 0; i < n; i++ {
		s, err := startRedisNode(filepath.Join(dir, fmt.Sprintf("cluster-%d", i)),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.addr)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out))
	}
	if err := waitClusterOK(ctx, addrs); err != nil {
		return fail(err)
	}
	return nodes, nil
}

// waitClusterOK waits until every node says cluster_state:ok and knows
// every other node.
func waitClusterOK(ctx context.Context, addrs []string) error {
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ClientName: benchClientName, PoolSize: 1, Protocol: 2, DisableIdentity: true})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(addrs))) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return fmt.Errorf("cluster did not become ok: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nil
}

// slotsOf is how many hash slots each node serves (CLUSTER SLOTS).
func slotsOf(ctx context.Context, rdb *redis.Client, addrs []string) []int {
	out := make([]int, len(addrs))
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return out
	}
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		for i, a := range addrs {
			if s.Nodes[0].Addr == a {
				out[i] += s.End - s.Start + 1
			}
		}
	}
	return out
}
