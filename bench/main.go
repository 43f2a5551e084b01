// Command bench measures taskgate over loopback against baselines measured
// in the same run, so the figures are ratios a noisy machine cannot skew.
//
//	go run ./bench -mode report    # everything below in one run (~10 min): writes docs/BENCHMARKS.md (report.go)
//	go run ./bench -mode tasksget  # tasks/get (both flavours) vs the parse-and-GET limit (tasksget.go, parseget.go)
//	go run ./bench                 # pass-through: direct vs httputil vs taskgate
//	go run ./bench -duration 10s -rounds 5 -concurrency 32
//	go run ./bench -mode tasks     # tasks: taskgate + redis-server vs a native TS SDK task server
//	go run ./bench -mode modern    # 2026-07-28 tasks: auto vs pass-through vs direct, tasks/get, tasks/update
//	go run ./bench -mode scale     # memory per held task; tasks/get on 1 vs 3 replicas (scale.go)
//	go run ./bench -mode stdio     # stdio child vs HTTP upstream (stdio.go); taskgate vs supergateway in front of a stdio server (stdiopeer.go)
//	go run ./bench -mode ratios    # one line per performance goal, met or missed, in ~3 min (ratios.go)
//	go run ./bench -mode capacity  # Redis commands, bytes and CPU per task operation, and a sizing projection (capacity.go)
//	go run ./bench -mode webhooks  # webhooks off vs on with a failing and a slow receiver: create and tasks/get latency (webhooks.go)
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
//
// BENCH_TASKGATE_BIN=/path/to/taskgate measures that build instead of
// this checkout's (A/B runs of a change: CONTRIBUTING.md says how to build
// it from another commit and what each mode gives to compare).
//
// -pprof DIR builds taskgate with -tags benchpprof (net/http/pprof on a
// loopback port, cmd/taskgate/benchpprof.go) and saves CPU profiles of the
// tasks/get load and heap/goroutine profiles of the held tasks into DIR:
// go tool pprof -top DIR/tasksget-modern.cpu.pprof.
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
	"strconv"
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
	pprofDir    string          // write taskgate profiles here (scale and tasksget phases)
	sections    string          // report mode: which sections, comma-separated
	stdioServer string          // stdio mode: the server behind taskgate and supergateway
	holdWindow  time.Duration   // scale mode: how long RSS is watched with the tasks held
	gcEnv       string          // scale mode: a second memory run with this taskgate environment
	set         map[string]bool // flags given on the command line
}

func run() error {
	role := flag.String("role", "", "internal: run as the httputil baseline proxy (httputil), the parse-and-GET baseline server (parseget) or a webhook receiver (whreceiver)")
	listen := flag.String("listen", "", "internal: address for -role")
	target := flag.String("target", "", "internal: upstream for -role httputil, redis-server address for -role parseget, the answer (500 or a delay such as 10s) for -role whreceiver")
	var o options
	flag.StringVar(&o.mode, "mode", "passthrough", "report (everything, writes docs/BENCHMARKS.md), ratios (the goals at a glance), passthrough, tasks, tasksget, modern, scale, stdio or capacity")
	flag.StringVar(&o.pprofDir, "pprof", "", "tasksget and scale modes (and report): build taskgate with net/http/pprof (-tags benchpprof) and write its CPU, heap and goroutine profiles into this directory")
	flag.DurationVar(&o.holdWindow, "hold-window", 30*time.Second, "scale mode: how long taskgate's RSS is watched (every second, largest sample kept) once the held tasks are created and RSS settled")
	flag.StringVar(&o.gcEnv, "gc-env", "", "scale mode: also measure memory per held task with this environment for taskgate (a GC knob such as GOGC=50 or GOMEMLIMIT=256MiB; space-separated); empty: defaults only")
	flag.StringVar(&o.stdioServer, "stdio-server", "test", "stdio mode: the stdio server taskgate and supergateway front: test (the test server, Go) or everything (@modelcontextprotocol/server-everything, node)")
	flag.StringVar(&o.sections, "sections", "passthrough,tasks,tasksget,modern,scale,stdio", "report mode: the sections to run, in this order")
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
	switch *role {
	case "":
	case "httputil":
		return serveHTTPUtil(*listen, *target)
	case "parseget":
		return serveParseGet(*listen, *target)
	case "whreceiver":
		return serveReceiver(*listen, *target)
	default:
		return fmt.Errorf("unknown -role %q", *role)
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return err
		}
		taskgateTags = []string{"-tags", "benchpprof"}
	}
	if o.mode == "report" {
		return reportBench(o)
	}
	run, ok := modes[o.mode]
	if !ok {
		return fmt.Errorf("unknown -mode %q: want report, ratios, passthrough, tasks, tasksget, modern, scale, stdio or capacity", o.mode)
	}
	report, err := run(o)
	if err != nil {
		return err
	}
	fmt.Print(report)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(report), 0o644)
	}
	return nil
}

// modes are the measurements; each returns its Markdown section.
var modes = map[string]func(options) (string, error){
	"passthrough": section(passthrough),
	"tasks":       section(tasksBench),
	"tasksget":    section(tasksGetBench),
	"modern":      section(modernBench),
	"scale":       section(scaleBench),
	"stdio":       section(stdioBench),
	"ratios":      section(ratiosBench),
	"capacity":    section(capacityBench),
	"console":     section(consoleBench),  // console.go
	"webhooks":    section(webhooksBench), // webhooks.go
}

// emitted is the section the last mode produced (emit).
var emitted string

// emit is how a mode hands back its Markdown section.
func emit(report string) error {
	emitted = report
	return nil
}

func section(f func(options) error) func(options) (string, error) {
	return func(o options) (string, error) {
		emitted = ""
		err := f(o)
		return emitted, err
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
	return ps.startEnv(dir, nil, name, args...)
}

// startEnv starts name in dir with env added to this process's environment.
func (ps *procs) startEnv(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
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

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// reproduce is the command line that runs mode again with the flags among
// names that were given on this run's command line.
func reproduce(o options, mode string, names ...string) string {
	parts := []string{"go run ./bench -mode " + mode}
	for _, n := range names {
		if f := flag.Lookup(n); f != nil && o.set[n] {
			v := f.Value.String()
			if strings.ContainsAny(v, " '\"") {
				v = strconv.Quote(v)
			}
			parts = append(parts, "-"+n+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// modeRun is what a measuring mode starts with: Ctrl-C handling, the
// load average and the time at its start, and the built binaries (dir,
// taskgate, testupstream). close removes them and ends ctx.
type modeRun struct {
	ctx         context.Context
	load0       string
	t0          time.Time
	dir, tg, tu string
	close       func()
}

func startModeRun() (*modeRun, error) {
	ctx, stop := interruptible()
	r := &modeRun{ctx: ctx, load0: loadAvg(), t0: time.Now()}
	dir, tg, tu, cleanup, err := buildAll()
	if err != nil {
		stop()
		return nil, err
	}
	r.dir, r.tg, r.tu = dir, tg, tu
	r.close = func() { cleanup(); stop() }
	return r, nil
}

// buildAll builds taskgate and the test upstream from this checkout into a
// fresh directory; cleanup removes it.
func buildAll() (dir, taskgate, testupstream string, cleanup func(), err error) {
	if prebuilt != nil { // report mode builds once for every section
		return prebuilt.dir, prebuilt.tg, prebuilt.tu, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "taskgate-bench-")
	if err != nil {
		return "", "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if taskgate, err = build(dir, "./cmd/taskgate", taskgateTags...); err == nil {
		testupstream, err = build(dir, "./internal/testupstream/cmd/testupstream")
	}
	if alt := os.Getenv("BENCH_TASKGATE_BIN"); alt != "" && err == nil {
		// A/B runs: measure another taskgate build (say, of the commit
		// before a change) with this checkout's bench and upstream.
		taskgate = alt
	}
	if err != nil {
		cleanup()
		return "", "", "", nil, err
	}
	return dir, taskgate, testupstream, cleanup, nil
}

// buildOnce builds for several modes run in a row: until cleanup, buildAll
// returns these builds.
func buildOnce() (dir, taskgate, testupstream string, cleanup func(), err error) {
	dir, taskgate, testupstream, remove, err := buildAll()
	if err != nil {
		return "", "", "", nil, err
	}
	prebuilt = &struct{ dir, tg, tu string }{dir, taskgate, testupstream}
	return dir, taskgate, testupstream, func() { prebuilt = nil; remove() }, nil
}

// prebuilt, when set, is what buildAll returns instead of building.
var prebuilt *struct{ dir, tg, tu string }

// taskgateTags are the build flags for taskgate: -pprof adds the
// benchpprof tag (cmd/taskgate/benchpprof.go).
var taskgateTags []string

// build compiles pkg into dir and returns the binary's path.
func build(dir, pkg string, flags ...string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, pkg)...)
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

// pause waits d, or less if ctx ends first; it returns ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return ctx.Err()
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
