package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a master, one replica of it and one Sentinel watching them,
// on free loopback ports: enough for a failover.
type Sentinel struct {
	// Addr is the Sentinel's host:port; Master the name it monitors.
	Addr, Master string
	// Primary is the master at start; Replica replicates it.
	Primary, Replica *Server
}

// StartSentinel starts a master, a replica and a Sentinel (redis-server
// --sentinel) monitoring them as "mymaster" with a quorum of 1 and a 1 s
// down-after, and waits until the Sentinel knows the replica. Everything
// is killed by its PID when the test ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	primary := New(t)
	_, pport, _ := net.SplitHostPort(primary.Addr)
	replica := NewWithArgs(t, "--replicaof", "127.0.0.1", pport)
	s := &Sentinel{Master: "mymaster", Primary: primary, Replica: replica}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redistest: redis-server not found in PATH")
	}
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(false)
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: must be writable
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor mymaster 127.0.0.1 %s 1\n"+
			"sentinel down-after-milliseconds mymaster 1000\n"+
			"sentinel failover-timeout mymaster 10000\n",
			port, dir, filepath.Join(dir, "sentinel.log"), pport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, conf, "--sentinel")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = waitSentinel(s, exited); lastErr == nil {
			return s
		}
		_ = cmd.Process.Kill()
	}
	t.Fatalf("redistest: sentinel: %v: %s", lastErr, tail(filepath.Join(dir, "sentinel.log")))
	return nil
}

// waitSentinel waits (15 s at most) until the Sentinel answers and lists
// the replica as connected to the master.
func waitSentinel(s *Sentinel, exited chan error) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("redis-server --sentinel exited: %v", err)
		default:
		}
		if info, err := do(s.Replica.Addr, "INFO", "replication"); err == nil && strings.Contains(info, "master_link_status:up") {
			if s.knowsReplica() {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the sentinel did not see the replica in 15 s")
}

// knowsReplica reports whether the Sentinel lists the replica.
func (s *Sentinel) knowsReplica() bool {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	replicas, err := sc.Replicas(ctx, s.Master).Result()
	if err != nil {
		return false
	}
	_, port, _ := net.SplitHostPort(s.Replica.Addr)
	for _, r := range replicas {
		if r["port"] == port && !strings.Contains(r["flags"], "disconnected") {
			return true
		}
	}
	return false
}

// CurrentMaster asks the Sentinel for the master's host:port.
func (s *Sentinel) CurrentMaster() (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hp, err := sc.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}
