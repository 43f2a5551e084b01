package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster starts a Redis Cluster of n masters (no replicas) on free
// loopback ports, assigns the 16384 slots evenly, and waits until every node
// reports cluster_state:ok. It returns the nodes' addresses.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	addrs := startClusterNodes(t, n)
	per := 16384 / n
	for i, a := range addrs {
		lo, hi := i*per, (i+1)*per-1
		if i == n-1 {
			hi = 16383
		}
		mustDo(t, a, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for _, a := range addrs[1:] {
		host, port, _ := net.SplitHostPort(a)
		mustDo(t, addrs[0], "CLUSTER", "MEET", host, port)
	}
	waitClusterOK(t, addrs)
	return addrs
}

// StartClusterCLI is StartCluster the way an operator builds one: n
// `redis-server --cluster-enabled yes` nodes joined by `redis-cli --cluster
// create … --cluster-replicas 0`, which assigns the slots. It fails the test
// when redis-cli is not in PATH; callers that want to skip check first.
func StartClusterCLI(t testing.TB, n int) []string {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redistest: redis-cli not found in PATH; install it with: apt-get install -y redis-server (or redis-tools)")
	}
	addrs := startClusterNodes(t, n)
	runClusterCreate(t, addrs, 0)
	waitClusterOK(t, addrs)
	return addrs
}

// startClusterNodes starts n empty cluster-enabled redis-servers.
func startClusterNodes(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i, s := range startClusterServers(t, n, 2000) {
		addrs[i] = s.Addr
	}
	return addrs
}

// startClusterServers starts n empty cluster-enabled redis-servers with
// the given cluster-node-timeout (ms).
func startClusterServers(t testing.TB, n, nodeTimeoutMS int) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = newServer(t, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(nodeTimeoutMS),
			// A replica whose elections keep failing on a starved machine
			// would otherwise count its data too old after node timeout ×
			// 10 + 10 s and never take over (a CI run saw no promotion in
			// 30 s): 0 lets it take over however long that takes.
			"--cluster-replica-validity-factor", "0",
		})
	}
	return servers
}

// runClusterCreate joins addrs with `redis-cli --cluster create`, giving
// each master the number of replicas asked for.
func runClusterCreate(t testing.TB, addrs []string, replicas int) {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redistest: redis-cli not found in PATH; install it with: apt-get install -y redis-server (or redis-tools)")
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// waitClusterOK waits (15 s at most) until every node reports
// cluster_state:ok and knows all the others.
func waitClusterOK(t testing.TB, addrs []string) {
	t.Helper()
	n := len(addrs)
	deadline := time.Now().Add(15 * time.Second)
	for _, a := range addrs {
		for {
			info, err := do(a, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster did not become ok: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func mustDo(t testing.TB, addr string, args ...string) {
	t.Helper()
	if _, err := do(addr, args...); err != nil {
		t.Fatalf("redistest: %s %v: %v", addr, args, err)
	}
}

// do sends one command in RESP and returns a simple, integer or bulk
// string reply.
func do(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"), strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("%s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}
