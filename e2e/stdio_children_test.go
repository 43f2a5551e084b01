package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream/stdio"
)

// TestStdioChildBudget: through the built binary, a child that allocates
// without end is stopped at --upstream-memory-limit, its session ends (404),
// the other session's child answers, and /metrics says so: the kill by
// its limit, warm starts (--upstream-warm), the children by scope.
func TestStdioChildBudget(t *testing.T) {
	if stdioBuildErr != nil {
		t.Fatalf("test server binary unavailable: %v", stdioBuildErr)
	}
	hog := filepath.Join(t.TempDir(), "hog")
	if err := buildGo(hog, "./upstream/stdio/testdata/hog"); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "stdio:"+hog, "--upstream-memory-limit", "64MiB", "--upstream-warm", "1", "--upstream-open-files", "64")
	a, z := newRawSession(t, g.URL, ""), newRawSession(t, g.URL, "")
	a.initialize()
	z.initialize()
	a.mustResult("tools/call", map[string]any{"name": "grow", "arguments": map[string]any{}})
	waitUntil(t, 20*time.Second, func() bool {
		return strings.Contains(metricsText(t, g.base+"/metrics"), `taskgate_stdio_kills_total{limit="memory"} 1`)
	})
	waitUntil(t, 10*time.Second, func() bool {
		code, _ := a.post(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/list"})
		return code == http.StatusNotFound
	})
	if r := z.mustResult("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "still"}}); !strings.Contains(string(r), "still") {
		t.Fatalf("the other session: %s", r)
	}
	text := metricsText(t, g.base+"/metrics")
	for _, want := range []string{`(?m)^taskgate_stdio_starts_total\{kind="warm"\} [1-9]`, `(?m)^taskgate_stdio_children\{scope="session"\} 1$`, `(?m)^taskgate_stdio_resident_bytes\{stat="total"\} [1-9]`} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("/metrics has no %s:\n%s", want, text)
		}
	}
	if !strings.Contains(g.stderr.String(), `"limit":"memory"`) {
		t.Errorf("no log line names the limit")
	}
}

// BenchmarkStdioWarmStart: a client session's initialize to its answer
// through the stdio bridge, with server-everything (node) as the child:
// cold (the child started for the session) against warm (--upstream-warm:
// a child started ahead, waiting). Each iteration times one of each, the
// warm one once its child is waiting; it reports the medians and
// warm/cold (target: at most 0.2).
//
//	go test -run '^$' -bench StdioWarmStart -benchtime 10x ./e2e
func BenchmarkStdioWarmStart(b *testing.B) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skipf("needs node on PATH: %v", err)
	}
	script, _ := filepath.Abs(filepath.Join("js", "node_modules", "@modelcontextprotocol/server-everything/dist/index.js"))
	if _, err := os.Stat(script); err != nil {
		b.Skipf("server-everything is not installed (npm ci in e2e/js): %v", err)
	}
	open := func(warm int) *stdio.Bridge {
		br, err := stdio.Start(stdio.Options{Command: []string{node, script, "stdio"}, Warm: warm, MaxSessions: 4, Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = br.Close(ctx)
		})
		return br
	}
	cold, warm := open(0), open(1)
	var coldT, warmT []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		coldT = append(coldT, initOnce(b, cold))
		deadline := time.Now().Add(60 * time.Second)
		for warm.WarmReady() == 0 { // not timed: the pool refills between sessions
			if time.Now().After(deadline) {
				b.Fatal("no warm child within 60 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		warmT = append(warmT, initOnce(b, warm))
	}
	b.StopTimer()
	c, w := medianOf(coldT), medianOf(warmT)
	b.ReportMetric(float64(c.Microseconds())/1000, "cold-ms")
	b.ReportMetric(float64(w.Microseconds())/1000, "warm-ms")
	b.ReportMetric(float64(w)/float64(c), "warm/cold")
}

// initOnce opens a session on br, timing its initialize, and ends it.
func initOnce(b *testing.B, br *stdio.Bridge) time.Duration {
	h := &http.Client{Transport: br.Transport()}
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, stdio.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	start := time.Now()
	resp, err := h.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" || !strings.Contains(out.String(), `"result"`) {
		b.Fatalf("initialize: HTTP %d %s", resp.StatusCode, out.String())
	}
	del, _ := http.NewRequest(http.MethodDelete, stdio.URL, nil)
	del.Header.Set("Mcp-Session-Id", sid)
	if r, err := h.Do(del); err == nil {
		r.Body.Close()
	}
	return took
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
