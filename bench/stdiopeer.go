package main

// -mode stdio, second part: taskgate in front of a stdio server against
// the peer that does the same job, supergateway 4.0.0 (npm, pinned in
// e2e/js) in its stateful Streamable HTTP mode, which like taskgate's
// default starts a process per client session. All three front the same
// server (-stdio-server: the test server's --stdio mode, or the reference
// server from npm under node; echo tool), in one run: taskgate
// with a child per session (the default), taskgate with one shared child
// (--upstream-shared), supergateway. Each of the -concurrency clients has
// a session of its own, as real clients do; latency is one client's.
// Goals (issue 25): throughput ≥ 1.5× supergateway's, p50 at c=1 ≤ 0.8×.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// supergatewayScript is the peer's entry point, installed by npm ci in e2e/js.
var supergatewayScript = filepath.Join("e2e", "js", "node_modules", "supergateway", "dist", "index.js")

type peerTarget struct {
	name  string
	url   string
	pid   int
	call  request
	first request // client 0's session only: the latency phase
}

func stdioPeerBench(ctx context.Context, o options, tg, tu string) (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node not found in PATH: the supergateway baseline needs Node.js ≥ 20: %w", err)
	}
	jsDir, err := filepath.Abs(filepath.Join("e2e", "js"))
	if err != nil {
		return "", err
	}
	if err := npmCIFor(ctx, jsDir, filepath.Join("supergateway", "package.json")); err != nil {
		return "", err
	}
	var ps procs
	defer ps.stopAll()
	// supergateway runs --stdio with a shell; taskgate splits the words
	// itself: both get the paths quoted.
	child, server := "'"+tu+"' --stdio", "the test server's --stdio mode (Go)"
	call := request{want: []byte(`hello`),
		body: `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`}
	switch o.stdioServer {
	case "test":
	case "everything":
		script := filepath.Join(jsDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
		child, server = "'"+node+"' '"+script+"' stdio", "@modelcontextprotocol/server-everything (node)"
		call = request{want: []byte(`Echo: hello`),
			body: `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`}
	default:
		return "", fmt.Errorf("unknown -stdio-server %q: want test or everything", o.stdioServer)
	}
	addrs := make([]string, 3)
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return "", err
		}
	}
	serve := func(addr string, extra ...string) []string {
		// error: the test server writes a stderr line per call, which
		// taskgate would otherwise warn about each second (supergateway
		// runs with --logLevel none). Every bench client comes from
		// 127.0.0.1 without credentials, so taskgate takes them all for
		// one principal: its share (--max-sessions-per-principal, half of
		// --max-sessions) refused the later clients' initialize ("no
		// session id"). The clients stand for different users and
		// supergateway has no such cap: fairArgs turns the shares off.
		args := append([]string{"serve", "--listen", addr, "--upstream-command", child, "--log-level", "error",
			"--max-sessions", strconv.Itoa(o.concurrency + 8)}, fairArgs(tg)...)
		return append(args, extra...)
	}
	_, sgPort, _ := strings.Cut(addrs[2], ":")
	starts := []struct {
		name, bin string
		args      []string
	}{
		{"taskgate (a child per session)", tg, serve(addrs[0])},
		{"taskgate (--upstream-shared)", tg, serve(addrs[1], "--upstream-shared")},
		{"supergateway 4.0.0 (--stateful)", node, []string{supergatewayScript, "--stdio", child, "--outputTransport", "streamableHttp",
			"--stateful", "--port", sgPort, "--streamableHttpPath", "/mcp", "--logLevel", "none"}},
	}
	var targets []*peerTarget
	for i, s := range starts {
		if err := ps.start(s.bin, s.args...); err != nil {
			return "", fmt.Errorf("%s: %w", s.name, err)
		}
		targets = append(targets, &peerTarget{name: s.name, url: "http://" + addrs[i] + "/mcp", pid: ps[len(ps)-1].Process.Pid})
	}
	for _, a := range addrs {
		if err := waitTCP(a); err != nil {
			return "", err
		}
	}
	c := newClient(o.concurrency)
	for _, x := range targets {
		x.call = call
		for range o.concurrency {
			sid, err := initSession(ctx, c, x.url)
			if err != nil {
				return "", fmt.Errorf("%s: %w", x.name, err)
			}
			x.call.headers = append(x.call.headers, http.Header{"Content-Type": {"application/json"},
				"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}})
		}
		x.first = x.call
		x.first.headers = x.call.headers[:1]
	}
	var all []op
	for _, x := range targets {
		all = append(all, op{"tools/call", x.name, x.url, x.call})
	}
	if err := warm(ctx, c, all, o.concurrency); err != nil {
		return "", err
	}
	lat, thr, cpu := map[string]*result{}, map[string]*result{}, map[string]time.Duration{}
	for _, x := range targets {
		lat[x.name], thr[x.name] = &result{}, &result{}
	}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		for _, x := range targets {
			lat[x.name].merge(load(ctx, c, x.url, x.first, 1, o.duration, o.latencyReqs))
			c0 := cpuTime(x.pid)
			thr[x.name].merge(load(ctx, c, x.url, x.call, o.concurrency, o.duration, 0))
			cpu[x.name] += cpuTime(x.pid) - c0
		}
		fmt.Fprintf(os.Stderr, "bench: stdio peer round %d/%d done\n", round+1, o.rounds)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n## stdio server: taskgate against supergateway\n\n")
	fmt.Fprintf(&b, "The same stdio server (%s, echo tool) behind taskgate with a child per session, "+
		"taskgate with one shared child, and supergateway 4.0.0 (`--outputTransport streamableHttp --stateful`, a child per session) "+
		"under Node %s. %d rounds × %s per target; throughput at %d concurrent clients, each with a session of its own; latency at 1.\n\n",
		server, versionOf(node, "--version"), o.rounds, o.duration, o.concurrency)
	fmt.Fprintf(&b, "| gateway | req/s (c=%d) | p50 | p99 | p50 (c=1) | p99 (c=1) | gateway CPU per request | errors |\n|---|---|---|---|---|---|---|---|\n", o.concurrency)
	for _, x := range targets {
		r, l := thr[x.name], lat[x.name]
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %.0f µs | %d |\n", x.name, r.rps(), ms(r.pct(.5)), ms(r.pct(.99)),
			ms(l.pct(.5)), ms(l.pct(.99)), float64(cpu[x.name].Microseconds())/float64(max(r.requests, 1)), r.errors+l.errors)
	}
	sg := targets[2].name
	// One line per target, "- … (target …)": the report's summary
	// collects them (report.go).
	b.WriteString("\n")
	for i, x := range targets[:2] {
		tr := thr[x.name].rps() / thr[sg].rps()
		pr := float64(lat[x.name].pct(.5)) / float64(lat[sg].pct(.5))
		figure(fmt.Sprintf("stdio.peer%d.rps", i), tr)
		figure(fmt.Sprintf("stdio.peer%d.p50", i), pr)
		fmt.Fprintf(&b, "- stdio server: %s / supergateway throughput: **%.2f×** (target ≥ 1.5×: %s)\n", x.name, tr, met(tr >= 1.5))
		fmt.Fprintf(&b, "- stdio server: %s / supergateway p50 at c=1: **%.2f×** (target ≤ 0.8×: %s); %s vs %s\n", x.name, pr, met(pr <= 0.8),
			ms(lat[x.name].pct(.5)), ms(lat[sg].pct(.5)))
	}
	fmt.Fprintf(&b, "\nCPU is the gateway process's own (taskgate, or supergateway's node), not its children's.\n")
	return b.String(), nil
}
