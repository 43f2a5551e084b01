package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// op is one kind of request sent to one target.
type op struct {
	name   string // what is measured, e.g. "tasks/get"
	target string // who answers, e.g. "taskgate + Redis"
	url    string
	req    request
}

func (x op) key() string { return x.name + "|" + x.target }

const (
	tgTarget     = "taskgate + redis-server"
	nativeTarget = "native TS SDK (InMemoryTaskStore)"
	directTarget = "upstream direct"

	opCreate = "tools/call → CreateTaskResult (echo as task)"
	opGet    = "tasks/get (completed task)"
	opEcho   = "tools/call echo (no task)"
)

// tasksBench measures MCP Tasks through taskgate on a real redis-server,
// and the same task load against a native TypeScript SDK task server.
func tasksBench(o options) error {
	// Defaults that keep a whole run under ~2 minutes on 2 cores.
	unlessGiven(&o, "duration", &o.duration, 4*time.Second)
	unlessGiven(&o, "latency-requests", &o.latencyReqs, 1000)
	if o.tasks < 1 || o.createReqs < 1 || o.concurrency < 1 || o.rounds < 1 {
		return errors.New("-tasks, -create-requests, -concurrency and -rounds must be positive")
	}
	ctx, stop := interruptible()
	defer stop()
	load0 := loadAvg()

	jsDir, err := filepath.Abs(filepath.Join("bench", "js"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(jsDir, "server.mjs")); err != nil {
		return fmt.Errorf("bench/js/server.mjs not found: run from the repository root (%v)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return errors.New("node not found in PATH: the native TypeScript baseline needs Node.js ≥ 20")
	}
	if err := npmCI(ctx, jsDir); err != nil {
		return err
	}
	dir, tg, tu, cleanup, err := buildAll()
	if err != nil {
		return err
	}
	defer cleanup()
	rs, err := startRedis(dir)
	if err != nil {
		return err
	}
	defer rs.stop()

	upAddr, _ := freeAddr()
	tgAddr, _ := freeAddr()
	jsAddr, _ := freeAddr()
	_, jsPort, _ := net.SplitHostPort(jsAddr)
	var ps procs
	defer ps.stopAll()
	upURL := "http://" + upAddr + "/mcp"
	tgURL := "http://" + tgAddr + "/mcp"
	jsURL := "http://" + jsAddr + "/mcp"
	if err := ps.start(tu, "--listen", upAddr); err != nil {
		return err
	}
	if err := ps.start(tg, append([]string{"serve", "--listen", tgAddr, "--upstream", upURL,
		"--redis-url", "redis://" + rs.addr, "--task", "echo", "--max-tasks-per-owner", "-1",
		"--log-level", "warn"}, pollArgs(tg)...)...); err != nil {
		return err
	}
	if err := ps.startIn(jsDir, node, "server.mjs", jsPort); err != nil {
		return err
	}
	for _, a := range []string{upAddr, tgAddr, jsAddr} {
		if err := waitTCP(a); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: redis-server %s (PID %d), upstream %s (PID %d), taskgate %s (PID %d), native TS %s (PID %d)\n",
		rs.addr, rs.cmd.Process.Pid, upAddr, ps[0].Process.Pid, tgAddr, ps[1].Process.Pid, jsAddr, ps[2].Process.Pid)

	c := newClient(o.concurrency)
	// One session per server; the 2025-11-25 session through taskgate
	// serves both its tasks and its pass-through calls.
	sess := map[string]string{}
	for name, u := range map[string]string{tgTarget: tgURL, nativeTarget: jsURL, directTarget: upURL} {
		sid, err := initSession(ctx, c, u)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sess[name] = sid
	}
	hdr := func(target string) http.Header {
		return http.Header{
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Mcp-Session-Id":       {sess[target]},
			"Mcp-Protocol-Version": {"2025-11-25"},
		}
	}
	if o.toolsList {
		for target, u := range map[string]string{tgTarget: tgURL, nativeTarget: jsURL, directTarget: upURL} {
			if _, _, err := rpc(ctx, c, u, hdr(target), "tools/list", map[string]any{}); err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
		}
	}
	const createBody = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"task":{"ttl":60000}}}`
	const echoBody = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	formats := map[string]string{} // target → Content-Type of a tasks/get answer
	getReq := func(target, url string) (request, error) {
		ids, ct, err := completedTasks(ctx, c, url, hdr(target), o.tasks)
		if err != nil {
			return request{}, fmt.Errorf("%s: %w", target, err)
		}
		formats[target] = ct
		r := request{header: hdr(target), want: []byte(`"completed"`)}
		for _, id := range ids {
			q, _ := json.Marshal(id)
			r.bodies = append(r.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+
				strings.ReplaceAll(string(q), "%", "%%")+`}}`)
		}
		return r, nil
	}
	tgGet, err := getReq(tgTarget, tgURL)
	if err != nil {
		return err
	}
	jsGet, err := getReq(nativeTarget, jsURL)
	if err != nil {
		return err
	}
	creates := []op{
		{opCreate, tgTarget, tgURL, request{body: createBody, header: hdr(tgTarget), want: []byte(`"taskId"`)}},
		{opCreate, nativeTarget, jsURL, request{body: createBody, header: hdr(nativeTarget), want: []byte(`"taskId"`)}},
	}
	gets := []op{{opGet, tgTarget, tgURL, tgGet}, {opGet, nativeTarget, jsURL, jsGet}}
	echoes := []op{
		{opEcho, tgTarget + " (pass-through)", tgURL, request{body: echoBody, header: hdr(tgTarget), want: []byte(`hello`)}},
		{opEcho, directTarget, upURL, request{body: echoBody, header: hdr(directTarget), want: []byte(`hello`)}},
	}
	all := slices.Concat(creates, gets, echoes)

	// Warm up connections, caches and scripts; every op must answer cleanly.
	for _, x := range all {
		fmt.Fprintf(os.Stderr, "bench: warming up %s → %s\n", x.name, x.target)
		var r result
		if x.name == opCreate {
			r = load(ctx, c, x.url, x.req, 1, time.Second, 200)
			drain(ctx, c, x)
		} else {
			r = load(ctx, c, x.url, x.req, o.concurrency, time.Second, 0)
		}
		if r.requests == 0 || r.errors > 0 {
			msg := ""
			if p := firstErr.Load(); p != nil {
				msg = ": " + *p
			}
			return fmt.Errorf("%s → %s: %d answers, %d errors during warm-up%s", x.name, x.target, r.requests, r.errors, msg)
		}
	}

	lat := map[string]*result{}
	thr := map[string]*result{}
	for _, x := range all {
		lat[x.key()], thr[x.key()] = &result{}, &result{}
	}
	for round := 0; round < o.rounds && ctx.Err() == nil; round++ {
		order := func(xs []op) []op { return roundOrder(xs, round) }
		phase := func(x op, conc int) {
			if o.verbose {
				fmt.Fprintf(os.Stderr, "bench: %s round %d: %s → %s at c=%d\n", time.Now().Format("15:04:05.000"), round+1, x.name, x.target, conc)
			}
		}
		for _, x := range order(creates) {
			phase(x, 1)
			lat[x.key()].merge(load(ctx, c, x.url, x.req, 1, o.duration, o.createReqs))
			drain(ctx, c, x) // let every upstream call the tasks started finish
		}
		for _, x := range order(slices.Concat(gets, echoes)) {
			phase(x, 1)
			lat[x.key()].merge(load(ctx, c, x.url, x.req, 1, o.duration, o.latencyReqs))
		}
		for _, x := range order(slices.Concat(gets, echoes)) {
			phase(x, o.concurrency)
			thr[x.key()].merge(load(ctx, c, x.url, x.req, o.concurrency, o.duration, 0))
		}
		fmt.Fprintf(os.Stderr, "bench: round %d/%d done\n", round+1, o.rounds)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	env := tasksEnv{
		load0:    load0,
		load1:    loadAvg(),
		redis:    versionOf("redis-server", "--version"),
		node:     versionOf(node, "--version"),
		sdk:      sdkVersion(jsDir),
		redisMem: redisInfo(rs.addr, "used_memory_human"),
		formats:  formats,
	}
	report := tasksReport(o, env, creates, gets, echoes, lat, thr)
	return emit(report)
}

type tasksEnv struct {
	load0, load1, redis, node, sdk, redisMem string
	formats                                  map[string]string
}

func tasksReport(o options, env tasksEnv, creates, gets, echoes []op, lat, thr map[string]*result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## MCP Tasks (2025-11-25): taskgate + redis-server vs a native TypeScript SDK task server\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average (1/5/15 min) at start %s, at end %s.\n", machine(), env.load0, env.load1)
	fmt.Fprintf(&b, "%s (no persistence, loopback); Node %s, @modelcontextprotocol/sdk %s. ", env.redis, env.node, env.sdk)
	fmt.Fprintf(&b, "%d rounds × %s per target; throughput at %d concurrent clients on one session per server, latency at 1. ",
		o.rounds, o.duration, o.concurrency)
	if o.toolsList {
		fmt.Fprintf(&b, "Each session called tools/list once before measuring. ")
	} else {
		fmt.Fprintf(&b, "No tools/list before the calls (taskgate's tool catalogue stays cold; see -tools-list). ")
	}
	fmt.Fprintf(&b, "tasks/get polls %d completed tasks; CreateTaskResult latency: up to %d task-augmented calls per target per round, each starting the tool in the background (taskgate: a worker calls the go-sdk upstream's echo; native: the result is stored on the next tick).\n\n",
		o.tasks, o.createReqs)
	fmt.Fprintf(&b, "| operation | target | req/s (c=%d) | p50 | p99 | p50 (c=1) | p99 (c=1) | errors |\n|---|---|---|---|---|---|---|---|\n", o.concurrency)
	for _, x := range slices.Concat(creates, gets, echoes) {
		l, t := lat[x.key()], thr[x.key()]
		if t.requests+t.errors == 0 {
			fmt.Fprintf(&b, "| %s | %s | — | — | — | %s | %s | %d |\n", x.name, x.target, ms(l.pct(.5)), ms(l.pct(.99)), l.errors)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %d |\n", x.name, x.target, t.rps(), ms(t.pct(.5)), ms(t.pct(.99)),
			ms(l.pct(.5)), ms(l.pct(.99)), t.errors+l.errors)
	}
	cTG, cJS := lat[creates[0].key()], lat[creates[1].key()]
	gTG, gJS := thr[gets[0].key()], thr[gets[1].key()]
	eTG, eUp := thr[echoes[0].key()], thr[echoes[1].key()]
	p50 := cTG.pct(.5)
	fmt.Fprintf(&b, "\n- CreateTaskResult p50 through taskgate at c=1: **%s** (target < 1 ms on an idle machine: %s); p99 %s; native TS p50 %s\n",
		ms(p50), met(p50 < time.Millisecond), ms(cTG.pct(.99)), ms(cJS.pct(.5)))
	r1 := gTG.rps() / eTG.rps()
	fmt.Fprintf(&b, "- taskgate tasks/get / taskgate pass-through tools/call throughput: **%.2f×** (target ≥ 1.5×: %s)\n", r1, met(r1 >= 1.5))
	r2 := gTG.rps() / gJS.rps()
	fmt.Fprintf(&b, "- taskgate tasks/get / native TS tasks/get throughput: **%.2f×** (target ≥ 2×: %s)\n", r2, met(r2 >= 2))
	fmt.Fprintf(&b, "- for scale: taskgate pass-through / upstream direct throughput %.2f×; tasks/get p50 at c=1 taskgate %s vs native %s\n",
		eTG.rps()/eUp.rps(), ms(lat[gets[0].key()].pct(.5)), ms(lat[gets[1].key()].pct(.5)))
	fmt.Fprintf(&b, "- tasks/get answers: taskgate %s, native TS %s (the SDK transport's default); Redis used memory at end %s\n",
		orDash(env.formats[tgTarget]), orDash(env.formats[nativeTarget]), orDash(env.redisMem))
	if p := firstErr.Load(); p != nil {
		fmt.Fprintf(&b, "- first error: `%s`\n", strings.ReplaceAll(*p, "`", "'"))
	}
	fmt.Fprintf(&b, "\nReproduce: `%s`\n", reproduce(o, "tasks", "duration", "rounds", "concurrency", "latency-requests", "create-requests", "tasks", "tools-list"))
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// npmCI installs bench/js's locked dependencies when node_modules lacks them.
func npmCI(ctx context.Context, jsDir string) error {
	return npmCIFor(ctx, jsDir, filepath.Join("@modelcontextprotocol", "sdk", "package.json"))
}

// npmCIFor installs jsDir's locked dependencies when its node_modules
// lacks the file marker.
func npmCIFor(ctx context.Context, jsDir, marker string) error {
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", marker)); err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: npm ci in %s\n", jsDir)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = jsDir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %w", jsDir, err)
	}
	return nil
}

// rpcReply is one JSON-RPC response.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpc sends one request and returns its result and the answer's
// Content-Type; the answer may be JSON or an SSE stream.
func rpc(ctx context.Context, c *http.Client, url string, hdr http.Header, method string, params any) (json.RawMessage, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id := nextID.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header = hdr.Clone()
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return nil, ct, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, b)
	}
	var msgs [][]byte
	if strings.HasPrefix(ct, "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && len(d) > 0 {
				msgs = append(msgs, bytes.Clone(d))
				if bytes.Contains(d, []byte(`"result"`)) || bytes.Contains(d, []byte(`"error"`)) {
					break
				}
			}
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, ct, err
		}
		msgs = append(msgs, b)
	}
	for _, m := range msgs {
		var r rpcReply
		if json.Unmarshal(m, &r) != nil || string(r.ID) != fmt.Sprint(id) {
			continue
		}
		if r.Error != nil {
			return nil, ct, fmt.Errorf("%s: JSON-RPC error %d: %s", method, r.Error.Code, r.Error.Message)
		}
		return r.Result, ct, nil
	}
	return nil, ct, fmt.Errorf("%s: no response in the answer", method)
}

// createTask starts one echo task that lives ttl and returns its id.
func createTask(ctx context.Context, c *http.Client, url string, hdr http.Header, ttl time.Duration) (string, error) {
	res, _, err := rpc(ctx, c, url, hdr, "tools/call", map[string]any{
		"name": "echo", "arguments": map[string]any{"text": "hello"}, "task": map[string]any{"ttl": ttl.Milliseconds()},
	})
	if err != nil {
		return "", err
	}
	var ctr struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &ctr); err != nil || ctr.Task.TaskID == "" {
		return "", fmt.Errorf("tools/call as task: not a CreateTaskResult: %.300s", res)
	}
	return ctr.Task.TaskID, nil
}

// waitCompleted polls tasks/get until the task is completed (at most 15s).
func waitCompleted(ctx context.Context, c *http.Client, url string, hdr http.Header, id string) (string, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, ct, err := rpc(ctx, c, url, hdr, "tasks/get", map[string]any{"taskId": id})
		if err != nil {
			return "", err
		}
		var t struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(res, &t)
		switch {
		case t.Status == "completed":
			return ct, nil
		case t.Status != "working":
			return "", fmt.Errorf("task %s: status %q: %.300s", id, t.Status, res)
		case time.Now().After(deadline):
			return "", fmt.Errorf("task %s still working after 15s", id)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// warmTaskRequests opens a 2025-11-25 session at url (target name) and
// makes what the console and webhooks modes load it with: create, an echo
// call as a task (its CreateTaskResult), and get, tasks/get over n
// completed tasks; then warms both up (scripts loaded, connections open,
// every answer clean), tasks/get at conc.
func warmTaskRequests(ctx context.Context, c *http.Client, name, url string, n, conc int) (create, get request, err error) {
	const createBody = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"task":{"ttl":60000}}}`
	sid, err := initSession(ctx, c, url)
	if err != nil {
		return create, get, err
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}}
	ids, _, err := completedTasks(ctx, c, url, hdr, n)
	if err != nil {
		return create, get, err
	}
	create = request{body: createBody, header: hdr, want: []byte(`"taskId"`)}
	get = request{header: hdr, want: []byte(`"completed"`)}
	for _, id := range ids {
		q, _ := json.Marshal(id)
		get.bodies = append(get.bodies, `{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":`+
			strings.ReplaceAll(string(q), "%", "%%")+`}}`)
	}
	r := load(ctx, c, url, create, 1, time.Second, 200)
	drain(ctx, c, op{opCreate, name, url, create})
	g := load(ctx, c, url, get, conc, time.Second, 0)
	if r.errors > 0 || g.errors > 0 || r.requests == 0 || g.requests == 0 {
		return create, get, fmt.Errorf("errors during warm-up: %s", firstErrText())
	}
	return create, get, nil
}

// completedTasks creates n echo tasks and waits until all are completed;
// it returns their ids and the Content-Type tasks/get answered with.
func completedTasks(ctx context.Context, c *http.Client, url string, hdr http.Header, n int) ([]string, string, error) {
	var ids []string
	for i := 0; i < n; i++ {
		id, err := createTask(ctx, c, url, hdr, 30*time.Minute) // outlives any run
		if err != nil {
			return nil, "", err
		}
		ids = append(ids, id)
	}
	var ct string
	for _, id := range ids {
		var err error
		if ct, err = waitCompleted(ctx, c, url, hdr, id); err != nil {
			return nil, "", err
		}
	}
	return ids, ct, nil
}

// drain waits until the background work of the tasks x just created is
// done: it creates one more task and waits for it to complete (workers
// start in order and the tool is instant).
func drain(ctx context.Context, c *http.Client, x op) {
	id, err := createTask(ctx, c, x.url, x.req.header, time.Minute)
	if err == nil {
		_, err = waitCompleted(ctx, c, x.url, x.req.header, id)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "bench: %s: drain: %v\n", x.target, err)
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func versionOf(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return bin + " (version unknown)"
	}
	s := strings.TrimSpace(string(out))
	if f := strings.Fields(s); len(f) >= 3 && f[0] == "Redis" { // "Redis server v=7.0.15 sha=…"
		return "redis-server " + strings.TrimPrefix(f[2], "v=")
	}
	return s
}

func sdkVersion(jsDir string) string {
	b, err := os.ReadFile(filepath.Join(jsDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil {
		return "?"
	}
	var p struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Version
}
