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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedisNode starts redis-server like startRedis, with extra
// arguments, on a free port whose cluster bus port (+10000) is free too.
func startRedisNode(dir string, extra ...string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found in PATH (apt-get install -y redis-server)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		_, ps, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(ps)
		if port == 6379 || port+10000 > 65535 {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err != nil {
			continue
		} else {
			l.Close()
		}
		logPath := filepath.Join(dir, "redis.log")
		cmd := exec.Command(bin, append([]string{"--port", ps, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", dir, "--logfile", logPath}, extra...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &redisServer{addr: addr, cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(s.exited) }()
		if err := waitTCP(addr); err != nil {
			s.stop()
			lastErr = fmt.Errorf("%w: %s", err, tail(logPath))
			continue
		}
		return s, nil
	}
	return nil, lastErr
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
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ClientName: benchClientName, PoolSize: 1, Protocol: 2, DisableIdentity: true})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return fail(fmt.Errorf("cluster did not become ok: %v %s", err, info))
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nodes, nil
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
