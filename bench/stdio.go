package main

// -mode stdio: taskgate in front of the test server as a stdio child
// (--upstream-command) next to taskgate in front of the same server over
// HTTP, in one run: pass-through tools/call (echo) and tasks/get of
// completed tasks, throughput and latency, and the gateway's CPU per call.
// Then taskgate (both stdio modes) against supergateway in front of the
// same stdio server (stdiopeer.go).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

func stdioBench(o options) error {
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx, tg, tu := run.ctx, run.tg, run.tu
	upAddr, _ := freeAddr()
	httpAddr, _ := freeAddr()
	stdioAddr, _ := freeAddr()
	var ps procs
	defer ps.stopAll()
	upURL := "http://" + upAddr + "/mcp"
	common := append([]string{"--log-level", "warn", "--task", "echo"}, pollArgs(tg)...)
	if err := ps.start(tu, "--listen", upAddr); err != nil {
		return err
	}
	if err := ps.start(tg, append([]string{"serve", "--listen", httpAddr, "--upstream", upURL}, common...)...); err != nil {
		return err
	}
	// The child's stdio pipes are the gateway's own: quote the path.
	if err := ps.start(tg, append([]string{"serve", "--listen", stdioAddr, "--upstream-command", "'" + tu + "' --stdio"}, common...)...); err != nil {
		return err
	}
	for _, a := range []string{upAddr, httpAddr, stdioAddr} {
		if err := waitTCP(a); err != nil {
			return err
		}
	}
	c := newClient(o.concurrency)
	type side struct {
		name, url string
		pid       int
		call, get request
	}
	sides := []*side{{name: "HTTP upstream", url: "http://" + httpAddr + "/mcp", pid: ps[1].Process.Pid},
		{name: "stdio upstream", url: "http://" + stdioAddr + "/mcp", pid: ps[2].Process.Pid}}
	for _, s := range sides {
		sid, err := initSession(ctx, c, s.url)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}}
		s.call = request{header: hdr, want: []byte(`hello`),
			body: `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`}
		ids, _, err := completedTasks(ctx, c, s.url, hdr, o.tasks)
		if err != nil {
			return fmt.Errorf("%s tasks: %w", s.name, err)
		}
		s.get = request{header: hdr, want: []byte(`"completed"`)}
		for _, id := range ids {
			q, _ := json.Marshal(id)
			s.get.bodies = append(s.get.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+
				strings.ReplaceAll(string(q), "%", "%%")+`}}`)
		}
	}
	var all []op
	for _, s := range sides {
		all = append(all, op{"tools/call (pass-through)", s.name, s.url, s.call}, op{"tasks/get", s.name, s.url, s.get})
	}
	if err := warm(ctx, c, all, o.concurrency); err != nil {
		return err
	}
	key := func(x op) string { return x.name + " / " + x.target }
	pid := map[string]int{}
	for _, s := range sides {
		for _, x := range all {
			if x.target == s.name {
				pid[key(x)] = s.pid
			}
		}
	}
	lat, thr, cpu := map[string]*result{}, map[string]*result{}, map[string]time.Duration{}
	for _, x := range all {
		lat[key(x)], thr[key(x)] = &result{}, &result{}
	}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		for _, x := range all {
			lat[key(x)].merge(load(ctx, c, x.url, x.req, 1, o.duration, o.latencyReqs))
			c0 := cpuTime(pid[key(x)])
			thr[key(x)].merge(load(ctx, c, x.url, x.req, o.concurrency, o.duration, 0))
			cpu[key(x)] += cpuTime(pid[key(x)]) - c0
		}
		fmt.Fprintf(os.Stderr, "bench: round %d/%d done\n", round+1, o.rounds)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## stdio upstream (--upstream-command) next to the same server over HTTP\n\n")
	fmt.Fprintf(&b, "Machine: %s. %d rounds × %s per target; throughput at %d concurrent clients, latency at 1. "+
		"The upstream is the test server (echo tool): over HTTP, or as taskgate's stdio child.\n\n", machine(), o.rounds, o.duration, o.concurrency)
	fmt.Fprintf(&b, "| operation | upstream | req/s (c=%d) | p50 | p99 | p50 (c=1) | gateway CPU per request | errors |\n|---|---|---|---|---|---|---|---|\n", o.concurrency)
	perReq := func(k string) float64 { return float64(cpu[k].Microseconds()) / float64(max(thr[k].requests, 1)) }
	for _, x := range all {
		k := key(x)
		r, l := thr[k], lat[k]
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %.0f µs | %d |\n", x.name, x.target, r.rps(), ms(r.pct(.5)), ms(r.pct(.99)),
			ms(l.pct(.5)), perReq(k), r.errors+l.errors)
	}
	for _, name := range []string{"tools/call (pass-through)", "tasks/get"} {
		h, s := name+" / HTTP upstream", name+" / stdio upstream"
		fmt.Fprintf(&b, "\n- %s: stdio / HTTP throughput **%.2f×**, p50 at c=1 %s vs %s", name, thr[s].rps()/thr[h].rps(),
			ms(lat[s].pct(.5)), ms(lat[h].pct(.5)))
	}
	fmt.Fprintf(&b, "\n\nThe stdio side's CPU includes the child's pipes and the bridge (one gateway process; the child's own CPU is not counted, as the HTTP upstream's is not).\n")
	peer, err := stdioPeerBench(ctx, o, tg, tu)
	if err != nil {
		return fmt.Errorf("against supergateway: %w", err)
	}
	b.WriteString(peer)
	fmt.Fprintf(&b, "\nLoad average %s at start, %s at end.\n", run.load0, loadAvg())
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "stdio", "duration", "rounds", "concurrency", "latency-requests", "tasks", "stdio-server"))
	return emit(b.String())
}
