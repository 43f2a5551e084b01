// Command bench measures taskgate over loopback against baselines measured
// in the same run, so the figures are ratios a noisy machine cannot skew.
//
//	go run ./bench                 # pass-through: direct vs httputil vs taskgate
//	go run ./bench -duration 10s -rounds 5 -concurrency 32
//	go run ./bench -mode tasks     # tasks: taskgate + redis-server vs a native TS SDK task server
//	go run ./bench -mode modern    # 2026-07-28 tasks: auto vs pass-through vs direct, tasks/get, tasks/update
//	go run ./bench -mode scale     # memory per held task; tasks/get on 1 vs 3 replicas (scale.go)
//
// It builds and starts, as separate processes on 127.0.0.1: the test
// upstream (go-sdk streamable server, stateful, SSE answers), a plain
// httputil.ReverseProxy with a pooled transport (this program re-executed in
// the "httputil" role), and taskgate in pass-through. Every process it
// starts is stopped by PID when it ends. Load is bounded by -duration and
// -rounds; rounds interleave the targets so drift hits all three alike.
//
// -mode tasks (tasks.go) measures MCP Tasks through taskgate on a real
// redis-server it starts on a free port: CreateTaskResult latency,
// tasks/get throughput against pass-through tools/call, and the same
// tasks/get load against a native TypeScript SDK server with the SDK's
// InMemoryTaskStore (bench/js/server.mjs; npm ci runs there when
// node_modules is missing).
//
// -mode modern (modern.go) measures the 2026-07-28 flavour against a
// stateless upstream on a real redis-server: a fast tool called "auto"
// (tasks extension declared, no rule) vs passed through vs direct,
// tasks/get throughput, tasks/update ack latency, and the Redis commands
// each of these sends (counted with the slow log, redis_count.go).
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
	mode        string
	duration    time.Duration
	rounds      int
	concurrency int
	latencyReqs int
	out         string
	createReqs  int
	tasks       int
	updateReqs  int
	countReqs   int
	held        int
	verbose     bool
	toolsList   bool
	set         map[string]bool // flags given on the command line
}

func run() error {
	role := flag.String("role", "", "internal: run as the httputil baseline proxy")
	listen := flag.String("listen", "", "internal: address for -role")
	target := flag.String("target", "", "internal: upstream for -role")
	var o options
	flag.StringVar(&o.mode, "mode", "passthrough", "passthrough, tasks, modern or scale")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "load time per target per round")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each round loads every target once")
	flag.IntVar(&o.concurrency, "concurrency", 16, "concurrent clients in the throughput phase")
	flag.IntVar(&o.latencyReqs, "latency-requests", 3000, "sequential requests per target per round in the latency phase")
	flag.StringVar(&o.out, "out", "", "also write the Markdown report to this file")
	flag.IntVar(&o.createReqs, "create-requests", 1000, "tasks mode: task-augmented calls per target per round in the CreateTaskResult latency phase (each starts an upstream call)")
	flag.BoolVar(&o.toolsList, "tools-list", false, "tasks mode: call tools/list once on each session before measuring, as many clients do (fills taskgate's tool catalogue)")
	flag.BoolVar(&o.verbose, "v", false, "tasks and modern modes: print each phase to stderr as it starts (to attach a profiler)")
	flag.IntVar(&o.tasks, "tasks", 8, "tasks, modern and scale modes: completed tasks the tasks/get load polls, spread over the clients")
	flag.IntVar(&o.updateReqs, "update-requests", 50, "modern mode: answering tasks/update per round, each on a fresh elicit task in input_required")
	flag.IntVar(&o.countReqs, "count-requests", 1000, "modern mode: sequential calls per batch whose Redis commands are counted")
	flag.IntVar(&o.held, "held", 10000, "scale mode: concurrent held task calls whose memory is measured")
	flag.Parse()
	o.set = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if *role == "httputil" {
		return serveHTTPUtil(*listen, *target)
	}
	switch o.mode {
	case "passthrough":
		return passthrough(o)
	case "tasks":
		return tasksBench(o)
	case "modern":
		return modernBench(o)
	case "scale":
		return scaleBench(o)
	default:
		return fmt.Errorf("unknown -mode %q: want passthrough, tasks, modern or scale", o.mode)
	}
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
	return ps.startIn("", name, args...)
}

// startIn starts name in directory dir ("" for this one).
func (ps *procs) startIn(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
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

// stopAll takes a pointer: "defer ps.stopAll()" must see the processes
// started after the defer statement.
func (ps *procs) stopAll() {
	for _, c := range *ps {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range *ps {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
		}
	}
}

// reproduce is the command line that runs mode again with the flags among
// names that were given on this run's command line.
func reproduce(o options, mode string, names ...string) string {
	parts := []string{"go run ./bench -mode " + mode}
	for _, n := range names {
		if f := flag.Lookup(n); f != nil && o.set[n] {
			parts = append(parts, "-"+n+"="+f.Value.String())
		}
	}
	return strings.Join(parts, " ")
}

// buildAll builds taskgate and the test upstream from this checkout into a
// fresh directory; cleanup removes it.
func buildAll() (dir, taskgate, testupstream string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "taskgate-bench-")
	if err != nil {
		return "", "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if taskgate, err = build(dir, "./cmd/taskgate"); err == nil {
		testupstream, err = build(dir, "./internal/testupstream/cmd/testupstream")
	}
	if err != nil {
		cleanup()
		return "", "", "", nil, err
	}
	return dir, taskgate, testupstream, cleanup, nil
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
