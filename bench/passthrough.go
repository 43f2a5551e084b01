package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// passthrough measures a small tools/call (the echo tool) sent directly to
// the upstream, through httputil.ReverseProxy, and through taskgate.
func passthrough(o options) error {
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx, tg, tu := run.ctx, run.tg, run.tu
	self, err := os.Executable()
	if err != nil {
		return err
	}
	upAddr, _ := freeAddr()
	rpAddr, _ := freeAddr()
	tgAddr, _ := freeAddr()
	var ps procs
	defer ps.stopAll()
	upURL := "http://" + upAddr + "/mcp"
	if err := ps.start(tu, "--listen", upAddr); err != nil {
		return err
	}
	if err := ps.start(self, "-role", "httputil", "-listen", rpAddr, "-target", upURL); err != nil {
		return err
	}
	penv, paddr := pprofEnv(o)
	if err := ps.startEnv("", penv, tg, "serve", "--listen", tgAddr, "--upstream", upURL, "--log-level", "warn"); err != nil {
		return err
	}
	for _, a := range []string{upAddr, rpAddr, tgAddr} {
		if err := waitTCP(a); err != nil {
			return err
		}
	}
	targets := []target{
		{"direct", upURL},
		{"httputil", "http://" + rpAddr + "/mcp"},
		{"taskgate", "http://" + tgAddr + "/mcp"},
	}
	c := newClient(o.concurrency)
	sid, err := initSession(ctx, c, upURL)
	if err != nil {
		return err
	}
	call := request{
		body: `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
		header: http.Header{
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Mcp-Session-Id":       {sid},
			"Mcp-Protocol-Version": {"2025-11-25"},
		},
	}
	for _, t := range targets { // warm up connections and caches
		fmt.Fprintf(os.Stderr, "bench: warming up %s\n", t.name)
		if r := load(ctx, c, t.url, call, o.concurrency, time.Second, 0); r.requests == 0 {
			return fmt.Errorf("%s answered no request during warm-up (%d errors)", t.name, r.errors)
		}
	}
	lat := make(map[string]*result)
	thr := make(map[string]*result)
	for _, t := range targets {
		lat[t.name], thr[t.name] = &result{}, &result{}
	}
	// CPU time of the proxy process per proxied call (the figure a busy
	// machine moves least); direct has no proxy.
	pids := map[string]int{"httputil": ps[1].Process.Pid, "taskgate": ps[2].Process.Pid}
	cpu := map[string]time.Duration{}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		for _, t := range targets {
			lat[t.name].merge(load(ctx, c, t.url, call, 1, o.duration, o.latencyReqs))
			c0 := cpuTime(pids[t.name])
			thr[t.name].merge(load(ctx, c, t.url, call, o.concurrency, o.duration, 0))
			cpu[t.name] += cpuTime(pids[t.name]) - c0
		}
		fmt.Fprintf(os.Stderr, "bench: round %d/%d done\n", round+1, o.rounds)
	}
	if o.pprofDir != "" && ctx.Err() == nil {
		done := make(chan error, 1)
		go func() { done <- fetchProfile(ctx, paddr, "profile?seconds=8", o.pprofDir, "passthrough.cpu.pprof") }()
		load(ctx, c, targets[2].url, call, o.concurrency, 9*time.Second, 0)
		if err := <-done; err != nil {
			return fmt.Errorf("CPU profile: %w", err)
		}
		fmt.Fprintf(os.Stderr, "bench: CPU profile of taskgate's pass-through load: %s\n", filepath.Join(o.pprofDir, "passthrough.cpu.pprof"))
	}
	report := passthroughReport(o, targets, lat, thr, cpu)
	return emit(report)
}

func passthroughReport(o options, targets []target, lat, thr map[string]*result, cpu map[string]time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Pass-through tools/call (echo, stateful go-sdk upstream, SSE answers)\n\n")
	fmt.Fprintf(&b, "Machine: %s. %d rounds × %s per target; throughput at %d concurrent clients, latency at 1.\n\n",
		machine(), o.rounds, o.duration, o.concurrency)
	fmt.Fprintf(&b, "| target | req/s (c=%d) | p50 | p99 | p50 (c=1) | p99 (c=1) | errors |\n|---|---|---|---|---|---|---|\n", o.concurrency)
	for _, t := range targets {
		r, l := thr[t.name], lat[t.name]
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %d |\n", t.name, r.rps(), ms(r.pct(.5)), ms(r.pct(.99)), ms(l.pct(.5)), ms(l.pct(.99)), r.errors+l.errors)
	}
	d, h, g := thr["direct"], thr["httputil"], thr["taskgate"]
	rt := g.rps() / h.rps()
	figure("passthrough.rps", rt)
	fmt.Fprintf(&b, "\n- pass-through: taskgate / httputil throughput: **%.2f×** (target ≥ 1.1×: %s)\n", rt, met(rt >= 1.1))
	fmt.Fprintf(&b, "- taskgate / direct throughput: %.2f×; httputil / direct: %.2f×\n", g.rps()/d.rps(), h.rps()/d.rps())
	perCall := func(name string) float64 {
		return float64(cpu[name].Microseconds()) / float64(max(thr[name].requests, 1))
	}
	fmt.Fprintf(&b, "- proxy CPU per call at c=%d (user+system of the proxy process, /proc/PID/stat): taskgate %.0f µs, httputil %.0f µs (%.2f×)\n",
		o.concurrency, perCall("taskgate"), perCall("httputil"), perCall("taskgate")/perCall("httputil"))
	figure("passthrough.cpu", perCall("taskgate")/perCall("httputil"))
	added := lat["taskgate"].pct(.5) - lat["direct"].pct(.5)
	fmt.Fprintf(&b, "- pass-through: added p50 latency over direct at c=1: taskgate **%s** (target < 0.2 ms: %s), httputil %s\n",
		ms(added), met(added < 200*time.Microsecond), ms(lat["httputil"].pct(.5)-lat["direct"].pct(.5)))
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "passthrough", "duration", "rounds", "concurrency", "latency-requests"))
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// initSession opens one upstream session, used by all three targets: the
// proxies pass Mcp-Session-Id through untouched.
func initSession(ctx context.Context, c *http.Client, url string) (string, error) {
	post := func(body string, sid string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		return c.Do(req)
	}
	resp, err := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`, "")
	if err != nil {
		return "", err
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		// The answer says why (a JSON-RPC error comes with HTTP 200).
		return "", fmt.Errorf("initialize: HTTP %d and no session id: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	resp, err = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return sid, nil
}
