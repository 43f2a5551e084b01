// Package redistest runs a throwaway redis-server for tests: on a free
// loopback port, in a temporary data dir, without persistence unless asked
// (NewWithArgs), killed by its PID when the test ends.
// It never touches a Redis on the default port 6379.
//
// redis-server must be in PATH; CI installs it (apt-get install -y redis-server).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is one redis-server process under a test's control.
type Server struct {
	// Addr is host:port; it stays the same across Stop and Start.
	Addr string

	t    testing.TB
	bin  string
	dir  string
	port int
	args []string // extra redis-server arguments

	mu     sync.Mutex
	proc   *os.Process // nil while stopped
	exited chan error  // receives the process' Wait result
}

// Start starts a redis-server for the test and returns its address. The
// server is killed when the test ends.
func Start(t testing.TB) string {
	return New(t).Addr
}

// New starts a redis-server for the test and returns it, for tests that stop
// and restart it. The server is killed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	return newServer(t, nil)
}

// NewWithArgs is New with extra redis-server arguments, which override the
// defaults (later arguments win). For a server whose data survives Stop and
// Restart: NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always").
func NewWithArgs(t testing.TB, args ...string) *Server {
	t.Helper()
	return newServer(t, args)
}

func newServer(t testing.TB, args []string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redistest: redis-server not found in PATH; install it with: apt-get install -y redis-server")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), args: args}
	t.Cleanup(s.Stop)
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(len(args) > 0)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

// Stop kills the server (by its PID) and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Kill()
	<-s.exited
	s.proc = nil
}

// Restart kills the server (SIGKILL, no shutdown save) and starts it again
// on the same port and data dir: empty without persistence (New), and with
// AOF (NewWithArgs "--appendonly", "yes") reloading every write it
// acknowledged, as a crashed Redis does (TestRestartKeepsData).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for attempt := 0; attempt < 20; attempt++ { // the port may linger briefly
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart: %v", err)
}

// Start starts a stopped server again on the same port and data dir
// (empty unless it persists; see Restart).
func (s *Server) Start() { s.Restart() }

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.port == 6379 {
		return fmt.Errorf("refusing to use port 6379")
	}
	logPath := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", logPath,
	)
	cmd.Args = append(cmd.Args, s.args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server on port %d exited: %v: %s", s.port, err, tail(logPath))
		default:
		}
		if Ping(s.Addr) {
			s.proc, s.exited = cmd.Process, exited
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server on port %d did not answer PING: %s", s.port, tail(logPath))
}

// Ping reports whether a Redis at addr answers PING (within about 700 ms).
func Ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// freePort finds a free loopback port; with bus, one whose cluster bus
// port (port+10000) is free too.
func freePort(bus bool) (int, error) {
	for attempt := 0; attempt < 50; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port == 6379 || port == 16379 {
			continue
		}
		if !bus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if lb, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
			lb.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port")
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
