package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taskgate/taskgate/internal/redistest"
)

// redisServer is a throwaway redis-server this run started: on a free
// loopback port (never 6379), without persistence, stopped by its PID.
type redisServer struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts redis-server with its working files in dir.
func startRedis(dir string) (*redisServer, error) {
	return startRedisOn(dir, nil)
}

// startRedisOn starts redis-server with extra arguments on a free port
// (never 6379) that usable, if given, accepts.
func startRedisOn(dir string, usable func(port int) bool, extra ...string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found in PATH (apt-get install -y redis-server)")
	}
	lastErr := errors.New("no usable free port for redis-server")
	for attempt := 0; attempt < 20; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		if n, _ := strconv.Atoi(port); port == "6379" || (usable != nil && !usable(n)) {
			continue
		}
		s, err := tryRedis(bin, dir, port, extra...)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryRedis(bin, dir, port string, extra ...string) (*redisServer, error) {
	logPath := filepath.Join(dir, "redis-"+port+".log")
	cmd := exec.Command(bin, append([]string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
		"--logfile", logPath,
	}, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", port), cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server on port %s exited: %s", port, tail(logPath))
		default:
		}
		if redistest.Ping(s.addr) {
			return s, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("redis-server on port %s did not answer PING: %s", port, tail(logPath))
}

// stop stops the server by its PID: SIGTERM, then SIGKILL after 5s.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// redisInfo returns one field of INFO (e.g. "used_memory_human"), or "".
func redisInfo(addr, field string) string {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO\r\n")); err != nil {
		return ""
	}
	rd := bufio.NewReader(c)
	head, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return ""
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return ""
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(rd, buf); err != nil {
		return ""
	}
	for _, l := range strings.Split(string(buf), "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	return ""
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
