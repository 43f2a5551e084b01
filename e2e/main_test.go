package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var (
	// taskgateBin is the binary under test, built once by TestMain.
	taskgateBin string
	// buildErr is why the binary could not be built; tests that need the
	// gateway fail with it, the direct halves still run.
	buildErr error
	// stdioServerBin is the test server as a program (its --stdio mode
	// fronts --upstream-command tests), built once by TestMain.
	stdioServerBin string
	stdioBuildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "taskgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	stdioServerBin = filepath.Join(dir, "testupstream")
	stdioBuildErr = buildGo(stdioServerBin, "./internal/testupstream/cmd/testupstream")
	if bin := os.Getenv("TASKGATE_E2E_BIN"); bin != "" {
		taskgateBin = bin
		return m.Run()
	}
	taskgateBin = filepath.Join(dir, "taskgate")
	buildErr = buildTaskgate(taskgateBin)
	return m.Run()
}

// buildTaskgate builds ./cmd/taskgate of this checkout into bin.
func buildTaskgate(bin string) error { return buildGo(bin, "./cmd/taskgate") }

// buildGo builds the package pkg of this checkout into bin.
func buildGo(bin, pkg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go not on PATH: %w", err)
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, pkg)
	cmd.Dir = ".." // the module root; tests run in e2e/
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// newUpstream starts a test upstream and returns its MCP endpoint.
func newUpstream(t *testing.T, opts testupstream.Options) string {
	t.Helper()
	srv := httptest.NewServer(testupstream.Handler(opts))
	t.Cleanup(func() { closeBounded(t, srv) })
	return srv.URL + "/mcp"
}

// closeBounded closes srv but waits at most 5 s: httptest's Close waits for
// every handler to return, and a failed test can leave a legacy tool handler
// waiting for an answer that never comes (e.g. an elicitation lost on the way).
func closeBounded(t *testing.T, srv *httptest.Server) {
	srv.CloseClientConnections()
	done := make(chan struct{})
	go func() {
		srv.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Logf("upstream %s: handlers still running 5 s after close; abandoning them", srv.URL)
	}
}

// gateway is one running taskgate process started by a test.
type gateway struct {
	// URL is the gateway's MCP endpoint.
	URL    string
	base   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
}

// startGateway runs `taskgate serve` in front of upstreamURL on a free
// loopback port, waits for /healthz, and stops it (by its PID) when the test
// ends. Its stderr goes to the test log if the test fails.
func startGateway(t testing.TB, upstreamURL string, extraArgs ...string) *gateway {
	t.Helper()
	return startGatewayEnv(t, nil, upstreamURL, extraArgs...)
}

// startGatewayEnv is startGateway with env added to the process's
// environment.
func startGatewayEnv(t testing.TB, env []string, upstreamURL string, extraArgs ...string) *gateway {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("taskgate binary unavailable: %v", buildErr)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before we bind it
		g, err := tryStartGateway(t, env, upstreamURL, extraArgs)
		if err == nil {
			return g
		}
		lastErr = err
	}
	t.Fatalf("starting taskgate: %v", lastErr)
	return nil
}

func tryStartGateway(t testing.TB, env []string, upstreamURL string, extraArgs []string) (*gateway, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startGatewayAtEnv(t, addr, env, upstreamURL, extraArgs)
}

// startGatewayAt is tryStartGateway on a given address, e.g. to restart a
// killed replica where its clients expect it.
func startGatewayAt(t testing.TB, addr, upstreamURL string, extraArgs []string) (*gateway, error) {
	return startGatewayAtEnv(t, addr, nil, upstreamURL, extraArgs)
}

func startGatewayAtEnv(t testing.TB, addr string, env []string, upstreamURL string, extraArgs []string) (*gateway, error) {
	// Every replica here shares the host, so the hostname default would
	// name them all alike: each gets an id of its own, kept across a
	// restart on the same address (as a restarted pod keeps its name).
	up := []string{"--upstream", upstreamURL}
	if command, ok := strings.CutPrefix(upstreamURL, "stdio:"); ok {
		up = []string{"--upstream-command", command}
	}
	args := append(append([]string{"serve", "--listen", addr}, up...), append([]string{"--replica-id", "e2e-" + addr}, extraArgs...)...)
	g := &gateway{
		URL:    "http://" + addr + "/mcp",
		base:   "http://" + addr,
		cmd:    exec.Command(taskgateBin, args...),
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
	}
	g.cmd.Stdout = g.stderr
	g.cmd.Stderr = g.stderr
	if len(env) > 0 {
		g.cmd.Env = append(os.Environ(), env...)
	}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = g.cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("taskgate %v output:\n%s", args, g.stderr.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := g.waitHealthy(ctx); err != nil {
		g.stop()
		return nil, fmt.Errorf("%w; output:\n%s", err, g.stderr.String())
	}
	return g, nil
}

// waitHealthy polls GET /healthz until it answers 200.
func (g *gateway) waitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/healthz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-g.done:
			return fmt.Errorf("taskgate exited before /healthz answered (%v)", g.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("taskgate /healthz not 200: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM to the process we started and kills it if it has not
// exited within 5 s.
func (g *gateway) stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// toolRow is a line of `taskgate tools --json`.
type toolRow struct {
	Tool   string `json:"tool"`
	Legacy string `json:"legacy"`
	Modern string `json:"modern"`
}

// toolsJSON runs `taskgate tools --json` with args, bounded by ctx, and
// returns its rows, its output and its stderr (the progress lines); a
// failed run or an output that is not the rows fails the test.
func toolsJSON(t *testing.T, ctx context.Context, args ...string) ([]toolRow, []byte, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, taskgateBin, append([]string{"tools", "--json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("taskgate tools: %v\n%s", err, stderr.String())
	}
	var rows []toolRow
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	return rows, out, stderr.String()
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// syncBuffer is a bytes.Buffer safe for the process's writes and our reads.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte            // the unfinished last line, for tap
	tap     func(line string) // hears every complete line written after it is set
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tap != nil {
		b.partial = append(b.partial, p...)
		for {
			i := bytes.IndexByte(b.partial, '\n')
			if i < 0 {
				break
			}
			b.tap(string(b.partial[:i]))
			b.partial = b.partial[i+1:]
		}
	}
	return b.buf.Write(p)
}

// setTap makes f hear every line written from now on.
func (b *syncBuffer) setTap(f func(line string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tap = f
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// vias are the two ways every test reaches the upstream.
var vias = []string{"direct", "gateway"}

// endpoint starts a fresh upstream with opts and returns the MCP endpoint to
// drive it through: the upstream itself ("direct") or a fresh gateway in
// front of it ("gateway"). Runs share no state.
func endpoint(t *testing.T, via string, opts testupstream.Options) string {
	t.Helper()
	up := newUpstream(t, opts)
	if via == "direct" {
		return up
	}
	return startGateway(t, up).URL
}
