// Command bench measures taskgate over loopback against baselines measured
// in the same run, so the figures are ratios a noisy machine cannot skew.
//
//	go run ./bench                 # pass-through: direct vs httputil vs taskgate
//	go run ./bench -duration 10s -rounds 5 -concurrency 32
//
// It builds and starts, as separate processes on 127.0.0.1: the test
// upstream (go-sdk streamable server, stateful, SSE answers), a plain
// httputil.ReverseProxy with a pooled transport (this program re-executed in
// the "httputil" role), and taskgate in pass-through. Every process it
// starts is stopped by PID when it ends. Load is bounded by -duration and
// -rounds; rounds interleave the targets so drift hits all three alike.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	duration    time.Duration
	rounds      int
	concurrency int
	latencyReqs int
	out         string
}

func run() error {
	role := flag.String("role", "", "internal: run as the httputil baseline proxy")
	listen := flag.String("listen", "", "internal: address for -role")
	target := flag.String("target", "", "internal: upstream for -role")
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "load time per target per round")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each round loads every target once")
	flag.IntVar(&o.concurrency, "concurrency", 16, "concurrent clients in the throughput phase")
	flag.IntVar(&o.latencyReqs, "latency-requests", 3000, "sequential requests per target per round in the latency phase")
	flag.StringVar(&o.out, "out", "", "also write the Markdown report to this file")
	flag.Parse()
	if *role == "httputil" {
		return serveHTTPUtil(*listen, *target)
	}
	return passthrough(o)
}

// serveHTTPUtil is the baseline: the standard library's reverse proxy with
// a transport pooled like taskgate's, and immediate flushing (as it does
// for SSE anyway).
func serveHTTPUtil(listen, target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.Transport = &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	rp.FlushInterval = -1
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	return http.Serve(ln, rp)
}

// procs are the processes this run started; stopAll stops exactly them.
type procs []*exec.Cmd

func (ps *procs) start(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	// If this program dies, the kernel stops what it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	*ps = append(*ps, cmd)
	return nil
}

func (ps procs) stopAll() {
	for _, c := range ps {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range ps {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
		}
	}
}

// build compiles pkg into dir and returns the binary's path.
func build(dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitTCP waits until addr accepts connections.
func waitTCP(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not start listening within 20s", addr)
}

// machine describes where the figures were taken.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
